"""The PKCS#11 adapter: the only module of the service that talks to the HSM.

Thread model. python-pkcs11 calls ``C_Initialize(NULL)``, which tells SoftHSM that the
application does no locking of its own; two threads calling it at once corrupt its
heap. So every PKCS#11 call of a process runs on one dedicated thread: the public
methods of :class:`Hsm` may be called from any thread (or awaited from the event loop
with the ``a``-prefixed variants); they queue the work and wait for it. The HSM thread
never blocks on anything but the HSM, so no lock is held across a request.

Sessions. One logged-in session per process (a second ``C_Login`` fails with
``UserAlreadyLoggedIn``). Keys are looked up by label once and kept as session-object
copies (still sensitive and non-extractable), which encrypt about twice as fast as the
token objects. When the session or the token is lost, the call answers
:class:`~keymanager.errors.HsmUnavailable` and the next call reopens everything.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hmac
import logging
import os
import queue
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pkcs11
from pkcs11 import Attribute, KeyType, Mechanism, ObjectClass
from pkcs11 import exceptions as p11

from keymanager.domain import ciphertext as ct
from keymanager.domain.models import Algorithm, HsmObjects
from keymanager.errors import DecryptionFailed, HsmUnavailable, KeyMaterialMissing

log = logging.getLogger(__name__)

T = TypeVar("T")

# Errors after which the session (or the whole library) is not worth trusting again.
_LOST = (
    p11.SessionHandleInvalid,
    p11.SessionClosed,
    p11.DeviceRemoved,
    p11.DeviceError,
    p11.TokenNotPresent,
    p11.TokenNotRecognised,
    p11.UserNotLoggedIn,
    p11.NoSuchToken,
    p11.PinIncorrect,
    p11.PinLocked,
    p11.KeyHandleInvalid,
    p11.ObjectHandleInvalid,
)

_SECRET_KEY_BASE: dict[Attribute, Any] = {
    Attribute.CLASS: ObjectClass.SECRET_KEY,
    Attribute.TOKEN: True,
    Attribute.PRIVATE: True,
    Attribute.SENSITIVE: True,
    Attribute.EXTRACTABLE: False,
    Attribute.ENCRYPT: False,
    Attribute.DECRYPT: False,
    Attribute.SIGN: False,
    Attribute.VERIFY: False,
    Attribute.WRAP: False,
    Attribute.UNWRAP: False,
    Attribute.DERIVE: False,
}
AES_TEMPLATE = {**_SECRET_KEY_BASE, Attribute.ENCRYPT: True, Attribute.DECRYPT: True}
"""An AES-256 key version: encrypt and decrypt, nothing else."""
HMAC_TEMPLATE = {**_SECRET_KEY_BASE, Attribute.SIGN: True, Attribute.VERIFY: True}
"""An HMAC-SHA256 key version (a generic secret): sign and verify, nothing else."""
AES_ENCRYPT_ONLY_TEMPLATE = {**_SECRET_KEY_BASE, Attribute.ENCRYPT: True}
"""An FF1_AES_256 key version: FF1 needs only AES's forward cipher (see hsm/tokenization.py)."""


def version_labels(key_id: str, version: int, algorithm: Algorithm, nonce: str = "") -> HsmObjects:
    """The labels of the HSM objects of one key version.

    ``nonce`` makes the labels of one generation unique, so that when two processes race
    to make the same version, the loser can destroy its own objects and nobody else's.
    """
    base = f"km/{key_id}/v{version}" + (f".{nonce}" if nonce else "")
    if algorithm is Algorithm.AES_256_CBC_HMAC_SHA256:
        return HsmObjects(enc_label=f"{base}/aes", mac_label=f"{base}/hmac")
    if algorithm is Algorithm.AES_256_GCM:
        return HsmObjects(enc_label=f"{base}/aes", mac_label=None)
    if algorithm is Algorithm.FF1_AES_256:
        return HsmObjects(enc_label=f"{base}/ff1", mac_label=None)
    return HsmObjects(enc_label=None, mac_label=f"{base}/hmac")


class MissingKeyObject(Exception):
    """A key version's object is not in the token (destroyed, or a token that is not ours)."""


