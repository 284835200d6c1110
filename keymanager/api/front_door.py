"""The front door: what a request must pass before a byte of its body is read.

In this order, for every HTTP request (:class:`FrontDoor`):

1. A key, principal or managed object named in the URL must follow the contract's name rules (400
   ``invalid_request``), so nothing longer than a name reaches a query, a cache or an audit record.
2. A ``Content-Length`` over the route's limit is refused with 413.
3. The caller authenticates — bearer token or verified TLS client certificate — except on the
   public routes (:data:`PUBLIC_PATHS`). An unknown credential is 401; an address that failed too
   often is 429 with ``Retry-After`` (see ``services/throttle.py``) unless its credential is a
   stored one (:func:`vouched_for`: cached, or in ``services/credential_index.py``), which is
   then authenticated as any other. The principal's credential goes into
   ``scope["state"]["credential"]``, where the route's own authentication (``api/deps.py``) reads it.
4. Only then is the body read, and cut at the route's limit: ``max_json`` for every route but
   the two batch routes (``max_batch``) and the two stream routes (no limit; they check the
   key's policy before they keep anything).

Refusals sent while a body may still be on its way close the connection (``Connection: close``),
so the rest of the body is never read. Failed authentications are audited as summaries, at most
one record per client address per interval.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from starlette.responses import Response
from starlette.types import Receive, Scope

from keymanager.api.errors import render
from keymanager.api.request_context import CREDENTIAL
from keymanager.domain.credential_kinds import MAX_SUBJECT_CHARS, MAX_TOKEN_CHARS
from keymanager.domain.credentials import Credential
from keymanager.domain.names import (
    KEY_REF_RULE,
    OBJECT_ID_RULE,
    PRINCIPAL_NAME_RULE,
    is_key_ref,
    is_object_id,
    is_principal_name,
)
from keymanager.domain.sigv4 import claimed_access_key_id
from keymanager.errors import InvalidRequest, KeyManagerError, PayloadTooLarge, RateLimited, Unauthenticated
from keymanager.services.container import Services
from keymanager.services.credential_index import ACCESS_KEY
from keymanager.services.throttle import AuthThrottle, FailureSummary

PUBLIC_PATHS = frozenset({"/v1/health", "/v1/ready", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
"""Routes anyone may call; every other path (unknown ones included) needs a principal."""
CLIENT_SUBJECT = "client_subject"

_KEY = re.compile(r"/v1/keys/([^/]*)(?:/.*)?")
_PRINCIPAL = re.compile(r"/v1/principals/([^/]*)")
_OBJECT = re.compile(r"/v1/objects/([^/]*)")
_BATCH = re.compile(r"/v1/keys/[^/]+/(?:encrypt|decrypt)/batch")
_STREAM = re.compile(r"/v1/keys/[^/]+/(?:encrypt|decrypt)/stream")


@dataclass(frozen=True)
class BodyLimits:
    """Body limits in bytes: JSON routes, and the two batch routes; the two stream routes have none."""

    json: int
    batch: int

    def of(self, method: str, path: str) -> int | None:
        """The limit of the route ``method path`` (None: unlimited)."""
        if method == "POST" and _STREAM.fullmatch(path):
            return None
        if method == "POST" and _BATCH.fullmatch(path):
            return self.batch
        return self.json


class FrontDoor:
    """The checks before the body (see the module docstring); the gateway (``api/gateway.py``) asks
    :meth:`admit` of every request but the KMS door's and answers a refusal with :meth:`refusal`."""

    def __init__(
        self,
        *,
        services: Callable[[], Services],
        throttle: AuthThrottle,
        limits: BodyLimits,
        methods: Callable[[Scope], list[str]],
    ) -> None:
        self.methods = methods
        self.services = services
        self.throttle = throttle
        self.limits = limits

    async def admit(self, scope: Scope, headers: Mapping[bytes, bytes]) -> int | None:
        """The body limit of the request ``scope`` (None: unlimited) once its names, length and
        credential passed; the refusal (a KeyManagerError) otherwise. ``headers``: the request's,
        names in lower case, the first of each name."""
        limit = self.limits.of(scope["method"], scope["path"])
        self._check_names(scope)
        length = headers.get(b"content-length")
        if limit is not None and length is not None and length.isdigit() and int(length) > limit:
            raise PayloadTooLarge("request body too large")
        if scope["path"] not in PUBLIC_PATHS:
            await self._authenticate(scope, headers)
        return limit

    def refusal(self, exc: KeyManagerError, request_id: str, headers: Mapping[bytes, bytes]) -> Response:
        """The answer to a request :meth:`admit` refused with ``exc``: it closes the connection when
        a body may be on its way, so the rest of the body is never read."""
        response = render(exc, request_id)
        if b"transfer-encoding" in headers or headers.get(b"content-length", b"0") != b"0":
            response.headers["connection"] = "close"
        return response

    def _check_names(self, scope: Scope) -> None:
        """The name rules, for a method the path serves (any other method is 405, not a bad name)."""
        try:
            _check_names(scope["path"])
        except InvalidRequest:
            if scope["method"] in self.methods(scope):
                raise

    async def _authenticate(self, scope: Scope, headers: Mapping[bytes, bytes]) -> None:
        """Put the caller's credential in the scope; Unauthenticated, RateLimited or a store error otherwise."""
        credential = credential_of(scope, headers.get(b"authorization"))
        services = self.services()
        admission = Admission.of(self.throttle, services, scope)
        wait = await admission.throttled(lambda: vouched_for(services, credential), 429)
        if wait is not None:
            raise RateLimited("too many failed authentications from this address", retry_after=wait)
        try:
            if credential is None:
                raise Unauthenticated()
            if not services.cache.knows(credential):
                await services.cache.snapshot(fresh=False).principal(credential)
        except Unauthenticated:
            await admission.failed(401)
            raise
        scope["state"][CREDENTIAL] = credential


