"""The pure core shared by ``KeyManager`` and ``AsyncKeyManager``: no I/O here.

Every API operation is described by a ``Call``: what to send (method, path, query, JSON body),
whether it may be retried, and how to turn the answer into a typed result. The clients send
the call, and hand the answer (any ``Response``) back to ``result``; between attempts they
sleep for ``Core.retry_delay``. How a client reaches the service is ``_connection``'s.

Retries (connection errors, 503, 429) are allowed only for reads and cryptographic calls,
never for calls that create or change something (keys, principals, rotation, deletion, patch).

Any call may be answered 202 ``pending_approval`` (dual control held it for approval): ``result``
raises that as ``ApprovalPending``, whatever the call, before looking at the call's own statuses.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import quote

from keymanager_sdk._exceptions import APIError, ApprovalPending, KeyManagerError, api_error
from keymanager_sdk._key_specs import KeySpec, key_specs_of
from keymanager_sdk._models import (
    AuditPage,
    AuditVerification,
    Context,
    DataKey,
    Encrypted,
    Health,
    Key,
    Mac,
    NewPrincipal,
    Policy,
    Principal,
    Readiness,
    as_bytes,
    as_ciphertext,
    b64decode,
    b64encode,
    context_json,
    policy_json,
)

__version__ = "0.1.0"

T = TypeVar("T")

BATCH_MAX_ITEMS = 1000
"""The service's limit on items per batch request."""
BATCH_MAX_BODY = 768 * 1024
"""Batches are also cut so that their JSON body stays well below the service's 1 MiB limit."""
CONTEXT_HEADER = "X-KM-Context"
"""Header carrying base64 of the JSON encryption context of an on-board stream."""
STREAM_CHUNK = 256 * 1024
RETRY_STATUSES = frozenset({429, 503})
PENDING_STATUS = 202
"""The status of a guarded call held for approval (body ``status`` ``pending_approval``)."""
AUDIT_PAGE_MAX = 1000

Plaintext = bytes | bytearray | memoryview | str
BatchResult = list[T | APIError]
PolicyArg = Policy | Mapping[str, Any] | None


class Response(Protocol):
    """What the core reads of an answer (an ``httpx.Response`` or the urllib3 transport's ``Answer``)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def reason_phrase(self) -> str: ...

    def json(self) -> Any: ...


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter: attempt ``n`` (from 0) sleeps ``uniform(0, min(cap, base·2ⁿ))``.

    A ``Retry-After`` header (seconds or an HTTP date) on a 429 or 503 is honoured instead,
    up to ``max_retry_after`` seconds.
    """

    max_retries: int = 3
    backoff_base: float = 0.1
    backoff_cap: float = 5.0
    max_retry_after: float = 60.0


