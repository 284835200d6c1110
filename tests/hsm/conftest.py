"""Tests of one algorithm run on every token: where the token lacks the algorithm's mechanisms, the
test asserts instead that a key of it is refused by name (nothing is skipped).

A test parametrised with ``algorithm`` (an :class:`Algorithm` or its name) or with a known-answer
``vector`` naming one, and using the ``hsm`` fixture, runs as written when the token has the
algorithm (``Capabilities.has``); otherwise its body is replaced by that refusal check.
"""

from __future__ import annotations

from typing import Any

import pytest

from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm
from keymanager.errors import InvalidRequest
from keymanager.hsm import Hsm


def _algorithm_of(item: pytest.Function) -> Algorithm | None:
    params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
    named = params.get("algorithm")
    if named is None and isinstance(params.get("vector"), dict):
        named = params["vector"].get("algorithm")
    try:
        return Algorithm(named) if named is not None else None
    except ValueError:
        return None


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    algorithm = _algorithm_of(pyfuncitem)
    hsm = pyfuncitem.funcargs.get("hsm")
    if algorithm is None or not isinstance(hsm, Hsm) or hsm.capabilities().has(algorithm.value):
        return None  # run the test as written
    key_id = new_id()
    with pytest.raises(InvalidRequest, match=f"does not support {algorithm.value} .no CKM_"):
        hsm.generate_version(key_id, 1, algorithm)
    assert hsm.find_labels(f"km/{key_id}/") == []
    return True
