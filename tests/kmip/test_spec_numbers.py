"""The KMIP door's own enums (``doors/kmip/spec/``) say what the specification says: every member has
PyKMIP's number under PyKMIP's name, so a value the codec maps across (by number) means the same on
both sides; a member typed in wrong would answer or refuse the wrong thing."""

from __future__ import annotations

from enum import Enum

import pytest
from kmip.core import enums as pykmip

from keymanager.doors.kmip import spec

ENUMS = [getattr(spec, name) for name in spec.__all__ if isinstance(getattr(spec, name), type)]


@pytest.mark.parametrize("ours", ENUMS, ids=lambda e: e.__name__)
def test_every_member_has_the_specifications_number(ours: type[Enum]) -> None:
    theirs = getattr(pykmip, ours.__name__)
    assert {m.name: m.value for m in ours} == {m.name: theirs[m.name].value for m in ours}


def test_the_door_names_every_concept_it_reads() -> None:
    assert len(ENUMS) == len(spec.__all__) >= 15
