"""Bring your own key: import parameters and the import of key material for keys of origin ``external``.

A key created with ``origin: external`` starts in ``pending_import`` with no version. An admin asks
for import parameters (an RSA wrapping public key, an import token, an expiry 24 h away), wraps
the key material under it, and imports it: the material is unwrapped inside the HSM into the next
version's objects and checked there (exact length, attributes, a known-answer operation; see
:mod:`keymanager.hsm.key_import`); the first import makes version 1 and enables the key.

Afterwards, as in AWS KMS, an import of ``EXISTING_KEY_MATERIAL`` (the default) takes only the
key's own material again (its key check value, computed in the HSM, must equal the primary
version's): nothing changes and the import is audited. New material becomes a new primary
version only through ``import_type: NEW_KEY_MATERIAL`` (an imported key's rotation), audited as
such. A failure leaves nothing behind: the objects are destroyed when the version cannot be recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from keymanager.db import Store
from keymanager.domain.audit import AuditEntry
from keymanager.domain.models import Key, KeyState, Origin
from keymanager.errors import Conflict, InvalidRequest
from keymanager.hsm import Hsm
from keymanager.hsm import import_parameters as ip
from keymanager.hsm import key_import as ki
from keymanager.hsm.import_parameters import ImportParameters, WrappingAlgorithm
from keymanager.hsm.key_import import EncryptedKeyMaterial, ImportType
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
        offered = ip.wrapping_algorithms(self._hsm)
        if wrapping_algorithm not in offered:
            names = ", ".join(a.value for a in offered) or "none (the HSM lacks the mechanisms)"
            raise InvalidRequest(f"wrapping_algorithm is one of {names} on this HSM")
        return ip.make_parameters(self._hsm, key.id, WrappingAlgorithm(wrapping_algorithm))

    def import_material(
        self,
        key: Key,
        import_token: str,
        materials: list[bytes],
        *,
        import_type: str = ImportType.EXISTING_KEY_MATERIAL.value,
        record: AuditEntry | None = None,
    ) -> Key:
        """Import ``materials`` into ``key``: its first version (enabling it), its own material again
        (nothing changes), or with ``NEW_KEY_MATERIAL`` a new primary version; the key as it is then.

        ``record`` is written with the change (or alone, when nothing changes). InvalidRequest for an
        unknown import type, and for every refusal of :func:`keymanager.hsm.key_import.unwrap_version`.
        """
        _check_importable(key)
        try:
            kind = ImportType(import_type)
        except ValueError:
            raise InvalidRequest(f"import_type is one of {', '.join(ImportType)}") from None
        current = key.versions[key.primary_version].hsm if key.primary_version else None
        number = key.primary_version + 1
        material = EncryptedKeyMaterial(import_token, materials, kind)
        objects = ki.unwrap_version(self._hsm, key.id, number, key.algorithm, material, current=current)
        if objects is None:  # the key's own material again
            return self._store.update_key(key.id, record=record)
        return add_version(self._store, self._hsm, key, objects, record=record, what="import")


def _check_importable(key: Key) -> None:
    if key.origin is not Origin.EXTERNAL:
        raise Conflict("only a key created with origin 'external' takes imported key material")
    if key.state not in _IMPORTABLE:
        raise Conflict(f"a key in state {key.state.value} takes no import")
