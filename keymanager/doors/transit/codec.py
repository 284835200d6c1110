"""Vault Transit's words: its errors, paths, fields, version-tagged values and hash names (pure).

Nothing here decides a rule of ours; it reads Vault's request shapes and writes its answers. The
error of the door is :class:`TransitError` (a status and a message, answered as Vault does:
``{"errors": ["…"]}``); every refusal of a field names the field. Bodies are strict JSON
(``domain/strict_json.py``: a key named twice is refused) no deeper than :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from keymanager.domain import strict_json
from keymanager.domain.key_specs import Hash
from keymanager.domain.names import KEY_REF_RULE, is_key_ref

MAX_DEPTH = 6
"""Deepest nesting of a request body (``batch_input``'s items are at depth 3)."""
PERMISSION_DENIED = "permission denied"
NOT_FOUND_KEY = "encryption key not found"
TOO_OLD = "ciphertext or signature version is disallowed by policy (too old)"
DECRYPTION_FAILED = "invalid ciphertext: decryption failed"
"""The one answer for every failure of a ciphertext's body (encoding, length, tag, key, associated data)."""

HASHES: Mapping[str, Hash] = {
    "sha1": Hash.SHA1,
    "sha2-224": Hash.SHA224,
    "sha2-256": Hash.SHA256,
    "sha2-384": Hash.SHA384,
    "sha2-512": Hash.SHA512,
}
"""Vault's hash names for the digests of the table (``sha3-*`` are Vault's too; no key spec signs with them)."""
SOFTWARE_HASHES: Mapping[str, str] = {
    **{name: digest.value for name, digest in HASHES.items()},
    "sha3-224": "sha3_224",
    "sha3-256": "sha3_256",
    "sha3-384": "sha3_384",
    "sha3-512": "sha3_512",
}
"""What ``hash`` computes in software (as Vault does), by ``hashlib`` name."""
DEFAULT_HASH = "sha2-256"


class TransitError(Exception):
    """A refusal as Vault words it: HTTP ``status`` and ``message`` (``{"errors": [message]}``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def invalid(message: str) -> TransitError:
    """A 400 (the caller's error)."""
    return TransitError(400, message)


# -- paths --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One request's operation (its action is ``transit.<operation>``), the mount it came through
    (None for ``/v1/auth/…``), the key it names and the path's last optional part (an algorithm, a
    version, a data key's kind, a byte count)."""

    operation: str
    mount: str | None = None
    name: str | None = None
    argument: str | None = None
    kind: str | None = None


_KEYED = {
    "encrypt": ("encrypt", ("POST",)),
    "decrypt": ("decrypt", ("POST",)),
    "rewrap": ("rewrap", ("POST",)),
}
_OPTIONAL_ARGUMENT = {"hmac": "hmac", "sign": "sign", "verify": "verify"}
_KEY_ACTIONS = {"config": "key_config", "rotate": "key_rotate", "trim": "key_trim"}
REFUSED_PATHS: Mapping[str, str] = {
    "backup": "backup and restore hand out key material in plaintext; keys here never leave the HSM",
    "restore": "backup and restore hand out key material in plaintext; keys here never leave the HSM",
    "wrapping_key": "importing keys through the Transit API is not served: import them through the REST API",
    "import": "importing keys through the Transit API is not served: import them through the REST API",
    "import_version": "importing keys through the Transit API is not served: import them through the REST API",
    "cache-config": "there is no Transit key cache to configure (keys are cached per worker, bounded)",
    "config": "the mount's key configuration (upsert, ...) is fixed: keys are created explicitly",
    "byok-export": "keys here never leave the HSM (only exportable AES-GCM keys, through export)",
    "soft-delete": "a key is deleted with DELETE keys/<name> (then kept for the deletion window)",
    "soft-delete-restore": "a deletion is cancelled through the REST API (POST /v1/keys/<key>/cancel-deletion)",
}
"""Vault paths refused by name, with the reason (400)."""

METHODS: Mapping[str, tuple[str, ...]] = {
    "key_list": ("GET", "LIST"),
    "key_create": ("POST", "PUT"),
    "key_read": ("GET",),
    "key_delete": ("DELETE",),
    "export": ("GET",),
    "lookup_self": ("GET", "POST", "PUT"),
}
"""The methods of each operation (every other takes POST, and PUT as Vault does)."""


def methods_of(operation: str) -> tuple[str, ...]:
    return METHODS.get(operation, ("POST", "PUT"))


def parse_path(path: str, mounts: Collection[str]) -> Route | None:
    """The route of ``path`` (under ``/v1/``); None when it is no path of this door's. TransitError 404
    for a path under a mount or ``auth/`` that Vault has no such operation for, 400 for a refused one."""
    if path.startswith("/v1/auth/"):
        return _auth_route(path[len("/v1/auth/") :])
    for mount in mounts:
        prefix = f"/v1/{mount}/"
        if path.startswith(prefix):
            route = _mount_route(mount, path[len(prefix) :].rstrip("/").split("/"))
            if route.name is not None and not is_key_ref(route.name):
                raise invalid(f"name: {KEY_REF_RULE}")
            return route
    return None


def owns(path: str, mounts: Collection[str]) -> bool:
    """Whether ``path`` is this door's: under a mount, or Vault's ``/v1/auth/`` (no REST path is)."""
    return path.startswith("/v1/auth/") or any(path.startswith(f"/v1/{mount}/") for mount in mounts)


def _auth_route(rest: str) -> Route:
    if rest == "approle/login":
        return Route("login")
    if rest == "token/lookup-self":
        return Route("lookup_self")
    raise TransitError(404, "unsupported path: the auth methods served are approle/login and token/lookup-self")


def _mount_route(mount: str, parts: list[str]) -> Route:
    head, rest = parts[0], parts[1:]
    if head == "keys":
        return _keys_route(mount, rest)
    if head in _KEYED and len(rest) == 1:
        return Route(_KEYED[head][0], mount, rest[0])
    if head in _OPTIONAL_ARGUMENT and len(rest) in (1, 2):
        return Route(_OPTIONAL_ARGUMENT[head], mount, rest[0], rest[1] if len(rest) == 2 else None)
    if head == "datakey" and len(rest) == 2:
        return Route("datakey", mount, rest[1], kind=rest[0])
    if head == "export" and len(rest) in (2, 3):
        return Route("export", mount, rest[1], rest[2] if len(rest) == 3 else None, kind=rest[0])
    if head == "random" and len(rest) <= 2:
        return Route("random", mount, None, "/".join(rest) or None)
    if head == "hash" and len(rest) <= 1:
        return Route("hash", mount, None, rest[0] if rest else None)
    if head in REFUSED_PATHS:
        raise invalid(f"{head}: {REFUSED_PATHS[head]}")
    raise TransitError(404, "unsupported path")


def _keys_route(mount: str, rest: list[str]) -> Route:
    if not rest or rest == [""]:
        return Route("key_list", mount)
    if len(rest) == 1:
        return Route("key", mount, rest[0])  # create, read or delete: told by the method
    if len(rest) == 2 and rest[1] in _KEY_ACTIONS:
        return Route(_KEY_ACTIONS[rest[1]], mount, rest[0])
    if len(rest) == 2 and rest[1] in REFUSED_PATHS:
        raise invalid(f"{rest[1]}: {REFUSED_PATHS[rest[1]]}")
    raise TransitError(404, "unsupported path")


def keyed_operation(method: str) -> str:
    """The operation of ``keys/<name>`` for ``method`` (405 is the door's for any other)."""
    return {"GET": "key_read", "DELETE": "key_delete"}.get(method, "key_create")


# -- bodies -------------------------------------------------------------------------------


def body(raw: bytes) -> dict[str, Any]:
    """The JSON object of a request body (an empty body: ``{}``); 400 for anything else, a key named
    twice, or nesting deeper than :data:`MAX_DEPTH`."""
    if not raw.strip():
        return {}
    try:
        value = strict_json.loads(raw)
    except strict_json.DuplicateKey as exc:
        raise invalid(f"failed to parse JSON input: {exc}") from None
    except (ValueError, RecursionError):
        raise invalid("failed to parse JSON input: the body is not JSON") from None
    if not isinstance(value, dict):
        raise invalid("failed to parse JSON input: the body must be a JSON object")
    if _depth(value) > MAX_DEPTH:
        raise invalid(f"failed to parse JSON input: nested deeper than {MAX_DEPTH} levels")
    return value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def only(params: Mapping[str, Any], allowed: Collection[str], where: str = "") -> None:
    """400 naming the first field of ``params`` not in ``allowed``."""
    for name in params:
        if name not in allowed:
            raise invalid(f"{where}{name}: unknown field")


def text(params: Mapping[str, Any], name: str, default: str = "", *, limit: int = 1 << 26, where: str = "") -> str:
    """String field ``name`` (``default`` when absent or null)."""
    value = params.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise invalid(f"{where}{name}: expected a string")
    if len(value) > limit:
        raise invalid(f"{where}{name}: at most {limit} characters")
    return value


def flag(params: Mapping[str, Any], name: str, *, where: str = "") -> bool | None:
    """Boolean field ``name`` (Vault also takes ``"true"``/``"false"``); None when absent."""
    value = params.get(name)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise invalid(f"{where}{name}: expected a boolean")


def number(params: Mapping[str, Any], name: str, *, low: int = 0, high: int = 1 << 31, where: str = "") -> int | None:
    """Integer field ``name`` between ``low`` and ``high`` (Vault also takes a decimal string); None when absent."""
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,12}", value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"{where}{name}: expected an integer")
    if not low <= value <= high:
        raise invalid(f"{where}{name}: must be between {low} and {high}")
    return value


def decoded(params: Mapping[str, Any], name: str, *, limit: int, where: str = "") -> bytes:
    """Base64 field ``name`` (standard alphabet, padded) decoded; empty when absent."""
    value = text(params, name, limit=4 * (limit // 3 + 3), where=where)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(f"{where}{name}: not valid base64") from None


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


def duration(params: Mapping[str, Any], name: str) -> int | None:
    """Duration field ``name`` in seconds (an integer, or Vault's ``90s``, ``15m``, ``24h``, ``30d``);
    None when absent."""
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        match = re.fullmatch(r"([0-9]{1,10})([smhd]?)", value.strip())
        if match is None:
            raise invalid(f"{name}: expected a duration such as 3600, 24h or 30d")
        return int(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]]
    found = number(params, name, high=100 * 365 * 86400)
    assert found is not None
    return found


# -- version-tagged values ----------------------------------------------------------------

_TAGGED = re.compile(r"vault:v([0-9]{1,9}):(.*)", re.DOTALL)


def tagged(version: int, data: bytes, *, urlsafe: bool = False) -> str:
    """``vault:v<version>:`` and ``data`` in base64 (the JWS marshaling: URL-safe, unpadded)."""
    body = base64.urlsafe_b64encode(data).rstrip(b"=").decode() if urlsafe else encoded(data)
    return f"vault:v{version}:{body}"


def untagged(value: str, what: str, *, urlsafe: bool = False) -> tuple[int, bytes | None]:
    """The version and the bytes of a ``vault:v<N>:<base64>`` value (the bytes None when they are not
    base64: for a ciphertext, the caller answers that as every other failure of its body). 400 naming
    ``what`` for a value without the prefix or with version 0."""
    match = _TAGGED.fullmatch(value)
    if match is None:
        raise invalid(f"invalid {what}: no vault:v<N>: prefix")
    version = int(match[1])
    if version == 0:
        raise invalid(f"invalid {what}: version 0 is no key version (versions start at 1)")
    data = match[2]
    try:
        if urlsafe:
            return version, base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
        return version, base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return version, None
