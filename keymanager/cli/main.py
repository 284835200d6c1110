"""``keymanager init`` sets everything up idempotently; ``keymanager serve`` runs the service."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from keymanager import __version__
from keymanager.cli import break_glass
from keymanager.cli.km_variables import unknown_variables
from keymanager.cli.startup import redacted_url
from keymanager.config import Settings
from keymanager.domain.models import Role
from keymanager.errors import KeyManagerError
from keymanager.services.authorization import Right, holds

if TYPE_CHECKING:
    from keymanager.serving import WorkerPlan

PREPARE_TIMEOUT_SECONDS = 600
"""How long ``serve`` waits for the audit chain to be prepared (the first start after an upgrade
verifies the whole chain written before it was keyed: about 100 µs per record here)."""


def _write_secret(path: Path, text: str) -> None:
    """Write ``text`` to a new file readable by its owner only."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text + "\n")


def init(settings: Settings) -> int:
    """Create what is missing: schema, SoftHSM token, development PKI, audit key, first admin
    principal, and the kmctl profile of the local service.

    The database is checked (opened and migrated) first: when it cannot be, exit 1 naming it,
    before anything is created in the HSM.
    """
    from keymanager.cli.profile import write_kmctl_profile
    from keymanager.cli.startup import database_problem
    from keymanager.cli.tls import ensure_dev_pki
    from keymanager.services.container import Services

    settings.var_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    problem = database_problem(settings)
    if problem is not None:
        print(f"keymanager init: {problem} (nothing else was created)", file=sys.stderr)
        return 1
    if settings.is_softhsm:
        from keymanager.hsm.softhsm import ensure_softhsm_token, write_softhsm_conf

        conf = settings.resolved_softhsm2_conf()
        write_softhsm_conf(conf, settings.var_dir / "softhsm" / "tokens")
        created = ensure_softhsm_token(
            settings.pkcs11_module,
            settings.pkcs11_token_label,
            settings.pin(),
            settings.pkcs11_so_pin.get_secret_value(),
            conf,
        )
        print(f"SoftHSM token '{settings.pkcs11_token_label}': {'created' if created else 'present'}")
    ca = None
    if settings.tls_cert is None and settings.tls_key is None:
        ca = ensure_dev_pki(settings.tls_dir).ca_cert
        print(f"development CA: {ca}")
    services = Services.build(settings)
    try:
        presence = services.audit_chain.prepare()
        print(f"audit key '{settings.audit_key_label}': {'created' if presence.value == 'created' else 'present'}")
        services.hsm.ping()
        _print_capabilities(settings.pkcs11_token_label, services.hsm.capabilities().summary())
        print(f"database: {redacted_url(settings.resolved_database_url())} (schema current)")
        admins = [p for p in services.principals.list() if holds(p.role, Right.MANAGE)]
        token_file = settings.var_dir / "admin.token"
        if admins:
            print(f"admin principal: present ({', '.join(p.name for p in admins)}); token file {token_file}")
        else:
            created_admin = services.principals.create("admin", Role.ADMIN)
            _write_secret(token_file, created_admin.token)
            print("admin principal 'admin' created. Its token is shown once here and kept in", token_file)
            print(created_admin.token)
    finally:
        services.close()
    print(f"kmctl profile: {write_kmctl_profile(settings, token_file, ca)} (kmctl uses it when run here)")
    return 0