class _Token:
    """State owned by the HSM thread: library, logged-in session, cached key copies."""

    def __init__(self, module: str, token_label: str, pin: str) -> None:
        self._module = module
        self._token_label = token_label
        self._pin = pin
        self._lib: Any = None
        self._session: Any = None
        self._keys: dict[str, Any] = {}

    # -- session life --------------------------------------------------------------
    def session(self) -> Any:
        if self._session is None:
            self._open()
        return self._session

    def _open(self) -> None:
        try:
            if self._lib is None:
                self._lib = pkcs11.lib(self._module)
            token = self._find_token()
            try:
                self._session = token.open(rw=True, user_pin=self._pin)
            except p11.UserAlreadyLoggedIn:
                # A previous session of this process logged in and is gone; the login persists.
                self._session = token.open(rw=True)
        except p11.PKCS11Error as exc:
            self.reset()
            log.warning("HSM session could not be opened: %s", type(exc).__name__)
            raise HsmUnavailable() from None
        except (OSError, RuntimeError) as exc:
            self.reset()
            log.warning("PKCS#11 module could not be loaded: %s", type(exc).__name__)
            raise HsmUnavailable() from None

    def _find_token(self) -> Any:
        try:
            return self._lib.get_token(token_label=self._token_label)
        except (p11.NoSuchToken, p11.TokenNotPresent, p11.TokenNotRecognised):
            # Slots may have changed (token re-inserted, directory re-created): start over.
            self._lib.reinitialize()
            return self._lib.get_token(token_label=self._token_label)

    def reset(self) -> None:
        """Forget the session and cached keys; the next call reopens."""
        self._keys.clear()
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(p11.PKCS11Error):
                session.close()

    def close(self) -> None:
        self.reset()
        self._lib = None

    # -- keys -----------------------------------------------------------------------
    def key(self, label: str) -> Any:
        """The session copy of the token key ``label`` (looked up once, then cached)."""
        cached = self._keys.get(label)
        if cached is not None:
            return cached
        token_key = self._find(label)
        copy = token_key.copy({Attribute.TOKEN: False})
        self._keys[label] = copy
        return copy

    def _find(self, label: str) -> Any:
        """The token object ``label``; MissingKeyObject if it is not in the token.

        SoftHSM may not show an object another process (worker or replica) made: once this
        process has written to the token itself, it can miss the other's changes until the
        library is initialised again. So when a label is not found, the library is
        re-initialised once (sessions reopened, key copies made again) and the label looked up
        again. Real HSMs show every object at once; for them this costs one extra search.
        """
        try:
            return self.session().get_key(object_class=ObjectClass.SECRET_KEY, label=label)
        except p11.NoSuchKey:
            pass
        self.reset()
        if self._lib is not None:
            self._lib.reinitialize()
        try:
            return self.session().get_key(object_class=ObjectClass.SECRET_KEY, label=label)
        except p11.NoSuchKey:
            raise MissingKeyObject() from None

    def forget(self, label: str) -> None:
        copy = self._keys.pop(label, None)
        if copy is not None:
            with contextlib.suppress(p11.PKCS11Error):
                copy.destroy()


class _HsmThread:
    """The one thread of this process that calls PKCS#11; work comes in through a queue.

    Results go back to a waiting thread through a ``concurrent.futures.Future`` and to an event
    loop through one of its own futures, woken with ``call_soon_threadsafe`` (lighter than an
    executor's chained futures on every request).
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], Any, asyncio.AbstractEventLoop | None]] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._run, name="hsm", daemon=True)
        self._thread.start()

    def here(self) -> bool:
        return threading.current_thread() is self._thread

    def run(self, work: Callable[[], T], timeout: float | None = None) -> T:
        """Run ``work`` on the HSM thread and wait for its result (or exception)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._queue.put((work, future, None))
        return future.result(timeout)

    async def arun(self, work: Callable[[], T]) -> T:
        """Run ``work`` on the HSM thread; the event loop goes on meanwhile."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((work, future, loop))
        return await future

    def _run(self) -> None:
        while True:
            work, future, loop = self._queue.get()
            try:
                outcome, failed = work(), False
            except BaseException as exc:  # handed to the caller, whatever it is
                outcome, failed = exc, True
            if loop is None:
                if failed:
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
            else:
                with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                    loop.call_soon_threadsafe(_settle, future, outcome, failed)


def _settle(future: asyncio.Future[Any], outcome: Any, failed: bool) -> None:
    if future.done():
        return
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


_thread_lock = threading.Lock()
_thread: _HsmThread | None = None


def _hsm_thread() -> _HsmThread:
    """This process's single PKCS#11 thread, shared by every :class:`Hsm`; made anew after fork."""
    global _thread
    with _thread_lock:
        if _thread is None:
            _thread = _HsmThread()
        return _thread


