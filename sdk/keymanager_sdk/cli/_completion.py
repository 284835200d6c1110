"""``kmctl completion bash|zsh|fish``: shell completion scripts made from kmctl's own parser.

The parser is walked once: for each command path (``""``, ``"keys"``, ``"keys create"`` …) the
words that may follow it — sub-commands, then options. Each script is that table and a few
lines of the shell's own completion machinery, so it never goes stale against the parser.
Install: ``kmctl completion bash > /etc/bash_completion.d/kmctl``, ``kmctl completion zsh >
"${fpath[1]}/_kmctl"`` (or ``source <(kmctl completion zsh)``), ``kmctl completion fish >
~/.config/fish/completions/kmctl.fish``.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "fish")


def command_words(parser: argparse.ArgumentParser, path: str = "") -> dict[str, tuple[list[str], list[str]]]:
    """Every command path of ``parser`` and what may follow it: (sub-commands, long options)."""
    commands: list[str] = []
    options: list[str] = []
    table: dict[str, tuple[list[str], list[str]]] = {path: (commands, options)}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                commands.append(name)
                table.update(command_words(child, f"{path} {name}".strip()))
        elif not action.option_strings and action.choices:
            commands.extend(str(choice) for choice in action.choices)  # a positional's choices (a shell name)
        else:
            options.extend(o for o in action.option_strings if o.startswith("--"))
    return table


def _bash(table: dict[str, tuple[list[str], list[str]]]) -> str:
    cases = "\n".join(
        f'        "{path}") words="{" ".join(commands + options)}" ;;' for path, (commands, options) in table.items()
    )
    return f"""# kmctl completion for bash (kmctl completion bash)
_kmctl() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" path="" word words candidate
    for word in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        case "$word" in -*) continue ;; esac
        candidate="${{path:+$path }}$word"
        case "$candidate" in
{chr(10).join(f'            "{p}") path="$candidate" ;;' for p in table if p)}
        esac
    done
    case "$path" in
{cases}
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F _kmctl kmctl
"""


def _zsh(table: dict[str, tuple[list[str], list[str]]]) -> str:
    return "#compdef kmctl\n# kmctl completion for zsh (kmctl completion zsh)\n" + (
        "autoload -U +X bashcompinit && bashcompinit\n" + _bash(table)
    )


def _fish(table: dict[str, tuple[list[str], list[str]]]) -> str:
    lines = ["# kmctl completion for fish (kmctl completion fish)", "complete -c kmctl -f"]
    for path, (commands, options) in table.items():
        words = path.split()
        children = " ".join(commands)
        if not words:
            condition = "__fish_use_subcommand"
        else:
            seen = "; and ".join(f"__fish_seen_subcommand_from {w}" for w in words)
            condition = seen + (f"; and not __fish_seen_subcommand_from {children}" if children else "")
        if children:
            lines.append(f"complete -c kmctl -n '{condition}' -a '{children}'")
        for option in options:
            lines.append(f"complete -c kmctl -n '{condition}' -l {option[2:]}")
    return "\n".join(lines) + "\n"


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of ``parser`` for ``shell`` (one of ``SHELLS``)."""
    table = command_words(parser)
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](table)
