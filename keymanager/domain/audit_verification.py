"""Verification of one audit chain: its links, hashes and seals, checked record by record.

What is checked, and why a chain breaks where it does, follows the formats of
:mod:`keymanager.domain.audit` (links, SHA-256 chain values, seals made in the HSM with the audit
key) and the chain's head in a checkpoint (:mod:`keymanager.domain.checkpoint`). The rows are read by
``keymanager.db.audit_reads``, which feeds them here in sequence order.
"""

from __future__ import annotations

import hmac

from keymanager.domain.audit import AuditRecord, ChainKey, Verification, genesis_hash, record_hash, seal_message
from keymanager.domain.checkpoint import LEGACY_CHAIN, ChainHead


class ChainVerifier:
    """Checks the rows of one chain fed in sequence order, every one, then its head; keeps O(batch) state.

    Links and SHA-256 hashes are checked as records come, from the chain's :func:`genesis_hash`;
    seals are checked with ``key`` (in the HSM) ``batch`` at a time, and always before a later
    problem is reported, so the result names the first broken record. With a ``checkpoint``
    (this chain's head in a checkpoint), the chain must reach its record and hold its chain
    value there. ``unsealed_tail`` accepts records after the last seal (only for checking a
    chain written before it was keyed, see ``AuditChain.prepare``). A row numbered below 1 breaks
    the chain, as does one its reader finds past the head (:meth:`refuse`).
    """

    def __init__(
        self,
        key: ChainKey,
        checkpoint: ChainHead | None = None,
        *,
        batch: int = 1000,
        unsealed_tail: bool = False,
        chain_id: int = LEGACY_CHAIN,
    ) -> None:
        self._key = key
        self._checkpoint = checkpoint
        self._batch = batch
        self._unsealed_tail = unsealed_tail
        self._chain = chain_id
        self._count = 0
        self._seq = 0
        self._hash = genesis_hash(chain_id)
        self._sealed_seq = 0
        """The last record whose seal was checked and found good."""
        self._pending: list[tuple[int, str, bytes]] = []
        """Seals fed and not yet checked: (seq, seal hex, message)."""
        self._broken: Verification | None = None

    def feed(self, record: AuditRecord) -> bool:
        """Check one more record; False once the chain is broken (later records are not read)."""
        if self._broken is not None:
            return False
        if record.seq < 1:
            self.refuse(record.seq, f"record {record.seq} has a sequence number below 1: it is not part of the chain")
            return False
        problem = self._problem(record)
        if problem is not None:
            if self._check_seals():
                self._broken = self._failed(self._count, self._seq + 1, problem)
            return False
        self._count += 1
        self._seq, self._hash = record.seq, record.hash
        if record.seal is not None:
            self._pending.append((record.seq, record.seal, seal_message(record.seq, record.hash)))
            if len(self._pending) >= self._batch:
                return self._check_seals()
        return True

    def _problem(self, record: AuditRecord) -> str | None:
        """Why ``record`` does not continue the chain checked so far, or None."""
        if record.seq != self._seq + 1:
            return f"expected record {self._seq + 1}, found {record.seq} (records missing or reordered)"
        if record.prev_hash != self._hash:
            return "link to the previous record broken (a record was removed, inserted or swapped)"
        if record_hash(record.seq, record.prev_hash, record.entry) != record.hash:
            return "record contents do not match its hash (the record was edited)"
        if self._differs_from_checkpoint(record):
            return "record differs from the checkpoint (the chain was rewritten up to here)"
        return None

    def refuse(self, seq: int, reason: str) -> None:
        """Break the chain at its row ``seq``, which is no record of the chain (below 1, or past its
        head), unless the seals fed before it show an earlier break."""
        if self._broken is None and self._check_seals():
            self._broken = self._failed(self._count, seq, reason)

    def _differs_from_checkpoint(self, record: AuditRecord) -> bool:
        checkpoint = self._checkpoint
        return checkpoint is not None and record.seq == checkpoint.seq and record.hash != checkpoint.hash

    def finish(self, head_seq: int, head_hash: str) -> Verification:
        """The result, checking that the last record is the chain head, sealed, and reaches the checkpoint."""
        if self._broken is None and self._check_seals():
            self._broken = self._check_end(head_seq, head_hash)
        return self._broken or Verification(True, self._count)

    def _failed(self, records: int, seq: int, reason: str) -> Verification:
        return Verification(False, records, seq, reason, self._chain)

    def _check_end(self, head_seq: int, head_hash: str) -> Verification | None:
        if (head_seq, head_hash) != (self._seq, self._hash):
            return self._failed(self._count, self._seq + 1, "records missing at the end of the chain")
        if self._checkpoint is not None and self._checkpoint.seq > self._seq:
            return self._failed(
                self._count,
                self._seq + 1,
                f"the chain ends before the checkpoint's record {self._checkpoint.seq} (records were removed)",
            )
        if self._sealed_seq != self._seq and not self._unsealed_tail:
            why = (
                "no record carries a seal of the audit key yet (a chain from before it was keyed is "
                "verified and sealed by 'keymanager init' or the first start; otherwise it was written without the HSM)"
                if self._sealed_seq == 0
                else "the last records carry no seal of the audit key (written or recomputed without the HSM)"
            )
            return self._failed(self._sealed_seq, self._sealed_seq + 1, why)
        return None

    def _check_seals(self) -> bool:
        """Check the pending seals in the HSM; False (and the chain broken) at the first bad one."""
        if not self._pending:
            return True
        pending, self._pending = self._pending, []
        expected = self._key.sign([message for _, _, message in pending])
        for (seq, found, _), good in zip(pending, expected, strict=True):
            if not hmac.compare_digest(found.encode(), good.hex().encode()):
                self._broken = self._failed(
                    self._sealed_seq,
                    self._sealed_seq + 1,
                    f"the seal of record {seq} does not match: a record up to it was edited and the chain "
                    "recomputed, or the seal was not made with the audit key",
                )
                return False
            self._sealed_seq = seq
        return True
