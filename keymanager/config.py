"""Settings: environment variables with the prefix ``KM_``, each with a working development default."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEV_PIN = "km-dev-pin"
DEV_SO_PIN = "km-dev-so-pin"
SOFTHSM_MODULE = "/usr/lib/softhsm/libsofthsm2.so"


class Settings(BaseSettings):
    """Every setting of the service. Production (``KM_ENV=production``) refuses the development PIN."""

    model_config = SettingsConfigDict(env_prefix="KM_", extra="ignore")

    env: Literal["development", "production"] = "development"
    var_dir: Path = Path("var")

    database_url: str | None = None
    """SQLAlchemy URL; default: SQLite file ``<var_dir>/keymanager.db``."""

    pkcs11_module: str = SOFTHSM_MODULE
    pkcs11_token_label: str = "keymanager"  # noqa: S105 (a label, not a secret)
    pkcs11_pin: SecretStr | None = None
    pkcs11_pin_file: Path | None = None
    pkcs11_so_pin: SecretStr = SecretStr(DEV_SO_PIN)
    softhsm2_conf: Path | None = None
    """SoftHSM configuration file; default ``<var_dir>/softhsm2.conf`` (written by ``keymanager init``)."""

    log_level: Literal["critical", "error", "warning", "info", "debug"] = "warning"

    host: str = "127.0.0.1"
    port: int = 8443
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None

    max_plaintext_bytes: int = Field(default=64 * 1024, gt=0)
    max_request_bytes: int = Field(default=1024 * 1024, gt=0)
    max_batch_items: int = Field(default=1000, gt=0)
    max_batch_request_bytes: int = Field(default=128 * 1024 * 1024, gt=0)
    """Body limit of the ``…/batch`` routes (1,000 items of 64 KiB, base64, fit)."""

    stream_segment_bytes: int = Field(default=256 * 1024, ge=4096, le=4 * 1024 * 1024)
    """Plaintext bytes per segment of an on-board stream."""

    cpu_affinity: bool = False
    """Pin each worker process to a CPU of its own while there are free CPUs (``api/affinity.py``).
    For a host or VM that runs keymanager alone: containers sharing a node would all pin to the
    same first CPUs."""

    min_pending_days: int = Field(default=7, ge=0)
    """Shortest waiting period before a key is destroyed (7, as AWS KMS; tests may lower it)."""
    maintenance_interval_seconds: float = Field(default=60.0, gt=0)
    """How often each process looks for keys due for scheduled rotation or destruction."""

    # --- serving: what a connection may cost before its request head is complete ---
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    """A request head must arrive within this long (from the connection's start or its first byte): else 408."""
    max_header_bytes: int = Field(default=16 * 1024, ge=1024)
    """Largest request head (request line and headers): 431 beyond it."""
    tls_handshake_timeout_seconds: float = Field(default=10.0, gt=0)
    keepalive_timeout_seconds: int = Field(default=5, gt=0)
    """An idle keep-alive connection is closed after this long."""

    # --- AWS KMS API (docs/kms-api.md) ---
    aws_account_id: str = Field(default="111122223333", pattern=r"^[0-9]{12}$")
    """The account named in the KMS API's ARNs (``arn:aws:kms:<region>:<account>:key/<id>``)."""

    @model_validator(mode="after")
    def _refuse_dev_secrets_in_production(self) -> Settings:
        if self.env == "production" and self.pin() == DEV_PIN:
            raise ValueError("KM_ENV=production refuses the development PKCS#11 PIN")
        return self

    def pin(self) -> str:
        """The user PIN: ``KM_PKCS11_PIN_FILE`` wins over ``KM_PKCS11_PIN``; development default otherwise."""
        if self.pkcs11_pin_file is not None:
            return self.pkcs11_pin_file.read_text().strip()
        if self.pkcs11_pin is not None:
            return self.pkcs11_pin.get_secret_value()
        return DEV_PIN

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.var_dir / 'keymanager.db').resolve()}"

    def resolved_softhsm2_conf(self) -> Path:
        return (self.softhsm2_conf or self.var_dir / "softhsm2.conf").resolve()

    def export_softhsm_conf(self) -> None:
        """Point SoftHSM at our configuration file unless ``SOFTHSM2_CONF`` is already set.

        SoftHSM reads the variable once, when the library is initialised in a process.
        """
        os.environ.setdefault("SOFTHSM2_CONF", str(self.resolved_softhsm2_conf()))

    @property
    def is_softhsm(self) -> bool:
        return "softhsm" in Path(self.pkcs11_module).name.lower()

    @property
    def tls_dir(self) -> Path:
        return self.var_dir / "tls"

    @property
    def run_dir(self) -> Path:
        """Per-process runtime files (the CPU claims of the workers)."""
        return self.var_dir / "run"

    @property
    def spool_dir(self) -> Path:
        """Where streams keep their ciphertext while the upload completes (never plaintext)."""
        return self.var_dir / "spool"

    def resolved_tls_cert(self) -> Path:
        return self.tls_cert or self.tls_dir / "server.pem"

    def resolved_tls_key(self) -> Path:
        return self.tls_key or self.tls_dir / "server-key.pem"
