"""The audit key: one HMAC-SHA256 secret in the token that seals the audit chain.

A generic secret made in the HSM with the same template as a key version's HMAC key (token,
private, sensitive, never extractable, sign and verify only), found by its label. It is made
once per installation (``keymanager init``, or the first start on a database whose chain is not
keyed yet, under the chain's lock so replicas starting together make one); every process then
uses a session copy, like any key version. Its label does not start with ``km/``, so sweeps of
key-version objects never touch it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from pkcs11 import KeyType, Mechanism

from keymanager.hsm.adapter import Hsm
from keymanager.hsm.dispatch import success_not_recorded
from keymanager.hsm.readback import check_object
from keymanager.hsm.templates import HMAC_TEMPLATE
from keymanager.hsm.token import MissingKeyObject

DEFAULT_LABEL = "keymanager-audit"


class Presence(enum.Enum):
    FOUND = "found"
    CREATED = "created"
    MISSING = "missing"


class AuditKey:
    """HMAC-SHA256 in the HSM with the audit key labelled ``label`` (a ``ChainKey``)."""

    def __init__(self, hsm: Hsm, label: str = DEFAULT_LABEL) -> None:
        self._hsm = hsm
        self.label = label

    def ensure(self, *, create: bool) -> Presence:
        """Whether the key is in the token; with ``create``, make it when it is not.

        Two processes must not create it at once (they would make two keys with one label): the
        caller holds a lock that excludes that (see ``AuditChain.prepare``).
        """
        return self._hsm.call(_ensure, self.label, create)

    def sign(self, messages: Sequence[bytes]) -> list[bytes]:
        """HMAC-SHA256 of each message, computed in the HSM in one trip to its thread.

        Raises KeyMaterialMissing when the key is not in the token, HsmUnavailable when the
        HSM fails.
        """
        return self._hsm.call(_seal, self.label, list(messages))


def _ensure(token: Any, label: str, create: bool) -> Presence:
    try:
        token.key(label)
        return Presence.FOUND
    except MissingKeyObject:
        if not create:
            return Presence.MISSING
    token.capabilities.require("audit seal")
    made = token.session().generate_key(
        KeyType.GENERIC_SECRET,
        256,
        label=label,
        store=True,
        mechanism=Mechanism.GENERIC_SECRET_KEY_GEN,
        template=HMAC_TEMPLATE,
    )
    check_object(made, HMAC_TEMPLATE, 32)
    return Presence.CREATED


@success_not_recorded
def _seal(token: Any, label: str, messages: list[bytes]) -> list[bytes]:
    key = token.key(label)
    return [bytes(key.sign(message, mechanism=Mechanism.SHA256_HMAC)) for message in messages]
