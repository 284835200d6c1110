"""Identity as Vault clients present it: AppRole credentials, their logins, and ``token/lookup-self``.

An AppRole credential is a credential kind of a principal (``db/transit.py``): an admin makes one
through REST (``POST /v1/principals/{name}/approle``), kmctl or the SDK, and is shown its ``secret_id``
once (only its SHA-256 is kept). ``POST /v1/auth/approle/login`` with the ``role_id`` and ``secret_id``
gives a client token (``hvs.`` and 256 random bits; only its hash is kept) for that principal, valid for
``KM_TRANSIT_TOKEN_TTL_SECONDS``; a principal keeps at most :data:`MAX_CLIENT_TOKENS` (its oldest go
first). Client tokens authenticate wherever a bearer token does, through the same metadata cache
(``services/snapshot.py``): each login, each deleted credential and each sweep of expired tokens is a
change, so every worker and replica sees it at its next check.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from keymanager.db.transit import ClientToken, Login, TransitStore
from keymanager.domain.audit import AuditEntry
from keymanager.domain.credential_kinds import MAX_ROLE_ID_CHARS
from keymanager.domain.credentials import token_hash
from keymanager.domain.models import Door, Principal
from keymanager.errors import InvalidRequest, NotFound, Unauthenticated
from keymanager.services.authorization import admits

MAX_CLIENT_TOKENS = 32
"""Client tokens a principal keeps at once (a login past it evicts the oldest)."""
TOKEN_PREFIX = "hvs."  # noqa: S105 (a prefix, not a secret)
MAX_SECRET_ID_CHARS = 256


@dataclass(frozen=True)
class AppRoleCreated:
    role_id: str
    secret_id: str
    created_at: datetime


@dataclass(frozen=True)
class LoggedIn:
    principal: Principal
    token: str
    expires_at: datetime


class AppRoles:
    """AppRole credentials and logins (see the module docstring); blocking: call off the event loop."""

    def __init__(
        self,
        store: TransitStore,
        principal: Callable[[str], Principal | None],
        *,
        ttl_seconds: int,
        max_tokens: int = MAX_CLIENT_TOKENS,
    ) -> None:
        """``principal``: the principal of a name, if any (``Store.principal_by_name``)."""
        self._store = store
        self._principal = principal
        self._ttl = timedelta(seconds=ttl_seconds)
        self._max_tokens = max_tokens

    @property
    def ttl_seconds(self) -> int:
        return int(self._ttl.total_seconds())

    def create(self, principal_name: str, *, record: AuditEntry | None = None) -> AppRoleCreated:
        """A new AppRole credential of ``principal_name``: its ``secret_id`` is shown this once. NotFound for
        an unknown principal, InvalidRequest for a key store (it authenticates with SigV4 only), Conflict past
        the bound per principal."""
        owner = self._principal(principal_name)
        if owner is None:
            raise NotFound("principal not found")
        if not admits(Door.REST, owner.role):
            raise InvalidRequest("a key store (role xks) authenticates with SigV4 only: it has no AppRole credentials")
        role_id, secret_id = str(uuid.uuid4()), secrets.token_urlsafe(32)
        _, created = self._store.add_approle(principal_name, role_id, token_hash(secret_id), record=record)
        return AppRoleCreated(role_id, secret_id, created)

    def list(self, principal_name: str) -> list[tuple[str, datetime]]:
        """The role ids and creation times of the principal's credentials; NotFound for an unknown principal."""
        found = self._store.approles_of(principal_name)
        if found is None:
            raise NotFound("principal not found")
        return found

    def delete(self, principal_name: str, role_id: str, *, record: AuditEntry | None = None) -> None:
        """Delete the credential and every client token its logins made; NotFound when there is none."""
        if not self._store.delete_approle(principal_name, role_id, record=record):
            raise NotFound("AppRole credential not found")

    def login(self, role_id: str, secret_id: str, *, record: AuditEntry | None) -> LoggedIn:
        """A new client token for the principal holding the credential; Unauthenticated for any other pair
        (nothing is written then)."""
        if not role_id or not secret_id or len(role_id) > MAX_ROLE_ID_CHARS or len(secret_id) > MAX_SECRET_ID_CHARS:
            raise Unauthenticated()
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = datetime.now(UTC)
        login = Login(role_id, token_hash(secret_id), token_hash(token), now, now + self._ttl, self._max_tokens)
        principal = self._store.login(login, record=record)
        if principal is None or not admits(Door.REST, principal.role):
            raise Unauthenticated()
        return LoggedIn(principal, token, login.expires_at)

    def client_token(self, hashed: str) -> ClientToken | None:
        """What is known of the live client token whose hash is ``hashed`` (None: not one, or expired)."""
        return self._store.client_token(hashed)

    def sweep(self) -> int:
        """Remove the expired client tokens (scheduled work); how many."""
        return self._store.sweep_expired()


def login_answer(logged_in: LoggedIn, ttl_seconds: int) -> dict[str, Any]:
    """The ``auth`` block of Vault's login answer."""
    policies = ["default", logged_in.principal.role.value]
    return {
        "client_token": logged_in.token,
        "accessor": "",
        "policies": policies,
        "token_policies": policies,
        "metadata": {"role_name": logged_in.principal.name},
        "lease_duration": ttl_seconds,
        "renewable": False,
        "entity_id": "",
        "token_type": "service",
        "orphan": True,
        "num_uses": 0,
    }


def lookup_answer(principal: Principal, token: ClientToken | None, now: datetime) -> dict[str, Any]:
    """Vault's ``token/lookup-self`` data for ``principal`` (its AppRole client token when ``token``)."""
    policies = ["default", principal.role.value]
    shown: dict[str, Any] = {
        "accessor": "",
        "display_name": principal.name,
        "entity_id": "",
        "explicit_max_ttl": 0,
        "meta": {"principal": principal.name},
        "num_uses": 0,
        "orphan": True,
        "policies": policies,
        "renewable": False,
        "type": "service",
    }
    if token is None:  # a principal's own bearer token: it never expires
        shown.update(
            creation_time=int(principal.created_at.timestamp()),
            creation_ttl=0,
            expire_time=None,
            issue_time=principal.created_at.isoformat(),
            path="auth/token/create",
            ttl=0,
        )
        return shown
    shown.update(
        creation_time=int(token.created_at.timestamp()),
        creation_ttl=int((token.expires_at - token.created_at).total_seconds()),
        expire_time=token.expires_at.isoformat(),
        issue_time=token.created_at.isoformat(),
        path="auth/approle/login",
        ttl=max(0, int((token.expires_at - now).total_seconds())),
        meta={"role_name": principal.name},
    )
    return shown
