"""Reading a task's events back: its timeline (`timeline`) and how a terminal shows it (`render`)."""
