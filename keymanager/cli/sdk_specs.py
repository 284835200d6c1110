"""The SDK's lists of key specs, usages and algorithms, made from the one table (``domain/key_specs/``).

``sdk/keymanager_sdk/_spec_names.py`` is this module's :func:`module_text`, so the SDK and kmctl (which
never import the server) offer exactly what the service's table has; ``tests/cli/test_sdk_specs.py``
fails while it is stale, and ``tests/sdk`` checks it against ``GET /v1/key-specs`` of a real
server. Regenerate it with::

    .venv/bin/python -m keymanager.cli.sdk_specs --update sdk/keymanager_sdk/_spec_names.py
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from keymanager.domain.key_specs import (
    ASYMMETRIC,
    SPECS,
    SYMMETRIC,
    EncryptionAlgorithm,
    KeyAgreementAlgorithm,
    KeyUsage,
    MacAlgorithm,
    SigningAlgorithm,
)

HEADER = '''"""The key specs, usages and algorithms of the service's table of key types.

Generated from ``keymanager/domain/key_specs/`` by ``python -m keymanager.cli.sdk_specs``: do not
edit (a test of the service fails while this differs from its table). kmctl's choices read these.
"""
'''


def _tuple(name: str, doc: str, values: Iterable[str]) -> str:
    """``name = (...)`` and its docstring, as ruff formats them (an item a line; a lone item inline)."""
    listed = list(values)
    items = f'"{listed[0]}",' if len(listed) == 1 else "\n" + "".join(f'    "{value}",\n' for value in listed)
    return f'{name} = ({items})\n"""{doc}"""\n'


def module_text() -> str:
    """The text of ``sdk/keymanager_sdk/_spec_names.py`` for the table as it is."""
    used = [usage for usage in KeyUsage if any(spec.allowed(usage) for spec in SPECS.values())]
    parts = [
        _tuple("KEY_SPECS", "Every key spec (a key's ``algorithm``), in the table's order.", (a.value for a in SPECS)),
        _tuple("SYMMETRIC_SPECS", "The specs with secret keys only.", (a.value for a in SYMMETRIC)),
        _tuple(
            "KEY_PAIR_SPECS", "The asymmetric specs (``generate_data_key_pair``'s too).", (a.value for a in ASYMMETRIC)
        ),
        _tuple("USAGES", "The key usages some spec allows.", (u.value for u in used)),
        _tuple("SIGNING_ALGORITHMS", "AWS ``SigningAlgorithmSpec``s.", (a.value for a in SigningAlgorithm)),
        _tuple("ENCRYPTION_ALGORITHMS", "AWS ``EncryptionAlgorithmSpec``s.", (a.value for a in EncryptionAlgorithm)),
        _tuple("MAC_ALGORITHMS", "AWS ``MacAlgorithmSpec``s.", (a.value for a in MacAlgorithm)),
        _tuple(
            "KEY_AGREEMENT_ALGORITHMS", "AWS ``KeyAgreementAlgorithmSpec``s.", (a.value for a in KeyAgreementAlgorithm)
        ),
    ]
    return HEADER + "\n" + "\n".join(parts)


def main(argv: list[str]) -> int:
    """Print the module, or with ``--update PATH`` write it there; exit 0 (2 for bad arguments)."""
    if not argv:
        sys.stdout.write(module_text())
        return 0
    if len(argv) == 2 and argv[0] == "--update":
        Path(argv[1]).write_text(module_text())
        return 0
    print("usage: python -m keymanager.cli.sdk_specs [--update PATH]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
