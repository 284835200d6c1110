"""The AWS External Key Store door's translation: XKS proxy API calls as calls of the services.

:class:`~keymanager.doors.xks.operations.XksService` serves GetKeyMetadata, Encrypt and Decrypt
on the keys a key store (a principal of role ``xks``) is named on, through ``CryptoService`` and
the key rules of ``services/keys.py``; :class:`~keymanager.doors.xks.health.XksHealth` serves
GetHealthStatus. Formats and errors: :mod:`keymanager.domain.xks`; the HTTP side: ``doors/xks/door.py``.
"""

from keymanager.doors.xks.health import XksHealth
from keymanager.doors.xks.operations import XksCall, XksService

__all__ = ["XksCall", "XksHealth", "XksService"]
