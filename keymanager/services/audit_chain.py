"""The audit chain keyed by the HSM: setting it up once, and checkpoints that leave the database.

:meth:`AuditChain.prepare` runs before a process serves (``keymanager init`` and ``keymanager
serve``). Under the chain's lock, so that replicas starting together do it once:

- a chain with no seal yet (a new database, or one written before migration 0004) gets the
  audit key, made in the HSM when the token has none;
- a chain already sealed needs the key that sealed it: when the token has no key of that
  label (another token, or the key was destroyed), the service refuses to start rather than
  make a new key that the existing seals would not match;
- records written before the chain was keyed are verified as the plain SHA-256 chain they are,
  then covered by a sealed marker record (``audit.chain.keyed``) that says how that went.

Checkpoints (:mod:`keymanager.domain.checkpoint`: the head of every chain) go to the log as one line, at INFO through
their own logger so that they are written whatever the service's log level, and, when
``KM_AUDIT_CHECKPOINT_FILE`` is set, are appended to that file.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from keymanager.db.audit import AuditRecords, ChainTail
from keymanager.domain.audit import AuditEntry, Outcome, Verification
from keymanager.domain.checkpoint import Checkpoint
from keymanager.errors import HsmUnavailable
from keymanager.hsm.audit_key import AuditKey, Presence

log = logging.getLogger(__name__)
checkpoint_log = logging.getLogger("keymanager.audit.checkpoint")
checkpoint_log.setLevel(logging.INFO)  # a checkpoint is written even when the service logs warnings only
_service_log = logging.getLogger("keymanager")

MARKER_ACTION = "audit.chain.keyed"
SYSTEM = "system"


class AuditKeyMissing(HsmUnavailable):
    """The chain is sealed, and the token has no audit key of the configured label."""


class AuditChain:
    """Set-up and checkpoints of the audit chain in ``store``, sealed with ``key``."""

    def __init__(
        self,
        store: AuditRecords,
        key: AuditKey,
        *,
        checkpoint_file: Path | None = None,
        checkpoints_always_logged: bool = True,
    ) -> None:
        """``checkpoints_always_logged`` (production): checkpoint lines reach the log whatever the
        service's level; False (development): only when the service logs ``info`` or more. The
        checkpoint file, when set, gets every line either way."""
        self._always_logged = checkpoints_always_logged
        self._store = store
        self._key = key
        self._checkpoint_file = checkpoint_file
        self._emitted: Checkpoint | None = None
        self._emitted_at: datetime | None = None
        self._emit_lock = threading.Lock()

    def prepare(self) -> Presence:
        """Make sure the chain is keyed by the audit key (see the module docstring); whether the
        key was found or created. Raises AuditKeyMissing, HsmUnavailable, DatabaseUnavailable."""
        presence = Presence.FOUND
        unsealed = False

        def ensure_key(tail: ChainTail) -> Sequence[AuditEntry]:
            nonlocal presence, unsealed
            presence = self._key.ensure(create=not tail.keyed)
            if presence is Presence.MISSING:
                raise AuditKeyMissing(
                    f"the audit chain is sealed, but the token has no audit key labelled {self._key.label!r} "
                    "(another token or KM_AUDIT_KEY_LABEL, or the key was destroyed)"
                )
            unsealed = not tail.keyed and tail.last_seq > 0
            return []

        self._store.extend_locked(ensure_key)
        if unsealed:
            self._key_legacy_chain()
        return presence

    def _key_legacy_chain(self) -> None:
        """Verify the records written before the chain was keyed, then seal them with a marker."""
        legacy = self._store.verify(unsealed_tail=True)
        if not legacy.ok:
            log.error(
                "the audit chain written before it was keyed is broken at record %s: %s",
                legacy.first_broken_seq,
                legacy.reason,
            )

        def marker(tail: ChainTail) -> Sequence[AuditEntry]:
            return [] if tail.keyed else [_marker(legacy, tail.last_seq)]

        for record in self._store.extend_locked(marker):
            log.warning("audit chain keyed by the HSM from record %s on", record.seq)

    def verify(self, checkpoint: Checkpoint | None = None) -> Verification:
        """Every chain checked (seals in the HSM), against ``checkpoint`` when given."""
        return self._store.verify(checkpoint)

    def emit_checkpoint(self, *, always: bool = False) -> Checkpoint:
        """Write every chain's head as a checkpoint line to the log (and the checkpoint file);
        unless ``always``, only when one moved since this object last wrote one. The heads written."""
        head = self._store.head()
        with self._emit_lock:
            if head == self._emitted and not always:
                return head
            self._emitted, self._emitted_at = head, datetime.now(UTC)
            if self._always_logged or _service_log.isEnabledFor(logging.INFO):
                checkpoint_log.info("%s", head.line())
            if self._checkpoint_file is not None:
                _append_line(self._checkpoint_file, head)
        return head

    def last_checkpoint(self) -> tuple[Checkpoint, datetime] | None:
        """The last checkpoint this process wrote and when (None before its first)."""
        with self._emit_lock:
            if self._emitted is None or self._emitted_at is None:
                return None
            return self._emitted, self._emitted_at


def _append_line(path: Path, head: Checkpoint) -> None:
    """Append ``head``'s line, with the time, to ``path`` (made 0600); a failure is logged, not raised."""
    line = f"{datetime.now(UTC).isoformat(timespec='seconds')} {head.line()}\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())  # one write of a short line: appends of processes do not interleave
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("audit checkpoint not written to its file: %s", type(exc).__name__)


def _marker(legacy: Verification, last_seq: int) -> AuditEntry:
    details: dict[str, object] = {"unkeyed_records": last_seq, "verified": legacy.ok}
    if not legacy.ok:
        details["first_broken_seq"] = legacy.first_broken_seq
    return AuditEntry(
        time=datetime.now(UTC),
        action=MARKER_ACTION,
        outcome=Outcome.OK if legacy.ok else Outcome.ERROR,
        status=200,
        principal=SYSTEM,
        details=details,
    )
