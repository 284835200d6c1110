"""``KeyManager``: the synchronous client. It only does I/O; requests and answers are ``_core``'s."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, BinaryIO, Self, TypeVar

import httpx

from keymanager_sdk import _connection, _core
from keymanager_sdk._access_keys import AccessKeyMethods
from keymanager_sdk._approvals import ApprovalMethods
from keymanager_sdk._asymmetric import AsymmetricMethods
from keymanager_sdk._core import BatchResult, Call, Core, Plaintext, PolicyArg, Response, RetryPolicy, envelope_key
from keymanager_sdk._envelope import (
    DEFAULT_SEGMENT_SIZE,
    EnvelopeHeader,
    check_context,
    open_stream,
    read_header,
    seal_stream,
    write_atomically,
)
from keymanager_sdk._exceptions import DecryptionFailed, TransportError
from keymanager_sdk._key_import import KeyImportMethods
from keymanager_sdk._key_specs import KeySpec
from keymanager_sdk._models import (
    AuditRecord,
    AuditVerification,
    Context,
    DataKey,
    Encrypted,
    Health,
    Key,
    Mac,
    NewPrincipal,
    Principal,
    Readiness,
)
from keymanager_sdk._objects import ObjectMethods
from keymanager_sdk._tokens import TokenMethods
from keymanager_sdk._transport import TRANSPORT_ERRORS, JsonTransport, json_transport

T = TypeVar("T")


class KeyManager(TokenMethods, AccessKeyMethods, KeyImportMethods, AsymmetricMethods, ApprovalMethods, ObjectMethods):
    """Synchronous client of the keymanager API.

    ``base_url`` is the service (``https://host:8443``). Authenticate with ``token`` (bearer) or a
    TLS client certificate (``client_cert`` / ``client_key`` PEM paths); ``ca`` is the CA bundle
    that signed the server's certificate (``verify`` may give a ready ``ssl.SSLContext`` instead, or
    the CA bundle's path as httpx takes it; anything else is a ``TypeError``). ``http://`` URLs are
    refused (the service speaks HTTPS) unless ``insecure_http=True`` says so, for measurements only.
    ``KeyManager.from_env()`` takes these from ``KM_*`` variables. The URL and the files are
    checked here: ``ConfigurationError`` (a ``ValueError``) names what is wrong.

    JSON calls go over urllib3's keep-alive pool (``_transport``), at most
    ``limits.max_connections`` connections; streams and a custom ``transport`` over httpx.
    ``trust_env`` honours ``HTTP(S)_PROXY`` / ``NO_PROXY``. Create one client, share it between
    threads (and forked children), and close it (or use ``with``) when done.

    Reads and cryptographic calls are retried on connection errors, 429 and 503 (honouring
    ``Retry-After``) up to ``max_retries`` times with full-jitter backoff; calls that create or
    change keys and principals are never retried. ``sleep`` and ``transport`` are for tests.
    Every method raises ``TransportError`` when the service cannot be reached (naming method,
    host, port and path) and the ``APIError`` subclass of the service's error code otherwise;
    a plaintext that is neither ``str`` nor bytes-like is a ``TypeError``. Any call the service
    holds for approval (dual control) raises ``ApprovalPending``: once approved, send it again.
    Tokens: ``_tokens``; access keys of the AWS KMS API: ``_access_keys``; approval requests and
    rules: ``_approvals``; managed objects that are not keys (registered over KMIP): ``_objects``.
    """

    def __init__(  # noqa: PLR0913 (keyword-only options of the public constructor, as httpx.Client has)
        self,
        base_url: str,
        *,
        token: str | None = None,
        ca: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        verify: _connection.Verify = None,
        timeout: float | httpx.Timeout = _connection.DEFAULT_TIMEOUT,
        max_retries: int = 3,
        retry: RetryPolicy | None = None,
        limits: httpx.Limits | None = None,
        trust_env: bool = True,
        insecure_http: bool = False,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._origin = _connection.origin(_connection.check_url(base_url, insecure_http))
        headers, context = _connection.http_options(token, ca, client_cert, client_key, verify)
        self._core = Core(retry or RetryPolicy(max_retries=max_retries))
        self._sleep = sleep
        timeouts = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=30)
        self._http = httpx.Client(
            base_url=base_url,
            headers=headers,
            verify=context,
            timeout=timeouts,
            limits=limits,
            trust_env=trust_env,
            transport=transport,
        )
        self._json: JsonTransport | None = None
        if transport is None:
            self._json = json_transport(base_url, headers, context, timeouts, limits, trust_env)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **options: Any) -> Self:
        """A client configured by ``KM_URL``, ``KM_TOKEN`` or ``KM_TOKEN_FILE``, ``KM_CA``,
        ``KM_CLIENT_CERT`` and ``KM_CLIENT_KEY`` (``env``: ``os.environ`` by default); ``options``
        are passed on and win. ``ConfigurationError`` when ``KM_URL`` is unset or a file is missing."""
        settings: dict[str, Any] = {**_connection.settings_from_env(env), **options}
        return cls(**settings)

    def close(self) -> None:
        """Close the connection pools."""
        if self._json is not None:
            self._json.close()
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _send(self, call: Call[Any]) -> Response:
        if self._json is not None:
            return self._json.request(call.method, call.path, call.json, call.params, call.headers)
        return self._http.request(call.method, call.path, json=call.json, params=call.params, headers=call.headers)

    def _run(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = self._send(call)
            except TRANSPORT_ERRORS as exc:
                delay = self._core.retry_delay(call, attempt, None)
                if delay is None:
                    message = _connection.transport_message(call.method, self._origin, call.path, exc)
                    raise TransportError(message) from exc
            else:
                delay = self._core.retry_delay(call, attempt, response)
                if delay is None:
                    return self._core.result(call, response)
            self._sleep(delay)
            attempt += 1

    # --- health ----------------------------------------------------------------------------------

    def health(self) -> Health:
        """Liveness of the service (``status`` ``ok``)."""
        return self._run(self._core.health())

    def ready(self) -> Readiness:
        """Readiness: ``ok`` False (not an exception) when the HSM or the database does not answer."""
        return self._run(self._core.ready())

    # --- principals ------------------------------------------------------------------------------

    def create_principal(
        self,
        name: str,
        role: str,
        cert_subject: str | None = None,
        *,
        create_keys: bool = False,
        key_store: bool = False,
    ) -> NewPrincipal:
        """Create a principal (role ``admin``, ``app`` or ``auditor``); the result carries its token, shown once.

        ``cert_subject`` (RFC 4514, e.g. ``CN=billing,O=example``) binds a TLS client certificate.
        ``create_keys``: it may create keys it then owns (KMIP clients); ``key_store`` (with
        ``create_keys``): a KMIP key-store client, whose AES keys made over KMIP are exportable to it.
        Raises ``Conflict`` when the name is taken. Admin only; never retried.
        """
        return self._run(
            self._core.create_principal(name, role, cert_subject, create_keys=create_keys, key_store=key_store)
        )

    def whoami(self) -> Principal:
        """The principal this client's credential belongs to (any role may ask)."""
        return self._run(self._core.whoami())

    def list_principals(self) -> list[Principal]:
        """Every principal (without tokens). Admin only."""
        return self._run(self._core.list_principals())

    def delete_principal(self, name: str) -> None:
        """Delete a principal; its token stops working at once. Admin only; never retried."""
        self._run(self._core.delete_principal(name))

    # --- keys ------------------------------------------------------------------------------------

    def key_specs(self) -> list[KeySpec]:
        """The service's table of key types (any role may ask): each spec, its usages and their algorithms."""
        return self._run(self._core.key_specs())

    def create_key(
        self,
        name: str,
        algorithm: str | None = None,
        description: str | None = None,
        policy: PolicyArg = None,
        rotation_period_days: int | None = None,
        origin: str | None = None,
        usage: str | None = None,
    ) -> Key:
        """Create a key in the HSM (version 1). ``algorithm``: ``AES_256_CBC_HMAC_SHA256`` (default),
        ``AES_256_GCM``, ``HMAC_SHA256`` …, or an asymmetric spec (``RSA_2048``, ``ECC_NIST_P256`` …)
        with its ``usage`` (``SIGN_VERIFY``, ``ENCRYPT_DECRYPT``, ``KEY_AGREEMENT``; RSA must name it).
        ``policy``: a ``Policy`` or the API's mapping. ``origin`` ``"external"``: no material until
        ``import_key_material``. Never retried."""
        call = self._core.create_key(name, algorithm, description, policy, rotation_period_days, origin, usage)
        return self._run(call)

    def list_keys(self) -> list[Key]:
        """Every key for an admin; for other principals, the keys whose policy names them."""
        return self._run(self._core.list_keys())

    def get_key(self, key: str) -> Key:
        """One key by name or id (``KeyNotFound`` when there is none), with its ``etag``."""
        return self._run(self._core.get_key(key))

    def update_key(
        self,
        key: str,
        *,
        description: str | None = None,
        policy: PolicyArg = None,
        min_decryption_version: int | None = None,
        if_match: str | None = None,
    ) -> Key:
        """Change what is given (the policy is replaced whole); the updated key. Never retried.

        With ``if_match`` (a ``Key.etag`` from ``get_key``), only if the key has not changed since:
        else ``PreconditionFailed``, and nothing changes.
        """
        changes = {"description": description, "policy": policy, "min_decryption_version": min_decryption_version}
        return self._run(self._core.update_key(key, changes, if_match))

    def enable_key(self, key: str) -> Key:
        """Enable a disabled key."""
        return self._run(self._core.update_key(key, {"enabled": True}))

    def disable_key(self, key: str) -> Key:
        """Disable a key: every cryptographic use fails with ``KeyDisabled`` until it is enabled."""
        return self._run(self._core.update_key(key, {"enabled": False}))

    def rotate_key(self, key: str) -> Key:
        """Make a new primary version; older versions still decrypt down to ``min_decryption_version``."""
        return self._run(self._core.rotate_key(key))

    def schedule_key_deletion(self, key: str, pending_days: int = 30) -> Key:
        """Schedule destruction after ``pending_days``; the key (state ``pending_deletion``, ``deletion_date``)."""
        return self._run(self._core.schedule_key_deletion(key, pending_days))

    def cancel_key_deletion(self, key: str) -> Key:
        """Cancel a scheduled deletion; the key comes back ``disabled``."""
        return self._run(self._core.cancel_key_deletion(key))

    # --- cryptography ----------------------------------------------------------------------------

    def encrypt(
        self, key: str, data: Plaintext, context: Context | None = None, algorithm: str | None = None
    ) -> Encrypted:
        """Encrypt a small field (≤ 64 KiB; ``str`` as UTF-8, or bytes-like) under ``key``.

        The result is the ciphertext string (an ``Encrypted``, a ``str`` subclass) that also
        tells ``key_id`` and ``key_version``. ``TypeError`` for any other type of ``data``.
        ``algorithm`` ``RSAES_OAEP_SHA_1`` or ``RSAES_OAEP_SHA_256`` for an RSA ``ENCRYPT_DECRYPT``
        key: the ciphertext is then base64 of the raw OAEP ciphertext (as AWS KMS returns it)."""
        return self._run(self._core.encrypt(key, data, context, algorithm))

    def encrypt_with_version(self, key: str, data: Plaintext, context: Context | None = None) -> Encrypted:
        """The same as ``encrypt`` (kept for code written when ``encrypt`` returned a plain ``str``)."""
        return self._run(self._core.encrypt(key, data, context))

    def decrypt(
        self,
        ciphertext: str | bytes,
        context: Context | None = None,
        key: str | None = None,
        algorithm: str | None = None,
    ) -> bytes:
        """Decrypt a ciphertext (the key is named by it; ``key`` pins it). ``DecryptionFailed`` on any fault.

        RSA-OAEP: ``key`` and ``algorithm`` both given (``ValueError`` without ``key``), the
        ciphertext as ``encrypt`` returned it or as raw bytes."""
        return self._run(self._core.decrypt(ciphertext, context, key, algorithm))

    def encrypt_many(
        self, key: str, items: Iterable[Plaintext], context: Context | None = None
    ) -> BatchResult[Encrypted]:
        """Encrypt many fields, in batches of ≤ 1000. One result per item, in order: an ``Encrypted``,
        or the ``APIError`` of that item (returned, not raised). A failing request raises."""
        return [r for call in self._core.encrypt_batches(key, items, context) for r in self._run(call)]

    def decrypt_many(self, key: str, ciphertexts: Iterable[str], context: Context | None = None) -> BatchResult[bytes]:
        """Decrypt many ciphertexts of ``key``; one plaintext or ``APIError`` (returned) per item, in order."""
        return [r for call in self._core.decrypt_batches(key, ciphertexts, context) for r in self._run(call)]

    def generate_data_key(
        self, key: str, bits: int = 256, context: Context | None = None, include_plaintext: bool = True
    ) -> DataKey:
        """A fresh data key (128 or 256 bits) from the HSM and the same key wrapped under ``key``."""
        return self._run(self._core.generate_data_key(key, bits, context, include_plaintext))

    def reencrypt(
        self,
        key: str,
        ciphertext: str,
        context: Context | None = None,
        destination_key: str | None = None,
        destination_context: Context | None = None,
    ) -> Encrypted:
        """Re-encrypt under the primary version of ``destination_key`` (default: ``key``) without revealing it."""
        return self._run(self._core.reencrypt(key, ciphertext, context, destination_key, destination_context))

    def mac(self, key: str, data: Plaintext, context: Context | None = None) -> Mac:
        """Deterministic HMAC-SHA256 of ``data`` with an ``HMAC_SHA256`` key (a blind index)."""
        return self._run(self._core.mac(key, data, context))

    def verify_mac(
        self,
        key: str,
        data: Plaintext,
        mac: bytes | Mac,
        context: Context | None = None,
        key_version: int | None = None,
    ) -> bool:
        """True when ``mac`` is the MAC of ``data`` (compared in the service)."""
        tag = mac.mac if isinstance(mac, Mac) else mac
        return self._run(self._core.verify_mac(key, data, tag, context, key_version))

    # --- audit -----------------------------------------------------------------------------------

    def iter_audit(
        self,
        key: str | None = None,
        principal: str | None = None,
        since: datetime | str | None = None,
        action: str | None = None,
        page_size: int | None = None,
        newest_first: bool = False,
    ) -> Iterator[AuditRecord]:
        """Audit records matching the filters, oldest first (newest first with ``newest_first``),
        following the pages lazily."""
        cursor: int | None = None
        while True:
            page = self._run(self._core.audit_page(key, principal, action, since, page_size, cursor, newest_first))
            yield from page.records
            if page.next is None or not page.records:
                return
            cursor = page.next

    def audit(
        self,
        key: str | None = None,
        principal: str | None = None,
        since: datetime | str | None = None,
        limit: int | None = None,
        action: str | None = None,
        newest_first: bool = False,
    ) -> list[AuditRecord]:
        """Up to ``limit`` (all when None) audit records matching the filters, oldest first (the newest
        ``limit`` records, newest first, with ``newest_first``). Auditor or admin."""
        records: list[AuditRecord] = []
        for record in self.iter_audit(
            key, principal, since, action, page_size=_core.audit_page_size(limit), newest_first=newest_first
        ):
            if limit is not None and len(records) >= limit:
                break
            records.append(record)
        return records

    def verify_audit(self) -> AuditVerification:
        """Check the audit log's hash chain (``ok`` False and ``first_broken_seq`` when it is broken)."""
        return self._run(self._core.verify_audit())

    # --- envelope encryption ---------------------------------------------------------------------

    def encrypt_stream(
        self,
        key: str,
        src: BinaryIO,
        dst: BinaryIO,
        context: Context | None = None,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
    ) -> EnvelopeHeader:
        """Encrypt ``src`` into a KMEV envelope on ``dst`` with a fresh data key of ``key``; constant memory."""
        data_key = self.generate_data_key(key, 256, context)
        return seal_stream(src, dst, **envelope_key(data_key), context=context, segment_size=segment_size)

    def decrypt_stream(self, src: BinaryIO, dst: BinaryIO, context: Context | None = None) -> EnvelopeHeader:
        """Decrypt a KMEV envelope; ``context``, when given, must be the envelope's.

        Raises ``EnvelopeError`` (not an envelope) or ``DecryptionFailed``; on failure discard ``dst``.
        """
        header, aad = read_header(src)
        check_context(header, context)
        open_stream(src, dst, header, aad, self.decrypt(header.wrapped_key, header.context))
        return header

    def encrypt_file(
        self,
        key: str,
        in_path: str | os.PathLike[str],
        out_path: str | os.PathLike[str],
        context: Context | None = None,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
    ) -> EnvelopeHeader:
        """Encrypt a file into an envelope file; ``out_path`` appears only when complete."""
        with open(in_path, "rb") as src:
            return write_atomically(out_path, lambda dst: self.encrypt_stream(key, src, dst, context, segment_size))

    def decrypt_file(
        self, in_path: str | os.PathLike[str], out_path: str | os.PathLike[str], context: Context | None = None
    ) -> EnvelopeHeader:
        """Decrypt an envelope file; ``out_path`` appears only when every segment authenticated."""
        with open(in_path, "rb") as src:
            return write_atomically(out_path, lambda dst: self.decrypt_stream(src, dst, context))

    # --- on-board streaming ----------------------------------------------------------------------

    def encrypt_stream_onboard(self, key: str, src: BinaryIO, dst: BinaryIO, context: Context | None = None) -> None:
        """Stream ``src`` through the service's HSM, writing its output to ``dst``. Not retried."""
        self._stream_onboard(key, "encrypt", src, dst, context)

    def decrypt_stream_onboard(self, key: str, src: BinaryIO, dst: BinaryIO, context: Context | None = None) -> None:
        """Stream a ciphertext made by ``encrypt_stream_onboard`` back. Not retried.

        The service releases each segment only once authenticated and cuts the response when one
        fails; a cut response raises ``DecryptionFailed``, and then ``dst`` must be discarded."""
        self._stream_onboard(key, "decrypt", src, dst, context)

    def _stream_onboard(self, key: str, direction: str, src: BinaryIO, dst: BinaryIO, context: Context | None) -> None:
        path, headers = self._core.stream_request(key, direction, context)
        try:
            with self._http.stream("POST", path, content=_core.chunks(src), headers=headers) as response:
                if response.status_code != 200:
                    response.read()
                    raise _core.refusal(response, key)
                for chunk in response.iter_bytes():
                    dst.write(chunk)
        except httpx.TransportError as exc:
            if direction == "decrypt":
                raise DecryptionFailed.local() from exc
            raise TransportError(_connection.transport_message("POST", self._origin, path, exc)) from exc
