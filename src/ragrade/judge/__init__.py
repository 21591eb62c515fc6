"""The judge stage."""
