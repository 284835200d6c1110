"""Whether a principal may use a key for an operation now: its policy, its state, its kind.

One rule for every operation on key material (encryption, MACs, tokens), so that a refusal
reads the same whichever service raises it.
"""

from __future__ import annotations

from keymanager.domain.models import HMAC_KEY_BITS, Algorithm, Key, KeyState, Principal, Role
from keymanager.domain.policy import Operation
from keymanager.errors import (
    Forbidden,
    InvalidRequest,
    KeyDestroyed,
    KeyDisabled,
    KeyManagerError,
    KeyPendingDeletion,
    KeyPendingImport,
)

_TOKENS = (Operation.TOKENIZE, Operation.DETOKENIZE)


def usable(key: Key, principal: Principal, operation: Operation) -> Key:
    """``key`` if ``principal`` may use it for ``operation`` now and it is of the kind the operation
    needs; else Forbidden, the error of the key's state, or InvalidRequest (another kind of key)."""
    require_use(key, principal, operation)
    require_enabled(key)
    if operation is Operation.MAC:
        if key.algorithm not in HMAC_KEY_BITS:
            raise InvalidRequest(f"MACs need a key of an HMAC algorithm ({', '.join(HMAC_KEY_BITS)})")
    elif operation in _TOKENS:
        if key.algorithm is not Algorithm.FF1_AES_256 or key.token_format is None:
            raise InvalidRequest("tokens need a key of algorithm FF1_AES_256")
    elif key.algorithm in HMAC_KEY_BITS:
        raise InvalidRequest(f"an {key.algorithm} key only computes MACs")
    elif key.algorithm is Algorithm.FF1_AES_256:
        raise InvalidRequest("an FF1_AES_256 key only makes tokens")
    return key


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
    if principal.role is Role.AUDITOR or not key.policy.allows(operation, principal.id):
        raise Forbidden(f"the principal may not {operation.value.replace('_', ' ')} with this key")
