"""Whether a principal may use a key for an operation now: its policy, its state, its kind.

One rule for every operation on key material (encryption, MACs, tokens, signatures, key
agreement), so that a refusal reads the same whichever service raises it. What a key is for is
its usage (:class:`~keymanager.domain.key_specs.KeyUsage`, from the table of key types).
"""

from __future__ import annotations

from collections.abc import Mapping

from keymanager.domain.key_specs import RAW_MODES, Algorithm, KeyUsage, spec_of
from keymanager.domain.models import Key, KeyState, Principal
from keymanager.domain.policy import Operation
from keymanager.errors import (
    Forbidden,
    KeyDestroyed,
    KeyDisabled,
    KeyManagerError,
    KeyPendingDeletion,
    KeyPendingImport,
    WrongKeyUsage,
)
from keymanager.services.authorization import Right, holds

USAGE_OF: Mapping[Operation, KeyUsage | None] = {
    Operation.ENCRYPT: KeyUsage.ENCRYPT_DECRYPT,
    Operation.DECRYPT: KeyUsage.ENCRYPT_DECRYPT,
    Operation.GENERATE_DATA_KEY: KeyUsage.ENCRYPT_DECRYPT,
    Operation.REENCRYPT: KeyUsage.ENCRYPT_DECRYPT,
    Operation.GENERATE_DATA_KEY_PAIR: KeyUsage.ENCRYPT_DECRYPT,
    Operation.MAC: KeyUsage.GENERATE_VERIFY_MAC,
    Operation.TOKENIZE: KeyUsage.TOKENIZE,
    Operation.DETOKENIZE: KeyUsage.TOKENIZE,
    Operation.SIGN: KeyUsage.SIGN_VERIFY,
    Operation.VERIFY: KeyUsage.SIGN_VERIFY,
    Operation.DERIVE_SHARED_SECRET: KeyUsage.KEY_AGREEMENT,
    Operation.GET_PUBLIC_KEY: None,
    Operation.GET_KEY_MATERIAL: None,
}
"""The usage a key needs for each operation (None: any usage)."""

_ASYMMETRIC_ONLY = frozenset(
    {Operation.SIGN, Operation.VERIFY, Operation.DERIVE_SHARED_SECRET, Operation.GET_PUBLIC_KEY}
)
"""Operations only asymmetric keys do (the others are symmetric, except RSA encryption: see :func:`usable`)."""
_ASYMMETRIC_RIGHTS = _ASYMMETRIC_ONLY | {Operation.ENCRYPT, Operation.DECRYPT}
"""The rights asymmetric keys are used for; symmetric keys for every right but the asymmetric-only ones."""


def rights_for(algorithm: Algorithm, usage: KeyUsage | None) -> frozenset[Operation]:
    """Every right a key of ``algorithm`` created for ``usage`` (None: its spec's default) can be used for."""
    spec = spec_of(algorithm)
    chosen = usage or spec.default_usage
    served = _ASYMMETRIC_RIGHTS if spec.asymmetric else frozenset(Operation) - _ASYMMETRIC_ONLY
    return frozenset(op for op in served if USAGE_OF[op] in (None, chosen))


def usable(key: Key, principal: Principal, operation: Operation, *, asymmetric: bool = False, raw: bool = False) -> Key:
    """``key`` if ``principal`` may use it for ``operation`` now and it is of the kind the operation
    needs; else Forbidden, the error of the key's state, or WrongKeyUsage (a key of another usage, or
    of another kind: ``asymmetric`` says which the caller serves for encryption and decryption,
    since a symmetric and an RSA key both encrypt; ``raw`` that the caller runs the key's block
    cipher mode itself, as KMIP's Encrypt does: a key of a raw mode serves only such callers)."""
    require_use(key, principal, operation)
    require_enabled(key)
    spec = spec_of(key.algorithm)
    needed = USAGE_OF[operation]
    kind = True if operation in _ASYMMETRIC_ONLY else asymmetric
    if (needed is not None and key.key_usage is not needed) or spec.asymmetric is not kind:
        raise WrongKeyUsage(_misuse(key, operation, needed))
    if spec.mode in RAW_MODES and not raw and needed is not None:
        raise WrongKeyUsage(
            f"a {key.algorithm} key is a raw {spec.mode} key: only KMIP's Encrypt and Decrypt use it, in its mode"
        )
    return key


def _misuse(key: Key, operation: Operation, needed: KeyUsage | None) -> str:
    what = operation.value.replace("_", " ")
    if needed is not None and key.key_usage is not needed:
        return f"a {key.algorithm} key of usage {key.key_usage} cannot {what} (that needs usage {needed})"
    if spec_of(key.algorithm).asymmetric:
        return f"{what} needs a symmetric key: a {key.algorithm} key encrypts only with an RSAES_OAEP algorithm"
    return f"{what} needs an asymmetric key: {key.algorithm} is symmetric"


_STATE_ERRORS: dict[KeyState, type[KeyManagerError]] = {
    KeyState.DISABLED: KeyDisabled,
    KeyState.PENDING_DELETION: KeyPendingDeletion,
    KeyState.DESTROYED: KeyDestroyed,
    KeyState.PENDING_IMPORT: KeyPendingImport,
}


def require_enabled(key: Key) -> None:
    """Raise the error of the key's state unless it is enabled (409 ``key_disabled`` and the others)."""
    if key.state is not KeyState.ENABLED:
        raise _STATE_ERRORS[key.state]()


def require_use(key: Key, principal: Principal, operation: Operation) -> None:
    """Raise Forbidden unless the key's policy lets ``principal`` (by id) do ``operation`` now;
    an auditor never uses a key."""
    if not holds(principal.role, Right.NAMED_BY_POLICY) or not key.policy.allows(operation, principal.id):
        raise Forbidden(f"the principal may not {operation.value.replace('_', ' ')} with this key")
