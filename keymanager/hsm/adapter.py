"""The PKCS#11 adapter: the only module of the service that talks to the HSM.

Thread model. python-pkcs11 calls ``C_Initialize(NULL)``, which tells SoftHSM that the
application does no locking of its own; two threads calling it at once corrupt its
heap. So every PKCS#11 call of a process runs on one dedicated thread: the public
methods of :class:`Hsm` may be called from any thread (or awaited from the event loop
with the ``a``-prefixed variants); they queue the work and wait for it. The HSM thread
never blocks on anything but the HSM, so no lock is held across a request.

Deadlines. Every wait for the HSM thread ends within the adapter's ``timeout``
(``KM_HSM_TIMEOUT_SECONDS``): past it the caller gets HsmUnavailable, later callers are
refused at once while the call is still running, and once it returns the session and the
library are started afresh before the next call. A stuck call is never raced by another
thread: see the comment above :func:`_hsm_worker`.

Sessions. One logged-in session per process (a second ``C_Login`` fails with
``UserAlreadyLoggedIn``). Keys are looked up by label once and kept as session-object
copies (still sensitive and non-extractable), which encrypt about twice as fast as the
token objects. When the session or the token is lost, the call answers
:class:`~keymanager.errors.HsmUnavailable` and the next call reopens everything.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import logging
import os
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
from keymanager.worker import DeadlineExceeded, LastOutcome, Worker, serve_each

log = logging.getLogger(__name__)

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

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
        self.restart_pending = False
        """Set when a call failed or overran its deadline: the next call starts the library afresh first."""

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

    def present(self) -> None:
        """Raise a PKCS#11 error unless the library still finds the token (with an open session)."""
        self.session()
        self._lib.get_token(token_label=self._token_label)

    def reset(self) -> None:
        """Forget the session and cached keys; the next call reopens."""
        self._keys.clear()
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(p11.PKCS11Error):
                session.close()

    def restart(self) -> None:
        """Drop the session and finalise the library (C_Finalize); the next session initialises it again.

        Runs on the HSM thread before the call that follows a failed one, or one that overran its
        deadline (once it has returned), so that a network HSM's connection, a token directory put
        back, or a session the stuck call left in any state, is not reused as it was.
        """
        self.restart_pending = False
        self.reset()
        lib, self._lib = self._lib, None
        if lib is not None:
            with contextlib.suppress(p11.PKCS11Error):
                lib.finalize()
        log.info("HSM library finalised after a failed call; it is initialised again for this one")

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


# Why one thread, and why a stuck one is never replaced while it may still be inside the library:
# - python-pkcs11 initialises the library with C_Initialize(NULL) (pkcs11/_pkcs11.pyx, lib.initialize)
#   and keeps one lib object per module path for the process (pkcs11/__init__.py, ``_loaded``);
# - SoftHSM answers C_Initialize(NULL) with MutexFactory::i()->disable() ("No concurrent access by
#   multiple threads", SoftHSM.cpp): a second thread entering while the first is inside races on
#   unlocked state;
# - PKCS#11 v2.40 section 5.4: "the behavior of C_Finalize is nevertheless undefined if it is called by
#   an application while other threads of the application are making Cryptoki calls", so a second
#   thread cannot finalise the library under a stuck call either.
# So a call past its deadline is abandoned by its caller (503), new calls are refused at once while
# it is still running (``Worker.overdue``), and only when it has returned does the same thread drop
# the session and finalise and initialise the library again (``_Token.restart``) before the next
# call. A call that never returns leaves the process unready; the service's watchdog then ends the
# process so that its supervisor starts a fresh one (``keymanager.api.app``).
_worker_lock = threading.Lock()
_worker: Worker[Callable[[], Any], Any] | None = None


def _hsm_worker() -> Worker[Callable[[], Any], Any]:
    """This process's single PKCS#11 thread, shared by every :class:`Hsm`; made anew after fork."""
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = Worker("hsm", serve_each)
        return _worker


def _forget_worker_after_fork() -> None:
    global _worker
    _worker = None


os.register_at_fork(after_in_child=_forget_worker_after_fork)


