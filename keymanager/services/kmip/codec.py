"""The codec the door uses: the hot path (:mod:`.fast`) where it reads or writes the whole message,
PyKMIP's (:mod:`.messages`) for everything else."""

from __future__ import annotations

from collections.abc import Sequence

from kmip.core import enums

from keymanager.services.kmip import fast, messages


def decode(message: bytes, served: frozenset[enums.Operation], max_items: int) -> messages.Request:
    """The request in ``message`` (checked by :func:`~.ttlv.check`); KmipRefusal as :func:`.messages.decode` says."""
    return fast.decode(message, served, max_items) or messages.decode(message, served, max_items)


def encode(version: tuple[int, int], results: Sequence[messages.Result], max_size: int | None) -> bytes:
    """The response message answering ``results`` (see :func:`.messages.encode`)."""
    return fast.encode(version, results, max_size) or messages.encode(version, results, max_size)
