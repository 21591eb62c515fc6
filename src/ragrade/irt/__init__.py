"""The irt stage."""
