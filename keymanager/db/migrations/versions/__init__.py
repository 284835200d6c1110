"""Hand-written schema revisions, applied in order by Alembic."""
