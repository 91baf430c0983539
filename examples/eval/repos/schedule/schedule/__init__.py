"""Room booking: time intervals, conflicts between bookings, free slots in a day."""
