"""Helpers of the API tests: error-body checks and base64."""

from __future__ import annotations

import base64
from typing import Any

import httpx


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def assert_error(response: httpx.Response, status: int, code: str, message: str | None = None) -> dict[str, Any]:
    """The response is the documented error body with ``status`` and ``code``; returns the body."""
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error", "request_id"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    if message is not None:
        assert body["error"]["message"] == message, body
    assert body["request_id"] and body["request_id"] == response.headers["x-request-id"]
    return body


def without_request_id(response: httpx.Response) -> tuple[int, dict[str, Any]]:
    """What a client can tell two error answers apart by: status and body minus the request id."""
    assert "Traceback" not in response.text
    body = response.json()
    assert body.pop("request_id") == response.headers["x-request-id"]
    return response.status_code, body


def use_policy(*names: str) -> dict[str, list[str]]:
    """A policy granting encrypt and decrypt to ``names``."""
    return {"encrypt": list(names), "decrypt": list(names)}