class Hsm:
    """Cryptographic operations on keys that live in one PKCS#11 token.

    Construct with the module path, the token label and the user PIN; the PIN is
    kept only inside this object and never appears in a message. Methods are
    thread-safe; each runs on this process's single HSM thread and answers within
    ``timeout`` seconds: past it, HsmUnavailable (see the comment above ``_hsm_worker``).
    """

    def __init__(self, module: str, token_label: str, pin: str, *, timeout: float = 5.0) -> None:
        self._token = _Token(module, token_label, pin)
        self._worker = _hsm_worker()
        self._timeout = timeout
        self.outcome = LastOutcome()
        """Whether the last call failed (HsmUnavailable or past its deadline) and none succeeded since."""
        self.observer: Callable[[str, float, bool], None] | None = None
        """Called on the HSM thread after each call with (operation, seconds, failed)."""
        self.on_timeout: Callable[[str], None] | None = None
        """Called with the operation's name when a caller gives up on a call at its deadline."""

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
        """Run ``fn(token, *args)``, mapping a lost session and other PKCS#11 errors to HsmUnavailable
        and recording the outcome (a DecryptionFailed is the caller's failure: the HSM answered)."""
        try:
            if self._token.restart_pending:
                self._token.restart()
            result = fn(self._token, *args)
        except DecryptionFailed:
            if fn not in _SUCCESS_NOT_RECORDED:
                self.outcome.succeeded()
            raise
        except MissingKeyObject:
            self.outcome.failed()
            raise KeyMaterialMissing() from None
        except _LOST as exc:
            self._token.reset()
            self.outcome.failed()
            log.warning("HSM session lost (%s); it will be reopened on the next call", type(exc).__name__)
            raise HsmUnavailable() from None
        except p11.PKCS11Error as exc:
            # Any other refusal of the HSM (general error, out of memory, template refused, a token
            # directory gone or read-only): the service answers 503, never a raw PKCS#11 error (which
            # would be a 500), and the library is started afresh before the next call.
            self._token.restart_pending = True
            self.outcome.failed()
            log.warning("HSM call failed (%s)", type(exc).__name__)
            raise HsmUnavailable() from None
        except HsmUnavailable:
            self.outcome.failed()
            raise
        if fn not in _SUCCESS_NOT_RECORDED:
            self.outcome.succeeded()
        return result

    def _refuse_if_stuck(self) -> None:
        """HsmUnavailable at once while a call runs past its deadline: nothing queues behind it."""
        if self._worker.overdue() > 0:
            self.outcome.failed()
            raise HsmUnavailable()

    def _timed_out(self, fn: Callable[..., Any]) -> HsmUnavailable:
        """The caller gave up on ``fn`` at its deadline: the session is restarted once the call returns."""
        self._token.restart_pending = True
        self.outcome.failed()
        if self._worker.overdue() > 0:  # the running call is stuck: nobody waits behind it
            self._worker.fail_queued()
        operation = fn.__name__.lstrip("_")
        log.warning(
            "HSM call %s exceeded its deadline of %.1f s; the session will be restarted", operation, self._timeout
        )
        if self.on_timeout is not None:
            self.on_timeout(operation)
        return HsmUnavailable()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(token, *args)`` on the HSM thread and wait for its result, at most ``timeout`` s."""
        if self._worker.here():
            return self._guarded(fn, *args)
        self._refuse_if_stuck()
        try:
            result: T = self._worker.call(functools.partial(self._guarded, fn, *args), self._timeout)
        except DeadlineExceeded:
            raise self._timed_out(fn) from None
        return result

    async def acall(self, fn: Callable[..., T], *args: Any) -> T:
        """Await ``fn(token, *args)`` run on the HSM thread, without blocking the event loop."""
        self._refuse_if_stuck()
        try:
            result: T = await self._worker.acall(functools.partial(self._guarded, fn, *args), self._timeout)
        except DeadlineExceeded:
            raise self._timed_out(fn) from None
        return result

    def stuck_for(self) -> float:
        """Seconds the running HSM call is past its deadline (0.0 when none is): a call that never
        returns makes this grow for ever."""
        return self._worker.overdue()

    def close(self) -> None:
        """Close this adapter's session (the process's HSM thread stays for other adapters).

        Skipped when the HSM thread is stuck in a call: it cannot be reached and the process is ending.
        """
        if self._worker.overdue() > 0:
            log.warning("HSM thread stuck in a call: the session is left to the process's end")
            return
        with contextlib.suppress(DeadlineExceeded):
            self._worker.call(self._token.close, 10.0)

    # -- operations -----------------------------------------------------------------
    def ping(self) -> None:
        """Raise HsmUnavailable unless the token answers."""
        self.call(_ping)

    def probe(self) -> None:
        """Raise HsmUnavailable unless the token answers and takes a write: a token object is made and
        destroyed (label ``km-ready-probe``, outside the ``km/`` namespace of key versions)."""
        self.call(_probe)

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

    def find_labels_afresh(self, prefix: str) -> list[str]:
        """:meth:`find_labels` after re-initialising the library, so that objects other processes
        made or destroyed since this one last wrote are seen too (SoftHSM keeps a view per process)."""
        return self.call(_find_labels_afresh, prefix)

    def destroy_label(self, label: str) -> None:
        """Destroy the token's secret keys labelled ``label`` (none is fine; idempotent)."""
        self.call(_destroy_one_label, label)


# -- work done on the HSM thread ------------------------------------------------------

_SUCCESS_NOT_RECORDED: set[Callable[..., Any]] = set()


def success_not_recorded(fn: F) -> F:
    """Mark an HSM operation whose success says nothing about the token's health (an HMAC under a
    key already in memory, as the audit seal is, after every request): its failures count, its
    successes do not end an unready spell (a token that refuses writes stays unready)."""
    _SUCCESS_NOT_RECORDED.add(fn)
    return fn


def _ping(token: _Token) -> None:
    session = token.session()
    session.generate_random(64)
    # A search reaches the token's object store, not only its random generator.
    list(session.get_objects({Attribute.CLASS: ObjectClass.SECRET_KEY, Attribute.LABEL: "km/ping"}))
    # Asking for the token again (C_GetSlotList, C_GetTokenInfo) reaches its storage: SoftHSM answers
    # GeneralError here when the token directory is gone, while the session above still works from memory.
    token.present()


_PROBE_LABEL = "km-ready-probe"


def _probe(token: _Token) -> None:
    _ping(token)
    session = token.session()
    session.generate_key(
        KeyType.AES, 128, label=_PROBE_LABEL, store=True, mechanism=Mechanism.AES_KEY_GEN, template=AES_TEMPLATE
    )
    _destroy_label(session, _PROBE_LABEL)  # also any probe object a failed probe left behind


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
                    template=AES_TEMPLATE,
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


def _find_labels_afresh(token: _Token, prefix: str) -> list[str]:
    token.reset()
    if token._lib is not None:
        token._lib.reinitialize()
    return _find_labels(token, prefix)


def _destroy_one_label(token: _Token, label: str) -> None:
    token.forget(label)
    _destroy_label(token.session(), label)