def _forget_thread_after_fork() -> None:
    global _thread
    _thread = None


os.register_at_fork(after_in_child=_forget_thread_after_fork)


class Hsm:
    """Cryptographic operations on keys that live in one PKCS#11 token.

    Construct with the module path, the token label and the user PIN; the PIN is
    kept only inside this object and never appears in a message. Methods are
    thread-safe; each runs on this process's single HSM thread.
    """

    def __init__(self, module: str, token_label: str, pin: str) -> None:
        self._token = _Token(module, token_label, pin)
        self._thread = _hsm_thread()
        self.observer: Callable[[str, float, bool], None] | None = None
        """Called on the HSM thread after each call with (operation, seconds, failed)."""

    # -- dispatch -------------------------------------------------------------------
    def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(token, *args)`` on the HSM thread (timed for the observer)."""
        observer = self.observer
        if observer is None:
            return self._mapped(fn, *args)
        start = time.perf_counter()
        failed = True
        try:
            result = self._mapped(fn, *args)
            failed = False
            return result
        except DecryptionFailed:
            failed = False  # the caller's ciphertext, not the HSM, failed
            raise
        finally:
            observer(fn.__name__.lstrip("_"), time.perf_counter() - start, failed)

    def _mapped(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(token, *args)``, mapping a lost session and other PKCS#11 errors to HsmUnavailable."""
        try:
            return fn(self._token, *args)
        except MissingKeyObject:
            raise KeyMaterialMissing() from None
        except _LOST as exc:
            self._token.reset()
            log.warning("HSM session lost (%s); it will be reopened on the next call", type(exc).__name__)
            raise HsmUnavailable() from None
        except p11.PKCS11Error as exc:
            # Any other refusal of the HSM (general error, out of memory, template refused):
            # the service answers 503, never a raw PKCS#11 error (which would be a 500).
            log.warning("HSM call failed (%s)", type(exc).__name__)
            raise HsmUnavailable() from None

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(token, *args)`` on the HSM thread and wait for its result."""
        if self._thread.here():
            return self._guarded(fn, *args)
        return self._thread.run(lambda: self._guarded(fn, *args))

    async def acall(self, fn: Callable[..., T], *args: Any) -> T:
        """Await ``fn(token, *args)`` run on the HSM thread, without blocking the event loop."""
        return await self._thread.arun(lambda: self._guarded(fn, *args))

    def close(self) -> None:
        """Close this adapter's session (the process's HSM thread stays for other adapters)."""
        self._thread.run(self._token.close, timeout=10)

    # -- operations -----------------------------------------------------------------
    def ping(self) -> None:
        """Raise HsmUnavailable unless the token answers."""
        self.call(_ping)

    def generate_version(self, key_id: str, version: int, algorithm: Algorithm) -> HsmObjects:
        """Generate the token objects of one key version; all or nothing."""
        return self.call(_generate_version, key_id, version, algorithm)

    def destroy_version(self, objects: HsmObjects) -> None:
        """Destroy the token objects of one key version (absent ones are ignored)."""
        self.call(_destroy_version, objects)

    def find_labels(self, prefix: str) -> list[str]:
        """Labels of the token's secret keys that start with ``prefix`` (for checks and sweeps)."""
        return self.call(_find_labels, prefix)

    def mac(self, objects: HsmObjects, message: bytes) -> bytes:
        """HMAC-SHA256 of ``message`` with the version's HMAC key (computed in the HSM)."""
        return self.call(_mac, objects, message)

    async def aencrypt_many(
        self, objects: HsmObjects, algorithm: Algorithm, head: bytes, items: Sequence[tuple[bytes, bytes]]
    ) -> list[bytes]:
        """:meth:`aencrypt` of each ``(plaintext, context)``, in one trip to the HSM thread."""
        return await self.acall(_encrypt_many, objects, algorithm, head, items)

    async def adecrypt_many(
        self, algorithm: Algorithm, items: Sequence[tuple[HsmObjects, bytes, bytes, bytes]]
    ) -> list[bytes | DecryptionFailed]:
        """:meth:`adecrypt` of each ``(objects, head, body, context)``; a failed item gives DecryptionFailed."""
        return await self.acall(_decrypt_many, algorithm, items)

    async def amac(self, objects: HsmObjects, message: bytes) -> bytes:
        """:meth:`mac` for the event loop."""
        return await self.acall(_mac, objects, message)

    async def adata_key(
        self, objects: HsmObjects, algorithm: Algorithm, head: bytes, nbytes: int, context: bytes
    ) -> tuple[bytes, bytes]:
        """``nbytes`` from the HSM's generator and their ciphertext body under ``objects``, in one trip."""
        return await self.acall(_data_key, objects, algorithm, head, nbytes, context)

    def random(self, nbytes: int) -> bytes:
        """``nbytes`` random bytes from the HSM's generator."""
        return self.call(_random, nbytes)

    def encrypt(
        self, objects: HsmObjects, algorithm: Algorithm, head: bytes, plaintext: bytes, context: bytes
    ) -> bytes:
        """The ciphertext body of ``plaintext`` (see :mod:`keymanager.domain.ciphertext`)."""
        return self.call(_encrypt, objects, algorithm, head, plaintext, context)

    async def aencrypt(
        self, objects: HsmObjects, algorithm: Algorithm, head: bytes, plaintext: bytes, context: bytes
    ) -> bytes:
        """:meth:`encrypt` for the event loop."""
        return await self.acall(_encrypt, objects, algorithm, head, plaintext, context)

    def decrypt(self, objects: HsmObjects, algorithm: Algorithm, head: bytes, body: bytes, context: bytes) -> bytes:
        """The plaintext of a ciphertext body; any authentication failure raises DecryptionFailed."""
        return self.call(_decrypt, objects, algorithm, head, body, context)

    async def adecrypt(
        self, objects: HsmObjects, algorithm: Algorithm, head: bytes, body: bytes, context: bytes
    ) -> bytes:
        """:meth:`decrypt` for the event loop."""
        return await self.acall(_decrypt, objects, algorithm, head, body, context)