@dataclass(frozen=True, slots=True)
class Admission:
    """One request's passage through the failed-authentication throttle, the same on every door
    (REST here, the KMS, XKS and Transit doors in their modules, KMIP's listener): a throttled
    address is refused unless the credential it presents is a stored one, and each refusal before
    authentication is counted and summarised in the audit log, naming the request (``method``,
    ``path``) that made a summary due. What the refusal looks like is the door's."""

    throttle: AuthThrottle
    services: Services
    address: str
    request_id: str
    method: str
    path: str

    @classmethod
    def of(cls, throttle: AuthThrottle, services: Services, scope: Scope) -> Admission:
        """The admission of the HTTP request ``scope``."""
        client = scope.get("client")
        address = str(client[0]) if client else ""
        return cls(throttle, services, address, scope["state"].get("request_id", ""), scope["method"], scope["path"])

    async def throttled(self, vouched: Callable[[], Awaitable[bool]], status: int) -> int | None:
        """The seconds to tell the caller to wait when its address is throttled and ``vouched()`` (asked
        only then) says its credential is not a stored one — the refusal, answered with ``status``, is
        then summarised; None when the request is admitted."""
        wait = self.throttle.retry_after(self.address)
        if wait is None or await vouched():
            return None
        await self._summarise(self.throttle.refused(self.address), status)
        return wait

    async def failed(self, status: int) -> None:
        """Count a refusal (``status``) before the caller authenticated, and summarise it when due."""
        await self._summarise(self.throttle.failed(self.address), status)

    async def _summarise(self, summary: FailureSummary | None, status: int) -> None:
        """Hand ``summary`` (when the throttle made one due) to the audit log, naming this request
        (``AuditLog.failed_authentication``); the audit log's error if it cannot be written."""
        await self.services.audit_log.failed_authentication(
            summary, request_id=self.request_id, status=status, method=self.method, path=self.path
        )


async def vouched_for(services: Services, credential: Credential | None) -> bool:
    """Whether ``credential`` is a stored one (cached, or in the credential index): a throttled
    address is served for it, since the throttle limits what strangers cost, not who may be served."""
    if credential is None:
        return False
    return services.cache.knows(credential) or await services.credentials.holds(credential.cache_name)


async def read_limited_body(
    headers: list[tuple[str, str]], receive: Receive, limit: int, too_large: Exception
) -> bytes:
    """The body of a request to a door that reads its own (the KMS and XKS doors): ``too_large``
    raised, before any byte is kept beyond it, when ``Content-Length`` or the bytes received pass
    ``limit`` (a ``Content-Length`` that is not a number is refused the same way)."""
    for name, value in headers:
        if name.lower() == "content-length" and (not value.isdigit() or int(value) > limit):
            raise too_large
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def vouched_for_signature(services: Services, scope: Scope) -> bool:
    """Whether the access key a SigV4-signed request (the KMS and XKS doors) claims is a stored one:
    a throttled address is served for it (its signature is then verified as any other's)."""
    authorization = next((v for k, v in scope["headers"] if k.lower() == b"authorization"), b"")
    key_id = claimed_access_key_id(authorization.decode("latin-1"))
    return key_id is not None and await services.credentials.holds(ACCESS_KEY + key_id)


def credential_of(scope: Scope, authorization: bytes | None) -> Credential | None:
    """The credential the request presents: a bearer token (``authorization``: its first
    ``Authorization`` header), else a verified client certificate; None when there is none or it
    cannot be one (a malformed header, an overlong token)."""
    if authorization is not None:
        scheme, _, token = authorization.decode("latin-1").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_CHARS:
            return None
        return Credential.of_token(token)
    subject = scope.get("extensions", {}).get("tls", {}).get(CLIENT_SUBJECT)
    if subject and len(subject) <= MAX_SUBJECT_CHARS:
        return Credential(subject=subject)
    return None


def _check_names(path: str) -> None:
    if path.startswith("/v1/keys/"):
        match = _KEY.fullmatch(path)
        if match is not None and not is_key_ref(match.group(1)):
            raise InvalidRequest(KEY_REF_RULE)
    elif path.startswith("/v1/principals/"):
        match = _PRINCIPAL.fullmatch(path)
        if match is not None and not is_principal_name(match.group(1)):
            raise InvalidRequest(PRINCIPAL_NAME_RULE)
    elif path.startswith("/v1/objects/"):
        match = _OBJECT.fullmatch(path)
        if match is not None and not is_object_id(match.group(1)):
            raise InvalidRequest(OBJECT_ID_RULE)
