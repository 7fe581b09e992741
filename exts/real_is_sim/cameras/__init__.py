"""cameras."""
