"""AWS Signature Version 4, verified: what a server needs to accept AWS SDK requests.

A request is authenticated by rebuilding its canonical request from what was received (method,
path, query, the headers the client says it signed, the body's SHA-256), deriving the signing
key from the access key's secret and the credential scope, and comparing the signature in
constant time. The canonical form follows the SigV4 specification as botocore's ``SigV4Auth``
implements it (``tests/domain/test_sigv4.py`` proves the two equal on thousands of generated
requests): dot segments and repeated slashes removed from the path, which is then
percent-encoded once more; query pairs decoded, re-encoded and sorted; header values trimmed
with inner whitespace collapsed, repeated headers joined with commas.

What must be signed, as AWS requires: ``host``, ``x-amz-date`` and every ``x-amz-*`` header the
request carries (``x-amz-target``, which names the operation, included), so that no header that
decides something can be changed on a captured request. The signed ``Host`` must be one of the
service's own names (``hosts``, normalised by :func:`normal_host`), so that a request signed for
another endpoint holding the same key pair does not replay here. The service name of the
credential scope is a parameter: one verifier for every SigV4 door (``kms``, ``kms-xks-proxy``).

Refusals are :class:`SignatureRefused` with the AWS error name a client expects:
``MissingAuthenticationTokenException`` (no signature at all), ``IncompleteSignatureException``
(a malformed ``Authorization`` header or date, a header that must be signed and is not),
``InvalidSignatureException`` (wrong signature, expired or future-dated request, another
service's scope, a ``Host`` that is not this service's), ``UnrecognizedClientException``
(session tokens, which this service does not issue). The message never carries the secret or
the expected signature.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, unquote

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_CLOCK_SKEW = timedelta(minutes=15)
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_TIMESTAMP_FORM = re.compile(r"[0-9]{8}T[0-9]{6}Z")
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256\s+Credential=(?P<credential>[^,\s]+)\s*,\s*"
    r"SignedHeaders=(?P<signed>[^,\s]+)\s*,\s*Signature=(?P<signature>[0-9a-f]{64})\s*"
)
_MAX_ACCESS_KEY_ID = 128
_AMZ_PREFIX = "x-amz-"
_DEFAULT_HTTPS_PORT = ":443"


class SignatureRefused(Exception):
    """The request is not authenticated; ``code`` is the AWS error name to answer with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ReceivedRequest:
    """A request as the server received it: ``raw_path`` and ``query`` still percent-encoded."""

    method: str
    raw_path: str
    query: str
    headers: Sequence[tuple[str, str]]
    body: bytes
    _by_name: dict[str, list[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, list[str]] = {}
        for key, value in self.headers:
            by_name.setdefault(key.lower(), []).append(value)
        object.__setattr__(self, "_by_name", by_name)  # one pass over the headers, not one per look-up

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (lower case); repeated headers joined with commas."""
        values = self._by_name.get(name)
        return ",".join(values) if values else None

    def values(self, name: str) -> list[str]:
        """Every value of header ``name`` (lower case), in order."""
        return self._by_name.get(name, [])

    def names(self) -> Collection[str]:
        """The names (lower case) of the headers the request carries."""
        return self._by_name.keys()


@dataclass(frozen=True)
class Credential:
    """What the ``Authorization`` header claims: whose key, for which scope, over which headers."""

    access_key_id: str
    date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str
    timestamp: str

    @property
    def scope(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/aws4_request"


def normal_host(host: str) -> str:
    """A ``Host`` value as :func:`parse` compares it: lower case, without the default port ``:443``."""
    host = host.strip().lower()
    return host.removesuffix(_DEFAULT_HTTPS_PORT)


def parse(
    request: ReceivedRequest,
    *,
    service: str,
    hosts: Collection[str],
    now: datetime,
    max_skew: timedelta = MAX_CLOCK_SKEW,
) -> Credential:
    """The credential a request claims, checked for form, service, signed headers, host and time
    (``max_skew`` either way; not yet its signature). ``service`` is the credential scope's service name (``kms``);
    ``hosts`` the :func:`normal_host` forms of the names the service answers to.

    Raises :class:`SignatureRefused`.
    """
    match = _authorization(request)
    key_id, date, region, scope_service = _credential_scope(match["credential"])
    signed = tuple(match["signed"].split(";"))
    if list(signed) != sorted(set(signed)) or "host" not in signed:
        raise SignatureRefused("IncompleteSignatureException", "SignedHeaders must be sorted, unique and include host")
    timestamp = request.header("x-amz-date")
    if timestamp is None or "x-amz-date" not in signed:
        raise SignatureRefused("IncompleteSignatureException", "the signed header X-Amz-Date is required")
    _check_amz_headers_signed(request, signed)
    try:
        signed_at = _signed_at(timestamp)
    except ValueError:
        raise SignatureRefused("IncompleteSignatureException", "X-Amz-Date must be YYYYMMDDTHHMMSSZ") from None
    if date != timestamp[:8]:
        raise SignatureRefused("InvalidSignatureException", "the credential's date does not match X-Amz-Date")
    if scope_service != service:
        raise SignatureRefused(
            "InvalidSignatureException", f"Credential should be scoped to correct service: '{service}'"
        )
    _check_time(signed_at, timestamp, now, max_skew)
    for name in signed:
        if request.header(name) is None:
            raise SignatureRefused("IncompleteSignatureException", f"the signed header {name} is missing")
    if normal_host(request.header("host") or "") not in hosts:
        raise SignatureRefused("InvalidSignatureException", "the request is signed for a host that is not this service")
    return Credential(key_id, date, region, scope_service, signed, match["signature"], timestamp)


def _authorization(request: ReceivedRequest) -> re.Match[str]:
    """The request's ``Authorization`` header, parsed; refused when missing, malformed or beside a session token."""
    authorization = request.header("authorization")
    if authorization is None:
        if "X-Amz-Signature=" in request.query:
            raise SignatureRefused("IncompleteSignatureException", "presigned query requests are not supported")
        raise SignatureRefused("MissingAuthenticationTokenException", "Missing Authentication Token")
    if request.header("x-amz-security-token") is not None:
        raise SignatureRefused("UnrecognizedClientException", "The security token included in the request is invalid.")
    match = _AUTHORIZATION.fullmatch(authorization.strip())
    if match is None:
        raise SignatureRefused(
            "IncompleteSignatureException",
            "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' of AWS4-HMAC-SHA256",
        )
    return match


def _credential_scope(credential: str) -> tuple[str, str, str, str]:
    """Key id, date, region and service of a ``Credential`` value; refused unless it has that form."""
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request" or not 0 < len(parts[0]) <= _MAX_ACCESS_KEY_ID:
        raise SignatureRefused(
            "IncompleteSignatureException", "Credential must be <key>/<date>/<region>/<service>/aws4_request"
        )
    key_id, date, region, scope_service, _ = parts
    return key_id, date, region, scope_service


def _check_time(signed_at: datetime, timestamp: str, now: datetime, max_skew: timedelta) -> None:
    """Refuse a signature made more than ``max_skew`` before or after ``now``."""
    if signed_at < now - max_skew:
        minutes = max_skew // timedelta(minutes=1)
        raise SignatureRefused(
            "InvalidSignatureException", f"Signature expired: {timestamp} is more than {minutes} minutes old"
        )
    if signed_at > now + max_skew:
        raise SignatureRefused("InvalidSignatureException", f"Signature not yet current: {timestamp} is in the future")


def claimed_access_key_id(authorization: str) -> str | None:
    """The access key id an ``Authorization`` header of AWS4-HMAC-SHA256 claims (nothing checked
    but its form), or None when it claims none."""
    match = _AUTHORIZATION.fullmatch(authorization.strip())
    if match is None:
        return None
    key_id = match["credential"].split("/")[0]
    return key_id if 0 < len(key_id) <= _MAX_ACCESS_KEY_ID else None


def _check_amz_headers_signed(request: ReceivedRequest, signed: Sequence[str]) -> None:
    """IncompleteSignatureException unless every ``x-amz-*`` header of ``request`` is in ``signed``."""
    unsigned = sorted(name for name in request.names() if name.startswith(_AMZ_PREFIX) and name not in signed)
    if unsigned:
        raise SignatureRefused(
            "IncompleteSignatureException",
            f"'{unsigned[0][:64]}' is present in the request but not a 'SignedHeader' in the AWS Authorization",
        )


def verify(request: ReceivedRequest, credential: Credential, secret: str) -> None:
    """Raise :class:`SignatureRefused` unless ``credential``'s signature is the one ``secret`` makes."""
    expected = signature(secret, credential, canonical_request(request, credential.signed_headers))
    if not hmac.compare_digest(expected, credential.signature):
        raise SignatureRefused(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided.",
        )


def canonical_request(request: ReceivedRequest, signed_headers: Sequence[str]) -> str:
    """The canonical request of SigV4 over ``signed_headers`` (lower-case names, sorted)."""
    return "\n".join(
        [
            request.method.upper(),
            canonical_path(request.raw_path),
            canonical_query(request.query),
            "".join(f"{name}:{_trimmed(request, name)}\n" for name in signed_headers),
            ";".join(signed_headers),
            _payload_hash(request),
        ]
    )


def canonical_path(raw_path: str) -> str:
    """Dot segments and empty segments removed, then percent-encoded (again) except ``/`` and ``~``."""
    if not raw_path:
        return "/"
    segments: list[str] = []
    for segment in raw_path.split("/"):
        if segment == "..":
            if segments:
                segments.pop()
        elif segment and segment != ".":
            segments.append(segment)
    first = "/" if raw_path.startswith("/") else ""
    last = "/" if raw_path.endswith("/") and segments else ""
    return quote(first + "/".join(segments) + last, safe="/~")


def canonical_query(query: str) -> str:
    """Every ``name=value`` pair decoded, encoded as SigV4 says, and sorted."""
    if not query:
        return ""
    pairs = []
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        pairs.append((_encoded(name), _encoded(value)))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def signature(secret: str, credential: Credential, canonical: str) -> str:
    """The hex signature of ``canonical`` with the signing key of ``secret`` for the credential's scope."""
    to_sign = "\n".join(
        [ALGORITHM, credential.timestamp, credential.scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = _signing_key(secret, credential.date, credential.region, credential.service)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


@functools.lru_cache(maxsize=1024)
def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """The SigV4 signing key of a secret for one day, region and service (four HMACs: kept, bounded)."""
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _signed_at(timestamp: str) -> datetime:
    """``YYYYMMDDTHHMMSSZ`` as a UTC time; ValueError otherwise (strptime took a third of ``parse``'s time)."""
    if _TIMESTAMP_FORM.fullmatch(timestamp) is None:
        raise ValueError(timestamp)
    t = timestamp
    return datetime(int(t[:4]), int(t[4:6]), int(t[6:8]), int(t[9:11]), int(t[11:13]), int(t[13:15]), tzinfo=UTC)


def _encoded(text: str) -> str:
    return quote(unquote(text, errors="strict"), safe="-_.~")


def _trimmed(request: ReceivedRequest, name: str) -> str:
    return ",".join(" ".join(value.split()) for value in request.values(name))


def _payload_hash(request: ReceivedRequest) -> str:
    """The body's SHA-256; a client's ``X-Amz-Content-SHA256`` must agree with it (never unsigned)."""
    actual = hashlib.sha256(request.body).hexdigest()
    claimed = request.header("x-amz-content-sha256")
    if claimed is not None and claimed != actual:
        if claimed == UNSIGNED_PAYLOAD:
            raise SignatureRefused("InvalidSignatureException", "unsigned payloads are not accepted")
        raise SignatureRefused("InvalidSignatureException", "X-Amz-Content-SHA256 does not match the body")
    return actual
