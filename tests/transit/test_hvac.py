"""hvac 2.4.0's ``client.secrets.transit`` and its AppRole and token auth methods, unmodified, against
the door over TLS: every method the door serves, and each one it refuses by name."""

from __future__ import annotations

import base64
import hashlib

import hvac
import hvac.exceptions
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils

from tests.e2e.conftest import Server
from tests.transit.conftest import App, grant, new_name, vault_client


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def test_keys_encrypt_decrypt_rewrap_and_rotate(admin_vault: hvac.Client, transit_server: Server) -> None:
    transit, name = admin_vault.secrets.transit, new_name()
    created = transit.create_key(name)
    assert created["data"]["type"] == "aes256-gcm96" and created["data"]["latest_version"] == 1
    assert name in transit.list_keys()["data"]["keys"]  # the method LIST (serving/protocol.py reads it)
    listed = admin_vault.adapter.get("/v1/transit/keys", params={"list": "true"})  # the Go client's LIST
    assert name in listed["data"]["keys"]
    sealed = transit.encrypt_data(name, b64(b"4111 1111 1111 1111"), associated_data=b64(b"card"))["data"]
    assert sealed["ciphertext"].startswith("vault:v1:") and sealed["key_version"] == 1
    opened = transit.decrypt_data(name, sealed["ciphertext"], associated_data=b64(b"card"))["data"]
    assert unb64(opened["plaintext"]) == b"4111 1111 1111 1111"
    with pytest.raises(hvac.exceptions.InvalidRequest, match="invalid ciphertext: decryption failed"):
        transit.decrypt_data(name, sealed["ciphertext"], associated_data=b64(b"other"))

    transit.rotate_key(name)
    read = transit.read_key(name)["data"]
    assert (read["latest_version"], sorted(read["keys"])) == (2, ["1", "2"])
    first = transit.encrypt_data(name, b64(b"rewrapped"), key_version=1)["data"]["ciphertext"]
    rewrapped = transit.rewrap_data(name, first)["data"]["ciphertext"]
    assert (
        rewrapped.startswith("vault:v2:")
        and unb64(transit.decrypt_data(name, rewrapped)["data"]["plaintext"]) == b"rewrapped"
    )
    older = transit.encrypt_data(name, b64(b"x"), key_version=1)["data"]
    assert older["key_version"] == 1
    transit.update_key_configuration(name, min_decryption_version=2)
    with pytest.raises(hvac.exceptions.InvalidRequest, match="too old"):
        transit.decrypt_data(name, older["ciphertext"])

    with transit_server.client(transit_server.admin_token) as rest:  # the same key, ours, with its creator named
        shown = rest.get(f"/v1/keys/{name}").json()
    assert (shown["algorithm"], shown["primary_version"], shown["min_decryption_version"]) == ("AES_256_GCM", 2, 2)
    assert shown["policy"]["encrypt"] == ["admin"] and shown["policy"]["decrypt"] == ["admin"]


def test_batches_answer_each_item_and_vaults_status(admin_vault: hvac.Client) -> None:
    transit, name = admin_vault.secrets.transit, new_name()
    transit.create_key(name, key_type="aes256-gcm96")
    items = [{"plaintext": b64(b"one"), "reference": "a"}, {"plaintext": b64(b"two"), "reference": "b"}]
    sealed = transit.encrypt_data(name, batch_input=items)["data"]["batch_results"]
    assert [item["reference"] for item in sealed] == ["a", "b"]
    opened = transit.decrypt_data(name, batch_input=[{"ciphertext": s["ciphertext"]} for s in sealed])
    assert [unb64(item["plaintext"]) for item in opened["data"]["batch_results"]] == [b"one", b"two"]
    with pytest.raises(hvac.exceptions.InvalidRequest) as refused:  # one bad item: Vault's 400, every result
        transit.decrypt_data(name, batch_input=[{"ciphertext": sealed[0]["ciphertext"]}, {"ciphertext": "vault:v1:AA"}])
    results = refused.value.json["data"]["batch_results"]
    assert unb64(results[0]["plaintext"]) == b"one" and results[1]["error"] == "invalid ciphertext: decryption failed"


