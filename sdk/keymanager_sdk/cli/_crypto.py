"""kmctl's cryptographic commands: ``encrypt``, ``decrypt``, ``reencrypt``, ``datakey``, ``mac``,
``mac-verify``, ``tokenize``, ``detokenize``.

A command's raw answer (a ciphertext, a token, a plaintext, a MAC in hex) goes to stdout or
``--out`` as one line or as bytes; ``--output json`` or ``--query`` print the JSON shape of the
result instead. Inputs come from stdin or ``--in`` (a missing file: exit 2 naming it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import BinaryIO

from keymanager_sdk._client import KeyManager
from keymanager_sdk._envelope import write_atomically
from keymanager_sdk.cli._config import UsageError
from keymanager_sdk.cli._output import emit, structured
from keymanager_sdk.cli._progress import reading

FIELD_INPUT_MAX = 768 * 1024
"""The largest input kmctl sends as one field: base64 of it fills the service's default 1 MiB request limit."""
OVER_THE_FIELD_LIMIT = (
    "too large for a field (the service takes 64 KiB by default): use --envelope (local AES-256-GCM "
    "under a data key from the service) or --stream (through the service's HSM)"
)


def context(args: argparse.Namespace, option: str = "context") -> dict[str, str] | None:
    """The encryption context of ``--context NAME=VALUE`` options (None when there is none)."""
    pairs = getattr(args, option) or []
    if not pairs:
        return None
    if any("=" not in p for p in pairs):
        raise UsageError(f"--{option.replace('_', '-')} takes NAME=VALUE")
    return dict(p.split("=", 1) for p in pairs)


def _input(args: argparse.Namespace) -> BinaryIO:
    if not args.input:
        return sys.stdin.buffer
    try:
        return open(args.input, "rb")
    except OSError as exc:
        raise UsageError(f"--in {args.input}: {exc.strerror or exc}") from exc


def _field(args: argparse.Namespace) -> bytes:
    """The input as one field (refused over ``FIELD_INPUT_MAX`` before anything is sent)."""
    with _input(args) as src:
        data = src.read(FIELD_INPUT_MAX + 1)
    if len(data) > FIELD_INPUT_MAX:
        raise UsageError(f"the input is over {FIELD_INPUT_MAX // 1024} KiB, {OVER_THE_FIELD_LIMIT}")
    return bytes(data)


def _ciphertext(args: argparse.Namespace) -> str:
    with _input(args) as src:
        return src.read(FIELD_INPUT_MAX * 2).decode("ascii", errors="replace").strip()


def _write_output(args: argparse.Namespace, data: bytes) -> int:
    if args.output_file:
        Path(args.output_file).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def _line(args: argparse.Namespace, value: object, raw: str) -> int:
    """The result's JSON shape when asked for, else its raw answer on one line."""
    return emit(args, value) if structured(args) else _write_output(args, raw.encode() + b"\n")


def encrypt(client: KeyManager, args: argparse.Namespace) -> int:
    if args.envelope or args.stream:
        return _large(client, args, encrypting=True)
    result = client.encrypt(args.key, _field(args), context(args))
    return _line(args, result, str(result))


def decrypt(client: KeyManager, args: argparse.Namespace) -> int:
    if args.envelope or args.stream:
        return _large(client, args, encrypting=False)
    return _write_output(args, client.decrypt(_ciphertext(args), context(args), args.key))


def reencrypt(client: KeyManager, args: argparse.Namespace) -> int:
    """The ciphertext on stdin (or ``--in``) under the primary version of ``--to`` (default: its own key)."""
    ciphertext = _ciphertext(args)
    key = args.key or _key_id_of(ciphertext)
    if not key:
        raise UsageError("reencrypt needs --key when the input is not a km:1 ciphertext")
    result = client.reencrypt(key, ciphertext, context(args), args.to, context(args, "to_context"))
    return _line(args, result, str(result))


def _key_id_of(ciphertext: str) -> str | None:
    """The key id a ``km:1:<key id>:<version>:…`` ciphertext names (None for anything else)."""
    parts = ciphertext.split(":")
    return parts[2] if len(parts) >= 5 and parts[:2] == ["km", "1"] and parts[2] else None


def datakey(client: KeyManager, args: argparse.Namespace) -> int:
    """A data key: its plaintext (base64) and its wrapped form, or the wrapped form alone."""
    made = client.generate_data_key(args.key, args.bits, context(args), include_plaintext=not args.wrapped_only)
    return emit(args, made)


def mac(client: KeyManager, args: argparse.Namespace) -> int:
    made = client.mac(args.key, _field(args), context(args))
    return _line(args, made, made.hex())


def mac_verify(client: KeyManager, args: argparse.Namespace) -> int:
    """Exit 0 when ``MAC`` (hex) is the input's MAC under the key, 1 when it is not."""
    try:
        tag = bytes.fromhex(args.mac)
    except ValueError as exc:
        raise UsageError(f"MAC {args.mac!r} is not hex (what 'kmctl mac' prints)") from exc
    valid = client.verify_mac(args.key, _field(args), tag, context(args), args.key_version)
    _line(args, {"valid": valid}, "valid" if valid else "invalid")
    return 0 if valid else 1


def tokenize(client: KeyManager, args: argparse.Namespace) -> int:
    result = client.tokenize(args.key, args.value, context(args))
    return _line(args, result, result.token)


def detokenize(client: KeyManager, args: argparse.Namespace) -> int:
    value = client.detokenize(args.key, args.token, context(args), key_version=args.key_version)
    return _line(args, {"value": value}, value)


def _large(client: KeyManager, args: argparse.Namespace, encrypting: bool) -> int:
    """``--envelope`` or ``--stream``: from ``--in`` or stdin to ``--out`` (complete, or absent) or stdout."""
    if args.envelope and args.stream:
        raise UsageError("--envelope and --stream exclude each other")
    if args.stream and not args.key:
        raise UsageError("decrypt --stream needs --key (the key the stream was encrypted with)")
    ctx = context(args)
    verb = "encrypt" if encrypting else "decrypt"
    size = os.stat(args.input).st_size if args.input and os.path.isfile(args.input) else None

    def run(src: BinaryIO, dst: BinaryIO) -> object:
        if args.stream:
            onboard = client.encrypt_stream_onboard if encrypting else client.decrypt_stream_onboard
            return onboard(args.key, src, dst, ctx)
        if encrypting:
            return client.encrypt_stream(args.key, src, dst, ctx, args.segment_size * 1024)
        return client.decrypt_stream(src, dst, ctx)

    with _input(args) as raw, reading(raw, size, verb, args.progress) as src:
        if args.output_file:
            write_atomically(args.output_file, lambda dst: run(src, dst))
        else:
            try:
                run(src, sys.stdout.buffer)
            finally:
                sys.stdout.buffer.flush()
    return 0