def dev_cert(settings: Settings, name: str, out: Path | None = None) -> int:
    """Issue the client certificate ``CN=<name>,O=keymanager`` from the development CA (into ``out``,
    else the TLS directory) for a principal's mTLS (REST) or KMIP; print its paths and the subject to
    bind; exit 0, or 2 (said why) for a bad name or when ``keymanager init`` has not made the CA yet."""
    from keymanager.cli.tls import certificate_subject, issue_client_certificate

    try:
        cert, key = issue_client_certificate(settings.tls_dir, name, out)
    except ValueError as exc:
        print(f"keymanager dev-cert: {name!r}: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError:
        print(f"keymanager dev-cert: no development CA in {settings.tls_dir}: run 'keymanager init'", file=sys.stderr)
        return 2
    print(f"client certificate: {cert}")
    print(f"its key:            {key}")
    subject = certificate_subject(cert.read_bytes())
    print(f"subject:            {subject}")
    print(f'bind it to a principal: kmctl principals create {name} --role app --cert-subject "{subject}"')
    return 0


def _print_capabilities(label: str, summary: dict[str, Any]) -> None:
    """What the token can do (``Capabilities.summary``): one line of features, one line per missing one."""
    print(f"HSM token '{label}' supports: {', '.join(summary['supported']) or 'nothing this service uses'}")
    for feature, why in summary["unsupported"].items():
        print(f"HSM token '{label}' cannot do {feature}: {why}")


def serve(settings: Settings, args: argparse.Namespace) -> int:
    """Serve HTTPS (or plain HTTP with --insecure-http, after a warning) and KMIP until interrupted;
    exit 1 naming the part that keeps it from starting (database, HSM, audit chain, a port another
    process holds)."""
    from keymanager.api.logs import configure as configure_logs
    from keymanager.cli.startup import problem_at_start
    from keymanager.serving import ListenRefused, ServeOptions, bind_listeners, plan_workers, replica_metrics_dir
    from keymanager.serving import serve as run_server
    from keymanager.serving.affinity import CpuBudget

    tls = _tls_files(settings, args.insecure_http)
    if tls is None:
        return 2
    cert_path, key_path, client_ca = tls
    problem = problem_at_start(settings)
    if problem is not None:
        print(f"keymanager cannot start: {problem}", file=sys.stderr)
        return 1
    if not _prepare_audit_chain():
        return 1
    host, port = args.host or settings.host, args.port or settings.port
    kmip_port = settings.kmip_port if cert_path is not None else 0  # KMIP is TLS with client certificates or nothing
    try:
        listeners = bind_listeners(host, port, kmip_port)
    except ListenRefused as exc:
        print(f"keymanager cannot start: {exc}", file=sys.stderr)
        return 1
    log_level = args.log_level or settings.log_level
    os.environ["KM_LOG_LEVEL"] = log_level
    configure_logs(log_level, settings.resolved_log_format(), settings.access_log)
    scheme = "http" if args.insecure_http else "https"
    os.environ["KM_HOST"], os.environ["KM_PORT"] = host, str(port)  # each worker's own names (public_hosts)
    plan = plan_workers(settings, args.workers, CpuBudget.of_this_process())
    os.environ["KM_CPU_AFFINITY"] = "true" if plan.pinned else "false"  # read by each worker
    with replica_metrics_dir(settings.var_dir / "metrics") as metrics_dir:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir.resolve())
        _announce(settings, scheme, host, port, plan)
        run_server(
            ServeOptions(
                host=host,
                port=port,
                workers=plan.workers,
                tls_cert=cert_path,
                tls_key=key_path,
                client_ca=client_ca,
                log_level=log_level,
                keepalive_timeout=settings.keepalive_timeout_seconds,
            ),
            listeners,
        )
    return 0


def _tls_files(settings: Settings, insecure_http: bool) -> tuple[Path | None, Path | None, Path | None] | None:
    """The certificate, key and client CA to serve with (None each for plain HTTP, after a warning);
    None, said why, when the certificate is missing."""
    cert, key = settings.resolved_tls_cert(), settings.resolved_tls_key()
    if insecure_http:
        print("WARNING: serving plain HTTP: tokens and plaintext cross the network unencrypted.", file=sys.stderr)
        os.environ["KM_KMIP_PORT"] = "0"  # KMIP is TLS with client certificates or nothing
        return None, None, None
    if not cert.exists() or not key.exists():
        print(f"no TLS certificate at {cert}: run 'keymanager init' or set KM_TLS_CERT/KM_TLS_KEY", file=sys.stderr)
        return None
    return cert, key, settings.tls_client_ca


def _announce(settings: Settings, scheme: str, host: str, port: int, plan: WorkerPlan) -> None:
    """Say, once the service answers, where it serves and with how many workers."""
    from keymanager.cli.guide import next_steps
    from keymanager.cli.startup import announce_when_ready, loopback

    pinning = "each on a CPU of its own" if plan.pinned else "not pinned to CPUs"
    local = f"{scheme}://{loopback(host)}:{port}"
    ready = f"keymanager serving {scheme}://{host}:{port} with {plan.workers} worker(s), {pinning} ({plan.reason})"
    if settings.env == "development" and settings.resolved_log_format() == "text":  # a person is reading
        ready += "\n" + next_steps(settings, local)
    announce_when_ready(local, ready)


def _prepare_audit_chain() -> bool:
    """Before the workers start: the audit chain keyed (once across replicas); False, said why, if not.

    In a child process of its own: the serving process never loads the PKCS#11 library (its
    workers each initialise it themselves).
    """
    child = multiprocessing.get_context("spawn").Process(target=_prepare_in_child, name="audit-chain-prepare")
    child.start()
    child.join(timeout=PREPARE_TIMEOUT_SECONDS)
    if child.exitcode is None:
        child.kill()
        child.join()
        print(f"keymanager cannot start: audit chain: not ready in {PREPARE_TIMEOUT_SECONDS} s", file=sys.stderr)
    return child.exitcode == 0


