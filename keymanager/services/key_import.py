"""Bring your own key: import parameters and the import of key material for keys of origin ``external``.

A key created with ``origin: external`` starts in ``pending_import`` with no version. An admin asks
for import parameters (an RSA wrapping public key, an import token, an expiry 24 h away), wraps
the key material under it, and imports it: the material is unwrapped inside the HSM into the next
version's objects, which becomes primary; the first import enables the key. A new import adds a
version (an imported key's rotation). A failure leaves nothing behind: the objects are destroyed
when the version cannot be recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from keymanager.db import Store
from keymanager.domain.audit import AuditEntry
from keymanager.domain.models import Key, KeyState, Origin
from keymanager.errors import Conflict, InvalidRequest
from keymanager.hsm import Hsm
from keymanager.hsm import key_import as ki
from keymanager.hsm.key_import import ImportParameters, WrappingAlgorithm
from keymanager.services.lifecycle import add_version

_IMPORTABLE = (KeyState.PENDING_IMPORT, KeyState.ENABLED, KeyState.DISABLED)


@dataclass(frozen=True)
class KeyImportService:
    """Import parameters and imports for keys of origin ``external``, over ``store`` and ``hsm``."""

    _store: Store
    _hsm: Hsm

    def parameters(self, key: Key, wrapping_algorithm: str) -> ImportParameters:
        """Fresh import parameters for ``key``; InvalidRequest for an unknown algorithm, Conflict for a key
        that does not take imports."""
        _check_importable(key)
        try:
            algorithm = WrappingAlgorithm(wrapping_algorithm)
        except ValueError:
            names = ", ".join(a.value for a in WrappingAlgorithm)
            raise InvalidRequest(f"wrapping_algorithm is one of {names}") from None
        return ki.make_parameters(self._hsm, key.id, algorithm)

    def import_material(
        self, key: Key, import_token: str, materials: list[bytes], *, record: AuditEntry | None = None
    ) -> Key:
        """Unwrap ``materials`` into a new primary version of ``key`` (enabling a pending key); the updated key."""
        _check_importable(key)
        number = key.primary_version + 1
        objects = ki.unwrap_version(self._hsm, key.id, number, key.algorithm, import_token, materials)
        return add_version(self._store, self._hsm, key, objects, record=record, what="import")


def _check_importable(key: Key) -> None:
    if key.origin is not Origin.EXTERNAL:
        raise Conflict("only a key created with origin 'external' takes imported key material")
    if key.state not in _IMPORTABLE:
        raise Conflict(f"a key in state {key.state.value} takes no import")
