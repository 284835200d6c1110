"""kmctl's argument parser: every command, its arguments with their help text and defaults.

``run`` of the parsed arguments is the command (called with the client), ``standalone`` a command
that needs no service (``completion``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from keymanager_sdk._approvals import APPROVAL_STATES, GUARDED_OPERATIONS
from keymanager_sdk._core import __version__
from keymanager_sdk._envelope import DEFAULT_SEGMENT_SIZE
from keymanager_sdk._key_import import WRAPPING_ALGORITHMS
from keymanager_sdk._models import OPERATIONS
from keymanager_sdk._spec_names import KEY_SPECS, SIGNING_ALGORITHMS, USAGES
from keymanager_sdk.cli import _approvals, _asymmetric, _completion, _crypto, _objects
from keymanager_sdk.cli import _commands as cmd
from keymanager_sdk.cli._access_keys import (
    access_keys_create,
    access_keys_delete,
    access_keys_list,
    approle_create,
    approle_delete,
    approle_list,
)
from keymanager_sdk.cli._commands import Command
from keymanager_sdk.cli._config import UsageError
from keymanager_sdk.cli._output import OUTPUTS, emit
from keymanager_sdk.cli._policy import policy_add, policy_remove

KEY_HELP = "the key's name or id"
REQUEST_HELP = "the approval request's id (what a held call printed)"
OBJECT_HELP = "the managed object's id (its KMIP unique identifier)"
GUARDED = ", ".join(GUARDED_OPERATIONS)


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error raised as ``UsageError`` (one line, exit 2) instead of printed,
    and every argument's default shown in its help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _common(parser: argparse.ArgumentParser) -> None:
    """The options every command takes (before or after the command's name)."""
    s = argparse.SUPPRESS
    parser.add_argument("--output", "-o", choices=OUTPUTS, default=s, help="output format (default: table)")
    parser.add_argument("--json", dest="output", action="store_const", const="json", default=s, help="--output json")
    parser.add_argument("--query", default=s, metavar="JMESPATH", help="print only this part of the result (JMESPath)")
    parser.add_argument("--url", default=s, help="service URL (default: KM_URL, else the profile's)")
    parser.add_argument(
        "--ca", default=s, help="CA bundle of the server's certificate (default: KM_CA, else the profile's)"
    )
    parser.add_argument("--profile", default=s, help="table of the profile file (default: KMCTL_PROFILE, else default)")
    parser.add_argument(
        "--config",
        default=s,
        help="profile file (default: KMCTL_CONFIG, else var/kmctl.toml here, else ~/.config/kmctl/config.toml)",
    )


def _sub(group: Any, name: str, run: Command, help_text: str) -> argparse.ArgumentParser:
    """A sub-command running ``run`` with the client."""
    parser: argparse.ArgumentParser = group.add_parser(name, help=help_text, description=help_text)
    _common(parser)
    parser.set_defaults(run=run)
    return parser


def _group(group: Any, name: str, help_text: str) -> Any:
    """A command with actions (``kmctl keys ACTION``)."""
    parser = group.add_parser(name, help=help_text, description=help_text)
    return parser.add_subparsers(dest="action", metavar="ACTION", required=True)


def _context(parser: argparse.ArgumentParser, text: str = "encryption context entry (repeat for more)") -> None:
    parser.add_argument("--context", action="append", metavar="NAME=VALUE", help=text)


def _input_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--in", dest="input", help="input file (default: stdin)")
    parser.add_argument("--out", dest="output_file", help="output file (default: stdout)")


def _keys(group: Any) -> None:
    keys = _group(group, "keys", "manage keys")
    create = _sub(keys, "create", cmd.keys_create, "create a key")
    create.add_argument("name", help="the new key's name")
    create.add_argument("--algorithm", choices=KEY_SPECS, help="key spec (default: AES_256_CBC_HMAC_SHA256)")
    create.add_argument(
        "--usage", choices=USAGES, help="asymmetric keys: what the key is for (RSA must name it; ECC: SIGN_VERIFY)"
    )
    create.add_argument("--token-format", help='FF1_AES_256: JSON, e.g. {"keep_last": 4, "luhn": "valid"}')
    create.add_argument("--description", help="free text shown with the key")
    create.add_argument("--policy", help='JSON, e.g. {"encrypt": ["billing"]}, or @file.json (default: nobody)')
    create.add_argument("--rotation-period-days", type=int, help="rotate automatically (default: never)")
    create.add_argument("--origin", choices=["hsm", "external"], help="external: material comes by 'keys import'")
    _sub(keys, "list", lambda c, a: emit(a, c.list_keys(), "keys"), "list the keys you may see")
    for name, method, text in [
        ("show", "get_key", "show a key"),
        ("rotate", "rotate_key", "make a new primary version"),
        ("enable", "enable_key", "enable a key"),
        ("disable", "disable_key", "disable a key"),
        ("cancel-deletion", "cancel_key_deletion", "cancel a scheduled deletion (the key comes back disabled)"),
    ]:
        _sub(keys, name, cmd.key_action(method), text).add_argument("key", help=KEY_HELP)
    update = _sub(keys, "update", cmd.keys_update, "change description, policy or min decryption version")
    update.add_argument("key", help=KEY_HELP)
    update.add_argument("--description", help="new description (default: unchanged)")
    update.add_argument("--policy", help="JSON or @file.json; replaces the policy whole (default: unchanged)")
    update.add_argument("--min-decryption-version", type=int, help="oldest version that still decrypts")
    delete = _sub(keys, "delete", cmd.keys_delete, "schedule a key's destruction")
    delete.add_argument("key", help=KEY_HELP)
    delete.add_argument("--pending-days", type=int, default=30, help="days before the HSM objects are destroyed")
    imported = _sub(keys, "import", cmd.keys_import, "import your key material (origin external), wrapped here")
    imported.add_argument("key", help=KEY_HELP)
    imported.add_argument("--material", required=True, metavar="FILE", help="the raw key (32 bytes for AES)")
    imported.add_argument("--mac-material", metavar="FILE", help="AES_256_CBC_HMAC_SHA256: the HMAC key's bytes")
    imported.add_argument(
        "--wrapping-algorithm", choices=WRAPPING_ALGORITHMS, default=WRAPPING_ALGORITHMS[0], help="how it is wrapped"
    )
    _asymmetric_keys(keys)
    policy = _group(keys, "policy", "grant or revoke one operation (safe against concurrent edits)")
    for name, run, text in [
        ("add", policy_add, "grant OPERATION on KEY to PRINCIPAL"),
        ("remove", policy_remove, "revoke OPERATION on KEY from PRINCIPAL"),
    ]:
        edit = _sub(policy, name, run, text)
        edit.add_argument("key", help=KEY_HELP)
        edit.add_argument("operation", choices=OPERATIONS, metavar="OPERATION", help=", ".join(OPERATIONS))
        edit.add_argument("principal", help="principal name")


def _asymmetric_keys(keys: Any) -> None:
    """``keys sign``, ``keys verify`` and ``keys public-key`` (``_asymmetric``)."""
    for name, run, text in [
        ("sign", _asymmetric.sign, "sign stdin or --in in the HSM (signature: base64 on stdout, raw to --out)"),
        ("verify", _asymmetric.verify, "exit 0 when the signature is KEY's signature of stdin or --in, else 1"),
    ]:
        parser = _sub(keys, name, run, text)
        parser.add_argument("key", help=KEY_HELP)
        parser.add_argument("--algorithm", required=True, choices=SIGNING_ALGORITHMS, help="signing algorithm")
        parser.add_argument("--digest", action="store_true", help="the input is the digest of the algorithm's hash")
        _input_output(parser)
        if name == "verify":
            parser.add_argument("--signature", help="the signature in base64, as 'kmctl keys sign' prints it")
            parser.add_argument("--signature-file", metavar="FILE", help="the signature's raw bytes")
    public = _sub(keys, "public-key", _asymmetric.public_key, "the public key (base64 DER SubjectPublicKeyInfo)")
    public.add_argument("key", help=KEY_HELP)
    public.add_argument("--pem", action="store_true", help="print PEM instead of base64 DER")
    public.add_argument("--out", dest="output_file", help="output file: the DER (PEM with --pem); default stdout")


def _principals(group: Any) -> None:
    principals = _group(group, "principals", "manage principals")
    create = _sub(principals, "create", cmd.principals_create, "create a principal (prints its token once)")
    create.add_argument("name", help="the new principal's name")
    create.add_argument("--role", required=True, choices=["admin", "app", "auditor"], help="what it may do")
    create.add_argument("--cert-subject", help="RFC 4514 subject of its TLS client certificate (mTLS)")
    create.add_argument("--create-keys", action="store_true", help="it may create keys it then owns (KMIP clients)")
    create.add_argument(
        "--key-store", action="store_true", help="with --create-keys: its AES keys made over KMIP are exportable to it"
    )
    _sub(principals, "list", lambda c, a: emit(a, c.list_principals(), "principals"), "list principals")
    delete = _sub(principals, "delete", cmd.principals_delete, "delete a principal (its token stops at once)")
    delete.add_argument("name", help="principal name")
    _sub(group, "whoami", cmd.whoami, "show the principal your credential belongs to")


def _access_keys(group: Any) -> None:
    access_keys = _group(group, "access-keys", "manage the access keys of the AWS KMS API (SigV4)")
    create = _sub(access_keys, "create", access_keys_create, "create an access key (prints its secret once)")
    create.add_argument("principal", help="principal name")
    create.add_argument("--access-key-id", help="register this id (16-128 of A-Z, 0-9) with the secret on stdin")
    create.add_argument("--secret-stdin", action="store_true", help="read the secret of --access-key-id from stdin")
    listing = _sub(access_keys, "list", access_keys_list, "list a principal's access keys")
    listing.add_argument("principal", help="principal name")
    delete = _sub(access_keys, "delete", access_keys_delete, "revoke an access key")
    delete.add_argument("principal", help="principal name")
    delete.add_argument("access_key_id", help="the id 'access-keys list' shows")
    approle = _group(group, "approle", "manage the AppRole credentials of the Vault Transit API")
    create = _sub(approle, "create", approle_create, "create an AppRole credential (prints its secret id once)")
    create.add_argument("principal", help="principal name")
    listing = _sub(approle, "list", approle_list, "list a principal's AppRole credentials")
    listing.add_argument("principal", help="principal name")
    delete = _sub(approle, "delete", approle_delete, "delete an AppRole credential and its client tokens")
    delete.add_argument("principal", help="principal name")
    delete.add_argument("role_id", help="the role id 'approle list' shows")


def _approvals_commands(group: Any) -> None:
    approvals = _group(group, "approvals", "dual control: approval requests of guarded calls, and their rules")
    listing = _sub(approvals, "list", _approvals.approvals_list, "list approval requests")
    listing.add_argument("--state", choices=APPROVAL_STATES, help="only requests in this state (default: all)")
    show = _sub(approvals, "show", _approvals.approvals_show, "show what a request would run, its digest and votes")
    show.add_argument("request_id", metavar="ID", help=REQUEST_HELP)
    approve = _sub(
        approvals, "approve", _approvals.approvals_approve, "approve a request (prints what will run and its digest)"
    )
    approve.add_argument("request_id", metavar="ID", help=REQUEST_HELP)
    approve.add_argument("--digest", help="approve only if the request's digest is this one (default: the one read)")
    deny = _sub(approvals, "deny", _approvals.approvals_deny, "deny a request: its call will not run")
    deny.add_argument("request_id", metavar="ID", help=REQUEST_HELP)
    deny.add_argument("--reason", help="why, shown with the request (at most 200 characters)")
    rules = _sub(approvals, "rules", _approvals.rules_show, "show the approval rules ('rules set' replaces them)")
    rules.add_argument("--key", help="a key's own rules (default: the service's)")
    actions = rules.add_subparsers(dest="rules_action", metavar="ACTION", required=False)
    replace = _sub(actions, "set", _approvals.rules_set, "replace the approval rules")
    replace.add_argument(
        "rules", metavar="RULES", help=f"JSON or @file.json, e.g. {_approvals.RULES_EXAMPLE}; operations: {GUARDED}"
    )
    replace.add_argument("--key", default=argparse.SUPPRESS, help="a key's own rules (default: the service's)")


def _objects_commands(group: Any) -> None:
    objects = _group(group, "objects", "managed objects that are not keys (secret data, opaque objects, certificates)")
    _sub(objects, "list", _objects.objects_list, "list the managed objects you may see (metadata only)")
    for name, run, text in [
        ("get", _objects.objects_get, "show a managed object's type, state, owner and times"),
        ("destroy", _objects.objects_destroy, "destroy a managed object (revoke it over KMIP first)"),
    ]:
        _sub(objects, name, run, text).add_argument("object_id", metavar="ID", help=OBJECT_HELP)


def _fields(group: Any) -> None:
    for name, run, text in [
        ("encrypt", _crypto.encrypt, "encrypt stdin or --in (a small field, or a large file with --envelope)"),
        ("decrypt", _crypto.decrypt, "decrypt stdin or --in (a ciphertext string, or an envelope with --envelope)"),
    ]:
        parser = _sub(group, name, run, text)
        if name == "encrypt":
            parser.add_argument("key", help=KEY_HELP)
        else:
            parser.add_argument("--key", help="pin the key (default: the one the ciphertext names)")
        _input_output(parser)
        _context(parser)
        parser.add_argument("--envelope", action="store_true", help="envelope encryption (KMEV) for large data")
        parser.add_argument("--stream", action="store_true", help="large data through the service's HSM")
        parser.add_argument("--segment-size", type=int, default=DEFAULT_SEGMENT_SIZE // 1024, help="KiB (64-1024)")
        parser.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="progress bar on stderr for --envelope/--stream (default: for files of 16 MB or more on a terminal)",
        )
    again = _sub(group, "reencrypt", _crypto.reencrypt, "re-encrypt a ciphertext (stdin or --in) without seeing it")
    again.add_argument("--key", help="the key it is under (default: the one the ciphertext names)")
    again.add_argument("--to", help="the key to encrypt under (default: the same key's primary version)")
    _input_output(again)
    _context(again, "its encryption context entry")
    again.add_argument("--to-context", action="append", metavar="NAME=VALUE", help="the new context (default: same)")
    data_key = _sub(group, "datakey", _crypto.datakey, "a new data key: plaintext (base64) and wrapped under KEY")
    data_key.add_argument("key", help=KEY_HELP)
    data_key.add_argument("--bits", type=int, choices=[128, 256], default=256, help="data key length")
    data_key.add_argument("--wrapped-only", action="store_true", help="leave the plaintext out")
    _context(data_key)


def _macs_and_tokens(group: Any) -> None:
    made = _sub(group, "mac", _crypto.mac, "HMAC-SHA256 (hex) of stdin or --in under an HMAC key (a blind index)")
    made.add_argument("key", help=KEY_HELP)
    _input_output(made)
    _context(made)
    check = _sub(group, "mac-verify", _crypto.mac_verify, "exit 0 when MAC is stdin's (or --in's) MAC, else 1")
    check.add_argument("key", help=KEY_HELP)
    check.add_argument("mac", help="the MAC in hex, as 'kmctl mac' prints it")
    check.add_argument("--key-version", type=int, help="the version that made it (default: the primary)")
    _input_output(check)
    _context(check)
    for name, run, text, what in [
        ("tokenize", _crypto.tokenize, "the format-preserving token of a value (FF1_AES_256 keys)", "value"),
        ("detokenize", _crypto.detokenize, "the value of a token (FF1_AES_256 keys)", "token"),
    ]:
        parser = _sub(group, name, run, text)
        parser.add_argument("key", help=KEY_HELP)
        parser.add_argument(what, help=f"the {what}")
        _context(parser, "context entry (the tweak)")
        parser.add_argument("--out", dest="output_file", help="output file (default: stdout)")
        if what == "token":
            parser.add_argument("--key-version", type=int, help="the version that made it (default: the primary)")


def _audit(group: Any) -> None:
    audit = _group(group, "audit", "read and verify the audit log")
    listing = _sub(audit, "list", cmd.audit_list, "list audit records (newest first)")
    listing.add_argument("--key", help="only this key's records (name or id)")
    listing.add_argument("--principal", help="only this principal's records")
    listing.add_argument("--action", dest="action_filter", help="only this action, e.g. key.encrypt")
    listing.add_argument("--since", help="only records at or after this ISO 8601 time")
    listing.add_argument("--limit", type=int, default=100, help="at most this many records")
    listing.add_argument("--order", choices=["desc", "asc"], default="desc", help="desc: newest first")
    _sub(audit, "verify", cmd.audit_verify, "verify the audit hash chain (exit 1 when broken)")


def completion(args: argparse.Namespace) -> int:
    """Print the completion hook of ``args.shell``; needs no service."""
    sys.stdout.write(_completion.script(args.shell))
    return 0


def _completion_command(group: Any) -> None:
    sub = group.add_parser("completion", help="print a shell completion script (bash, zsh, fish)")
    sub.add_argument("shell", choices=_completion.SHELLS, help="the shell")
    sub.set_defaults(standalone=completion)


def parser() -> argparse.ArgumentParser:
    """kmctl's argument parser."""
    root = Parser(prog="kmctl", description="Administer and use a keymanager service.")
    root.add_argument("--version", action="version", version=f"kmctl {__version__} (keymanager-sdk)")
    _common(root)
    root.set_defaults(output="table", query=None, standalone=None)
    group = root.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    _keys(group)
    _principals(group)
    _access_keys(group)
    _fields(group)
    _macs_and_tokens(group)
    _audit(group)
    _approvals_commands(group)
    _objects_commands(group)
    _completion_command(group)
    return root
