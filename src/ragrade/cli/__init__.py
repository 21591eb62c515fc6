"""Command-line interface: one thin module per verb group, calling the public API."""
