"""Key creation: what a new key is asked to be (:class:`NewKey`, :class:`InitialFacts`), the checks that
need no database, version 1 generated (or imported) in the HSM and the key's record.

:meth:`keymanager.services.keys.KeyService.create` runs them around the database's part (the policy's
principals, a taken name) and removes version 1 from the HSM when the record cannot be written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from keymanager.domain.key_specs import ONE_AES_OBJECT, SPECS, KeyUsage, choose_usage, spec_of
from keymanager.domain.models import (
    Algorithm,
    HsmObjects,
    Key,
    KeyState,
    KeyVersion,
    Lifecycle,
    Origin,
)
from keymanager.domain.names import KEY_NAME_RULE, is_key_name
from keymanager.domain.policy import Policy
from keymanager.domain.tokens import TokenFormat
from keymanager.errors import InvalidRequest
from keymanager.hsm import Hsm

_TOKENIZING = ", ".join(s.algorithm.value for s in SPECS.values() if s.allowed(KeyUsage.TOKENIZE))
"""The specs whose keys make format-preserving tokens (the table's ``TOKENIZE`` usage): each needs a
token format, and no other key takes one."""


@dataclass(frozen=True)
class NewKey:
    """A key to create (:meth:`KeyService.create <keymanager.services.keys.KeyService.create>`)."""

    name: str
    algorithm: Algorithm = Algorithm.AES_256_CBC_HMAC_SHA256
    description: str = ""
    policy: Policy | None = None
    """By principal name; None: an empty policy."""
    rotation_period_days: int | None = None
    token_format: TokenFormat | None = None
    origin: Origin = Origin.HSM
    usage: KeyUsage | None = None
    kms_auto_named: bool = False


@dataclass(frozen=True)
class InitialFacts:
    """What a key starts with beyond :class:`NewKey`: its lifecycle state and attributes, whether it is
    exportable, the material a client registered (:meth:`KeyService.create`; KMIP's Create and Register,
    an exportable transit key)."""

    lifecycle: Lifecycle
    attributes: Mapping[str, Any]
    exportable: bool = False
    """Generated extractable but sensitive (``hsm/export.py``), its material for ``get_key_material``."""
    material: bytes | None = None
    """AES material a client registered (origin ``external``; 16, 24 or 32 bytes, as ``algorithm``):
    unwrapped into the HSM as version 1."""

    def applied(self, key: Key) -> Key:
        state = KeyState.DISABLED if self.lifecycle is Lifecycle.PRE_ACTIVE else key.state
        attributes = dict(self.attributes)
        return replace(
            key,
            state=state,
            primary_version=1,
            lifecycle=self.lifecycle,
            attributes=attributes,
            exportable=self.exportable,
        )


def checked_usage(new: NewKey) -> KeyUsage:
    """The usage ``new`` is made for, once its name, token format, usage and origin fit its spec;
    else InvalidRequest."""
    algorithm = new.algorithm
    if (new.token_format is None) is spec_of(algorithm).allowed(KeyUsage.TOKENIZE):
        raise InvalidRequest(f"token_format is required for {_TOKENIZING} keys and only for them")
    if not is_key_name(new.name, kms_auto_named=new.kms_auto_named):
        raise InvalidRequest(KEY_NAME_RULE)
    try:
        chosen = choose_usage(algorithm, new.usage)
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None
    if spec_of(algorithm).asymmetric and (new.origin is Origin.EXTERNAL or new.rotation_period_days):
        raise InvalidRequest(f"a {algorithm} key is generated in the HSM and never rotates (one version)")
    return chosen


def first_version(
    hsm: Hsm, key_id: str, new: NewKey, usage: KeyUsage, initial: InitialFacts | None
) -> tuple[HsmObjects | None, bytes | None]:
    """Version 1's HSM objects and public key (DER SubjectPublicKeyInfo, asymmetric keys only), made
    in the HSM: a key pair, registered AES material, an exportable AES key or the spec's objects;
    (None, None) for a key whose material is imported later."""
    spec = spec_of(new.algorithm)
    if spec.asymmetric:
        return hsm.generate_key_pair(key_id, 1, new.algorithm, usage)
    if initial is not None and initial.material is not None:
        return hsm.import_aes(key_id, 1, initial.material, initial.exportable), None
    if initial is not None and initial.exportable:
        if spec.mode not in ONE_AES_OBJECT:
            aes = ", ".join(a for a, row in SPECS.items() if row.mode in ONE_AES_OBJECT)
            raise InvalidRequest(f"only AES keys of one AES object ({aes}) are created exportable")
        return hsm.generate_exportable(key_id, 1, new.algorithm), None
    if new.origin is not Origin.EXTERNAL:
        return hsm.generate_version(key_id, 1, new.algorithm), None
    return None, None


def new_key(
    key_id: str,
    new: NewKey,
    policy: Policy,
    usage: KeyUsage,
    objects: HsmObjects | None,
    public_key: bytes | None,
    now: datetime,
) -> Key:
    """The key record of ``new`` (``policy`` by principal id) made at ``now``, with version 1's
    ``objects`` and ``public_key`` (no version for a key whose material is imported later)."""
    external = new.origin is Origin.EXTERNAL
    return Key(
        id=key_id,
        name=new.name,
        algorithm=new.algorithm,
        state=KeyState.PENDING_IMPORT if external else KeyState.ENABLED,
        policy=policy,
        primary_version=0 if external else 1,
        min_decryption_version=1,
        created_at=now,
        updated_at=now,
        description=new.description,
        rotation_period_days=new.rotation_period_days,
        versions={}
        if objects is None
        else {1: KeyVersion(key_id=key_id, version=1, hsm=objects, created_at=now, public_key=public_key)},
        token_format=new.token_format,
        origin=new.origin,
        usage=usage,
    )
