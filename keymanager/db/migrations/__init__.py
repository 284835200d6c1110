"""Alembic environment of the metadata store; applied by :func:`keymanager.db.migrate`."""
