"""``KeyManager`` against a real service over TLS: every method, results and error mapping.

Tests of endpoints the service is still gaining say so in their docstring ("waits on …").
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from keymanager_sdk import (
    AuditRecord,
    Conflict,
    DecryptionFailed,
    Encrypted,
    Forbidden,
    Key,
    KeyDisabled,
    KeyManager,
    KeyNotFound,
    Mac,
    Policy,
    PreconditionFailed,
    TransportError,
    Unauthenticated,
    VersionBelowMinimum,
)

from tests.e2e.conftest import Server, keymanager
from tests.sdk.conftest import App, unique

CARD = "4111111111111111"
MakeKey = Callable[..., Key]


def test_health_and_ready(app: KeyManager) -> None:
    assert app.health().status == "ok"
    ready = app.ready()
    assert ready.ok and (ready.hsm, ready.database) == ("ok", "ok")


def test_principal_lifecycle(server: Server, admin: KeyManager) -> None:
    name = unique("sdk-p")
    created = admin.create_principal(name, "auditor")
    assert (created.name, created.role, created.cert_subject) == (name, "auditor", None)
    assert created.token and created.token not in repr(created)
    assert name in {p.name for p in admin.list_principals()}
    with pytest.raises(Conflict):
        admin.create_principal(name, "app")
    admin.delete_principal(name)
    assert name not in {p.name for p in admin.list_principals()}
    with KeyManager(server.url, token=created.token, ca=str(server.ca)) as gone, pytest.raises(Unauthenticated):
        gone.list_keys()


def test_key_lifecycle(admin: KeyManager, app: KeyManager, app_principal: App) -> None:
    name = unique("sdk-k")
    policy = Policy(encrypt=(app_principal.name,), decrypt=(app_principal.name,))
    key = admin.create_key(name, "AES_256_GCM", "for tests", policy, rotation_period_days=90)
    assert (key.name, key.algorithm, key.state, key.primary_version) == (name, "AES_256_GCM", "enabled", 1)
    assert key.policy.encrypt == (app_principal.name,) and key.rotation_period_days == 90
    assert admin.get_key(key.id) == admin.get_key(name)
    assert name in {k.name for k in admin.list_keys()} and name in {k.name for k in app.list_keys()}
    updated = admin.update_key(name, description="changed", policy={"encrypt": [app_principal.name]})
    assert updated.description == "changed" and updated.policy.decrypt == ()
    with pytest.raises(Conflict):
        admin.create_key(name)
    assert admin.disable_key(name).state == "disabled"
    with pytest.raises(KeyDisabled) as refused:
        app.encrypt(name, CARD)
    assert refused.value.status == 409 and refused.value.request_id
    assert admin.enable_key(name).state == "enabled"
    assert app.encrypt(name, CARD).startswith("km:1:")


def test_missing_key_and_forbidden(admin: KeyManager, app: KeyManager) -> None:
    with pytest.raises(KeyNotFound) as missing:
        app.get_key(unique("nothing"))
    assert (missing.value.status, missing.value.code) == (404, "key_not_found")
    someone_else = admin.create_principal(unique("someone-else"), "app").name
    other = admin.create_key(unique("sdk-other"), policy={"encrypt": [someone_else]})
    with pytest.raises(Forbidden):
        app.encrypt(other.name, CARD)


@pytest.mark.parametrize("algorithm", ["AES_256_CBC_HMAC_SHA256", "AES_256_GCM"])
def test_encrypt_decrypt(app: KeyManager, make_key: MakeKey, algorithm: str) -> None:
    key = make_key(algorithm)
    context = {"tenant": "42"}
    ciphertext = app.encrypt(key.name, CARD, context)
    assert app.decrypt(ciphertext, context) == CARD.encode()
    assert app.decrypt(ciphertext, context, key=key.id) == CARD.encode()
    assert app.decrypt(app.encrypt(key.name, b"\x00\xff")) == b"\x00\xff"
    with pytest.raises(DecryptionFailed) as failed:
        app.decrypt(ciphertext, {"tenant": "43"})
    assert failed.value.message == "decryption failed"
    result = app.encrypt_with_version(key.name, CARD)
    assert isinstance(result, Encrypted) and (result.key_id, result.key_version) == (key.id, 1)


def test_mtls_client_certificate(server: Server, admin: KeyManager, make_key: MakeKey, tmp_path: Path) -> None:
    name = unique("sdk-mtls")  # a certificate of its own: the session's server is shared (tests/conftest.py)
    made = keymanager("dev-cert", name, "--out", str(tmp_path), env=server.env, cwd=server.var_dir.parent)
    assert made.returncode == 0, made.stderr
    subject = next(line.split(":", 1)[1].strip() for line in made.stdout.splitlines() if line.startswith("subject:"))
    admin.create_principal(name, "app", cert_subject=subject)
    with KeyManager(
        server.url, ca=str(server.var_dir / "tls" / "ca.pem"), client_cert=str(tmp_path / f"client-{name}.pem"),
        client_key=str(tmp_path / f"client-{name}-key.pem"),
    ) as client:  # fmt: skip
        assert isinstance(client.list_keys(), list)


def test_unreachable_service_is_a_transport_error(server: Server) -> None:
    sleeps: list[float] = []
    with (
        KeyManager("https://127.0.0.1:9", ca=str(server.ca), sleep=sleeps.append) as client,
        pytest.raises(TransportError) as failed,
    ):
        client.health()
    assert failed.value.__cause__ is not None and len(sleeps) == 3


def test_rotate_and_min_decryption_version(admin: KeyManager, app: KeyManager, make_key: MakeKey) -> None:
    """Waits on POST /v1/keys/{key}/rotate."""
    key = make_key()
    old = app.encrypt(key.name, CARD)
    rotated = admin.rotate_key(key.name)
    assert rotated.primary_version == 2 and {v.version for v in rotated.versions} == {1, 2}
    assert app.encrypt_with_version(key.name, CARD).key_version == 2
    assert app.decrypt(old) == CARD.encode()
    assert admin.update_key(key.name, min_decryption_version=2).min_decryption_version == 2
    with pytest.raises((VersionBelowMinimum, DecryptionFailed)):
        app.decrypt(old)


def test_schedule_and_cancel_deletion(admin: KeyManager, make_key: MakeKey) -> None:
    """Waits on DELETE /v1/keys/{key}?pending_days=N and POST /v1/keys/{key}/cancel-deletion."""
    key = make_key()
    pending = admin.schedule_key_deletion(key.name, pending_days=30)
    assert pending.state == "pending_deletion" and pending.deletion_date is not None
    assert admin.cancel_key_deletion(key.name).state == "disabled"


def test_encrypt_many_and_decrypt_many(app: KeyManager, make_key: MakeKey) -> None:
    """Waits on POST /v1/keys/{key}/encrypt/batch and …/decrypt/batch. 1,500 items: two batches each way."""
    key = make_key()
    items = [f"card-{i}" for i in range(1500)]
    encrypted = app.encrypt_many(key.name, items, {"t": "1"})
    assert len(encrypted) == 1500 and all(isinstance(e, Encrypted) for e in encrypted)
    ciphertexts = [e.ciphertext for e in encrypted if isinstance(e, Encrypted)]
    ciphertexts[7] = ciphertexts[7][:-6] + ("AAAAAA" if not ciphertexts[7].endswith("AAAAAA") else "BBBBBB")
    decrypted = app.decrypt_many(key.name, ciphertexts, {"t": "1"})
    assert isinstance(decrypted[7], DecryptionFailed)
    assert [d for i, d in enumerate(decrypted) if i != 7] == [s.encode() for i, s in enumerate(items) if i != 7]


def test_generate_data_key(app: KeyManager, make_key: MakeKey) -> None:
    """Waits on POST /v1/keys/{key}/datakey."""
    key = make_key()
    context = {"file": "report.pdf"}
    data_key = app.generate_data_key(key.name, context=context)
    assert data_key.plaintext is not None and len(data_key.plaintext) == 32
    assert data_key.plaintext.hex() not in repr(data_key)
    assert app.decrypt(data_key.ciphertext, context) == data_key.plaintext
    short = app.generate_data_key(key.name, bits=128, include_plaintext=False)
    assert short.plaintext is None and len(app.decrypt(short.ciphertext)) == 16


def test_reencrypt(app: KeyManager, admin: KeyManager, make_key: MakeKey) -> None:
    """Waits on POST /v1/keys/{key}/reencrypt (and rotate)."""
    key, other = make_key(), make_key("AES_256_GCM")
    old = app.encrypt(key.name, CARD, {"a": "1"})
    admin.rotate_key(key.name)
    fresh = app.reencrypt(key.name, old, {"a": "1"})
    assert fresh.key_version == 2 and app.decrypt(fresh.ciphertext, {"a": "1"}) == CARD.encode()
    moved = app.reencrypt(key.name, old, {"a": "1"}, destination_key=other.name, destination_context={"b": "2"})
    assert moved.key_id == other.id and app.decrypt(moved.ciphertext, {"b": "2"}) == CARD.encode()


def test_mac_and_verify(app: KeyManager, make_key: MakeKey) -> None:
    """Waits on POST /v1/keys/{key}/mac and …/mac/verify."""
    key = make_key("HMAC_SHA256")
    first, second = app.mac(key.name, CARD), app.mac(key.name, CARD.encode())
    assert isinstance(first, Mac) and first.mac == second.mac and len(first.mac) == 32
    assert first.hex() == first.mac.hex() and app.mac(key.name, "4000000000000002").mac != first.mac
    assert app.verify_mac(key.name, CARD, first) and app.verify_mac(key.name, CARD, first.mac, key_version=1)
    assert not app.verify_mac(key.name, "4000000000000002", first)


def test_audit_list_and_verify(admin: KeyManager, app: KeyManager, make_key: MakeKey, app_principal: App) -> None:
    key = make_key()
    app.encrypt(key.name, CARD)
    records = admin.audit(key=key.name)
    assert records and all(isinstance(r, AuditRecord) for r in records)
    assert any(r.principal == app_principal.name and r.key_id == key.id for r in records)
    assert len(admin.audit(limit=2)) == 2
    assert [r.position for r in admin.audit(principal=app_principal.name, limit=3)] == sorted(
        r.position or 0 for r in admin.audit(principal=app_principal.name, limit=3)
    )
    verification = admin.verify_audit()
    assert verification.ok and verification.records >= len(records) and verification.first_broken_seq is None


def test_envelope_stream_and_files(app: KeyManager, make_key: MakeKey, tmp_path: Path) -> None:
    """Waits on POST /v1/keys/{key}/datakey."""
    key = make_key()
    blob = os.urandom(600_000)
    sealed = io.BytesIO()
    header = app.encrypt_stream(key.name, io.BytesIO(blob), sealed, {"doc": "1"}, segment_size=64 * 1024)
    assert header.segment_size == 64 * 1024 and dict(header.context or {}) == {"doc": "1"}
    out = io.BytesIO()
    app.decrypt_stream(io.BytesIO(sealed.getvalue()), out, {"doc": "1"})
    assert out.getvalue() == blob
    with pytest.raises(DecryptionFailed):
        app.decrypt_stream(io.BytesIO(sealed.getvalue()), io.BytesIO(), {"doc": "2"})
    (tmp_path / "in").write_bytes(blob)
    app.encrypt_file(key.name, tmp_path / "in", tmp_path / "in.kmev")
    app.decrypt_file(tmp_path / "in.kmev", tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == blob
    damaged = bytearray((tmp_path / "in.kmev").read_bytes())
    damaged[-1] ^= 1
    (tmp_path / "bad.kmev").write_bytes(bytes(damaged))
    with pytest.raises(DecryptionFailed):
        app.decrypt_file(tmp_path / "bad.kmev", tmp_path / "bad.out")
    assert not (tmp_path / "bad.out").exists()


def test_onboard_stream(app: KeyManager, make_key: MakeKey) -> None:
    """Waits on POST /v1/keys/{key}/encrypt/stream and …/decrypt/stream."""
    key = make_key("AES_256_GCM")
    blob = os.urandom(3 * 1024 * 1024 + 5)
    sealed = io.BytesIO()
    app.encrypt_stream_onboard(key.name, io.BytesIO(blob), sealed, {"doc": "1"})
    assert sealed.getvalue() != blob
    out = io.BytesIO()
    app.decrypt_stream_onboard(key.name, io.BytesIO(sealed.getvalue()), out, {"doc": "1"})
    assert out.getvalue() == blob
    with pytest.raises(DecryptionFailed):
        app.decrypt_stream_onboard(key.name, io.BytesIO(sealed.getvalue()), io.BytesIO(), {"doc": "2"})


def test_update_key_if_match(admin: KeyManager, make_key: MakeKey) -> None:
    key = make_key("AES_256_GCM")
    seen = admin.get_key(key.name)
    assert seen.etag and seen.etag == key.etag
    assert all(k.etag is None for k in admin.list_keys())  # a listing carries no per-key tag
    changed = admin.update_key(key.name, description="one", if_match=seen.etag)
    assert changed.description == "one" and changed.etag not in (None, seen.etag)
    with pytest.raises(PreconditionFailed) as refused:
        admin.update_key(key.name, description="two", if_match=seen.etag)
    assert (refused.value.status, refused.value.code) == (412, "precondition_failed") and refused.value.request_id
    assert admin.get_key(key.name).description == "one"
    assert admin.update_key(key.name, description="three", if_match="*").description == "three"


def test_whoami(admin: KeyManager, app_principal: App, server: Server) -> None:
    assert (admin.whoami().name, admin.whoami().role) == ("admin", "admin")
    with KeyManager(server.url, token=app_principal.token, ca=str(server.ca)) as app:
        assert (app.whoami().name, app.whoami().role) == (app_principal.name, "app")


@pytest.mark.parametrize("wrapping", ["RSAES_OAEP_SHA_1", "RSA_AES_KEY_WRAP_SHA_1"])
def test_import_key_material_in_one_call(admin: KeyManager, wrapping: str) -> None:
    name = unique("byok")
    created = admin.create_key(
        name, "AES_256_GCM", origin="external", policy={"encrypt": ["admin"], "decrypt": ["admin"]}
    )
    assert created.state == "pending_import"
    imported = admin.import_key_material(name, os.urandom(32), wrapping_algorithm=wrapping)
    assert (imported.state, imported.primary_version) == ("enabled", 1)
    assert admin.decrypt(admin.encrypt(name, b"card")) == b"card"
    two = unique("byok2")
    admin.create_key(two, origin="external", policy={"encrypt": ["admin"], "decrypt": ["admin"]})
    admin.import_key_material(two, os.urandom(32), os.urandom(32), wrapping_algorithm=wrapping)
    assert admin.decrypt(admin.encrypt(two, b"card")) == b"card"


def test_wrap_key_material_refuses_what_it_cannot_do() -> None:
    import keymanager_sdk as km

    with pytest.raises(ValueError, match="RSAES_OAEP_SHA_256"):
        km.wrap_key_material(b"", b"k" * 32, "RSAES_OAEP_SHA_256")
    with pytest.raises(TypeError, match="material must be str or bytes-like, not int"):
        KeyManager("https://km.test").import_key_material("k", 42)  # type: ignore[arg-type]


def test_key_specs_are_the_servers_table_and_the_sdk_lists_match(app: KeyManager) -> None:
    from keymanager_sdk import KeySpec, _spec_names

    specs = app.key_specs()
    assert all(isinstance(spec, KeySpec) for spec in specs)
    assert tuple(spec.name for spec in specs) == _spec_names.KEY_SPECS
    assert tuple(spec.name for spec in specs if spec.asymmetric) == _spec_names.KEY_PAIR_SPECS
    signing = {a for spec in specs for a in spec.usages.get("SIGN_VERIFY", ())}
    assert signing == set(_spec_names.SIGNING_ALGORITHMS)
    assert {u for spec in specs for u in spec.usages} == set(_spec_names.USAGES)


def test_key_specs_carry_how_the_doors_name_each_spec(app: KeyManager) -> None:
    from keymanager.domain.key_specs import SPECS

    specs = {spec.name: spec for spec in app.key_specs()}
    for algorithm, row in SPECS.items():
        spec = specs[algorithm.value]
        mode = None if row.mode is None else row.mode.value
        doors = (spec.mode, spec.transit_type, spec.xks_spec, spec.kmip_algorithm, spec.kmip_length)
        assert doors == (mode, row.transit_type, row.xks_spec, row.kmip_algorithm, row.kmip_length), algorithm
    gcm = specs["AES_256_GCM"]
    assert (gcm.mode, gcm.transit_type, gcm.xks_spec, gcm.kmip_algorithm, gcm.kmip_length) == (
        "GCM",
        "aes256-gcm96",
        "AES_256",
        "AES",
        256,
    )


def test_a_key_spec_from_a_server_without_the_door_columns_still_parses() -> None:
    from keymanager_sdk import KeySpec

    old = {"name": "AES_256_GCM", "kms_key_spec": "SYMMETRIC_DEFAULT", "key_type": "AES", "key_bits": 256}
    spec = KeySpec.from_json({**old, "curve": None, "asymmetric": False, "default_usage": "ENCRYPT_DECRYPT"})
    assert (spec.name, spec.key_bits, spec.usages) == ("AES_256_GCM", 256, {})
    assert (spec.mode, spec.transit_type, spec.xks_spec, spec.kmip_algorithm, spec.kmip_length) == (None,) * 5
