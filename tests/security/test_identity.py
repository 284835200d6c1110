"""Identity by id over a real server: a principal reusing a deleted one's name inherits nothing."""

from __future__ import annotations

import base64
import secrets

from tests.security.conftest import Server


def test_reused_name_gets_nothing_of_the_deleted_principal(server: Server) -> None:
    name, key = f"billing-{secrets.token_hex(4)}", f"cards-{secrets.token_hex(4)}"
    policy = {use: [name] for use in ("encrypt", "decrypt", "generate_data_key", "reencrypt", "mac")}
    with server.client(server.admin_token) as admin:
        old_token = admin.post("/v1/principals", json={"name": name, "role": "app"}).json()["token"]
        assert admin.post("/v1/keys", json={"name": key, "policy": policy}).status_code == 201
        with server.client(old_token) as old:
            encrypted = old.post(f"/v1/keys/{key}/encrypt", json={"plaintext": base64.b64encode(b"4111").decode()})
            assert encrypted.status_code == 200, encrypted.text
            ciphertext = encrypted.json()["ciphertext"]
        assert admin.delete(f"/v1/principals/{name}").status_code == 204
        new_token = admin.post("/v1/principals", json={"name": name, "role": "app"}).json()["token"]
        shown = admin.get(f"/v1/keys/{key}").json()["policy"]
        assert all(shown[use] == [] for use in policy), shown
    with server.client(new_token) as new:
        # Both workers: every answer is a refusal, whichever process serves it.
        for _ in range(4):
            decrypted = new.post("/v1/decrypt", json={"ciphertext": ciphertext})
            assert decrypted.status_code == 403, decrypted.text
            assert decrypted.json()["error"]["code"] == "forbidden"
            assert new.post(f"/v1/keys/{key}/datakey", json={}).status_code == 403
            assert new.get(f"/v1/keys/{key}").status_code == 403
            assert new.get("/v1/keys").json() == []
