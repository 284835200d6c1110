"""confluent-kafka's ``hcvault`` KMS driver (client-side field encryption), unmodified: it logs in with
AppRole and wraps and unwraps a data key through the door over TLS (no Kafka broker is involved)."""

from __future__ import annotations

import secrets

import pytest
from confluent_kafka.schema_registry.rules.encryption.hcvault.hcvault_driver import HcVaultKmsDriver

from tests.e2e.conftest import Server
from tests.transit.conftest import App, grant, new_name


def test_the_hcvault_driver_wraps_and_unwraps_a_data_key_with_approle(transit_server: Server, app: App) -> None:
    key = new_name("kafka")
    with transit_server.client(transit_server.admin_token) as admin:
        made = admin.post(f"/v1/transit/keys/{key}", headers={"X-Vault-Token": transit_server.admin_token})
        assert made.status_code == 200, made.text
        approle = admin.post(f"/v1/principals/{app.name}/approle").json()
    grant(transit_server, key, app.name, "encrypt", "decrypt")
    key_url = f"hcvault://{transit_server.url}/transit/keys/{key}"  # hcvault:// and the Vault address
    # The driver reads its settings as Kafka's rule parameters would give them (no VAULT_* from the test's env).
    conf = {
        "approle.role.id": approle["role_id"],
        "approle.secret.id": approle["secret_id"],
        "ssl.ca.location": str(transit_server.ca),
    }
    client = HcVaultKmsDriver().new_kms_client(conf, key_url)
    aead = client.get_aead(key_url)
    data_key = secrets.token_bytes(32)
    wrapped = aead.encrypt(data_key, b"")
    assert wrapped.startswith(b"vault:v1:")
    assert aead.decrypt(wrapped, b"") == data_key
    with pytest.raises(Exception, match="invalid ciphertext"):
        aead.decrypt(wrapped[:-4] + b"AAAA", b"")
