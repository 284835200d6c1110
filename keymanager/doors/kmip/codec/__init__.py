"""The KMIP door's codec: the one place that imports PyKMIP (``tests/test_layers.py`` holds it so).

It reads request messages into the door's own types (``doors/kmip/requests.py``, named by
``doors/kmip/spec/``) and writes their answers: the hot path (:mod:`.fast`) where it reads or
writes the whole message, PyKMIP's (:mod:`.messages`) for everything else.
"""

from __future__ import annotations

from collections.abc import Sequence

from keymanager.doors.kmip import spec
from keymanager.doors.kmip.codec import fast, messages
from keymanager.doors.kmip.codec.messages import Item, Request, Result, answer_version, error_response
from keymanager.doors.kmip.codec.payloads import written as render

__all__ = ["Item", "Request", "Result", "answer_version", "decode", "encode", "error_response", "render"]


def decode(message: bytes, served: frozenset[spec.Operation], max_items: int) -> Request:
    """The request in ``message`` (checked by :func:`~.ttlv.check`); KmipRefusal as :func:`.messages.decode` says."""
    return fast.decode(message, served, max_items) or messages.decode(message, served, max_items)


def encode(version: tuple[int, int], results: Sequence[Result], max_size: int | None) -> bytes:
    """The response message answering ``results`` (see :func:`.messages.encode`)."""
    return fast.encode(version, results, max_size) or messages.encode(version, results, max_size)
