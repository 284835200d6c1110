"""The rig of a run: the service under test, the KMS to compare with, and the load processes."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from bench import aws
from bench.clients import BOTO3_TARGETS, TargetSpec
from bench.kmsdoor import provision_door
from bench.load import LoadPool
from bench.probes import ServerProbe
from bench.service import Endpoint, Service, provision, spawned

KM_LABELS = {
    "km": "keymanager on board (/encrypt; stream above 64 KiB)",
    "km-batch": "keymanager batches (encrypt_many/decrypt_many)",
    "km-envelope": "keymanager envelope (data key + local AES-256-GCM)",
    "km-gcm": "keymanager on board, AES-256-GCM key (/encrypt; stream above 64 KiB)",
    "km-esdk": "AWS Encryption SDK through keymanager's KMS door",
}
DOOR_TARGETS = ("km-kms-api", "km-gcm", "km-esdk")
"""Targets that use the door's ``AES_256_GCM`` key (and, but for ``km-gcm``, its access key)."""


@dataclass
class Rig:
    """What a run measures with: service, endpoint, optional KMS, load pool, probes."""

    service: Service | None
    endpoint: Endpoint | None
    aws: aws.AwsConfig | None
    pool: LoadPool
    probe: ServerProbe
    emulator_probe: ServerProbe
    batch: int = 100
    door: aws.AwsConfig | None = None
    """boto3's config for ``km-kms-api``: the service's KMS door, an access key, a GCM key."""

    def target(self, name: str) -> TargetSpec:
        """The spec of target ``name`` (one of ``bench.clients.TARGET_NAMES``)."""
        if name in BOTO3_TARGETS:
            config = self.aws if name == "aws-kms" else self.door
            assert config is not None
            return TargetSpec(name, f"{name} — {config.label}", aws=config)
        if name == "km-esdk":
            assert self.door is not None
            return TargetSpec(name, KM_LABELS[name], aws=replace(self.door, key_id=aws.key_arn(self.door)))
        endpoint = self.endpoint
        if name == "km-gcm":
            assert endpoint is not None and self.door is not None
            endpoint = replace(endpoint, key=self.door.key_id)
        return TargetSpec(name, KM_LABELS[name], endpoint=endpoint, batch=self.batch)

    def probe_of(self, target: str) -> ServerProbe:
        """Whose processes serve ``target``: the emulator's for ``aws-kms``, else the service's."""
        return self.emulator_probe if target == "aws-kms" else self.probe


def client_processes(args: argparse.Namespace) -> int:
    """Load processes: ``--client-procs``, else one per core (at least two), at most the top concurrency."""
    if args.client_procs:
        return int(args.client_procs)
    top: int = max(args.concurrency)
    return max(1, min(max(2, os.cpu_count() or 2), top))


def require_service(args: argparse.Namespace) -> None:
    """Refuse a run (SystemExit) that names no service: neither ``--spawn`` nor ``--url`` with ``--token``."""
    if not args.spawn and not (args.url and args.token):
        raise SystemExit("give --spawn, or --url with --token (an admin token) and usually --ca")


@contextmanager
def service_from(args: argparse.Namespace) -> Iterator[Service]:
    """The service of ``--spawn`` (started here, stopped afterwards) or of ``--url``/``--token``."""
    if args.spawn:
        with spawned(args.workers) as service:
            yield service
        return
    require_service(args)
    yield Service(url=args.url, ca=args.ca, admin_token=token_value(args.token), pid=args.server_pid, workers=None)


def token_value(token: str) -> str:
    """``--token``: the token itself, or ``@FILE`` to read it from a file."""
    return Path(token[1:]).read_text().strip() if token.startswith("@") else token


@contextmanager
def kms_from(args: argparse.Namespace) -> Iterator[aws.AwsConfig]:
    """The emulator (default) or real AWS KMS when ``--aws-region``/``--aws-profile`` is given; with a key."""
    with ExitStack() as stack:
        if args.aws_region or args.aws_profile:
            config = aws.real_aws(args.aws_region, args.aws_profile)
        else:
            config = stack.enter_context(aws.emulator())
        config, created = aws.with_key(config, args.aws_key_id)
        yield config
        if created:
            aws.retire_key(config)


def server_probe(service: Service | None) -> ServerProbe:
    """CPU and RSS probes of a service whose processes are known."""
    if service is None or service.pid is None:
        return ServerProbe.none()
    return ServerProbe(service.pids, service.worker_pids)


def emulator_probe(kms: aws.AwsConfig | None) -> ServerProbe:
    """CPU probe of the local KMS emulator (nothing to probe for real AWS)."""
    if kms is None or kms.pid is None:
        return ServerProbe.none()
    pids = [kms.pid]
    return ServerProbe(lambda: pids, list)


@contextmanager
def rig(args: argparse.Namespace, targets: list[str], running: Service | None = None) -> Iterator[Rig]:
    """Set up what ``targets`` need (on the ``running`` service, when given, instead of the
    arguments'); tear it down afterwards."""
    with ExitStack() as stack:
        service = endpoint = door = None
        if any(t != "aws-kms" for t in targets):
            service = running or stack.enter_context(service_from(args))
            endpoint = provision(service)
            door = provision_door(service, endpoint) if set(DOOR_TARGETS) & set(targets) else None
        kms = stack.enter_context(kms_from(args)) if "aws-kms" in targets else None
        pool = LoadPool(client_processes(args))
        stack.callback(pool.close)
        emulator = emulator_probe(kms)
        yield Rig(service, endpoint, kms, pool, server_probe(service), emulator, args.batch, door)
