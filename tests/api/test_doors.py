"""The doors beside the REST API are a list the gateway is given (``api/app.py`` ``http_doors``):
each request is owned by at most one of them, the REST API's by none, and KMIP is not among them."""

from __future__ import annotations

from pathlib import Path

import pytest

from keymanager.api.app import create_app, kmip_door
from keymanager.doors.console.door import ConsoleDoor
from keymanager.doors.kmip.door import KmipDoor
from keymanager.doors.kms.door import KmsDoor
from keymanager.doors.transit.door import TransitDoor
from keymanager.doors.xks.door import XksDoor
from tests.conftest import make_settings

OWNERS = [
    ("POST", "/", KmsDoor),
    ("POST", "/example/kms/xks/v1/keys/k1/encrypt", XksDoor),
    ("POST", "/v1/transit/encrypt/orders", TransitDoor),
    ("POST", "/v1/auth/approle/login", TransitDoor),
    ("GET", "/ui/", ConsoleDoor),
    ("GET", "/ui", ConsoleDoor),
    ("POST", "/v1/keys/orders/encrypt", None),
    ("GET", "/", None),
    ("GET", "/health", None),
    ("GET", "/uifoo", None),
]


@pytest.mark.parametrize(("method", "path", "owner"), OWNERS, ids=[f"{m} {p}" for m, p, _ in OWNERS])
def test_each_request_has_at_most_one_door_and_the_rest_api_none(
    tmp_path: Path, method: str, path: str, owner: type | None
) -> None:
    gateway = create_app(make_settings(tmp_path, ui=True))
    scope = {"type": "http", "method": method, "path": path, "headers": []}
    owners = [type(door) for door in gateway.doors if door.owns(scope)]
    assert owners == ([] if owner is None else [owner])


def test_the_console_is_a_door_only_when_on_and_kmip_never_rides_the_gateway(tmp_path: Path) -> None:
    on, off = create_app(make_settings(tmp_path, ui=True)), create_app(make_settings(tmp_path, ui=False))
    assert [type(door) for door in on.doors] == [KmsDoor, XksDoor, TransitDoor, ConsoleDoor]
    assert [type(door) for door in off.doors] == [KmsDoor, XksDoor, TransitDoor]
    door = kmip_door(on)
    assert isinstance(door, KmipDoor) and door.throttle is on.door.throttle
    assert not any(isinstance(d, KmipDoor) for d in on.doors)