def test_rotation_periods_and_batches_of_signatures(admin_vault: hvac.Client) -> None:
    transit, name, signer = admin_vault.secrets.transit, new_name(), new_name()
    transit.create_key(name, auto_rotate_period="720h")
    assert transit.read_key(name)["data"]["auto_rotate_period"] == 30 * 86400
    transit.update_key_configuration(name, auto_rotate_period="0")
    assert transit.read_key(name)["data"]["auto_rotate_period"] == 0
    with pytest.raises(hvac.exceptions.InvalidRequest, match="whole days"):
        transit.update_key_configuration(name, auto_rotate_period="36h")
    transit.create_key(signer, key_type="ecdsa-p256")
    batch = [{"input": b64(b"one"), "reference": "1"}, {"input": b64(b"two"), "reference": "2"}]
    signed = transit.sign_data(signer, batch_input=batch)["data"]["batch_results"]
    assert [s["reference"] for s in signed] == ["1", "2"] and all(
        s["signature"].startswith("vault:v1:") for s in signed
    )
    checked = transit.verify_signed_data(signer, b64(b"two"), signature=signed[1]["signature"])
    assert checked["data"]["valid"] is True


def test_data_keys_random_and_hash(admin_vault: hvac.Client) -> None:
    transit, name = admin_vault.secrets.transit, new_name()
    transit.create_key(name)
    made = transit.generate_data_key(name, key_type="plaintext", bits=512)["data"]
    assert len(unb64(made["plaintext"])) == 64
    assert transit.decrypt_data(name, made["ciphertext"])["data"]["plaintext"] == made["plaintext"]
    wrapped = transit.generate_data_key(name, key_type="wrapped")["data"]
    assert (
        "plaintext" not in wrapped
        and len(unb64(transit.decrypt_data(name, wrapped["ciphertext"])["data"]["plaintext"])) == 32
    )
    assert (
        len(bytes.fromhex(transit.generate_random_bytes(n_bytes=16, output_format="hex")["data"]["random_bytes"])) == 16
    )
    assert len(unb64(transit.generate_random_bytes(n_bytes=1024)["data"]["random_bytes"])) == 1024
    summed = transit.hash_data(b64(b"abc"), algorithm="sha2-512")["data"]["sum"]
    assert summed == hashlib.sha512(b"abc").hexdigest()


def test_hmac_and_its_verification(admin_vault: hvac.Client) -> None:
    transit, name = admin_vault.secrets.transit, new_name()
    admin_vault.write(f"transit/keys/{name}", type="hmac")  # hvac's create_key knows no hmac type: its generic write
    made = transit.generate_hmac(name, b64(b"blind index"))["data"]["hmac"]
    again = transit.generate_hmac(name, b64(b"blind index"))["data"]["hmac"]
    assert made == again and made.startswith("vault:v1:")
    assert transit.verify_signed_data(name, b64(b"blind index"), hmac=made)["data"]["valid"] is True
    assert transit.verify_signed_data(name, b64(b"other"), hmac=made)["data"]["valid"] is False
    with pytest.raises(hvac.exceptions.InvalidRequest, match="sha2-256"):
        transit.generate_hmac(name, b64(b"x"), algorithm="sha2-512")


