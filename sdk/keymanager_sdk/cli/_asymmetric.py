"""kmctl's commands of asymmetric keys: ``keys sign``, ``keys verify``, ``keys public-key``.

The message comes from ``--in`` or stdin (with ``--digest``: the digest of the algorithm's hash,
raw bytes, e.g. ``openssl dgst -sha256 -binary``). A signature is printed as base64 on one line,
or written raw to ``--out`` (what ``openssl pkeyutl -verify -sigfile`` reads); ``verify`` takes it
back as base64 (``--signature``) or raw from a file (``--signature-file``) and exits 0 when valid,
1 when not. ``public-key`` prints base64 of the DER SubjectPublicKeyInfo, or PEM with ``--pem``
(``--out``: DER bytes, or the PEM text). ``--output json`` prints the result's JSON shape.
"""

from __future__ import annotations

import argparse
import base64
import binascii
from pathlib import Path

from keymanager_sdk._client import KeyManager
from keymanager_sdk.cli._config import UsageError
from keymanager_sdk.cli._crypto import _field, _write_output
from keymanager_sdk.cli._output import emit, structured


def _message_type(args: argparse.Namespace) -> str:
    return "DIGEST" if args.digest else "RAW"


def sign(client: KeyManager, args: argparse.Namespace) -> int:
    """Sign the input in the HSM; the signature as base64 (stdout) or raw bytes (``--out``)."""
    signed = client.sign(args.key, _field(args), args.algorithm, _message_type(args))
    if structured(args):
        return emit(args, signed)
    if args.output_file:
        return _write_output(args, signed.signature)
    return _write_output(args, base64.b64encode(signed.signature) + b"\n")


def _signature(args: argparse.Namespace) -> bytes:
    """The signature of ``--signature`` (base64) or ``--signature-file`` (raw); ``UsageError`` else."""
    if (args.signature is None) == (args.signature_file is None):
        raise UsageError("give the signature as --signature BASE64 or --signature-file FILE (one of them)")
    if args.signature_file is not None:
        try:
            return Path(args.signature_file).read_bytes()
        except OSError as exc:
            raise UsageError(f"--signature-file {args.signature_file}: {exc.strerror or exc}") from exc
    try:
        return base64.b64decode(args.signature, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UsageError("--signature is not base64 (what 'kmctl keys sign' prints)") from exc


def verify(client: KeyManager, args: argparse.Namespace) -> int:
    """Exit 0 when the signature is the key's signature of the input, 1 when it is not."""
    signature = _signature(args)
    valid = client.verify(args.key, _field(args), signature, args.algorithm, _message_type(args))
    if structured(args):
        emit(args, {"valid": valid, "algorithm": args.algorithm})
    else:
        _write_output(args, b"valid\n" if valid else b"invalid\n")
    return 0 if valid else 1


def public_key(client: KeyManager, args: argparse.Namespace) -> int:
    """The key's public key: base64 of its DER (``--out``: the DER), or PEM with ``--pem``."""
    found = client.get_public_key(args.key)
    if structured(args):
        return emit(args, found)
    if args.pem:
        return _write_output(args, found.pem.rstrip("\n").encode("ascii") + b"\n")
    if args.output_file:
        return _write_output(args, found.der)
    return _write_output(args, base64.b64encode(found.der) + b"\n")
