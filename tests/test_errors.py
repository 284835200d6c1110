"""The hierarchy drawn in ``keymanager/errors.py``'s docstring is the module's, whole."""

from __future__ import annotations

import inspect
import re

from keymanager import errors


def test_the_drawn_hierarchy_is_every_error_with_its_parent_status_and_code() -> None:
    drawn = {}
    parents: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        found = re.match(r"\s{4}([│├└─ ]*)(\w+)(?:\s+(\d{3}) (\w+))?", line)
        if found is None or (found.group(3) is None and found.group(2) != "KeyManagerError"):
            continue
        depth = len(found.group(1)) // 4
        parents[depth:] = [found.group(2)]
        drawn[found.group(2)] = (parents[depth - 1] if depth else None, found.group(3), found.group(4))
    classes = {
        name: cls
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.KeyManagerError) and cls.__module__ == errors.__name__
    }
    assert drawn.keys() == classes.keys()
    for name, cls in classes.items():
        if cls is errors.KeyManagerError:
            continue
        parent, status, code = drawn[name]
        assert (parent, int(status), code) == (cls.__bases__[0].__name__, cls.status, cls.code), name