@dataclass(frozen=True)
class Call(Generic[T]):
    """One API request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[Response], T]
    json: Any = None
    params: Mapping[str, str | int] | None = None
    retryable: bool = False
    accept: frozenset[int] = field(default_factory=lambda: frozenset({200, 201, 204}))
    headers: Mapping[str, str] | None = None
    key: str | None = None
    """The key reference the call names (its errors carry it), when it names one."""
    principal: str | None = None
    """The principal the call names (its errors carry it), when it names one."""


def error_from(response: Response, key: str | None = None, principal: str | None = None) -> APIError:
    """The ``APIError`` for an error answer (a plain ``APIError`` when the body is not the API's),
    carrying the key reference or the principal the call names, when it names one."""
    request_id = response.headers.get("x-request-id", "")
    try:
        body = response.json()
        error = body["error"]
        request_id = str(body.get("request_id") or request_id)
        return api_error(response.status_code, str(error["code"]), str(error["message"]), request_id, key, principal)
    except (ValueError, KeyError, TypeError):
        return APIError(
            response.status_code, "http_error", response.reason_phrase or "error", request_id, key, principal
        )


def approval_pending(
    response: Response, key: str | None = None, principal: str | None = None
) -> ApprovalPending | None:
    """The ``ApprovalPending`` of a 202 ``pending_approval`` answer (None for any other answer),
    carrying the key reference or the principal the held call names.

    Raises ``APIError`` (``invalid_response``) for a ``pending_approval`` body without its fields.
    """
    if response.status_code != PENDING_STATUS:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, Mapping) or body.get("status") != "pending_approval":
        return None
    try:
        operations = body["operations"]
        if not isinstance(operations, list):
            raise TypeError(f"operations is {type(operations).__name__}, not a list")
        return ApprovalPending(
            str(body["request_id"]),
            tuple(str(op) for op in operations),
            int(body["approvals_required"]),
            datetime.fromisoformat(str(body["expires_at"])),
            key,
            principal,
        )
    except (KeyError, TypeError, ValueError) as exc:
        message = f"unexpected pending-approval answer: {exc}"
        raise APIError(PENDING_STATUS, "invalid_response", message, "", key, principal) from exc


def refusal(response: Response, key: str | None = None, principal: str | None = None) -> KeyManagerError:
    """What an answer that is not the call's result raises: ``ApprovalPending`` for a call held for
    approval, else ``error_from``'s ``APIError``."""
    return approval_pending(response, key, principal) or error_from(response, key, principal)


def _json_parser(build: Callable[[Any], T]) -> Callable[[Response], T]:
    def parse(response: Response) -> T:
        try:
            return build(response.json())
        except (ValueError, KeyError, TypeError) as exc:
            raise APIError(response.status_code, "invalid_response", f"unexpected answer: {exc}") from exc

    return parse


def _key(response: Response) -> Key:
    """A key from its answer, with the answer's ``ETag`` (its metadata version) as ``etag``."""
    key = _json_parser(Key.from_json)(response)
    return replace(key, etag=response.headers.get("etag"))


def _no_content(response: Response) -> None:
    return None


def _retry_after(response: Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def _path(*parts: str) -> str:
    return "/v1/" + "/".join(quote(p, safe="") for p in parts)


def _with_context(body: dict[str, Any], context: Context | None, name: str = "context") -> dict[str, Any]:
    if context is not None:
        body[name] = context_json(context)
    return body


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def envelope_key(data_key: DataKey) -> dict[str, Any]:
    """``seal_stream``'s key arguments from a data key that carries its plaintext."""
    if data_key.plaintext is None:
        raise APIError(200, "invalid_response", "the data key came without its plaintext")
    return {"data_key": data_key.plaintext, "wrapped_key": data_key.ciphertext}


def batches(items: Iterable[bytes | str], size: Callable[[bytes | str], int]) -> Iterator[list[bytes | str]]:
    """Cut ``items`` into lists of ≤ ``BATCH_MAX_ITEMS`` items and ≈ ≤ ``BATCH_MAX_BODY`` bytes of JSON."""
    batch: list[bytes | str] = []
    used = 0
    for item in items:
        cost = size(item) + 64
        if batch and (len(batch) >= BATCH_MAX_ITEMS or used + cost > BATCH_MAX_BODY):
            yield batch
            batch, used = [], 0
        batch.append(item)
        used += cost
    if batch:
        yield batch


def audit_page_size(limit: int | None) -> int | None:
    """The page size to ask for when reading up to ``limit`` records (the service's default when None)."""
    return None if limit is None else max(1, min(limit, AUDIT_PAGE_MAX))


def _batch_results(build: Callable[[Any], T]) -> Callable[[Any], BatchResult[T]]:
    def parse(data: Any) -> BatchResult[T]:
        out: BatchResult[T] = []
        for item in data["results"]:
            if "error" in item:
                error = item["error"]
                out.append(api_error(None, str(error["code"]), str(error["message"]), str(data.get("request_id", ""))))
            else:
                out.append(build(item))
        return out

    return parse


def _readiness(response: Response) -> Readiness:
    body = response.json()
    if "error" in body:
        raise error_from(response)
    return Readiness.from_json(body)


class Core:
    """Configuration and the request builders / answer parsers of every API operation."""

    def __init__(self, retry: RetryPolicy | None = None, rand: Callable[[], float] = random.random) -> None:
        self.retry = retry or RetryPolicy()
        self._rand = rand

    # --- sending -------------------------------------------------------------------------------

    def retry_delay(self, call: Call[Any], attempt: int, response: Response | None) -> float | None:
        """Seconds to wait before retrying ``call`` after attempt ``attempt`` (0-based), or None: do not retry.

        ``response`` is None when the attempt failed with a transport error.
        """
        if not call.retryable or attempt >= self.retry.max_retries:
            return None
        if response is not None:
            if response.status_code not in RETRY_STATUSES:
                return None
            after = _retry_after(response)
            if after is not None:
                return min(after, self.retry.max_retry_after)
        return self._rand() * min(self.retry.backoff_cap, self.retry.backoff_base * 2.0**attempt)

    @staticmethod
    def result(call: Call[T], response: Response) -> T:
        """The typed result of ``call`` from its answer; raises ``ApprovalPending`` when the service holds
        the call for approval, and the ``APIError`` subclass of an error answer."""
        pending = approval_pending(response, call.key, call.principal)
        if pending is not None:
            raise pending
        if response.status_code not in call.accept:
            raise error_from(response, call.key, call.principal)
        return call.parse(response)

    # --- health --------------------------------------------------------------------------------

    def health(self) -> Call[Health]:
        return Call("GET", "/v1/health", _json_parser(Health.from_json), retryable=True)

    def ready(self) -> Call[Readiness]:
        return Call("GET", "/v1/ready", _readiness, accept=frozenset({200, 503}))

    # --- principals ----------------------------------------------------------------------------

    def create_principal(
        self, name: str, role: str, cert_subject: str | None, *, create_keys: bool = False, key_store: bool = False
    ) -> Call[NewPrincipal]:
        body = _drop_none({"name": name, "role": role, "cert_subject": cert_subject})
        if create_keys:
            body["create_keys"] = True
        if key_store:
            body["key_store"] = True
        return Call("POST", "/v1/principals", _json_parser(NewPrincipal.from_json), json=body)

    def whoami(self) -> Call[Principal]:
        return Call("GET", "/v1/whoami", _json_parser(Principal.from_json), retryable=True)

    def list_principals(self) -> Call[list[Principal]]:
        parse = _json_parser(lambda data: [Principal.from_json(p) for p in data])
        return Call("GET", "/v1/principals", parse, retryable=True)

    def delete_principal(self, name: str) -> Call[None]:
        return Call("DELETE", _path("principals", name), _no_content, principal=name)

    # --- keys ----------------------------------------------------------------------------------

    def create_key(
        self,
        name: str,
        algorithm: str | None,
        description: str | None,
        policy: PolicyArg,
        rotation_period_days: int | None,
        origin: str | None = None,
        usage: str | None = None,
    ) -> Call[Key]:
        body = _drop_none(
            {
                "origin": origin,
                "name": name,
                "algorithm": algorithm,
                "usage": usage,
                "description": description,
                "policy": policy_json(policy),
                "rotation_period_days": rotation_period_days,
            }
        )
        return Call("POST", "/v1/keys", _key, json=body)

    def key_specs(self) -> Call[list[KeySpec]]:
        return Call("GET", "/v1/key-specs", _json_parser(key_specs_of), retryable=True)

    def list_keys(self) -> Call[list[Key]]:
        return Call("GET", "/v1/keys", _json_parser(lambda data: [Key.from_json(k) for k in data]), retryable=True)

    def get_key(self, key: str) -> Call[Key]:
        return Call("GET", _path("keys", key), _key, retryable=True, key=key)

    def update_key(self, key: str, changes: Mapping[str, Any], if_match: str | None = None) -> Call[Key]:
        body = _drop_none(changes)
        if "policy" in body:
            body["policy"] = policy_json(body["policy"])
        headers = None if if_match is None else {"If-Match": if_match}
        return Call("PATCH", _path("keys", key), _key, json=body, headers=headers, key=key)

    def rotate_key(self, key: str) -> Call[Key]:
        return Call("POST", _path("keys", key, "rotate"), _key, key=key)

    def schedule_key_deletion(self, key: str, pending_days: int) -> Call[Key]:
        params = {"pending_days": pending_days}
        return Call("DELETE", _path("keys", key), _key, params=params, key=key)

    def cancel_key_deletion(self, key: str) -> Call[Key]:
        return Call("POST", _path("keys", key, "cancel-deletion"), _key, key=key)

    # --- cryptography --------------------------------------------------------------------------

    def encrypt(
        self, key: str, data: Plaintext, context: Context | None, algorithm: str | None = None
    ) -> Call[Encrypted]:
        """``algorithm`` (``RSAES_OAEP_SHA_1|256``) for an RSA ``ENCRYPT_DECRYPT`` key: the
        ciphertext is then base64 of the raw OAEP ciphertext."""
        body = _with_context({"plaintext": b64encode(as_bytes(data))}, context)
        build = Encrypted.from_json
        if algorithm is not None:
            body["algorithm"], build = algorithm, Encrypted.from_oaep_json
        return Call("POST", _path("keys", key, "encrypt"), _json_parser(build), json=body, retryable=True, key=key)

    def decrypt(
        self, ciphertext: str | bytes, context: Context | None, key: str | None, algorithm: str | None = None
    ) -> Call[bytes]:
        """``algorithm`` (RSA-OAEP) needs ``key``, since a raw OAEP ciphertext does not name its key;
        its ciphertext may then be the raw bytes or their base64 (what ``encrypt`` returned)."""
        if algorithm is not None and key is None:
            raise ValueError(f"decrypting with {algorithm} needs key= (an OAEP ciphertext does not name its key)")
        path = "/v1/decrypt" if key is None else _path("keys", key, "decrypt")
        if algorithm is not None and not isinstance(ciphertext, str):
            text = b64encode(as_bytes(ciphertext, "ciphertext"))
        else:
            text = as_ciphertext(ciphertext)
        body = _with_context({"ciphertext": text}, context)
        if algorithm is not None:
            body["algorithm"] = algorithm
        parse = _json_parser(lambda d: b64decode(d["plaintext"]))
        return Call("POST", path, parse, json=body, retryable=True, key=key)

    def encrypt_batches(
        self, key: str, items: Iterable[Plaintext], context: Context | None
    ) -> Iterator[Call[BatchResult[Encrypted]]]:
        """One call per batch of ``items``, in order."""
        parse = _json_parser(_batch_results(Encrypted.from_json))
        for batch in batches((as_bytes(item) for item in items), lambda item: len(item) * 4 // 3):
            body_items = [_with_context({"plaintext": b64encode(as_bytes(p))}, context) for p in batch]
            path = _path("keys", key, "encrypt", "batch")
            yield Call("POST", path, parse, json={"items": body_items}, retryable=True, key=key)

    def decrypt_batches(
        self, key: str, ciphertexts: Iterable[str], context: Context | None
    ) -> Iterator[Call[BatchResult[bytes]]]:
        """One call per batch of ``ciphertexts``, in order."""
        parse = _json_parser(_batch_results(lambda d: b64decode(d["plaintext"])))
        for batch in batches((as_ciphertext(c) for c in ciphertexts), len):
            body_items = [_with_context({"ciphertext": c}, context) for c in batch]
            path = _path("keys", key, "decrypt", "batch")
            yield Call("POST", path, parse, json={"items": body_items}, retryable=True, key=key)

    def generate_data_key(self, key: str, bits: int, context: Context | None, include_plaintext: bool) -> Call[DataKey]:
        body = _with_context({"bits": bits, "include_plaintext": include_plaintext}, context)
        return Call(
            "POST", _path("keys", key, "datakey"), _json_parser(DataKey.from_json), json=body, retryable=True, key=key
        )

    def reencrypt(
        self,
        key: str,
        ciphertext: str,
        context: Context | None,
        destination_key: str | None,
        destination_context: Context | None,
    ) -> Call[Encrypted]:
        body = _with_context({"ciphertext": as_ciphertext(ciphertext)}, context)
        _with_context(body, destination_context, "destination_context")
        if destination_key is not None:
            body["destination_key"] = destination_key
        parse = _json_parser(Encrypted.from_json)
        return Call("POST", _path("keys", key, "reencrypt"), parse, json=body, retryable=True, key=key)

    def mac(self, key: str, data: Plaintext, context: Context | None) -> Call[Mac]:
        body = _with_context({"data": b64encode(as_bytes(data))}, context)
        return Call("POST", _path("keys", key, "mac"), _json_parser(Mac.from_json), json=body, retryable=True, key=key)

    def verify_mac(
        self, key: str, data: Plaintext, mac: bytes, context: Context | None, key_version: int | None
    ) -> Call[bool]:
        if isinstance(mac, str):
            raise TypeError("mac must be bytes-like (or a Mac), not str")
        body = _with_context({"data": b64encode(as_bytes(data)), "mac": b64encode(as_bytes(mac, "mac"))}, context)
        if key_version is not None:
            body["key_version"] = key_version
        parse = _json_parser(lambda d: bool(d["valid"]))
        return Call("POST", _path("keys", key, "mac", "verify"), parse, json=body, retryable=True, key=key)

    # --- audit ---------------------------------------------------------------------------------

    def audit_page(
        self,
        key: str | None,
        principal: str | None,
        action: str | None,
        since: datetime | str | None,
        limit: int | None,
        cursor: int | None,
        newest_first: bool = False,
    ) -> Call[AuditPage]:
        """One page of audit records; ``cursor`` is the previous page's ``next`` (None: the first page)."""
        since_text = since.isoformat() if isinstance(since, datetime) else since
        params = _drop_none(
            {
                "key": key,
                "principal": principal,
                "action": action,
                "since": since_text,
                "limit": limit,
                "before" if newest_first else "after": cursor,
                "order": "desc" if newest_first else None,
            }
        )
        return Call("GET", "/v1/audit", _json_parser(AuditPage.from_json), params=params, retryable=True, key=key)

    def verify_audit(self) -> Call[AuditVerification]:
        return Call("GET", "/v1/audit/verify", _json_parser(AuditVerification.from_json), retryable=True)

    # --- on-board streaming --------------------------------------------------------------------

    @staticmethod
    def stream_request(key: str, direction: str, context: Context | None) -> tuple[str, dict[str, str]]:
        """Path and headers of ``POST /v1/keys/{key}/{direction}/stream`` (direction ``encrypt`` or ``decrypt``)."""
        headers = {"Content-Type": "application/octet-stream"}
        if context is not None:
            headers[CONTEXT_HEADER] = b64encode(json.dumps(context_json(context), separators=(",", ":")).encode())
        return _path("keys", key, direction, "stream"), headers


def chunks(src: Any, size: int = STREAM_CHUNK) -> Iterator[bytes]:
    """Read a binary file object in chunks of ≤ ``size`` bytes until end of file."""
    while chunk := src.read(size):
        yield bytes(chunk)