# -- work done on the HSM thread ------------------------------------------------------


def _ping(token: _Token) -> None:
    session = token.session()
    session.generate_random(64)
    # A search reaches the token's object store, not only its random generator.
    list(session.get_objects({Attribute.CLASS: ObjectClass.SECRET_KEY, Attribute.LABEL: "km/ping"}))


def _random(token: _Token, nbytes: int) -> bytes:
    return bytes(token.session().generate_random(nbytes * 8))


def _data_key(
    token: _Token, objects: HsmObjects, algorithm: Algorithm, head: bytes, nbytes: int, context: bytes
) -> tuple[bytes, bytes]:
    plaintext = _random(token, nbytes)
    return plaintext, _encrypt(token, objects, algorithm, head, plaintext, context)


def _generate_version(token: _Token, key_id: str, version: int, algorithm: Algorithm) -> HsmObjects:
    session = token.session()
    objects = version_labels(key_id, version, algorithm, secrets.token_hex(4))
    created: list[Any] = []
    try:
        if objects.enc_label is not None:
            created.append(
                session.generate_key(
                    KeyType.AES,
                    256,
                    label=objects.enc_label,
                    store=True,
                    mechanism=Mechanism.AES_KEY_GEN,
                    template=AES_ENCRYPT_ONLY_TEMPLATE if algorithm is Algorithm.FF1_AES_256 else AES_TEMPLATE,
                )
            )
        if objects.mac_label is not None:
            created.append(
                session.generate_key(
                    KeyType.GENERIC_SECRET,
                    256,
                    label=objects.mac_label,
                    store=True,
                    mechanism=Mechanism.GENERIC_SECRET_KEY_GEN,
                    template=HMAC_TEMPLATE,
                )
            )
    except BaseException:
        for obj in created:
            with contextlib.suppress(p11.PKCS11Error):
                obj.destroy()
        raise
    return objects


def _destroy_version(token: _Token, objects: HsmObjects) -> None:
    session = token.session()
    for label in (objects.enc_label, objects.mac_label):
        if label is not None:
            token.forget(label)
            _destroy_label(session, label)


# What SoftHSM answers when another process destroyed an object between our search and our call.
_DESTROYED_ELSEWHERE = (p11.ObjectHandleInvalid, p11.FunctionFailed, p11.GeneralError)


def _destroy_label(session: Any, label: str, attempts: int = 5) -> None:
    """Destroy every secret key labelled ``label``; idempotent, also against another process doing it too."""
    template = {Attribute.CLASS: ObjectClass.SECRET_KEY, Attribute.LABEL: label}
    for _ in range(attempts):
        try:
            found = list(session.get_objects(template))
            if not found:
                return
            for obj in found:
                obj.destroy()
        except _DESTROYED_ELSEWHERE:
            continue  # look again: it is gone, or it is still there and we try once more
    raise p11.FunctionFailed()


