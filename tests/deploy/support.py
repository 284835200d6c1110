"""Readers for the deployment files: Dockerfile instructions, .dockerignore, YAML, systemd units.

No Docker daemon, cluster or systemd is needed: these parse the files as the tools would,
closely enough for the checks in this package.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
COMPOSE = DEPLOY / "docker-compose.yml"
HAPROXY_CFG = DEPLOY / "haproxy.cfg"
K8S = DEPLOY / "k8s"
SYSTEMD = DEPLOY / "systemd"
HEALTHCHECK_SCRIPT = DEPLOY / "docker" / "healthcheck.py"
VENV_BIN = Path(sys.executable).parent
# Containers listen on every interface of their own network namespace.
ANY_ADDRESS = "0.0.0.0"  # noqa: S104

# Names of settings that hold secret values; they may only ever point at files.
SECRET_NAME = re.compile(r"PIN|TOKEN|PASSWORD|PASSWD|SECRET", re.IGNORECASE)


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: upper-case keyword, raw argument text, stage index, line."""

    keyword: str
    args: str
    stage: int
    line: int

    def exec_form(self) -> list[str] | None:
        """The JSON (exec form) argument list, or None for shell form."""
        text = self.args
        if self.keyword == "HEALTHCHECK":
            match = re.search(r"\bCMD\s+(.*)$", text, re.DOTALL)
            if match is None:
                return None
            text = match.group(1)
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None

    def key_values(self) -> dict[str, str]:
        """ENV/ARG/LABEL pairs: ``K=V`` (several per line) or the legacy ``K V`` form."""
        tokens = shlex.split(self.args, posix=True)
        if len(tokens) >= 2 and "=" not in tokens[0]:
            return {tokens[0]: " ".join(tokens[1:])}
        pairs: dict[str, str] = {}
        for token in tokens:
            name, sep, value = token.partition("=")
            pairs[name] = value if sep else ""
        return pairs


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[Instruction]:
    """Instructions in order, with line continuations joined and comment lines dropped."""
    out: list[Instruction] = []
    stage = -1
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and (not stripped or stripped.startswith("#")):
            continue  # comments and blank lines inside a continued instruction are skipped
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        text = " ".join(part for part in pending if part)
        pending = []
        keyword, _, args = text.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        out.append(Instruction(keyword, args.strip(), stage, start))
    assert not pending, "Dockerfile ends inside a continued instruction"
    return out


def final_stage(instructions: list[Instruction]) -> list[Instruction]:
    last = max(i.stage for i in instructions)
    return [i for i in instructions if i.stage == last]


def dockerignore_patterns(path: Path = DOCKERIGNORE) -> list[tuple[bool, str]]:
    """(negated, pattern) pairs in order, as Docker reads them."""
    patterns = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line[1:].strip() if negated else line
        patterns.append((negated, pattern.strip("/")))
    return patterns


def _matches(pattern: str, path: str) -> bool:
    """Docker's rule: a pattern matches a path or any of its parent directories."""
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    if pattern.startswith("**/"):
        tail = pattern[3:]
        return any(fnmatch.fnmatchcase(c.rsplit("/", 1)[-1], tail) or fnmatch.fnmatchcase(c, tail) for c in candidates)
    return any(fnmatch.fnmatchcase(c, pattern) for c in candidates)


def in_build_context(path: str) -> bool:
    """Whether .dockerignore lets ``path`` (relative to the repository) into the build context."""
    included = True
    for negated, pattern in dockerignore_patterns():
        if _matches(pattern, path):
            included = negated
    return included


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_yaml_all(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def k8s_documents() -> list[tuple[Path, dict[str, Any]]]:
    """Every manifest under deploy/k8s (kustomization.yaml excluded), with its file."""
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs.extend((path, doc) for doc in load_yaml_all(path))
    return docs


def systemd_unit(path: Path) -> dict[str, list[tuple[str, str]]]:
    """Sections of a unit file, each a list of (key, value) in order (keys may repeat)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        assert current is not None, f"{path.name}: setting outside a section: {line}"
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not a key=value line: {line}"
        current.append((key.strip(), value.strip()))
    return sections


def unit_values(sections: dict[str, list[tuple[str, str]]], section: str, key: str) -> list[str]:
    return [v for k, v in sections.get(section, []) if k == key]


def unit_environment(sections: dict[str, list[tuple[str, str]]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for value in unit_values(sections, "Service", "Environment"):
        for token in shlex.split(value):
            name, _, val = token.partition("=")
            env[name] = val
    return env
