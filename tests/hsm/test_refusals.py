"""A refusal is not an outage: a token that refuses a mechanism, its parameters or a template answers
the request's error (400 naming the return code), never hsm_unavailable, never a library restart,
never a readiness flap."""

from __future__ import annotations

from typing import Any

import pytest

from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm
from keymanager.errors import InvalidRequest
from keymanager.hsm import Hsm
from keymanager.hsm.dispatch import REFUSALS, HsmRefused, return_code

pytestmark = pytest.mark.softhsm


class _Refusing:
    """A session whose C_GenerateKey answers ``error`` (a fault injected in front of the real session)."""

    def __init__(self, session: Any, error: Exception) -> None:
        self._session, self._error = session, error

    def generate_key(self, *args: Any, **kwargs: Any) -> Any:
        raise self._error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


@pytest.mark.parametrize("error", REFUSALS, ids=lambda e: e.__name__)
def test_each_refusal_is_the_requests_error(hsm: Hsm, monkeypatch: pytest.MonkeyPatch, error: type[Exception]) -> None:
    real = hsm.call(lambda token: token.session())
    monkeypatch.setattr(hsm._token, "session", lambda: _Refusing(real, error()))
    restarts: list[None] = []
    monkeypatch.setattr(hsm._token, "restart", lambda: restarts.append(None))
    with pytest.raises(HsmRefused) as info:
        hsm.generate_version(new_id(), 1, Algorithm.AES_256_CBC_HMAC_SHA256)
    assert isinstance(info.value, InvalidRequest) and info.value.status == 400
    assert return_code(error()) in info.value.message
    assert not hsm._token.restart_pending and not hsm.outcome.failing
    monkeypatch.undo()
    hsm.ping()
    assert restarts == []


def test_return_codes_are_named_as_pkcs11_names_them() -> None:
    names = {return_code(e()) for e in REFUSALS}
    assert {"CKR_MECHANISM_INVALID", "CKR_MECHANISM_PARAM_INVALID", "CKR_KEY_TYPE_INCONSISTENT"} <= names
    assert "CKR_TEMPLATE_INCONSISTENT" in names
