"""One module per group of API paths."""
