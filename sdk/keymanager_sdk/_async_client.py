"""``AsyncKeyManager``: the asyncio client. It only does I/O; requests and answers are ``_core``'s.

Methods mirror ``KeyManager`` one for one, with the same contracts. JSON calls go over the same
urllib3 pool as the sync client's, run in this client's own thread pool (one thread per
connection at most): measured, that costs a third of the client CPU of ``httpx.AsyncClient``
(``_transport``). A cancelled call stops waiting at once; its request still completes (or
times out) in its thread. Streams go over ``httpx.AsyncClient``. Envelope encryption runs its
segment loop (file I/O and AES-GCM) in a worker thread so the event loop stays free.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from types import TracebackType
from typing import Any, BinaryIO, Self, TypeVar

import httpx

from keymanager_sdk import _connection, _core
from keymanager_sdk._access_keys import AsyncAccessKeyMethods
from keymanager_sdk._approvals import AsyncApprovalMethods
from keymanager_sdk._asymmetric import AsyncAsymmetricMethods
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
from keymanager_sdk._key_import import AsyncKeyImportMethods
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
from keymanager_sdk._objects import AsyncObjectMethods
from keymanager_sdk._tokens import AsyncTokenMethods
from keymanager_sdk._transport import TRANSPORT_ERRORS, JsonTransport, json_transport

T = TypeVar("T")


class AsyncKeyManager(
    AsyncTokenMethods,
    AsyncAccessKeyMethods,
    AsyncKeyImportMethods,
    AsyncAsymmetricMethods,
    AsyncApprovalMethods,
    AsyncObjectMethods,
):
    """Asynchronous client of the keymanager API; see ``KeyManager`` for the options and contracts.

    ``AsyncKeyManager.from_env()`` reads the same ``KM_*`` variables. ``sleep`` is awaited
    between retries (``asyncio.sleep`` by default).
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
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._origin = _connection.origin(_connection.check_url(base_url, insecure_http))
        headers, context = _connection.http_options(token, ca, client_cert, client_key, verify)
        self._core = Core(retry or RetryPolicy(max_retries=max_retries))
        self._sleep = sleep
        timeouts = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=30)
        self._http = httpx.AsyncClient(
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
        self._thread_count = limits.max_connections or 100
        self._threads = ThreadPoolExecutor(self._thread_count, thread_name_prefix="keymanager-sdk")
        self._pid = os.getpid()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **options: Any) -> Self:
        """A client configured by the ``KM_*`` variables, as ``KeyManager.from_env``."""
        settings: dict[str, Any] = {**_connection.settings_from_env(env), **options}
        return cls(**settings)

    async def aclose(self) -> None:
        """Close the connection pools."""
        self._threads.shutdown(wait=False)
        if self._json is not None:
            self._json.close()
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _send(self, call: Call[Any]) -> Response:
        if self._json is not None:
            if self._pid != os.getpid():  # a forked child: the parent's worker threads do not exist here
                self._pid = os.getpid()
                self._threads = ThreadPoolExecutor(self._thread_count, thread_name_prefix="keymanager-sdk")
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self._threads, self._json.request, call.method, call.path, call.json, call.params, call.headers
            )
        return await self._http.request(
            call.method, call.path, json=call.json, params=call.params, headers=call.headers
        )

    async def _run(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = await self._send(call)
            except TRANSPORT_ERRORS as exc:
                delay = self._core.retry_delay(call, attempt, None)
                if delay is None:
                    message = _connection.transport_message(call.method, self._origin, call.path, exc)
                    raise TransportError(message) from exc
            else:
                delay = self._core.retry_delay(call, attempt, response)
                if delay is None:
                    return self._core.result(call, response)
            await self._sleep(delay)
            attempt += 1

    # --- health ----------------------------------------------------------------------------------

    async def health(self) -> Health:
        """Liveness of the service."""
        return await self._run(self._core.health())

    async def ready(self) -> Readiness:
        """Readiness: ``ok`` False (not an exception) when the HSM or the database does not answer."""
        return await self._run(self._core.ready())

    # --- principals ------------------------------------------------------------------------------

    async def create_principal(
        self,
        name: str,
        role: str,
        cert_subject: str | None = None,
        *,
        create_keys: bool = False,
        key_store: bool = False,
    ) -> NewPrincipal:
        """Create a principal; the result carries its token, shown once. Never retried (see the sync client)."""
        return await self._run(
            self._core.create_principal(name, role, cert_subject, create_keys=create_keys, key_store=key_store)
        )

    async def whoami(self) -> Principal:
        """The principal this client's credential belongs to (any role may ask)."""
        return await self._run(self._core.whoami())

    async def list_principals(self) -> list[Principal]:
        """Every principal (without tokens)."""
        return await self._run(self._core.list_principals())

    async def delete_principal(self, name: str) -> None:
        """Delete a principal; its token stops working at once. Never retried."""
        await self._run(self._core.delete_principal(name))

    # --- keys ------------------------------------------------------------------------------------

    async def key_specs(self) -> list[KeySpec]:
        """The service's table of key types (any role may ask): each spec, its usages and their algorithms."""
        return await self._run(self._core.key_specs())

    async def create_key(
        self,
        name: str,
        algorithm: str | None = None,
        description: str | None = None,
        policy: PolicyArg = None,
        rotation_period_days: int | None = None,
        origin: str | None = None,
        usage: str | None = None,
    ) -> Key:
        """Create a key in the HSM (version 1); ``usage`` for asymmetric specs. Never retried."""
        return await self._run(
            self._core.create_key(name, algorithm, description, policy, rotation_period_days, origin, usage)
        )

    async def list_keys(self) -> list[Key]:
        """The keys the caller may see."""
        return await self._run(self._core.list_keys())

    async def get_key(self, key: str) -> Key:
        """One key by name or id, with its ``etag``."""
        return await self._run(self._core.get_key(key))

    async def update_key(
        self,
        key: str,
        *,
        description: str | None = None,
        policy: PolicyArg = None,
        min_decryption_version: int | None = None,
        if_match: str | None = None,
    ) -> Key:
        """Change what is given (the policy is replaced whole). Never retried.

        With ``if_match`` (a ``Key.etag``), only if the key has not changed since, else ``PreconditionFailed``.
        """
        changes = {"description": description, "policy": policy, "min_decryption_version": min_decryption_version}
        return await self._run(self._core.update_key(key, changes, if_match))

    async def enable_key(self, key: str) -> Key:
        """Enable a disabled key."""
        return await self._run(self._core.update_key(key, {"enabled": True}))

    async def disable_key(self, key: str) -> Key:
        """Disable a key."""
        return await self._run(self._core.update_key(key, {"enabled": False}))

    async def rotate_key(self, key: str) -> Key:
        """Make a new primary version."""
        return await self._run(self._core.rotate_key(key))

    async def schedule_key_deletion(self, key: str, pending_days: int = 30) -> Key:
        """Schedule destruction after ``pending_days``."""
        return await self._run(self._core.schedule_key_deletion(key, pending_days))

    async def cancel_key_deletion(self, key: str) -> Key:
        """Cancel a scheduled deletion; the key comes back ``disabled``."""
        return await self._run(self._core.cancel_key_deletion(key))

    # --- cryptography ----------------------------------------------------------------------------

    async def encrypt(
        self, key: str, data: Plaintext, context: Context | None = None, algorithm: str | None = None
    ) -> Encrypted:
        """Encrypt a small field under ``key``; the ciphertext string (an ``Encrypted``, with key id and version).

        ``algorithm`` ``RSAES_OAEP_SHA_1|256`` for an RSA ``ENCRYPT_DECRYPT`` key (base64 of raw OAEP)."""
        return await self._run(self._core.encrypt(key, data, context, algorithm))

    async def encrypt_with_version(self, key: str, data: Plaintext, context: Context | None = None) -> Encrypted:
        """The same as ``encrypt`` (kept for code written when ``encrypt`` returned a plain ``str``)."""
        return await self._run(self._core.encrypt(key, data, context))

    async def decrypt(
        self,
        ciphertext: str | bytes,
        context: Context | None = None,
        key: str | None = None,
        algorithm: str | None = None,
    ) -> bytes:
        """Decrypt a ciphertext (``DecryptionFailed`` on any fault); RSA-OAEP with ``key`` and ``algorithm``."""
        return await self._run(self._core.decrypt(ciphertext, context, key, algorithm))

    async def encrypt_many(
        self, key: str, items: Iterable[Plaintext], context: Context | None = None
    ) -> BatchResult[Encrypted]:
        """One ``Encrypted`` or ``APIError`` (returned, not raised) per item, in order; batches of ≤ 1000."""
        return [r for call in self._core.encrypt_batches(key, items, context) for r in await self._run(call)]

    async def decrypt_many(
        self, key: str, ciphertexts: Iterable[str], context: Context | None = None
    ) -> BatchResult[bytes]:
        """One plaintext or ``APIError`` (returned, not raised) per item, in order; batches of ≤ 1000."""
        return [r for call in self._core.decrypt_batches(key, ciphertexts, context) for r in await self._run(call)]

    async def generate_data_key(
        self, key: str, bits: int = 256, context: Context | None = None, include_plaintext: bool = True
    ) -> DataKey:
        """A fresh data key from the HSM and the same key wrapped under ``key``."""
        return await self._run(self._core.generate_data_key(key, bits, context, include_plaintext))

    async def reencrypt(
        self,
        key: str,
        ciphertext: str,
        context: Context | None = None,
        destination_key: str | None = None,
        destination_context: Context | None = None,
    ) -> Encrypted:
        """Re-encrypt under the primary version of ``destination_key`` (default: ``key``)."""
        return await self._run(self._core.reencrypt(key, ciphertext, context, destination_key, destination_context))

    async def mac(self, key: str, data: Plaintext, context: Context | None = None) -> Mac:
        """Deterministic HMAC-SHA256 of ``data`` (a blind index)."""
        return await self._run(self._core.mac(key, data, context))

    async def verify_mac(
        self,
        key: str,
        data: Plaintext,
        mac: bytes | Mac,
        context: Context | None = None,
        key_version: int | None = None,
    ) -> bool:
        """True when ``mac`` is the MAC of ``data``."""
        tag = mac.mac if isinstance(mac, Mac) else mac
        return await self._run(self._core.verify_mac(key, data, tag, context, key_version))

    # --- audit -----------------------------------------------------------------------------------

    async def iter_audit(
        self,
        key: str | None = None,
        principal: str | None = None,
        since: datetime | str | None = None,
        action: str | None = None,
        page_size: int | None = None,
        newest_first: bool = False,
    ) -> AsyncIterator[AuditRecord]:
        """Audit records matching the filters, oldest first (newest first with ``newest_first``),
        following the pages lazily."""
        cursor: int | None = None
        while True:
            page = await self._run(
                self._core.audit_page(key, principal, action, since, page_size, cursor, newest_first)
            )
            for record in page.records:
                yield record
            if page.next is None or not page.records:
                return
            cursor = page.next

    async def audit(
        self,
        key: str | None = None,
        principal: str | None = None,
        since: datetime | str | None = None,
        limit: int | None = None,
        action: str | None = None,
        newest_first: bool = False,
    ) -> list[AuditRecord]:
        """Up to ``limit`` (all when None) audit records matching the filters, oldest first (newest
        first with ``newest_first``)."""
        records: list[AuditRecord] = []
        async for record in self.iter_audit(
            key, principal, since, action, page_size=_core.audit_page_size(limit), newest_first=newest_first
        ):
            if limit is not None and len(records) >= limit:
                break
            records.append(record)
        return records

    async def verify_audit(self) -> AuditVerification:
        """Check the audit log's hash chain."""
        return await self._run(self._core.verify_audit())

    # --- envelope encryption ---------------------------------------------------------------------

    async def encrypt_stream(
        self,
        key: str,
        src: BinaryIO,
        dst: BinaryIO,
        context: Context | None = None,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
    ) -> EnvelopeHeader:
        """Encrypt ``src`` into a KMEV envelope on ``dst`` (segment loop in a worker thread)."""
        data_key = await self.generate_data_key(key, 256, context)
        options = envelope_key(data_key)
        return await asyncio.to_thread(
            lambda: seal_stream(src, dst, **options, context=context, segment_size=segment_size)
        )

    async def decrypt_stream(self, src: BinaryIO, dst: BinaryIO, context: Context | None = None) -> EnvelopeHeader:
        """Decrypt a KMEV envelope; ``context``, when given, must be the envelope's. On failure discard ``dst``."""
        header, aad = await asyncio.to_thread(read_header, src)
        check_context(header, context)
        data_key = await self.decrypt(header.wrapped_key, header.context)
        await asyncio.to_thread(open_stream, src, dst, header, aad, data_key)
        return header

    async def encrypt_file(
        self,
        key: str,
        in_path: str | os.PathLike[str],
        out_path: str | os.PathLike[str],
        context: Context | None = None,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
    ) -> EnvelopeHeader:
        """Encrypt a file into an envelope file; ``out_path`` appears only when complete."""
        data_key = envelope_key(await self.generate_data_key(key, 256, context))

        def run() -> EnvelopeHeader:
            with open(in_path, "rb") as src:
                return write_atomically(
                    out_path, lambda dst: seal_stream(src, dst, **data_key, context=context, segment_size=segment_size)
                )

        return await asyncio.to_thread(run)

    async def decrypt_file(
        self, in_path: str | os.PathLike[str], out_path: str | os.PathLike[str], context: Context | None = None
    ) -> EnvelopeHeader:
        """Decrypt an envelope file; ``out_path`` appears only when every segment authenticated."""
        with open(in_path, "rb") as src:
            header, aad = await asyncio.to_thread(read_header, src)
            check_context(header, context)
            data_key = await self.decrypt(header.wrapped_key, header.context)
            await asyncio.to_thread(
                write_atomically, out_path, lambda dst: open_stream(src, dst, header, aad, data_key)
            )
        return header

    # --- on-board streaming ----------------------------------------------------------------------

    async def encrypt_stream_onboard(
        self, key: str, src: BinaryIO, dst: BinaryIO, context: Context | None = None
    ) -> None:
        """Stream ``src`` through the service's HSM, writing its output to ``dst``. Not retried."""
        await self._stream_onboard(key, "encrypt", src, dst, context)

    async def decrypt_stream_onboard(
        self, key: str, src: BinaryIO, dst: BinaryIO, context: Context | None = None
    ) -> None:
        """Stream back a ciphertext of ``encrypt_stream_onboard``; ``DecryptionFailed`` when the stream is cut."""
        await self._stream_onboard(key, "decrypt", src, dst, context)

    async def _stream_onboard(
        self, key: str, direction: str, src: BinaryIO, dst: BinaryIO, context: Context | None
    ) -> None:
        path, headers = self._core.stream_request(key, direction, context)

        async def upload() -> AsyncIterator[bytes]:
            while chunk := await asyncio.to_thread(src.read, _core.STREAM_CHUNK):
                yield bytes(chunk)

        try:
            async with self._http.stream("POST", path, content=upload(), headers=headers) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise _core.refusal(response, key)
                async for chunk in response.aiter_bytes():
                    dst.write(chunk)
        except httpx.TransportError as exc:
            if direction == "decrypt":
                raise DecryptionFailed.local() from exc
            raise TransportError(_connection.transport_message("POST", self._origin, path, exc)) from exc
