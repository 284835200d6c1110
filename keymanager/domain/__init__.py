"""Pure domain: formats, policy evaluation, versions. Imports no pkcs11, SQLAlchemy or FastAPI."""
