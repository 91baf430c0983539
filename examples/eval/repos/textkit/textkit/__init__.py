"""Small text helpers for a static site generator: slugs, word wrapping, truncation."""
