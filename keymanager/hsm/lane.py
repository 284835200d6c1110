"""The key-pair lane: asymmetric key generation in a process of its own, with a bounded queue.

RSA-4096 takes SoftHSM seconds of CPU, and every PKCS#11 call of a process runs on its one HSM
thread (:mod:`~keymanager.hsm.dispatch`): a principal that generated key pairs on every connection
it may open held that thread, and everyone's encrypts waited behind it (issue 41, item 3: a
bystander's p95 went from 26 ms to 10 s). Here each serving process hands key-pair generation to
a child process (spawned at the first generation, kept) with its own library, login and HSM thread,
at a lower CPU priority, so encryption in the parent never waits for it. At most
``slots`` generations of a process are under way or waiting at once; one more is refused at once
with :class:`~keymanager.errors.RateLimited` (429, the KMS door's ``ThrottlingException``, KMIP's
``Operation Failed``) instead of queueing behind the others. The token's objects are shared by
every session of the token, so the parent uses the pair the child made like any other. The child's
errors come back as the service's (a refusal of the HSM, a template not honoured, HsmUnavailable);
past :data:`DEADLINE` the child is stopped and the caller gets HsmUnavailable.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import multiprocessing
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from keymanager.domain.key_specs import KeyUsage
from keymanager.domain.models import Algorithm, HsmObjects
from keymanager.errors import HsmUnavailable, KeyManagerError, RateLimited
from keymanager.orphans import watch_parent

log = logging.getLogger(__name__)

DEADLINE = 60.0
"""Seconds a key-pair generation may take (SoftHSM 2.6.1 on this machine: RSA-4096 1-4 s idle, more
under load)."""
SLOTS = 2
"""Key-pair generations one serving process runs or holds at once (one runs, one waits)."""
_NICENESS = 10
"""How much the child lowers its CPU priority: the serving process's requests come first."""

_CHILD: Any = None
"""The child's own adapter (a :class:`~keymanager.hsm.dispatch.Dispatcher` on its own HSM thread)."""
_LANES: dict[tuple[str, str, str], KeyPairLane] = {}
_LANES_LOCK = threading.Lock()


class Slots:
    """At most ``count`` holders at once; one more is refused at once (RateLimited naming ``what``),
    never queued: the bound of every key-pair generation, in the HSM or in memory."""

    def __init__(self, count: int, what: str) -> None:
        self._free = threading.BoundedSemaphore(count)
        self._what = what

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        if not self._free.acquire(blocking=False):
            raise RateLimited(f"{self._what} is busy in this process: retry in a few seconds", retry_after=2)
        try:
            yield
        finally:
            self._free.release()


class KeyPairLane:
    """Key-pair generation of one token in a child process (see the module docstring)."""

    @classmethod
    def of(cls, module: str, token_label: str, pin: str) -> KeyPairLane:
        """The process's lane of this token (one child per token and process, whatever the adapters)."""
        key = (module, token_label, hashlib.sha256(pin.encode()).hexdigest())
        with _LANES_LOCK:
            lane = _LANES.get(key)
            if lane is None:
                lane = _LANES[key] = cls(module, token_label, pin)
            return lane

    def __init__(self, module: str, token_label: str, pin: str, *, slots: int = SLOTS) -> None:
        self._args = (module, token_label, pin)
        self._slots = Slots(slots, "key-pair generation")
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def generate(self, key_id: str, version: int, algorithm: Algorithm, usage: KeyUsage) -> tuple[HsmObjects, bytes]:
        """The objects of a new key-pair version and its SubjectPublicKeyInfo, made in the child;
        RateLimited at once when the lane is full."""
        with self._slots.held():
            pool = self._executor()
            future = pool.submit(_generate, key_id, version, algorithm, usage)
            try:
                answer = future.result(timeout=DEADLINE)
            except FutureTimeout:
                log.warning("key-pair generation ran past %.0f s: its process is stopped", DEADLINE)
                self._stop(pool)
                raise HsmUnavailable() from None
            except BrokenProcessPool:
                log.warning("the key-pair generation process ended: it is started afresh on the next call")
                self._stop(pool)
                raise HsmUnavailable() from None
        if isinstance(answer, _Refused):
            raise answer.error()
        objects, spki = answer
        return objects, spki

    def close(self) -> None:
        """Stop the child (it is started again by the next generation)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),  # never a fork of a process with PKCS#11 open
                    initializer=_start,
                    initargs=self._args,
                )
            return self._pool

    def _stop(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        for process in list(getattr(pool, "_processes", {}).values()):  # a stuck child: no join would end
            with contextlib.suppress(Exception):
                process.kill()
        pool.shutdown(wait=False, cancel_futures=True)


class _Refused:
    """A service error raised in the child, carried back by its class and message (some of the
    service's errors take other arguments than a message, and would not unpickle)."""

    def __init__(self, exc: KeyManagerError) -> None:
        self.kind = (type(exc).__module__, type(exc).__qualname__)
        self.message = exc.message

    def error(self) -> KeyManagerError:
        """The error again, of its class, with its message."""
        import importlib

        cls = getattr(importlib.import_module(self.kind[0]), self.kind[1], None)
        if not (isinstance(cls, type) and issubclass(cls, KeyManagerError)):
            cls = HsmUnavailable
        error: KeyManagerError = cls.__new__(cls)
        KeyManagerError.__init__(error, self.message)
        return error


def _start(module: str, token_label: str, pin: str) -> None:
    """In the child: it ends with its parent (``keymanager/orphans.py``), a lower priority, then an
    adapter of its own (its session opens on the first call)."""
    global _CHILD
    watch_parent()
    with contextlib.suppress(OSError):
        os.nice(_NICENESS)
    from keymanager.hsm.dispatch import Dispatcher

    _CHILD = Dispatcher(module, token_label, pin, timeout=DEADLINE)


def _generate(key_id: str, version: int, algorithm: Algorithm, usage: KeyUsage) -> tuple[HsmObjects, bytes] | _Refused:
    """In the child: :func:`~keymanager.hsm.key_pairs.generate_key_pair` on its HSM thread."""
    from keymanager.hsm import key_pairs

    try:
        made: tuple[HsmObjects, bytes] = _CHILD.call(
            key_pairs.generate_key_pair, key_id, version, algorithm, usage, deadline=DEADLINE
        )
    except KeyManagerError as exc:
        return _Refused(exc)
    return made