@pytest.mark.parametrize(
    ("key_type", "options"),
    [
        ("ecdsa-p256", {}),
        ("ecdsa-p256", {"marshaling_algorithm": "jws"}),
        ("ecdsa-p384", {"hash_algorithm": "sha2-384"}),
        ("ed25519", {}),
        ("rsa-2048", {"signature_algorithm": "pss"}),
        ("rsa-2048", {"signature_algorithm": "pkcs1v15", "hash_algorithm": "sha2-512"}),
    ],
)
def test_signatures_verify_here_and_with_the_public_key(
    admin_vault: hvac.Client, key_type: str, options: dict[str, str]
) -> None:
    transit, name, message = admin_vault.secrets.transit, new_name(), b"release v1.2.3"
    transit.create_key(name, key_type=key_type)
    signature = transit.sign_data(name, b64(message), **options)["data"]["signature"]
    assert signature.startswith("vault:v1:")
    assert transit.verify_signed_data(name, b64(message), signature=signature, **options)["data"]["valid"] is True
    assert transit.verify_signed_data(name, b64(b"forged"), signature=signature, **options)["data"]["valid"] is False
    public = transit.read_key(name)["data"]["keys"]["1"]["public_key"]
    _verify_outside(key_type, public, signature.removeprefix("vault:v1:"), message, options)


def _verify_outside(key_type: str, public: str, signature: str, message: bytes, options: dict[str, str]) -> None:
    """The signature checked with ``cryptography`` and the public key Vault's read shows (no call to us)."""
    if key_type == "ed25519":
        ed25519.Ed25519PublicKey.from_public_bytes(unb64(public)).verify(unb64(signature), message)
        return
    key = serialization.load_pem_public_key(public.encode())
    digest = {"sha2-384": hashes.SHA384(), "sha2-512": hashes.SHA512()}.get(
        options.get("hash_algorithm", ""), hashes.SHA256()
    )
    if isinstance(key, ec.EllipticCurvePublicKey):
        raw = base64.urlsafe_b64decode(signature + "==") if options.get("marshaling_algorithm") == "jws" else None
        der = (
            utils.encode_dss_signature(int.from_bytes(raw[:32]), int.from_bytes(raw[32:])) if raw else unb64(signature)
        )
        key.verify(der, message, ec.ECDSA(digest))
    else:
        assert isinstance(key, rsa.RSAPublicKey)
        scheme = (
            padding.PKCS1v15()
            if options.get("signature_algorithm") == "pkcs1v15"
            else padding.PSS(padding.MGF1(digest), padding.PSS.AUTO)
        )
        key.verify(unb64(signature), message, scheme, digest)


def test_export_only_of_exportable_keys(admin_vault: hvac.Client, transit_server: Server) -> None:
    transit, plain, exportable = admin_vault.secrets.transit, new_name(), new_name()
    transit.create_key(plain)
    with pytest.raises(hvac.exceptions.InvalidRequest, match="key is not exportable"):
        transit.export_key(plain, key_type="encryption-key")
    transit.create_key(exportable, exportable=True)
    exported = transit.export_key(exportable, key_type="encryption-key", version="latest")["data"]
    assert len(unb64(exported["keys"]["1"])) == 32
    with pytest.raises(hvac.exceptions.InvalidRequest, match="never leave the HSM"):
        transit.export_key(exportable, key_type="hmac-key")
    with transit_server.client(transit_server.admin_token) as rest:
        records = rest.get("/v1/audit", params={"key": exportable, "limit": 20}).json()
    actions = [r["action"] for r in (records["records"] if isinstance(records, dict) else records)]
    assert "transit.export" in actions


