"""Every ``keymanager`` command line in the deployment files exists in the real CLI.

The CLI is asked through ``keymanager --help`` / ``keymanager <command> --help`` (the
console script of .venv), and every subcommand and option used by the Dockerfile, the
compose file, the Kubernetes manifests, the systemd units and the code blocks of
deploy/README.md must be one it lists. Every ``KM_`` variable named there must be a setting.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from functools import cache
from typing import Any

import pytest

from keymanager.config import Settings
from tests.deploy.support import (
    COMPOSE,
    DEPLOY,
    DOCKERFILE,
    REPO,
    SYSTEMD,
    VENV_BIN,
    dockerfile_instructions,
    final_stage,
    k8s_documents,
    load_yaml,
    systemd_unit,
    unit_values,
)

COMPOSE_DEFAULT = re.compile(r"\$\{[A-Z_]+:-([^}]*)\}")


def _help(*argv: str) -> str:
    result = subprocess.run(
        [str(VENV_BIN / "keymanager"), *argv, "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout


@cache
def subcommands() -> frozenset[str]:
    match = re.search(r"\{([\w,-]+)\}", _help())
    assert match, "keymanager --help lists no subcommands"
    return frozenset(match.group(1).split(","))


@cache
def options(subcommand: str) -> frozenset[str]:
    return frozenset(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", _help(subcommand)))


def _dockerfile_invocations() -> list[list[str]]:
    runtime = final_stage(dockerfile_instructions())
    entrypoint = next(i for i in runtime if i.keyword == "ENTRYPOINT").exec_form()
    cmd = next(i for i in runtime if i.keyword == "CMD").exec_form()
    assert entrypoint is not None and cmd is not None
    return [entrypoint + cmd]


def _compose_invocations() -> list[list[str]]:
    out = []
    for service in load_yaml(COMPOSE)["services"].values():
        if not str(service.get("image", "")).startswith("${KEYMANAGER_IMAGE"):
            continue
        argv = [str(a) for a in service.get("entrypoint", ["keymanager"]) + service.get("command", ["serve"])]
        if argv[:2] == ["/bin/sh", "-c"]:
            assert 'exec keymanager "$$@"' in argv[2]
            argv = ["keymanager", *argv[4:]]
        out.append([COMPOSE_DEFAULT.sub(r"\1", a) for a in argv])
    return out


def _k8s_invocations() -> list[list[str]]:
    out = []
    for _, doc in k8s_documents():
        if doc["kind"] not in {"Deployment", "Job"}:
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            assert container["image"] == "keymanager"
            assert "command" not in container, "the image's ENTRYPOINT (keymanager) is used"
            out.append(["keymanager", *container["args"]])
    return out


def _systemd_invocations() -> list[list[str]]:
    out = []
    for path in sorted(SYSTEMD.glob("*.service")):
        for line in unit_values(systemd_unit(path), "Service", "ExecStart"):
            argv = shlex.split(line)
            assert argv[0] == "/opt/keymanager/bin/keymanager"
            out.append(["keymanager", *argv[1:]])
    return out


_README_COMMAND = re.compile(
    r"(?:^\s*(?:sudo\s+)?keymanager"  # keymanager serve ...
    r"|/opt/keymanager/bin/keymanager"  # the venv's console script
    r"|\bdocker run\b.*\bkeymanager:[\w.-]+)"  # the image's ENTRYPOINT with arguments
    r"\s+(?P<args>\S.*)$"
)


def _readme_invocations() -> list[list[str]]:
    text = (DEPLOY / "README.md").read_text()
    out = []
    for block in re.findall(r"^```(?:bash|sh)?\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s#.*$", "", line)
            match = _README_COMMAND.search(line)
            if match:
                out.append(["keymanager", *shlex.split(match.group("args"))])
    return out


SOURCES = {
    "Dockerfile": _dockerfile_invocations,
    "docker-compose.yml": _compose_invocations,
    "k8s": _k8s_invocations,
    "systemd": _systemd_invocations,
    "deploy/README.md": _readme_invocations,
}


def test_cli_has_init_and_serve() -> None:
    assert {"init", "serve"} <= subcommands()
    assert {"--workers", "--host", "--port", "--insecure-http"} <= options("serve")


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_every_invocation_exists(source: str) -> None:
    invocations = SOURCES[source]()
    assert invocations, f"no keymanager command found in {source}"
    for argv in invocations:
        assert argv[0] == "keymanager"
        subcommand = argv[1]
        assert subcommand in subcommands(), f"{source}: keymanager {subcommand} does not exist"
        for arg in argv[2:]:
            if arg.startswith("-"):
                assert arg.split("=")[0] in options(subcommand), f"{source}: keymanager {subcommand} {arg}"
        assert "--insecure-http" not in argv, f"{source}: never deploy plain HTTP"


def test_sources_use_both_commands() -> None:
    used = {argv[1] for source in SOURCES.values() for argv in source()}
    assert used == {"init", "serve"}


def _km_names(text: str) -> set[str]:
    return set(re.findall(r"\bKM_[A-Z0-9_]*[A-Z0-9]\b", text))


def test_every_km_variable_is_a_setting() -> None:
    settings = {f"KM_{name.upper()}" for name in Settings.model_fields}
    files: list[Any] = [DOCKERFILE, COMPOSE, DEPLOY / "README.md", *SYSTEMD.iterdir(), *DEPLOY.glob("k8s/*.yaml")]
    files += [REPO / "deploy" / "docker" / "healthcheck.py"]
    for path in files:
        # KM_TEST_PKCS11_*: the test suite's own variables (tests/conftest.py, make test-hsm), not settings
        unknown = {n for n in _km_names(path.read_text()) - settings if not n.startswith("KM_TEST_PKCS11_")}
        assert not unknown, f"{path.relative_to(REPO)} names settings that do not exist: {sorted(unknown)}"
