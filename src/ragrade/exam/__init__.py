"""The exam stage."""