def test_deletion_needs_deletion_allowed_then_keeps_the_deletion_window(
    admin_vault: hvac.Client, transit_server: Server
) -> None:
    transit, name = admin_vault.secrets.transit, new_name()
    transit.create_key(name)
    with pytest.raises(hvac.exceptions.InvalidRequest, match="deletion is not allowed"):
        transit.delete_key(name)
    transit.update_key_configuration(name, deletion_allowed=True)
    assert transit.read_key(name)["data"]["deletion_allowed"] is True
    assert transit.delete_key(name).status_code == 204
    with transit_server.client(transit_server.admin_token) as rest:
        shown = rest.get(f"/v1/keys/{name}").json()
    assert shown["state"] == "pending_deletion" and shown["deletion_date"] is not None
    assert transit.read_key(name)["data"]["soft_deleted"] is True
    with pytest.raises(hvac.exceptions.InvalidRequest, match="pending deletion"):
        transit.encrypt_data(name, b64(b"x"))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t, n: t.create_key(n, key_type="chacha20-poly1305"), "chacha20-poly1305 is refused"),
        (lambda t, n: t.create_key(n, derived=True), "derived: per-context keys are not served"),
        (lambda t, n: t.create_key(n, derived=True, convergent_encryption=True), "derived"),
        (lambda t, n: t.create_key(n, allow_plaintext_backup=True), "allow_plaintext_backup"),
        (lambda t, n: t.backup_key(n), "backup and restore"),
        (lambda t, n: t.restore_key("e30="), "backup and restore"),
        (lambda t, n: t.trim_key(n, 1), "trim: single key versions are not destroyed"),
        (lambda t, n: t.encrypt_data(n, b64(b"x"), nonce=b64(b"123456789012")), "nonce"),
        (lambda t, n: t.encrypt_data(n, b64(b"x"), context=b64(b"c")), "context: the key is not derived"),
        (lambda t, n: t.update_key_configuration(n, exportable=True), "cannot become exportable"),
        (lambda t, n: t.encrypt_data(n, "not base64!"), "plaintext: not valid base64"),
        (lambda t, n: t.encrypt_data(n, b64(b"x"), key_version=9), "higher than the latest"),
        (lambda t, n: t.decrypt_data(n, "vault:v0:AAAA"), "version 0"),
        (lambda t, n: t.decrypt_data(n, "vault:v7:AAAA"), "version is too new"),
        (lambda t, n: t.sign_data(n, b64(b"x")), "does not sign"),
    ],
)
def test_refusals_name_what_and_why(admin_vault: hvac.Client, call: object, message: str) -> None:
    transit, name = admin_vault.secrets.transit, new_name()
    transit.create_key(name)
    with pytest.raises(hvac.exceptions.InvalidRequest, match=message):
        call(transit, name)  # type: ignore[operator]


def test_approle_login_lookup_and_policies(transit_server: Server, admin_vault: hvac.Client, app: App) -> None:
    name = new_name()
    admin_vault.secrets.transit.create_key(name)
    with transit_server.client(transit_server.admin_token) as rest:
        made = rest.post(f"/v1/principals/{app.name}/approle").json()
    vault = vault_client(transit_server, None)
    vault.auth.approle.login(role_id=made["role_id"], secret_id=made["secret_id"])
    assert vault.token.startswith("hvs.") and vault.is_authenticated()
    looked = vault.auth.token.lookup_self()["data"]
    assert looked["display_name"] == app.name and looked["path"] == "auth/approle/login" and looked["ttl"] > 0
    with pytest.raises(hvac.exceptions.Forbidden, match="permission denied"):  # default deny: not in the policy
        vault.secrets.transit.encrypt_data(name, b64(b"x"))
    grant(transit_server, name, app.name, "encrypt", "decrypt")
    sealed = vault.secrets.transit.encrypt_data(name, b64(b"via approle"))["data"]["ciphertext"]
    assert unb64(app.vault.secrets.transit.decrypt_data(name, sealed)["data"]["plaintext"]) == b"via approle"
    with pytest.raises(hvac.exceptions.Forbidden):  # key admin is an admin's
        vault.secrets.transit.rotate_key(name)
    with pytest.raises(hvac.exceptions.InvalidRequest, match="invalid role or secret ID"):
        vault_client(transit_server, None).auth.approle.login(role_id=made["role_id"], secret_id="wrong")
    with transit_server.client(transit_server.admin_token) as rest:
        assert rest.delete(f"/v1/principals/{app.name}/approle/{made['role_id']}").status_code == 204
    assert not vault.is_authenticated()  # its client tokens went with it, on every worker
    assert not vault_client(transit_server, "hvs.unknown").is_authenticated()
