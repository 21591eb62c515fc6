"""The robust stage."""
