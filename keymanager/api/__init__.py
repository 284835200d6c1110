"""HTTP API v1 (FastAPI): the only package that imports FastAPI."""
