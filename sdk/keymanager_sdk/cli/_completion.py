"""Shell completion through ``argcomplete``: ``kmctl completion bash|zsh|fish`` prints the shell's
hook, which asks kmctl itself (run with ``_ARGCOMPLETE`` set) what may follow the words typed, so
completion always matches the parser. Install: ``kmctl completion bash >
/etc/bash_completion.d/kmctl`` (or ``source <(kmctl completion bash)``), ``source <(kmctl
completion zsh)``, ``kmctl completion fish > ~/.config/fish/completions/kmctl.fish``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from keymanager_sdk.cli._config import UsageError

SHELLS = ("bash", "zsh", "fish")
_NEEDS_CLI_EXTRA = "shell completion needs the SDK's cli extra: pip install 'keymanager-sdk[cli]'"


def complete_if_asked(parser: Callable[[], argparse.ArgumentParser]) -> None:
    """When a shell's hook runs kmctl to complete a line (``_ARGCOMPLETE`` set), answer and exit;
    otherwise return at once (nothing is imported)."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        import argcomplete
    except ImportError:
        return
    argcomplete.autocomplete(parser())


def script(shell: str) -> str:
    """The completion hook of ``shell`` (one of ``SHELLS``) for the ``kmctl`` command."""
    try:
        from argcomplete.shell_integration import shellcode
    except ImportError as exc:
        raise UsageError(_NEEDS_CLI_EXTRA) from exc
    return str(shellcode(["kmctl"], shell=shell))
