"""The retrieval stage."""
