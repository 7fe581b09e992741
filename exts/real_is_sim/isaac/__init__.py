"""isaac."""
