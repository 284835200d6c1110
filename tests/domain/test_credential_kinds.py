"""The table of credential kinds: one row per kind, what the services, the store and the throttle's
index read instead of knowing the kinds."""

from __future__ import annotations

from datetime import UTC, datetime

from keymanager.domain import credential_kinds as ck
from keymanager.domain import xks
from keymanager.domain.credentials import Credential, token_hash
from keymanager.domain.models import Principal, Role
from keymanager.services.authorization import DOORS, admits
from keymanager.services.credential_index import ACCESS_KEY, SUBJECT, TOKEN


def test_every_kind_is_a_row_with_a_unique_name() -> None:
    names = [kind.name for kind in ck.KINDS]
    assert names == ["bearer_token", "certificate_subject", "sigv4_access_key", "xks_uri_prefix", "approle"]


def test_the_throttle_index_prefixes_come_from_the_table() -> None:
    assert (TOKEN, SUBJECT, ACCESS_KEY) == ("t:", "s:", "a:")
    assert {kind.index_prefix for kind in ck.KINDS} == {"t:", "s:", "a:", None}
    assert ck.XKS_URI_PREFIX.index_prefix is None  # never presented alone: the access key is indexed
    assert ck.APPROLE.index_prefix == ck.BEARER_TOKEN.index_prefix  # secret ids' hashes among the tokens
    assert Credential.of_token("kmt_x").cache_name == "t:" + token_hash("kmt_x")
    assert Credential(subject="CN=a").cache_name == "s:CN=a"


def test_only_the_certificate_subject_and_the_xks_prefix_are_rows_of_the_credentials_table() -> None:
    assert ck.stored_by_name() == (ck.CERTIFICATE_SUBJECT, ck.XKS_URI_PREFIX)
    assert {kind.storage for kind in ck.KINDS} == set(ck.Storage)


def test_rules_and_facts() -> None:
    prefix = ck.XKS_URI_PREFIX
    assert prefix.rule == xks.PREFIX_RULE and prefix.valid("keystores/prod") and not prefix.valid("/lead")
    assert prefix.facts["region"].rule == xks.REGION_RULE and prefix.facts["region"].valid("eu-west-1")
    assert not prefix.facts["region"].valid("Mars")
    subject = ck.CERTIFICATE_SUBJECT
    assert subject.valid("CN=a") and subject.valid("x" * 1024) and not subject.valid("x" * 1025)
    assert not subject.valid("")
    assert ck.SIGV4_ACCESS_KEY.valid("KMAKAAAAAAAAAAAAAAAA") and ck.SIGV4_ACCESS_KEY.valid("AKIAI2SFODNN7EXAMPLE")
    assert not ck.SIGV4_ACCESS_KEY.valid("akia")


def test_who_may_hold_each_kind_follows_the_rights_tables_doors() -> None:
    def may_hold(kind: ck.CredentialKind, role: Role) -> bool:
        return any(admits(door, role) for door in kind.admission)

    assert [role for role in DOORS if may_hold(ck.XKS_URI_PREFIX, role)] == [Role.XKS]
    assert [role for role in DOORS if not may_hold(ck.CERTIFICATE_SUBJECT, role)] == [Role.XKS]
    assert all(may_hold(ck.SIGV4_ACCESS_KEY, role) for role in DOORS)
    assert [kind.name for kind in ck.KINDS if kind.required] == ["xks_uri_prefix"]
    assert all(kind.refused for kind in ck.stored_by_name())  # what a role that may not hold it is told


def test_a_principals_credentials_by_kind_and_back() -> None:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    store = Principal("a" * 32, "aws", Role.XKS, moment, xks_uri_prefix="ks/prod", xks_region="eu-west-1")
    held = ck.held_by(store)
    assert held == {"xks_uri_prefix": ck.Held("ks/prod", {"region": "eu-west-1"})}
    assert ck.principal_fields(held) == {"cert_subject": None, "xks_uri_prefix": "ks/prod", "xks_region": "eu-west-1"}
    app = Principal("b" * 32, "billing", Role.APP, moment, cert_subject="CN=billing")
    assert ck.held_by(app) == {"certificate_subject": ck.Held("CN=billing")}
    assert ck.principal_fields(ck.held_by(app))["cert_subject"] == "CN=billing"
    assert ck.held_by(Principal("c" * 32, "plain", Role.APP, moment)) == {}
    assert ck.principal_fields({}) == {"cert_subject": None, "xks_uri_prefix": None, "xks_region": None}
