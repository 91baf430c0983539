"""The role runtime."""
