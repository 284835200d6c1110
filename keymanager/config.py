"""Settings: environment variables with the prefix ``KM_``, each with a working development default.

A ``KM_`` variable that names no setting stops every command, with the closest setting's name
(``KM_DATABSE_URL`` would otherwise leave the service on SQLite): :mod:`keymanager.cli.km_variables`
says which other names the service leaves to the clients and to its tools.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEV_PIN = "km-dev-pin"
DEV_SO_PIN = "km-dev-so-pin"
SOFTHSM_MODULE = "/usr/lib/softhsm/libsofthsm2.so"
REST_PATHS = frozenset(
    {
        "approvals",
        "audit",
        "auth",
        "decrypt",
        "health",
        "inventory",
        "key-specs",
        "keys",
        "objects",
        "principals",
        "ready",
        "sys",
        "whoami",
    }
)
"""The first segments of the paths under ``/v1/`` the REST API (and the Transit door's ``auth/``) serve or
reserve: no Transit mount may be named so (``tests/transit/test_mounts.py`` checks the REST routes' list)."""
_MOUNT = re.compile(r"[A-Za-z0-9_-]{1,64}(?:/[A-Za-z0-9_-]{1,64}){0,3}")


def is_softhsm_module(module: str) -> bool:
    """Whether the PKCS#11 module at path ``module`` is SoftHSM (its file name says so)."""
    return "softhsm" in Path(module).name.lower()


class Settings(BaseSettings):
    """Every setting of the service. Production (``KM_ENV=production``) refuses the development PIN."""

    model_config = SettingsConfigDict(env_prefix="KM_", extra="ignore")

    env: Literal["development", "production"] = "development"
    var_dir: Path = Path("var")

    database_url: str | None = None
    """SQLAlchemy URL; default: SQLite file ``<var_dir>/keymanager.db``. The usual ``DATABASE_URL``
    forms ``postgres://…`` and ``postgresql://…`` mean ``postgresql+psycopg://…`` (the driver installed)."""
    database_prepared_statements: bool = True
    """PostgreSQL: psycopg prepares the statements a connection runs often. False behind a pooler in
    transaction mode that cannot keep prepared statements (PgBouncer before 1.21, ``docs/operations.md``)."""

    pkcs11_module: str = SOFTHSM_MODULE
    pkcs11_token_label: str = "keymanager"  # noqa: S105 (a label, not a secret)
    pkcs11_pin: SecretStr | None = None
    pkcs11_pin_file: Path | None = None
    pkcs11_so_pin: SecretStr = SecretStr(DEV_SO_PIN)
    softhsm2_conf: Path | None = None
    """SoftHSM configuration file; default ``<var_dir>/softhsm2.conf`` (written by ``keymanager init``)."""

    log_level: Literal["critical", "error", "warning", "info", "debug"] = "warning"

    kms_default_algorithm: Literal["AES_256_GCM", "AES_256_CBC_HMAC_SHA256"] | None = None
    """What the KMS door's ``SYMMETRIC_DEFAULT`` keys are; default: AES_256_GCM where the HSM has
    ``CKM_AES_GCM``, else AES_256_CBC_HMAC_SHA256 (``keymanager.hsm.capabilities.sealing_algorithm``)."""

    host: str = "127.0.0.1"
    port: int = 8443
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    public_hosts: list[str] = Field(default_factory=list)
    """The ``Host`` values a SigV4-signed request may be signed for, as a JSON list (a balancer's
    name, with ``:port`` unless 443). Default: the TLS certificate's DNS and IP names with ``port``,
    and ``host:port`` (``services/public_hosts.py``)."""

    max_plaintext_bytes: int = Field(default=64 * 1024, gt=0)
    max_request_bytes: int = Field(default=1024 * 1024, gt=0)
    max_batch_items: int = Field(default=1000, gt=0)
    max_batch_request_bytes: int = Field(default=88 * 1024 * 1024, gt=0)
    """Body limit of ``POST …/encrypt/batch`` and ``…/decrypt/batch``, applied once the caller is
    authenticated: 1,000 items of 64 KiB (base64, with their JSON: about 84 MiB) fit."""

    stream_segment_bytes: int = Field(default=256 * 1024, ge=4096, le=4 * 1024 * 1024)
    """Plaintext bytes per segment of an on-board stream."""

    workers: int | None = Field(default=None, ge=1)
    """Worker processes of ``keymanager serve`` (``--workers`` wins); default: one per CPU the
    process may use, no more than its cgroup CPU quota (``serving/affinity.py``)."""
    cpu_affinity: bool | None = None
    """Pin each worker process to a CPU of its own while there are free CPUs. Default: ``keymanager
    serve`` pins when it finds the CPUs are the replica's own (enough allowed CPUs, no CPU quota
    below them, not a container free to run on the whole machine: ``serving/affinity.py``)."""

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
    # -- the KMIP door (issue 23: serving/kmip.py, doors/kmip/, docs/kmip.md) --
    kmip_port: int = Field(default=5696, ge=0, le=65535)
    """KMIP over TLS 1.2+ with mandatory client certificates (verified against ``KM_TLS_CLIENT_CA``,
    else the development CA) on ``KM_HOST`` and this port, in every worker (one socket, bound before
    they start: a port another process holds stops the start); 0 turns it off."""
    kmip_max_message_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    """Largest KMIP request message (its TTLV length field): a longer one closes the connection
    before anything of its size is allocated."""
    kmip_max_depth: int = Field(default=16, ge=4, le=64)
    """Deepest nesting of TTLV structures a KMIP request may have (the specification needs about 8)."""
    kmip_max_batch_items: int = Field(default=100, ge=1, le=1000)
    """Most batch items one KMIP request message may carry: a message with more is Invalid Message,
    none of its items done (one principal's message cannot hold a worker for seconds)."""
    kmip_max_response_bytes: int = Field(default=1024 * 1024, ge=4096, le=64 * 1024 * 1024)
    """Largest KMIP response message (a client's Maximum Response Size, when smaller, wins): a larger
    one is answered Response Too Large for each item."""
    kmip_idle_timeout_seconds: float = Field(default=120.0, gt=0)
    """A KMIP connection that sends no byte of a new request for this long is closed (each request,
    from its first byte, must arrive within ``KM_HEADER_TIMEOUT_SECONDS``)."""
    # -- real client addresses behind a balancer (issue 20, item 1: serving/client_address.py) --
    trusted_proxies: Annotated[list[ipaddress.IPv4Network | ipaddress.IPv6Network], NoDecode] = []
    """Balancers whose word on the client's address is taken: CIDRs, comma-separated (empty: none;
    every address is the TCP peer's). From these addresses only, the PROXY protocol header (v1 or
    v2, in front of the TLS handshake: HAProxy ``send-proxy-v2``) or, with ``KM_PROXY_PROTOCOL``
    false, the header ``KM_FORWARDED_HEADER`` names the client."""
    proxy_protocol: bool = True
    """Connections from ``KM_TRUSTED_PROXIES`` must begin with a PROXY protocol header (refused
    without one), and no forwarding header is ever read; false for a balancer that terminates TLS
    and names the client in the header ``KM_FORWARDED_HEADER`` instead. A PROXY header from any
    other address is always refused."""
    forwarded_header: Literal["x-forwarded-for", "forwarded"] = "x-forwarded-for"
    """With ``KM_PROXY_PROTOCOL`` false: the one header whose rightmost address that is not a
    trusted proxy names the client; the other is never read. ``x-forwarded-for`` is what nginx,
    HAProxy (``option forwardfor``), AWS ALB and most ingress controllers append to; ``forwarded``
    (RFC 7239 ``for=``) for a balancer that sends that instead."""
    refusal_log_seconds: float = Field(default=60.0, gt=0)
    """Connections refused before a request (400, 408, 431, TLS failures, bad PROXY headers) log at
    most one line per client address per this many seconds, with their count."""
    # -- front door (issue 10: authentication before the body, throttling, bounded caches) --
    auth_failures_per_second: float = Field(default=2.0, gt=0)
    """Failed authentications each client address may make per second, per worker process, once its
    burst is spent; beyond it 429 ``rate_limited`` with ``Retry-After``."""
    auth_failure_burst: int = Field(default=20, ge=1)
    """Failed authentications a client address may make at once before it is throttled."""
    auth_failure_addresses: int = Field(default=10_000, ge=1)
    """Client addresses whose failed authentications each worker tracks (least recently seen dropped)."""
    auth_failure_summary_seconds: float = Field(default=60.0, gt=0)
    """At most one audit record per client address per this many seconds sums up its failed
    authentications and throttled requests."""
    credential_index_max: int = Field(default=100_000, ge=1)
    """Stored credentials of each kind (bearer tokens, certificate subjects, access keys) whose
    digests each worker keeps so that a throttled address is still served for a valid credential
    (``services/credential_index.py``); beyond it, the others are throttled as strangers' are."""
    cache_max_principals: int = Field(default=10_000, ge=1)
    """Principals (by credential) each worker caches; the least recently used are evicted."""
    cache_max_keys: int = Field(default=10_000, ge=1)
    """Key entries (by name and by id) each worker caches; the least recently used are evicted."""
    # -- deadlines and readiness (issue 10: HSM deadlines, truthful readiness) ----------------
    hsm_timeout_seconds: float = Field(default=5.0, gt=0)
    """Deadline of every HSM call: past it the request answers 503 ``hsm_unavailable``, later calls
    are refused at once while the call is still running, and the session is restarted once it returns."""
    hsm_stuck_exit_seconds: float = Field(default=60.0, ge=0)
    """A worker process whose HSM call is still running this long past its deadline exits (status 70)
    so that its supervisor starts a fresh one: the stuck thread cannot be replaced safely inside the
    process. 0 disables (the process then stays unready until the call returns)."""
    ready_probe_interval_seconds: float = Field(default=1.0, gt=0)
    """After a failed HSM operation or audit write, ``/v1/ready`` probes that part (a token object
    made and destroyed; one audit record) at most this often per process; between probes it answers 503."""
    # -- streams, spool and leftovers (issue 10, items 2 and 10) --------------------------
    max_stream_bytes: int = Field(default=1024**3, gt=0)
    """Largest upload of ``…/encrypt/stream`` and ``…/decrypt/stream``; beyond it 413."""
    max_spool_bytes: int = Field(default=2 * 1024**3, gt=0)
    """Spool quota of one process: bytes of spool files it holds at once. A stream that would
    take more than what is free answers 503 ``spool_busy`` with ``Retry-After``; one that
    could never fit (more than the whole quota) answers 413."""
    orphan_sweep: bool = True
    """Let the maintenance task destroy orphaned ``km/`` token objects. Turn it off when the token
    is shared with another installation (another database), whose key versions this one cannot see."""
    orphan_grace_seconds: float = Field(default=3600.0, ge=0, le=365 * 86400)
    """Age (first seen unreferenced) after which a ``km/`` token object that no key version
    names is destroyed by the maintenance task. Must exceed the longest HSM-create-to-commit
    window of a key creation or rotation; the orphan sweep runs every quarter of it at most."""
    # -- audit chain keyed by the HSM (keymanager/services/audit_chain.py) --
    audit_writer_lanes: int = Field(default=1, ge=1, le=16)
    """PostgreSQL: writer threads of each process's audit log, each committing its group commits
    to a chain of its own, side by side (one waits for the WAL flush while the next commits): more
    requests per second where the disk's flush is slow, smaller group commits (more CPU per
    request). On SQLite, which takes one commit at a time, a process always has one."""
    audit_key_label: str = Field(default="keymanager-audit", min_length=1, max_length=64)
    """Label of the audit key in the token (HMAC-SHA256, made by ``keymanager init``); must not start with ``km/``."""
    audit_checkpoint_file: Path | None = None
    """When set, every audit checkpoint line is also appended to this file (keep it off the database's host)."""
    audit_checkpoint_interval_seconds: float = Field(default=60.0, gt=0)
    """How often each process writes a checkpoint of the audit chain (when it moved) to its log; also at shutdown."""

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("forwarded_header", mode="before")
    @classmethod
    def _header_name_in_lower_case(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _postgres_through_psycopg(cls, url: str | None) -> str | None:
        if url is None:
            return None
        for scheme in ("postgres://", "postgresql://"):
            if url.startswith(scheme):
                return "postgresql+psycopg://" + url[len(scheme) :]
        return url

    @field_validator("audit_key_label")
    @classmethod
    def _audit_key_apart_from_key_versions(cls, label: str) -> str:
        if label.startswith("km/"):
            raise ValueError("must not start with 'km/' (the labels of key versions, which sweeps remove)")
        return label

    # -- the fast path (issue 11, item 3) ---------------------------------------------------
    fast_path: bool = True
    """Serve the hot JSON routes (encrypt, decrypt, batches, data key, MAC, sign, verify) through
    ``api/fastpath.py``, without FastAPI's routing and dependency solving; same answers, same
    audit records (tests/api/test_fastpath.py). ``false`` sends every request through FastAPI."""
    # -- operations (issue 13: logs and metrics operators can use) --
    log_format: Literal["json", "text"] | None = None
    """``json`` (one object per line: time, level, logger, message, request id, principal id, route,
    status, duration) or ``text``; default ``json`` in production, ``text`` in development."""
    access_log: bool = False
    """One log line per request (``keymanager.access``: method, route, status, duration), whatever ``KM_LOG_LEVEL``."""

    # -- the web console (issue 39: doors/console/door.py, keymanager/ui/, docs/usage.md) --
    ui: bool | None = None
    """Serve the web console at ``/ui/`` on the HTTPS port: static files from the package, a client
    of the REST API with the API's own credentials, under a strict Content-Security-Policy. Default:
    on in development, off in production (set ``KM_UI=true`` there to serve it)."""
    # --- the Vault Transit API (issue 35: doors/transit/door.py, doors/transit/, docs/transit.md) ---
    transit_mount: Annotated[list[str], NoDecode] = ["transit"]
    """Mount paths of the Vault Transit API (``/v1/<mount>/encrypt/<key>``, …), comma-separated: every
    mount serves the same keys. A mount is 1-4 segments of letters, digits, ``_`` and ``-``; it may not
    begin with a REST API path (``keys``, ``principals``, ``auth``, …) nor sit inside another mount."""
    transit_token_ttl_seconds: int = Field(default=86400, ge=60, le=32 * 86400)
    """Lifetime of a client token made by the Transit door's AppRole login (``POST /v1/auth/approle/login``)."""

    @field_validator("transit_mount", mode="before")
    @classmethod
    def _mounts_comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip().strip("/") for part in value.split(",") if part.strip()]
        return value

    @field_validator("transit_mount")
    @classmethod
    def _mounts_apart_from_rest(cls, mounts: list[str]) -> list[str]:
        for mount in mounts:
            if _MOUNT.fullmatch(mount) is None:
                raise ValueError(f"{mount!r} is not a mount path (1-4 segments of letters, digits, '_', '-')")
            if mount.split("/")[0].lower() in REST_PATHS:
                raise ValueError(f"the mount {mount!r} would shadow the REST API's /v1/{mount.split('/')[0]}")
            inside = [other for other in mounts if other != mount and mount.startswith(other + "/")]
            if inside or mounts.count(mount) > 1:
                raise ValueError(
                    f"the mount {mount!r} is given twice or sits inside the mount {inside[0] if inside else mount!r}"
                )
        return mounts

    # --- AWS KMS API (docs/kms-api.md) ---
    aws_account_id: str = Field(default="111122223333", pattern=r"^[0-9]{12}$")
    """The account named in the KMS API's ARNs (``arn:<partition>:kms:<region>:<account>:key/<id>``, the
    partition that of the request's region: ``aws-cn`` for ``cn-*``, ``aws-us-gov`` for ``us-gov-*``)."""

    @model_validator(mode="after")
    def _refuse_dev_secrets_in_production(self) -> Settings:
        if self.env == "production" and self.pin() == DEV_PIN:
            raise ValueError("KM_ENV=production refuses the development PKCS#11 PIN")
        return self

    def resolved_log_format(self) -> Literal["json", "text"]:
        """``KM_LOG_FORMAT``, else ``json`` in production and ``text`` in development."""
        if self.log_format is not None:
            return self.log_format
        return "json" if self.env == "production" else "text"

    def ui_enabled(self) -> bool:
        """``KM_UI``, else on in development and off in production."""
        return self.ui if self.ui is not None else self.env == "development"

    @property
    def development_tls(self) -> bool:
        """Whether the service serves the development certificate ``keymanager init`` made (no ``KM_TLS_CERT``)."""
        return self.tls_cert is None

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
        return is_softhsm_module(self.pkcs11_module)

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
