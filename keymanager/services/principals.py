"""Principals: creation with a one-time token, listing, deletion, authentication."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from keymanager.db import Store
from keymanager.domain.approvals import Guarded, Proposal
from keymanager.domain.audit import AuditEntry
from keymanager.domain.credential_kinds import CERTIFICATE_SUBJECT, XKS_URI_PREFIX, CredentialKind
from keymanager.domain.credentials import Credential, new_id, new_token, token_hash
from keymanager.domain.models import Principal, Role
from keymanager.domain.names import PRINCIPAL_NAME_RULE, is_principal_name
from keymanager.errors import Conflict, InvalidRequest, NotFound, Unauthenticated
from keymanager.services.approvals import ApprovalService, guarded
from keymanager.services.authorization import Right, admits, grantable, holds


@dataclass(frozen=True)
class NewPrincipal:
    principal: Principal
    token: str
    """The bearer token: returned once, stored only as a hash."""


class PrincipalService:
    """Creates, lists, deletes and authenticates principals."""

    def __init__(self, store: Store, *, approvals: ApprovalService | None = None) -> None:
        self._store = store
        self._approvals = approvals

    def create(
        self,
        name: str,
        role: Role,
        cert_subject: str | None = None,
        *,
        xks_uri_prefix: str | None = None,
        xks_region: str | None = None,
        create_keys: bool = False,
        key_store: bool = False,
        record: AuditEntry | None = None,
    ) -> NewPrincipal:
        """Create a principal (committing ``record`` with it); InvalidRequest: a bad name, or a key store
        (role ``xks``) without a valid ``xks_uri_prefix`` or with an invalid ``xks_region`` (or either
        given to another role, or a certificate subject given to a key store); Conflict: a taken name,
        subject or prefix. ``create_keys``: the principal may create keys it then owns (KMIP clients
        do; ``services/authorization.py``); refused for a key store or an auditor. ``key_store``: the AES
        keys it creates over KMIP are exportable to it (``doors/kmip/keys.py``); needs ``create_keys``.

        A key store authenticates only through its access keys at the XKS door
        (``services/authorization.py`` ``admits``): its bearer token authenticates nothing."""
        if not is_principal_name(name):
            raise InvalidRequest(PRINCIPAL_NAME_RULE)
        given = [
            (XKS_URI_PREFIX, xks_uri_prefix, {"region": xks_region}),
            (CERTIFICATE_SUBJECT, cert_subject or None, {}),
        ]
        _check_credentials(role, given)
        if create_keys and not grantable(role, Right.CREATE_OWNED):
            raise InvalidRequest(f"a principal of role {role.value} cannot be given create_keys")
        if key_store and not create_keys:
            raise InvalidRequest("key_store needs create_keys: a key-store client creates the keys it then gets")
        token = new_token()
        principal = Principal(
            id=new_id(),
            name=name,
            role=role,
            created_at=datetime.now(UTC),
            cert_subject=cert_subject or None,
            xks_uri_prefix=xks_uri_prefix,
            xks_region=xks_region,
            create_keys=create_keys,
            key_store=key_store,
        )
        if holds(role, Right.MANAGE):
            arguments = {"role": role.value, "cert_subject": cert_subject or None, "create_keys": create_keys}
            with guarded(self._approvals, Proposal((Guarded.PRINCIPAL_ADMIN,), name, arguments), record):
                self._store.create_principal(principal, token_hash(token), record=record)
        else:
            self._store.create_principal(principal, token_hash(token), record=record)
        return NewPrincipal(principal=principal, token=token)

    def list(self) -> list[Principal]:
        """Every principal, ordered by name."""
        return self._store.list_principals()

    def delete(self, name: str, *, acting: Principal, record: AuditEntry | None = None) -> None:
        """Delete a principal (its token stops working at once); an admin cannot delete itself. Guarded
        as ``principal.remove``."""
        if name == acting.name:
            raise Conflict("a principal cannot delete itself")
        if self._store.principal_by_name(name) is None:
            raise NotFound("principal not found")
        with guarded(self._approvals, Proposal((Guarded.PRINCIPAL_REMOVE,), name), record):
            if not self._store.delete_principal(name, record=record):
                raise NotFound("principal not found")

    def authenticate(self, credential: Credential) -> Principal:
        """The principal holding ``credential`` (a token's hash or a certificate subject); Unauthenticated otherwise.

        The store is searched by the token's SHA-256, never by the token, so the time a
        look-up takes says nothing about how much of a guessed token was right.
        """
        found = None
        if credential.token_hash is not None:
            found = self._store.principal_by_token_hash(credential.token_hash)
        elif credential.subject is not None:
            found = self._store.principal_by_cert_subject(credential.subject)
        if found is None:
            raise Unauthenticated()
        return found


def _check_credentials(
    role: Role, given: Sequence[tuple[CredentialKind, str | None, Mapping[str, str | None]]]
) -> None:
    """InvalidRequest unless each credential ``given`` (its kind, its name or None, its facts) may be
    held by ``role`` (an ``admission`` door of its kind admits the role; else the kind's ``refused``),
    follows its kind's rule and its facts theirs, and a role that must hold a kind (``required``) holds it."""
    for kind, name, facts in given:
        if not any(admits(door, role) for door in kind.admission):
            if name is not None or any(value is not None for value in facts.values()):
                raise InvalidRequest(kind.refused)
            continue
        if name is None:
            if kind.required:
                raise InvalidRequest(kind.rule)
            continue
        if not kind.valid(name):
            raise InvalidRequest(kind.rule)
        for fact, value in facts.items():
            if value is not None and not kind.facts[fact].valid(value):
                raise InvalidRequest(kind.facts[fact].rule)
