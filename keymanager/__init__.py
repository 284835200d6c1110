"""keymanager: a self-hosted encryption key manager backed by a PKCS#11 HSM."""

__version__ = "0.1.0"
