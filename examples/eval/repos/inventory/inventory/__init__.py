"""Stock keeping for a small warehouse: levels, reservations, reorder suggestions, reports."""
