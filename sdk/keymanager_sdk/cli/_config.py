"""Where kmctl finds the service and its credentials.

Each setting is taken from the first place that has it: the command line (``--url``, ``--ca``),
the environment (``KM_URL``, ``KM_TOKEN`` or ``KM_TOKEN_FILE``, ``KM_CA``, ``KM_CLIENT_CERT``,
``KM_CLIENT_KEY``: the names ``KeyManager.from_env`` reads),
then the profile file: ``--config`` / ``KMCTL_CONFIG`` / ``var/kmctl.toml`` in the current
directory (what ``keymanager init`` writes for the local service, so kmctl run in the checkout
needs no setting) / ``~/.config/kmctl/config.toml``, table ``--profile`` / ``KMCTL_PROFILE`` /
``default``, with the keys ``url``, ``token``, ``token_file``, ``ca``, ``client_cert``, ``client_key``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keymanager_sdk._connection import ENVIRONMENT as SDK_ENVIRONMENT
from keymanager_sdk._connection import read_token_file
from keymanager_sdk._exceptions import ConfigurationError

DEFAULT_CONFIG = Path("~/.config/kmctl/config.toml")
CHECKOUT_CONFIG = Path("var/kmctl.toml")
"""The local service's profile, written by ``keymanager init``; read when it exists here."""
ENVIRONMENT = {"url": SDK_ENVIRONMENT["base_url"], **{k: v for k, v in SDK_ENVIRONMENT.items() if k != "base_url"}}


class UsageError(Exception):
    """The command line is wrong (kmctl exits 2 with one line)."""


class ConfigError(UsageError):
    """The configuration is missing or unreadable (kmctl exits 2)."""


@dataclass(frozen=True)
class Connection:
    url: str
    token: str | None
    ca: str | None
    client_cert: str | None
    client_key: str | None


def _profile(config: str | None, profile: str | None, env: Mapping[str, str]) -> dict[str, Any]:
    found = CHECKOUT_CONFIG if CHECKOUT_CONFIG.is_file() else DEFAULT_CONFIG
    path = Path(config or env.get("KMCTL_CONFIG") or found).expanduser()
    name = profile or env.get("KMCTL_PROFILE") or "default"
    if not path.exists():
        if config or profile:
            raise ConfigError(f"profile file {path} not found")
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    table = data.get(name)
    if not isinstance(table, dict):
        if profile:
            raise ConfigError(f"no profile [{name}] in {path}")
        return {}
    return table


def resolve(
    overrides: Mapping[str, str | None], config: str | None, profile: str | None, env: Mapping[str, str]
) -> Connection:
    """The connection settings; raises ``ConfigError`` when there is no URL or the file is bad."""
    table = _profile(config, profile, env)
    values: dict[str, str | None] = {}
    for name, variable in ENVIRONMENT.items():
        value = overrides.get(name) or env.get(variable) or table.get(name)
        values[name] = None if value is None else str(value)
    url = values.pop("url")
    if not url:
        raise ConfigError("no service URL: set KM_URL, pass --url, or write a profile")
    token_file = values.pop("token_file")
    if token_file and not values["token"]:
        try:
            values["token"] = read_token_file(token_file)
        except ConfigurationError as exc:
            raise ConfigError(str(exc)) from exc
    return Connection(url=url, **values)
