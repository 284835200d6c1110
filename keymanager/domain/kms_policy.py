"""Key policies in IAM's words: the document GetKeyPolicy shows, and what PutKeyPolicy accepts.

A key's policy is its native :class:`~keymanager.domain.policy.Policy`; the AWS KMS API only
spells it as an IAM-style document. :func:`policy_document` writes one statement per native
operation that names principals; :func:`parse_document` reads a document back, accepting it
only when every statement translates *exactly* into the native policy — otherwise it raises
``MalformedPolicyDocumentException`` naming the statement, so a policy is never stored that
would not be enforced as written. Exactly means:

- ``Effect`` ``Allow`` (the native policy has no deny), ``Resource`` ``"*"`` (a key policy is
  about its key), no ``NotAction``/``NotPrincipal``/``NotResource``;
- ``Principal`` ``{"AWS": …}`` of ``arn:<partition>:iam::<account>:user/<name>`` ARNs of this
  service's account, in the request's partition (the caller checks that each ``<name>`` is an
  existing principal);
- ``Action``: whole groups of :data:`POLICY_ACTIONS`, since a native operation grants all the
  actions of its group (``encrypt`` allows Encrypt *and* ReEncryptTo: a statement allowing
  only ``kms:Encrypt`` would be enforced as more than it says); ``kms:GenerateDataKey*``
  stands for what it matches in IAM (the data key and the data key pair groups),
  ``kms:GenerateDataKeyPair*`` for its group; actions are compared without case, as IAM does;
- ``Condition``: none, or the validity window ``DateGreaterThan``/``DateLessThan`` on
  ``aws:CurrentTime``, the same on every statement (the native window is one per key).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from keymanager.domain import strict_json
from keymanager.domain.kms import KmsError
from keymanager.domain.policy import Operation, Policy

MAX_POLICY_CHARS = 32768
POLICY_ACTIONS = {
    "encrypt": ["kms:Encrypt", "kms:ReEncryptTo"],
    "decrypt": ["kms:Decrypt", "kms:ReEncryptFrom"],
    "generate_data_key": ["kms:GenerateDataKey", "kms:GenerateDataKeyWithoutPlaintext"],
    "reencrypt": ["keymanager:ReEncrypt"],
    "mac": ["kms:GenerateMac", "kms:VerifyMac"],
    "sign": ["kms:Sign"],
    "verify": ["kms:Verify"],
    "get_public_key": ["kms:GetPublicKey"],
    "derive_shared_secret": ["kms:DeriveSharedSecret"],
    "generate_data_key_pair": ["kms:GenerateDataKeyPair", "kms:GenerateDataKeyPairWithoutPlaintext"],
}
"""What each native policy operation allows, in IAM's words (``reencrypt`` is the REST API's own)."""
_WILDCARDS = {
    "kms:generatedatakey*": ("generate_data_key", "generate_data_key_pair"),
    "kms:generatedatakeypair*": ("generate_data_key_pair",),
}
"""What IAM's wildcards match: ``kms:GenerateDataKey*`` the data key pairs' actions too."""
_GROUP_OF = {action.lower(): operation for operation, actions in POLICY_ACTIONS.items() for action in actions}
_STATEMENT_FIELDS = frozenset({"Sid", "Effect", "Principal", "Action", "Resource", "Condition"})
_WINDOW = {"DateGreaterThan": "not_before", "DateLessThan": "not_after"}


def policy_document(policy: Mapping[str, Any], account: str, partition: str = "aws") -> dict[str, Any]:
    """An IAM-style key policy generated from a native policy (``Policy.to_dict()``): one statement
    per operation that names principals, principals as ``arn:<partition>:iam::<account>:user/<name>``,
    ``not_before``/``not_after`` as ``aws:CurrentTime`` conditions."""
    condition: dict[str, Any] = {}
    if policy.get("not_before"):
        condition["DateGreaterThan"] = {"aws:CurrentTime": policy["not_before"]}
    if policy.get("not_after"):
        condition["DateLessThan"] = {"aws:CurrentTime": policy["not_after"]}
    statements = []
    for operation, actions in POLICY_ACTIONS.items():
        names = policy.get(operation) or []
        if not names:
            continue
        statement: dict[str, Any] = {
            "Sid": operation,
            "Effect": "Allow",
            "Principal": {"AWS": [user_arn(name, account, partition) for name in names]},
            "Action": actions,
            "Resource": "*",
        }
        if condition:
            statement["Condition"] = condition
        statements.append(statement)
    return {"Version": "2012-10-17", "Id": "keymanager-native-policy", "Statement": statements}


def user_arn(name: str, account: str, partition: str = "aws") -> str:
    return f"arn:{partition}:iam::{account}:user/{name}"


@dataclass(frozen=True)
class PolicyDraft:
    """A document translated: the native policy (principals by name) and, per principal name,
    the statement that first names it (to name the statement when the principal does not exist)."""

    policy: Policy
    named_in: Mapping[str, str]


def parse_document(text: str, account: str, partition: str = "aws") -> PolicyDraft:
    """The native policy ``text`` (a PutKeyPolicy ``Policy``) translates into exactly; else
    ``MalformedPolicyDocumentException`` naming the statement (see the module docstring)."""
    statements = _statements(text)
    grants: dict[Operation, set[str]] = {}
    named_in: dict[str, str] = {}
    windows: list[tuple[str, dict[str, datetime]]] = []
    for number, statement in enumerate(statements, start=1):
        label = _label(number, statement)
        names, operations, window = _statement(label, statement, user_arn("", account, partition))
        for operation in operations:
            grants.setdefault(operation, set()).update(names)
        for name in names:
            named_in.setdefault(name, label)
        windows.append((label, window))
    window = _one_window(windows)
    policy = Policy(
        grants={operation: frozenset(names) for operation, names in grants.items()},
        not_before=window.get("not_before"),
        not_after=window.get("not_after"),
    )
    return PolicyDraft(policy, named_in)


def _statements(text: str) -> list[Any]:
    """The statements of a policy document (one statement alone counts as a list of one); else
    ``ValidationException`` (too long) or ``MalformedPolicyDocumentException``."""
    if len(text) > MAX_POLICY_CHARS:
        raise KmsError("ValidationException", f"Policy is limited to {MAX_POLICY_CHARS} characters")
    try:
        document = strict_json.loads(text)
    except strict_json.DuplicateKey as exc:
        raise _malformed(str(exc)) from None
    except ValueError:
        raise _malformed("the policy is not valid JSON") from None
    if not isinstance(document, dict) or set(document) - {"Version", "Id", "Statement"}:
        raise _malformed("a policy is an object of Version, Id and Statement")
    if document.get("Version", "2012-10-17") != "2012-10-17":
        raise _malformed("Version must be 2012-10-17")
    statements = document.get("Statement", [])
    if isinstance(statements, dict):
        statements = [statements]
    if not isinstance(statements, list):
        raise _malformed("Statement must be a statement or a list of statements")
    return statements


def _one_window(windows: list[tuple[str, dict[str, datetime]]]) -> dict[str, datetime]:
    """The one validity window every statement (``(label, window)``) carries; else malformed."""
    if any(window != windows[0][1] for _, window in windows):
        label = next(label for label, window in windows if window != windows[0][1])
        raise _malformed(f"{label}: every statement must carry the same aws:CurrentTime window (one per key)")
    window = windows[0][1] if windows else {}
    if "not_before" in window and "not_after" in window and window["not_before"] >= window["not_after"]:
        raise _malformed("the DateGreaterThan time must be earlier than the DateLessThan time")
    return window


def _statement(label: str, statement: Any, prefix: str) -> tuple[set[str], set[Operation], dict[str, datetime]]:
    """Principal names (``prefix`` + name: the ARNs of this service's users), native operations and
    validity window of one statement."""
    if not isinstance(statement, dict):
        raise _malformed(f"{label} is not an object")
    unknown = sorted(set(statement) - _STATEMENT_FIELDS)
    if unknown:
        raise _malformed(f"{label}: {', '.join(unknown)} cannot be expressed in a key policy here")
    if statement.get("Effect") != "Allow":
        raise _malformed(f"{label}: only Effect Allow can be expressed (a native policy denies what it does not grant)")
    if _strings(statement.get("Resource")) != ["*"]:
        raise _malformed(f'{label}: Resource must be "*" (the key itself)')
    principal = statement.get("Principal")
    if not isinstance(principal, dict) or set(principal) != {"AWS"} or not _strings(principal["AWS"]):
        raise _malformed(f'{label}: Principal must be {{"AWS": [{prefix}<name>, …]}}')
    names = set()
    for arn in _strings(principal["AWS"]) or []:
        name = arn.removeprefix(prefix)
        if not arn.startswith(prefix) or not 1 <= len(name) <= 128:
            raise _malformed(f"{label}: principal {arn[:256]} is not a user of this account ({prefix}<name>)")
        names.add(name)
    return names, _operations(label, statement.get("Action")), _window(label, statement.get("Condition"))


def _operations(label: str, action: Any) -> set[Operation]:
    actions = _strings(action)
    if not actions:
        raise _malformed(f"{label}: Action must name at least one action")
    operations: set[str] = set()
    given: set[str] = set()
    for name in actions:
        lowered = name.lower()
        if lowered in _WILDCARDS:
            matched = _WILDCARDS[lowered]
            given.update(a.lower() for operation in matched for a in POLICY_ACTIONS[operation])
        elif lowered in _GROUP_OF:
            matched = (_GROUP_OF[lowered],)
            given.add(lowered)
        else:
            raise _malformed(f"{label}: action {name[:128]} has no native equivalent")
        operations.update(matched)
    for operation in sorted(operations):
        missing = [a for a in POLICY_ACTIONS[operation] if a.lower() not in given]
        if missing:
            raise _malformed(
                f"{label}: the native operation {operation} allows {', '.join(POLICY_ACTIONS[operation])} together; "
                f"add {', '.join(missing)} or remove the others"
            )
    return {Operation(operation) for operation in operations}


def _window(label: str, condition: Any) -> dict[str, datetime]:
    if condition is None:
        return {}
    if not isinstance(condition, dict) or not condition or set(condition) - set(_WINDOW):
        raise _malformed(f"{label}: only DateGreaterThan/DateLessThan on aws:CurrentTime can be expressed")
    window = {}
    for operator, bound in condition.items():
        moment_text = bound.get("aws:CurrentTime") if isinstance(bound, dict) else None
        if not isinstance(bound, dict) or set(bound) != {"aws:CurrentTime"} or not isinstance(moment_text, str):
            raise _malformed(f"{label}: {operator} must hold one aws:CurrentTime time")
        try:
            parsed = Policy.from_dict({_WINDOW[operator]: moment_text})
        except ValueError:
            raise _malformed(f"{label}: {operator} is not an ISO 8601 time") from None
        moment = parsed.not_before or parsed.not_after
        assert moment is not None
        window[_WINDOW[operator]] = moment
    return window


def _strings(value: Any) -> list[str] | None:
    """A string or a list of strings, as a list; None for anything else."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def _label(number: int, statement: Any) -> str:
    sid = statement.get("Sid") if isinstance(statement, dict) else None
    return f"statement {number}" + (f" (Sid {str(sid)[:64]!r})" if sid is not None else "")


def _malformed(message: str) -> KmsError:
    return KmsError("MalformedPolicyDocumentException", message)