def _find_labels(token: _Token, prefix: str) -> list[str]:
    session = token.session()
    labels = []
    for obj in session.get_objects({Attribute.CLASS: ObjectClass.SECRET_KEY, Attribute.TOKEN: True}):
        label = obj[Attribute.LABEL]
        if label.startswith(prefix):
            labels.append(label)
    return sorted(labels)


def _mac(token: _Token, objects: HsmObjects, message: bytes) -> bytes:
    key = token.key(_require(objects.mac_label))
    return bytes(key.sign(bytes(message), mechanism=Mechanism.SHA256_HMAC))


def _encrypt_many(
    token: _Token, objects: HsmObjects, algorithm: Algorithm, head: bytes, items: Sequence[tuple[bytes, bytes]]
) -> list[bytes]:
    return [_encrypt(token, objects, algorithm, head, plaintext, context) for plaintext, context in items]


def _decrypt_many(
    token: _Token, algorithm: Algorithm, items: Sequence[tuple[HsmObjects, bytes, bytes, bytes]]
) -> list[bytes | DecryptionFailed]:
    results: list[bytes | DecryptionFailed] = []
    for objects, head, body, context in items:
        try:
            results.append(_decrypt(token, objects, algorithm, head, body, context))
        except DecryptionFailed as exc:
            results.append(exc)
    return results


def _require(label: str | None) -> str:
    if label is None:
        raise DecryptionFailed()
    return label


def _encrypt(
    token: _Token, objects: HsmObjects, algorithm: Algorithm, head: bytes, plaintext: bytes, context: bytes
) -> bytes:
    aes = token.key(_require(objects.enc_label))
    if algorithm is Algorithm.AES_256_GCM:
        nonce = secrets.token_bytes(ct.NONCE_BYTES)
        params = pkcs11.GCMParams(nonce, ct.gcm_aad(head, context), ct.TAG_BYTES * 8)
        return nonce + bytes(aes.encrypt(bytes(plaintext), mechanism=Mechanism.AES_GCM, mechanism_param=params))
    iv = secrets.token_bytes(ct.IV_BYTES)
    body = bytes(aes.encrypt(bytes(plaintext), mechanism=Mechanism.AES_CBC_PAD, mechanism_param=iv))
    mac = token.key(_require(objects.mac_label)).sign(
        ct.mac_input(head, iv, body, context), mechanism=Mechanism.SHA256_HMAC
    )
    return iv + body + bytes(mac)


def _decrypt(
    token: _Token, objects: HsmObjects, algorithm: Algorithm, head: bytes, body: bytes, context: bytes
) -> bytes:
    try:
        if algorithm is Algorithm.AES_256_GCM:
            return _decrypt_gcm(token, objects, head, body, context)
        return _decrypt_cbc_hmac(token, objects, head, body, context)
    except _LOST:
        raise
    except (p11.PKCS11Error, MissingKeyObject):
        # Bad tag (SoftHSM: GeneralError), bad padding, bad length: all look the same.
        raise DecryptionFailed() from None


def _decrypt_gcm(token: _Token, objects: HsmObjects, head: bytes, body: bytes, context: bytes) -> bytes:
    if len(body) < ct.NONCE_BYTES + ct.TAG_BYTES:
        raise DecryptionFailed()
    aes = token.key(_require(objects.enc_label))
    nonce, sealed = body[: ct.NONCE_BYTES], body[ct.NONCE_BYTES :]
    params = pkcs11.GCMParams(nonce, ct.gcm_aad(head, context), ct.TAG_BYTES * 8)
    return bytes(aes.decrypt(sealed, mechanism=Mechanism.AES_GCM, mechanism_param=params))


def _decrypt_cbc_hmac(token: _Token, objects: HsmObjects, head: bytes, body: bytes, context: bytes) -> bytes:
    size = len(body) - ct.IV_BYTES - ct.MAC_BYTES
    if size < 16 or size % 16:
        raise DecryptionFailed()
    iv, sealed, mac = body[: ct.IV_BYTES], body[ct.IV_BYTES : -ct.MAC_BYTES], body[-ct.MAC_BYTES :]
    expected = token.key(_require(objects.mac_label)).sign(
        ct.mac_input(head, iv, sealed, context), mechanism=Mechanism.SHA256_HMAC
    )
    if not hmac.compare_digest(bytes(expected), mac):
        raise DecryptionFailed()
    aes = token.key(_require(objects.enc_label))
    return bytes(aes.decrypt(sealed, mechanism=Mechanism.AES_CBC_PAD, mechanism_param=iv))
