"""The corpus stage."""
