"""The ``KM_`` variables a command accepts, and the refusal of any other.

A ``KM_`` variable that names no setting of :class:`~keymanager.config.Settings` stops every command
(:func:`unknown_variables`, with the closest setting's name: ``KM_DATABSE_URL`` would otherwise leave
the service on SQLite), except the names the service leaves to others: the clients'
(:data:`CLIENT_VARIABLES`: the SDK and ``kmctl``, and the README's examples) and any name beginning
with one of :data:`FOREIGN_PREFIXES` (the test suite's ``KM_TEST_…``, the benchmark's ``KM_BENCH_…``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from keymanager.config import Settings

CLIENT_VARIABLES = frozenset(
    {
        "KM_URL",
        "KM_TOKEN",
        "KM_TOKEN_FILE",
        "KM_CA",
        "KM_CLIENT_CERT",
        "KM_CLIENT_KEY",
        "KM_ADMIN_TOKEN",
        "KM_ACCESS_KEY_ID",
        "KM_SECRET_ACCESS_KEY",
    }
)
"""``KM_`` names that are the clients', not the service's: the SDK's ``KeyManager.from_env`` and
``kmctl`` (``KM_URL``, ``KM_TOKEN``, ``KM_TOKEN_FILE``, ``KM_CA``, ``KM_CLIENT_CERT``,
``KM_CLIENT_KEY``) and the README's examples (``KM_ADMIN_TOKEN``, ``KM_ACCESS_KEY_ID``,
``KM_SECRET_ACCESS_KEY``): a shell may hold them where the service starts. Never settings."""
FOREIGN_PREFIXES = ("KM_TEST_", "KM_BENCH_")
"""Prefixes of ``KM_`` names the service leaves to its tools (the tests' ``KM_TEST_PKCS11_MODULE``,
the benchmark's ``KM_BENCH_POSTGRES_URL``); no setting will ever begin so."""


def setting_names() -> list[str]:
    """The environment variable of every setting (``KM_`` and the field's name in capitals)."""
    return [f"KM_{name.upper()}" for name in Settings.model_fields]


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """One line per ``KM_`` variable of ``environ`` (in any case, as settings are read) that names no
    setting and is not another's (:data:`CLIENT_VARIABLES`, :data:`FOREIGN_PREFIXES`), naming the
    closest setting when one is close; never its value (it may be a PIN)."""
    known = setting_names()
    lines = []
    for variable in sorted(environ):
        name = variable.upper()
        if not name.startswith("KM_") or name in known or name in CLIENT_VARIABLES or name.startswith(FOREIGN_PREFIXES):
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        hint = f"did you mean {close[0]}?" if close else "see docs/configuration.md for every setting"
        lines.append(f"{variable} is not a setting: {hint}")
    return lines
