"""The AWS KMS API's key policies, tags and grants: GetKeyPolicy, PutKeyPolicy, ListKeyPolicies,
TagResource, UntagResource, ListResourceTags, ListGrants. Every one needs the right to manage keys
(``services/authorization.py``), checked before the door calls them.

A key's policy is its native policy (:mod:`keymanager.domain.kms_policy` spells it in IAM's
words and reads it back, exactly or not at all), stored through ``KeyService.update`` as
``PATCH /v1/keys/{key}`` does. Tags are stored beside the key (``KmsStore``). There are no
grants: ListGrants answers an empty list for a key that exists.

Blocking (database): the API door runs these on a worker thread; changes are recorded with
their audit entry in the same transaction.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from keymanager.db.kms import KmsStore
from keymanager.domain import kms, kms_fields, kms_policy, kms_tags
from keymanager.domain.audit import AuditEntry
from keymanager.domain.models import Key, KeyState
from keymanager.domain.policy import Policy
from keymanager.doors.kms.call import Call, page
from keymanager.services.keys import KeyService, Unnameable

_POLICY_NAME = "default"


class KmsKeyResources:
    """Policies, tags and grants of keys (the KMS door's tables name its handlers: ``KmsKeys``)."""

    def __init__(self, keys: KeyService, store: KmsStore) -> None:
        self._keys = keys
        self._store = store

    # -- policies ----------------------------------------------------------------------------
    def get_key_policy(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        """The native policy as an IAM-style document (``PolicyName`` ``default``, the only one)."""
        key = self.admin_key(call)
        _policy_name(call, required=False)
        document = kms_policy.policy_document(self._keys.named([key.policy])[0].to_dict(), call.account, call.partition)
        return {"Policy": json.dumps(document, separators=(",", ":")), "PolicyName": _POLICY_NAME}

    def put_key_policy(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        """Replace the native policy with the one ``Policy`` translates into exactly (else
        MalformedPolicyDocumentException naming the statement)."""
        key = self.admin_key(call)
        _policy_name(call, required=True)
        lockout = call.params.get("BypassPolicyLockoutSafetyCheck")
        if lockout is not None and not isinstance(lockout, bool):
            raise kms.KmsError("SerializationException", "BypassPolicyLockoutSafetyCheck must be a boolean")
        text = kms_fields.string(call.params, "Policy", required=True, limit=kms_policy.MAX_POLICY_CHARS)
        assert text is not None
        self._keys.update(key.id, policy=self.policy_of(text, call), record=entry)
        return {}

    def list_key_policies(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        self.admin_key(call)
        names, rest = page(call.params, [_POLICY_NAME], most=1000)
        return {"PolicyNames": names, **rest}

    def policy_of(self, text: str, call: Call) -> Policy:
        """The native policy (by principal name) of a document of ``call``; MalformedPolicyDocumentException
        naming the statement that cannot be translated or names a principal that cannot be named."""
        draft = kms_policy.parse_document(text, call.account, call.partition)
        refused = self._keys.unnameable(draft.named_in.keys())
        for name, label in draft.named_in.items():
            if refused.get(name) is Unnameable.MISSING:
                raise kms.KmsError("MalformedPolicyDocumentException", f"{label}: no principal is named {name[:128]}")
            if refused.get(name) is Unnameable.AUDITOR:
                raise kms.KmsError(
                    "MalformedPolicyDocumentException", f"{label}: the auditor {name} cannot be named in a key policy"
                )
        return draft.policy

    # -- tags --------------------------------------------------------------------------------
    def tag_resource(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        key = self._taggable(call)
        tags = kms_tags.tags(call.params)
        if not tags:
            raise kms.KmsError("ValidationException", "1 validation error detected: Tags must not be empty")
        self.add_tags(key, tags, replace(entry, key_id=key.id, details={"tag_keys": sorted(tags)}))
        return {}

    def add_tags(self, key: Key, tags: dict[str, str], entry: AuditEntry | None) -> None:
        """Store ``tags`` with ``key``; TagException when it would hold more than AWS allows."""
        if not self._store.tag_key(key.id, tags, limit=kms_tags.MAX_TAGS, record=entry):
            raise kms.KmsError("TagException", f"a key holds at most {kms_tags.MAX_TAGS} tags")

    def untag_resource(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        key = self._taggable(call)
        tag_keys = call.params.get("TagKeys")
        if not isinstance(tag_keys, list) or not all(isinstance(k, str) for k in tag_keys):
            raise kms.KmsError("SerializationException", "TagKeys must be a list of strings")
        if not tag_keys:
            raise kms.KmsError("ValidationException", "1 validation error detected: TagKeys must not be empty")
        for tag_key in tag_keys:
            kms_tags.check_tag_key(tag_key)
        self._store.untag_key(
            key.id, tag_keys, record=replace(entry, key_id=key.id, details={"tag_keys": sorted(tag_keys)})
        )
        return {}

    def list_resource_tags(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        key = self.admin_key(call)
        tags, rest = page(call.params, sorted(self._store.tags_of(key.id).items()), most=50, default=50)
        return {"Tags": [{"TagKey": k, "TagValue": v} for k, v in tags], **rest}

    # -- grants ------------------------------------------------------------------------------
    def list_grants(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        """No grants exist here: an empty list, for a key that exists."""
        self.admin_key(call)
        page(call.params, [], most=100, default=50)
        return {"Grants": [], "Truncated": False}

    # -- steps -------------------------------------------------------------------------------
    def admin_key(self, call: Call) -> Key:
        """The key ``KeyId`` names (the door authorized its caller to manage keys); KeyNotFound."""
        key = self._keys.find(call.ref())
        call.noted(key.id)
        return key

    def _taggable(self, call: Call) -> Key:
        key = self.admin_key(call)
        if key.state in (KeyState.PENDING_DELETION, KeyState.DESTROYED):
            raise kms.KmsError("KMSInvalidStateException", f"a key in state {key.state.value} cannot be tagged")
        return key


def _policy_name(call: Call, *, required: bool) -> None:
    name = kms_fields.string(call.params, "PolicyName", required=required, limit=128) or _POLICY_NAME
    if name != _POLICY_NAME:
        raise kms.KmsError("NotFoundException", f"the only key policy is named {_POLICY_NAME!r}")
