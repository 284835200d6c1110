"""No key material in the database: only metadata and the HSM objects' labels."""

from __future__ import annotations

import base64
import hashlib
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from keymanager.config import Settings
from keymanager.hsm import Hsm
from tests.api.support import b64, use_policy
from tests.conftest import TEST_PIN, TEST_SO_PIN, auth

CARD = b"4111111111111111"

DOCUMENTED_COLUMNS = {
    "principals": {
        "id",
        "name",
        "role",
        "token_hash",
        "cert_subject",
        "created_at",
        "xks_uri_prefix",  # a key store's path prefix and AWS region: public configuration
        "xks_region",
        "create_keys",  # whether it may create keys it owns (KMIP): a flag
        "key_store",  # whether the AES keys it creates over KMIP are exportable to it: a flag
    },
    "keys": {
        "id",
        "name",
        "algorithm",
        "state",
        "description",
        "policy",
        "primary_version",
        "min_decryption_version",
        "rotation_period_days",
        "created_at",
        "updated_at",
        "deletion_date",
        "token_format",  # an FF1_AES_256 key's format: public metadata, no material
        "origin",  # hsm or external (imported)
        "usage",  # what the key is for (AWS KeyUsage)
        "kmip_lifecycle",  # the lifecycle state an operation set (pre_active, compromised, ...): Key.lifecycle
        "exportable",  # a flag: generated extractable but sensitive (its material is in the HSM only)
        "kmip_attributes",  # names, groups, custom x- attributes KMIP clients set, no material: Key.attributes
    },
    "key_versions": {
        "key_id",
        "version",
        "enc_label",
        "mac_label",
        "private_label",  # an asymmetric version's private and public key objects
        "public_label",
        "public_key",  # its DER SubjectPublicKeyInfo: public by definition
        "created_at",
        "destroyed_at",
    },
    "kmip_objects": {  # secret data, opaque objects, certificates registered through KMIP
        "id",
        "object_type",
        "state",
        "owner_id",
        "policy",
        "attributes",  # what the client set, the value's type and length: no value
        "sealed",  # the value, AES-GCM (or CBC+HMAC) under an HSM key: never in clear
        "seal_label",  # the HSM label of that key
        "created_at",
        "updated_at",
    },
}


def _dump(path: Path) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """Every column and row of every table of the SQLite file."""
    connection = sqlite3.connect(path)
    try:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        out = {}
        for table in tables:
            cursor = connection.execute(f'SELECT * FROM "{table}"')
            out[table] = ([d[0] for d in cursor.description], cursor.fetchall())
        return out
    finally:
        connection.close()


def test_database_holds_only_metadata_and_labels(
    client: TestClient,
    settings: Settings,
    hsm: Hsm,
    admin_token: str,
    new_key: Callable[..., dict[str, Any]],
    new_principal: Callable[..., str],
) -> None:
    token = new_principal("billing")
    keys = {
        alg: new_key(f"k-{alg.lower().replace('_', '-')}", {**use_policy("billing"), "mac": ["billing"]}, alg)
        for alg in ("AES_256_CBC_HMAC_SHA256", "AES_256_GCM", "HMAC_SHA256")
    }
    ciphertexts = []
    for alg in ("AES_256_CBC_HMAC_SHA256", "AES_256_GCM"):
        response = client.post(
            f"/v1/keys/{keys[alg]['id']}/encrypt",
            json={"plaintext": b64(CARD), "context": {"table": "cards"}},
            headers=auth(token),
        )
        assert response.status_code == 200
        ciphertexts.append(response.json()["ciphertext"])

    path = Path(settings.resolved_database_url().removeprefix("sqlite:///"))
    dump = _dump(path)
    for table, columns in DOCUMENTED_COLUMNS.items():
        assert set(dump[table][0]) == columns, table

    # key_versions: exactly the HSM labels of each key's objects, and those objects exist.
    labels = set(hsm.find_labels("km/"))
    columns, rows = dump["key_versions"]
    versions = {row[columns.index("key_id")]: dict(zip(columns, row, strict=True)) for row in rows}
    assert set(versions) == {k["id"] for k in keys.values()}
    for alg, key in keys.items():
        row = versions[key["id"]]
        base = rf"km/{key['id']}/v1(\.[0-9a-f]+)?"
        has_enc, has_mac = {
            "AES_256_CBC_HMAC_SHA256": (True, True),
            "AES_256_GCM": (True, False),
            "HMAC_SHA256": (False, True),
        }[alg]
        for column, present, suffix in (("enc_label", has_enc, "aes"), ("mac_label", has_mac, "hmac")):
            if present:
                assert re.fullmatch(rf"{base}/{suffix}", row[column]), row
                assert row[column] in labels
            else:
                assert row[column] is None

    # principals: token hashes only.
    columns, rows = dump["principals"]
    hashes = {row[columns.index("name")]: row[columns.index("token_hash")] for row in rows}
    assert hashes == {
        "admin": hashlib.sha256(admin_token.encode()).hexdigest(),
        "billing": hashlib.sha256(token.encode()).hexdigest(),
    }

    # No value anywhere is binary or a 32-byte secret spelled in base64; no secret of the run appears.
    secrets = [CARD.decode(), b64(CARD), admin_token, token, TEST_PIN, TEST_SO_PIN]
    secrets += [text.rsplit(":", 1)[1] for text in ciphertexts]
    token_hashes = set(hashes.values())
    for table, (_, rows) in dump.items():
        for row in rows:
            for value in row:
                assert not isinstance(value, bytes | bytearray | memoryview), (table, value)
                if not isinstance(value, str):
                    continue
                for secret in secrets:
                    assert secret not in value, table
                for word in re.findall(r"[A-Za-z0-9+/=_-]{40,}", value):
                    if word in token_hashes or word in labels:
                        continue
                    try:
                        decoded = base64.b64decode(word + "=" * (-len(word) % 4), altchars=b"-_")
                    except ValueError:
                        continue
                    assert len(decoded) != 32, (table, value)

    # Nor anywhere in the files themselves (the WAL included).
    raw = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    for secret in secrets:
        assert secret.encode() not in raw
