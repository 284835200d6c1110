"""``OneWritePerTurn``: what uvicorn writes during one turn of the event loop leaves in one write.

The transport under it records its calls (the wrapper's only collaborator); the service's answers
go through it in every end-to-end test over real TLS.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvloop

from keymanager.serving.protocol import HELD_AT_MOST, OneWritePerTurn


class Recording:
    """A transport that records what reaches it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.calls.append(("write", data))

    def close(self) -> None:
        self.calls.append(("close", None))

    def abort(self) -> None:
        self.calls.append(("abort", None))

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def run(body: Any) -> list[tuple[str, Any]]:
    async def main() -> list[tuple[str, Any]]:
        under = Recording()
        await body(OneWritePerTurn(under, asyncio.get_running_loop()))
        return under.calls

    return uvloop.run(main())


def test_a_head_and_a_body_written_in_one_turn_leave_in_one_write() -> None:
    async def answer(transport: OneWritePerTurn) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        transport.write(b"{}")
        await asyncio.sleep(0)
        transport.write(b"next")
        await asyncio.sleep(0)

    assert run(answer) == [("write", b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"), ("write", b"next")]


def test_a_large_write_is_not_held_so_flow_control_sees_it_at_once() -> None:
    big = b"x" * HELD_AT_MOST

    async def stream(transport: OneWritePerTurn) -> None:
        transport.write(b"head")
        transport.write(big)
        transport.write(b"more")
        assert len(under_calls(transport)) == 1  # sent before the turn ends
        await asyncio.sleep(0)

    assert run(stream) == [("write", b"head" + big), ("write", b"more")]


def under_calls(transport: OneWritePerTurn) -> list[tuple[str, Any]]:
    return transport._transport.calls  # type: ignore[no-any-return]


def test_closing_sends_what_is_held_first_and_aborting_drops_it() -> None:
    async def close(transport: OneWritePerTurn) -> None:
        transport.write(b"last words")
        transport.close()
        await asyncio.sleep(0)

    async def abort(transport: OneWritePerTurn) -> None:
        transport.write(b"never sent")
        transport.abort()
        await asyncio.sleep(0)

    assert run(close) == [("write", b"last words"), ("close", None)]
    assert run(abort) == [("abort", None)]


def test_everything_else_is_the_wrapped_transports() -> None:
    async def ask(transport: OneWritePerTurn) -> None:
        assert transport.get_extra_info("ssl_object") == "info:ssl_object"

    assert run(ask) == []
