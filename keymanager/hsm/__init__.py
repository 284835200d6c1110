"""The HSM adapter: the only package that imports ``pkcs11``."""

from keymanager.hsm.adapter import AES_TEMPLATE, HMAC_TEMPLATE, Hsm, version_labels

__all__ = ["AES_TEMPLATE", "HMAC_TEMPLATE", "Hsm", "version_labels"]
