"""The published figures the report compares with, each with its source, what it measured and
which of this report's rows is its analogue, as the issue quotes them."""

from __future__ import annotations

from dataclasses import dataclass

TOWNSEND = "Townsend Security, Alliance Key Manager on-board encryption table (the seed)"
AWS_AURORA = "AWS, Aurora PostgreSQL before/after encryption table (the seed)"
AWS_ELASTICACHE = "AWS, ElastiCache for Redis before/after in-transit encryption table (the seed)"
SOFTHSM_CAVEAT = "SoftHSM here is a software token in this process; a network HSM adds its round trip — typically ~1 ms"
"""Said beside every HSM figure of this run that is compared with the appliance's."""


@dataclass(frozen=True)
class SmallSeed:
    """The appliance's small-blob row: latency range over < 1 KB … 16 KB and its rate."""

    source: str = TOWNSEND
    sizes: str = "< 1 KB … 16 KB"
    latency_ms: tuple[float, float] = (48.0, 55.0)
    ops_per_s: float = 20.0
    measured: str = "a hardware appliance on its network encrypting one field per call, on board"
    analogue: str = "km, one client: one REST /encrypt or /decrypt per field, the AES in SoftHSM"


@dataclass(frozen=True)
class LargeSeed:
    """The appliance's file row: 1 MB in 462 ms … 70 MB in 10.65 s, about 6.5 MB/s."""

    source: str = TOWNSEND
    first: tuple[int, float] = (1_000_000, 0.462)
    last: tuple[int, float] = (70_000_000, 10.65)
    mb_per_s: float = 6.5
    measured: str = "the same hardware appliance encrypting whole files on board, over its network"
    analogue: str = "km large blobs: the on-board stream, the AES in SoftHSM"


@dataclass(frozen=True)
class BeforeAfter:
    """A before/after figure of an application with and without encryption."""

    source: str
    what: str
    unit: str
    before: float
    after: float
    measured: str
    analogue: str

    @property
    def change_pct(self) -> float:
        """after against before, in % (negative: encryption costs)."""
        return (self.after / self.before - 1) * 100


AURORA_MEASURED = "storage encryption: the database's volume encrypted, the AES in the storage layer"
AURORA_ANALOGUE = "(d) SDK envelope, cached data key: local AES under a data key fetched once"
SMALL = SmallSeed()
LARGE = LargeSeed()
APPLICATION = (
    BeforeAfter(AWS_AURORA, "read transactions/s", "TPS", 1930, 1463, AURORA_MEASURED, AURORA_ANALOGUE),
    BeforeAfter(AWS_AURORA, "write transactions/s", "TPS", 1884, 1888, AURORA_MEASURED, AURORA_ANALOGUE),
    BeforeAfter(
        AWS_ELASTICACHE,
        "requests/s, in-transit encryption",
        "requests/s",
        162.7,
        137.1,
        "TLS in transit between the cache and its clients",
        "nothing here: every request of this report already runs over TLS (`python -m bench transport` "
        "measures what TLS costs a call)",
    ),
)