def _prepare_in_child() -> None:
    """Exit 0 once the audit chain is prepared, 1 (said why on stderr) when it cannot be."""
    from keymanager.services.container import Services

    settings = Settings()
    try:
        services = Services.build(settings)
        try:
            services.audit_chain.prepare()
        finally:
            services.close()
    except KeyManagerError as exc:
        print(f"keymanager cannot start: audit chain: {exc.message}", file=sys.stderr)
        sys.exit(1)


def audit_verify(settings: Settings, checkpoint_arg: str | None) -> int:
    """Check the audit chains (seals in the HSM) and, with ``--checkpoint``, that they still hold the
    checkpoint's heads; exit 0 when intact, 1 naming the first broken record, 2 for a bad argument."""
    from keymanager.cli.checkpoint import read_checkpoint
    from keymanager.services.container import Services

    checkpoint = None
    if checkpoint_arg is not None:
        checkpoint = read_checkpoint(checkpoint_arg)
        if checkpoint is None:
            print("--checkpoint: no 'audit checkpoint chains=…' line in that file or text", file=sys.stderr)
            return 2
    services = Services.build(settings)
    try:
        result = services.audit_chain.verify(checkpoint)
    finally:
        services.close()
    if result.ok:
        against = f"; checkpoint of {len(checkpoint.heads)} chain heads contained" if checkpoint else ""
        print(f"audit log ok: {result.records} records, every chain intact and sealed{against}")
        return 0
    print(
        f"audit log BROKEN at record {result.first_broken_seq} of chain {result.chain}: {result.reason} "
        f"({result.records} records verified)"
    )
    return 1


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="keymanager", description="Self-hosted key manager backed by a PKCS#11 HSM.")
    top.add_argument("--version", action="version", version=f"keymanager {__version__}")
    commands = top.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "init", help="create the schema, SoftHSM token, dev TLS, first admin and kmctl profile (idempotent)"
    )
    cert = commands.add_parser("dev-cert", help="issue a client certificate (mTLS) from the development CA")
    cert.add_argument("name", help="the certificate's CN: 1-64 letters, digits, '_', '.' or '-'")
    cert.add_argument("--out", type=Path, help="the directory to write it to (default: the TLS directory, var/tls)")
    run = commands.add_parser("serve", help="serve the API over HTTPS")
    run.add_argument(
        "--workers",
        type=_positive,
        help="worker processes (default KM_WORKERS, else one per CPU the process may use)",
    )
    run.add_argument("--host", help="address to bind (default KM_HOST or 127.0.0.1)")
    run.add_argument("--port", type=int, help="port (default KM_PORT or 8443)")
    run.add_argument("--insecure-http", action="store_true", help="serve plain HTTP (for measurements only)")
    run.add_argument(
        "--log-level", choices=["critical", "error", "warning", "info", "debug"], help="default KM_LOG_LEVEL"
    )
    settings_table = commands.add_parser("settings", help="print the table of every KM_ setting (Markdown)")
    settings_table.add_argument("--update", metavar="PAGE", help="rewrite the table in PAGE (docs/configuration.md)")
    audit = commands.add_parser("audit", help="audit log tools")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    verify = audit_commands.add_parser("verify", help="verify the audit chain and its seals (with the HSM)")
    verify.add_argument(
        "--checkpoint",
        metavar="FILE_OR_LINE",
        help="a checkpoint file or log (the latest checkpoint line in it counts) or one checkpoint line",
    )
    break_glass.add_parser(commands)
    return top


def _settings() -> Settings | None:
    """This environment's settings, or None after printing why they are not valid."""
    unknown = unknown_variables(os.environ)
    if unknown:
        for line in unknown:
            print(f"configuration error: {line}", file=sys.stderr)
        return None
    try:
        return Settings()
    except ValidationError as exc:
        # Never the input values: they may hold a PIN.
        for error in exc.errors(include_input=False, include_url=False):
            where = ".".join(str(part) for part in error["loc"]) or "settings"
            print(f"configuration error: {where}: {error['msg']}", file=sys.stderr)
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``keymanager`` console script."""
    args = parser().parse_args(argv)
    if args.command == "settings":  # the defaults, not this environment's values
        from keymanager.cli.settings_doc import run as settings_table

        return settings_table(args.update)
    settings = _settings()
    if settings is None:
        return 2
    try:
        if args.command == "init":
            return init(settings)
        if args.command == "dev-cert":
            return dev_cert(settings, args.name, args.out)
        if args.command == "audit":
            return audit_verify(settings, args.checkpoint)
        if args.command == "approvals":
            return break_glass.run(settings, args)
        return serve(settings, args)
    except KeyManagerError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
