"""The bodies of the principal routes: creating a principal, and a principal as the API shows it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from keymanager.api.schemas import Body
from keymanager.domain.models import Principal, Role


class PrincipalCreate(Body):
    name: str = Field(min_length=1, max_length=64, description="Letters, digits, '_', '.', '-'; starts with a letter.")
    role: Annotated[Role, Field(strict=False)]
    cert_subject: str | None = Field(
        default=None,
        max_length=1024,
        description="RFC 4514 subject of a TLS client certificate that authenticates this principal, "
        "e.g. 'CN=billing,O=keymanager'.",
    )
    xks_uri_prefix: str | None = Field(
        default=None,
        max_length=128,
        description="Role xks only (an AWS External Key Store): the path prefix of its XKS requests, "
        "e.g. 'keystores/prod'; AWS KMS's XksProxyUriPath is then '/keystores/prod/kms/xks/v1'.",
    )
    xks_region: str | None = Field(
        default=None,
        max_length=32,
        description="Role xks only: the AWS region of the key store (e.g. 'eu-west-1'); requests signed "
        "for another region are refused. Without it, any region's signature is accepted.",
    )
    create_keys: bool = Field(
        default=False,
        description="The principal may create keys it then owns (its own policy names it), as KMIP "
        "clients such as libmongocrypt do; not for roles xks and auditor. Admins need no such flag.",
    )
    key_store: bool = Field(
        default=False,
        description="A KMIP key-store client (vSphere, MySQL's keyring, pg_tde, NetApp): the AES keys it "
        "creates over KMIP are exportable to it, each Get audited; needs create_keys. docs/kmip.md.",
    )


class PrincipalOut(BaseModel):
    id: str
    name: str
    role: Role
    cert_subject: str | None
    created_at: datetime
    xks_uri_prefix: str | None = None
    xks_region: str | None = None
    create_keys: bool = False
    key_store: bool = False

    @classmethod
    def of(cls, principal: Principal) -> PrincipalOut:
        return cls(
            id=principal.id,
            name=principal.name,
            role=principal.role,
            cert_subject=principal.cert_subject,
            created_at=principal.created_at,
            xks_uri_prefix=principal.xks_uri_prefix,
            xks_region=principal.xks_region,
            create_keys=principal.create_keys,
            key_store=principal.key_store,
        )


class PrincipalCreated(PrincipalOut):
    token: str = Field(description="Bearer token; shown only in this response.")
