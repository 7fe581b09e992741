"""correction."""
