"""The HSM thread: every PKCS#11 call of a process runs on it, each within a deadline.

Thread model. python-pkcs11 calls ``C_Initialize(NULL)``, which tells SoftHSM that the
application does no locking of its own; two threads calling it at once corrupt its heap. So
every PKCS#11 call of a process runs on one dedicated thread (a :class:`~keymanager.worker.Worker`):
:meth:`Dispatcher.call` may be called from any thread and :meth:`Dispatcher.acall` awaited from
the event loop; they queue the work and wait for it. The HSM thread never blocks on anything but
the HSM, so no lock is held across a request.

Deadlines. Every wait for the HSM thread ends within ``timeout`` (``KM_HSM_TIMEOUT_SECONDS``):
past it the caller gets HsmUnavailable, later callers are refused at once while the call is
still running, and once it returns the session and the library are started afresh before the
next call. A stuck call is never raced by another thread: see the comment above
:func:`_hsm_worker`.

Errors. A lost session or token answers HsmUnavailable and the next call reopens everything;
a refusal of a mechanism, its parameters or a template (:data:`REFUSALS`) is not an outage: it
answers :class:`HsmRefused` (400 naming the PKCS#11 return code), with no restart of the library
and no change to readiness; any other PKCS#11 error answers HsmUnavailable and restarts the
library first; a key object not in the token answers KeyMaterialMissing (also a 503); an object
the HSM made other than asked answers TemplateNotHonoured (a 503 that leaves readiness alone);
DecryptionFailed passes through.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from pkcs11 import exceptions as p11

from keymanager.errors import DecryptionFailed, HsmUnavailable, KeyMaterialMissing, UnsupportedByHsm
from keymanager.hsm.quirks import quirks_for
from keymanager.hsm.readback import TemplateNotHonoured
from keymanager.hsm.token import LOST, MissingKeyObject, Token
from keymanager.worker import DeadlineExceeded, LastOutcome, Worker, serve_each

log = logging.getLogger(__name__)

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_SUCCESS_NOT_RECORDED: set[Callable[..., Any]] = set()

REFUSALS: tuple[type[p11.PKCS11Error], ...] = (
    p11.MechanismInvalid,
    p11.MechanismParamInvalid,
    p11.KeyTypeInconsistent,
    p11.KeySizeRange,
    p11.TemplateInconsistent,
    p11.TemplateIncomplete,
    p11.AttributeValueInvalid,
    p11.AttributeTypeInvalid,
    p11.AttributeReadOnly,
    p11.DomainParamsInvalid,
    p11.FunctionNotSupported,
    p11.KeyUnextractable,
    p11.KeyNotWrappable,
    p11.WrappingKeyTypeInconsistent,
    p11.UnwrappingKeyTypeInconsistent,
)
"""PKCS#11 answers that refuse what was asked (a mechanism, its parameters, a template) from a token
that works: the request's or the configuration's error, never an outage."""


FIRST_CALL_DEADLINE = 10.0
"""Seconds the opening of an adapter's first session may take, before its first call (which then has
its own deadline): it reads the mechanism list and probes mechanism parameters (about 15 ms of CPU
on SoftHSM; more on a loaded host or a network HSM)."""


def _open(token: Token) -> None:
    """Open the session (reading the token's capabilities) before an adapter's first call."""
    token.session()


class HsmRefused(UnsupportedByHsm):
    """The HSM refused the mechanism, its parameters or the template of an operation (400)."""

    def __init__(self, error: p11.PKCS11Error, operation: str) -> None:
        super().__init__(f"the HSM refused {operation}: {return_code(error)} (not supported by this token)")


def return_code(error: p11.PKCS11Error) -> str:
    """PKCS#11's name of the return code python-pkcs11 raised as ``error``, e.g. ``CKR_MECHANISM_INVALID``."""
    return "CKR_" + re.sub(r"(?<!^)(?=[A-Z])", "_", type(error).__name__).upper()


def success_not_recorded(fn: F) -> F:
    """Mark an HSM operation whose success says nothing about the token's health (an HMAC under a
    key already in memory, as the audit seal is, after every request): its failures count, its
    successes do not end an unready spell (a token that refuses writes stays unready)."""
    _SUCCESS_NOT_RECORDED.add(fn)
    return fn


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
# the session and finalise and initialise the library again (``Token.restart``) before the next
# call. A call that never returns leaves the process unready; the service's watchdog then ends the
# process so that its supervisor starts a fresh one (``keymanager.api.app``).
_worker_lock = threading.Lock()
_worker: Worker[Callable[[], Any], Any] | None = None


def _hsm_worker() -> Worker[Callable[[], Any], Any]:
    """This process's single PKCS#11 thread, shared by every :class:`Dispatcher`; made anew after fork."""
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = Worker("hsm", serve_each, max_batch=256, separately=True)
        return _worker


def _forget_worker_after_fork() -> None:
    global _worker
    _worker = None


os.register_at_fork(after_in_child=_forget_worker_after_fork)


class Dispatcher:
    """Runs functions of one token's state on this process's HSM thread, within ``timeout`` seconds.

    Construct with the module path, the token label and the user PIN; the PIN is kept only
    inside the token state and never appears in a message. The module's quirks are chosen from
    its path (:func:`keymanager.hsm.quirks.quirks_for`).
    """

    def __init__(self, module: str, token_label: str, pin: str, *, timeout: float = 5.0) -> None:
        self._token = Token(module, token_label, pin, quirks_for(module))
        self._worker = _hsm_worker()
        self._timeout = timeout
        self.outcome = LastOutcome()
        """Whether the last call failed (HsmUnavailable or past its deadline) and none succeeded since."""
        self.observer: Callable[[str, float, bool], None] | None = None
        """Called on the HSM thread after each call with (operation, seconds, failed)."""
        self.on_timeout: Callable[[str], None] | None = None
        """Called with the operation's name when a caller gives up on a call at its deadline."""

    def call(self, fn: Callable[..., T], *args: Any, deadline: float | None = None) -> T:
        """Run ``fn(token, *args)`` on the HSM thread and wait for its result, at most ``timeout`` s (or
        ``deadline`` s, for an operation known to be slow: key-pair generation)."""
        if self._worker.here():
            return self._guarded(fn, *args)
        self._refuse_if_stuck()
        try:
            if self._token.known_capabilities is None:
                self._worker.call(functools.partial(self._mapped, _open), FIRST_CALL_DEADLINE)
            result: T = self._worker.call(functools.partial(self._guarded, fn, *args), self._wait(deadline))
        except DeadlineExceeded:
            raise self._timed_out(fn) from None
        return result

    async def acall(self, fn: Callable[..., T], *args: Any) -> T:
        """Await ``fn(token, *args)`` run on the HSM thread, without blocking the event loop."""
        self._refuse_if_stuck()
        try:
            if self._token.known_capabilities is None:
                await self._worker.acall(functools.partial(self._mapped, _open), FIRST_CALL_DEADLINE)
            result: T = await self._worker.acall(functools.partial(self._guarded, fn, *args), self._timeout)
        except DeadlineExceeded:
            raise self._timed_out(fn) from None
        return result

    def _wait(self, deadline: float | None) -> float:
        """How long a caller waits: the adapter's ``timeout``, or ``deadline`` when longer."""
        return self._timeout if deadline is None else max(deadline, self._timeout)

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
        except (DecryptionFailed, HsmRefused):
            failed = False  # the caller's ciphertext or request, not the HSM, failed
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
        except TemplateNotHonoured:
            raise  # the token answered (and the object is gone): a configuration fault, readiness unchanged
        except p11.PKCS11Error as exc:
            raise self._pkcs11_failure(fn, exc) from None
        except HsmUnavailable:
            self.outcome.failed()
            raise
        if fn not in _SUCCESS_NOT_RECORDED:
            self.outcome.succeeded()
        return result

    def _pkcs11_failure(self, fn: Callable[..., Any], exc: p11.PKCS11Error) -> HsmUnavailable | HsmRefused:
        """The error ``fn``'s PKCS#11 error becomes: a lost session is reset, a refused mechanism or
        template is the caller's (HsmRefused), anything else restarts the library before the next call."""
        if isinstance(exc, LOST):
            self._token.reset()
            self.outcome.failed()
            log.warning("HSM session lost (%s); it will be reopened on the next call", type(exc).__name__)
            return HsmUnavailable()
        if isinstance(exc, REFUSALS):
            log.warning("HSM refused %s (%s)", fn.__name__.lstrip("_"), return_code(exc))
            return HsmRefused(exc, fn.__name__.lstrip("_"))
        # Any other refusal of the HSM (general error, out of memory, template refused, a token
        # directory gone or read-only): the service answers 503, never a raw PKCS#11 error (which
        # would be a 500), and the library is started afresh before the next call.
        self._token.restart_pending = True
        self.outcome.failed()
        log.warning("HSM call failed (%s)", type(exc).__name__)
        return HsmUnavailable()

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
