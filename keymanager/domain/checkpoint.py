"""Checkpoints of the audit chains: each chain's head, kept outside the database.

The service writes one to its log (and optionally to a file) periodically and at shutdown, as
one line listing the head (sequence number and chain value) of every chain of the log::

    audit checkpoint chains=2 1:120:<64 hex> 7:5531:<64 hex>

Verifying the chains against a checkpoint proves the database still holds every record up to
each of those heads unchanged: records removed from the end of a chain (with its head moved
back to an earlier sealed record), or a whole chain removed, are seen only this way. Lines of
the single chain of earlier versions (``audit checkpoint seq=<n> hash=<64 hex>``) are read as
checkpoints of chain 1, which that chain became (migration 0013).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

_SINGLE = re.compile(r"audit checkpoint seq=(\d{1,18}) hash=([0-9a-f]{64})(?![0-9a-f])")
_CHAINS = re.compile(r"audit checkpoint chains=(\d{1,9})((?: \d{1,18}:\d{1,18}:[0-9a-f]{64})*)")
_HEAD = re.compile(r"(\d{1,18}):(\d{1,18}):([0-9a-f]{64})")
MAX_LINE_CHARS = 1 << 20
"""Longer lines of a log or checkpoint file are not read (a chain's head takes about 90 characters)."""
LEGACY_CHAIN = 1
"""The chain the single chain of earlier versions became."""


@dataclass(frozen=True)
class ChainHead:
    """Record ``seq`` of chain ``chain`` has the chain value ``hash``."""

    chain: int
    seq: int
    hash: str


@dataclass(frozen=True)
class Checkpoint:
    """The heads of the chains, by chain id."""

    heads: Mapping[int, ChainHead] = field(default_factory=dict)

    @classmethod
    def of(cls, heads: Iterable[ChainHead]) -> Checkpoint:
        """The checkpoint of ``heads`` (one per chain)."""
        return cls({head.chain: head for head in heads})

    def line(self) -> str:
        """The one-line form, as written to the log and the checkpoint file."""
        heads = "".join(f" {h.chain}:{h.seq}:{h.hash}" for h in sorted(self.heads.values(), key=_by_chain))
        return f"audit checkpoint chains={len(self.heads)}{heads}"

    def merged(self, other: Checkpoint) -> Checkpoint:
        """Per chain, the later of the two heads (the higher sequence number)."""
        heads = dict(self.heads)
        for head in other.heads.values():
            known = heads.get(head.chain)
            if known is None or head.seq > known.seq:
                heads[head.chain] = head
        return Checkpoint(heads)


def _by_chain(head: ChainHead) -> int:
    return head.chain


def parse_line(line: str) -> Checkpoint | None:
    """The checkpoint(s) on one log or checkpoint-file line, merged; None when it holds none."""
    found: Checkpoint | None = None
    text = line[:MAX_LINE_CHARS]
    for match in _SINGLE.finditer(text):
        single = Checkpoint.of([ChainHead(LEGACY_CHAIN, int(match.group(1)), match.group(2))])
        found = single if found is None else found.merged(single)
    for match in _CHAINS.finditer(text):
        heads = [ChainHead(int(c), int(s), h) for c, s, h in _HEAD.findall(match.group(2))]
        if len(heads) != int(match.group(1)):
            continue  # a cut line: not a checkpoint
        listed = Checkpoint.of(heads)
        found = listed if found is None else found.merged(listed)
    return found


def latest_checkpoint(lines: Iterable[str]) -> Checkpoint | None:
    """Per chain, the head with the highest sequence number among the checkpoints of ``lines``
    (log lines or bare checkpoint lines, other lines ignored); None when there is none.

    Every process writes its own checkpoints, each true when written: the latest head of each
    chain is a fact the database must still hold.
    """
    latest: Checkpoint | None = None
    for line in lines:
        found = parse_line(line)
        if found is not None:
            latest = found if latest is None else latest.merged(found)
    return latest
