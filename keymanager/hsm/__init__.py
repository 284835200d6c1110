"""The HSM adapter: the only package that imports ``pkcs11`` (see :mod:`keymanager.hsm.adapter`)."""

from keymanager.hsm.adapter import Hsm
from keymanager.hsm.templates import AES_TEMPLATE, HMAC_TEMPLATE, version_labels

__all__ = ["AES_TEMPLATE", "HMAC_TEMPLATE", "Hsm", "version_labels"]
