"""The unmodified AWS CLI (``awscli`` from PyPI) against the real server over TLS.

Each ``aws`` process is a subprocess with the endpoint on its command line (``--endpoint-url``,
``--ca-bundle``), its credentials and region in the environment, and no configuration file.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding

from tests.e2e.conftest import Server
from tests.kms_api.conftest import REGION, Pair, new_pair

pytestmark = pytest.mark.interop  # make test-interop: the AWS CLI, one process per call

AWS = str(Path(sys.executable).parent / "aws")
SERVICE_ERROR = 255
"""AWS CLI v1's exit code for an error the service answered (v1 is what PyPI's ``awscli`` is; v2 says 254)."""


class Cli:
    """``aws kms …`` as ``pair``; ``run`` answers the finished process, ``json`` the parsed output."""

    def __init__(self, server: Server, pair: Pair, home: Path) -> None:
        self.server = server
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
            "HOME": str(home),
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": pair.access_key_id,
            "AWS_SECRET_ACCESS_KEY": pair.secret_access_key,
            "AWS_MAX_ATTEMPTS": "1",
            "AWS_PAGER": "",
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [
            AWS,
            "kms",
            *args,
            "--endpoint-url",
            self.server.url,
            "--ca-bundle",
            str(self.server.ca),
            "--output",
            "json",
        ]
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60)

    def json(self, *args: str) -> Any:
        done = self.run(*args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None


@pytest.fixture(scope="module")
def admin_cli(kms_server: Server, admin_pair: Pair, tmp_path_factory: pytest.TempPathFactory) -> Cli:
    return Cli(kms_server, admin_pair, tmp_path_factory.mktemp("aws-home"))


def test_cli_create_alias_encrypt_decrypt_generate_list(admin_cli: Cli, tmp_path: Path) -> None:
    key = admin_cli.json("create-key", "--description", "made by the AWS CLI")["KeyMetadata"]
    assert key["KeySpec"] == "SYMMETRIC_DEFAULT" and key["KeyState"] == "Enabled"
    assert key["Description"] == "made by the AWS CLI"
    assert admin_cli.json("create-alias", "--alias-name", "alias/cli-orders", "--target-key-id", key["KeyId"]) is None

    secret = bytes(range(256)) * 16  # 4,096 bytes, every byte value: the AWS maximum for Encrypt
    (tmp_path / "secret.bin").write_bytes(secret)
    sealed = admin_cli.json(
        "encrypt",
        "--key-id",
        "alias/cli-orders",
        "--plaintext",
        f"fileb://{tmp_path / 'secret.bin'}",
        "--encryption-context",
        "purpose=cli-test",
    )
    assert sealed["KeyId"] == key["Arn"]
    blob = base64.b64decode(sealed["CiphertextBlob"], validate=True)
    assert secret not in blob
    (tmp_path / "blob.bin").write_bytes(blob)

    opened = admin_cli.json(
        "decrypt", "--ciphertext-blob", f"fileb://{tmp_path / 'blob.bin'}", "--encryption-context", "purpose=cli-test"
    )
    assert opened["KeyId"] == key["Arn"]
    assert base64.b64decode(opened["Plaintext"], validate=True) == secret

    wrong_context = admin_cli.run(
        "decrypt", "--ciphertext-blob", f"fileb://{tmp_path / 'blob.bin'}", "--encryption-context", "purpose=other"
    )
    assert wrong_context.returncode == SERVICE_ERROR and "InvalidCiphertextException" in wrong_context.stderr

    made = admin_cli.json("generate-data-key", "--key-id", key["Arn"], "--key-spec", "AES_256")
    plaintext = base64.b64decode(made["Plaintext"], validate=True)
    assert len(plaintext) == 32 and made["KeyId"] == key["Arn"]
    (tmp_path / "data-key.bin").write_bytes(base64.b64decode(made["CiphertextBlob"], validate=True))
    unwrapped = admin_cli.json("decrypt", "--ciphertext-blob", f"fileb://{tmp_path / 'data-key.bin'}")
    assert base64.b64decode(unwrapped["Plaintext"]) == plaintext

    listed = admin_cli.json("list-keys")
    assert {"KeyId": key["KeyId"], "KeyArn": key["Arn"]} in listed["Keys"]


def test_cli_refusal_exit_code_and_aws_error(
    kms_server: Server, admin_cli: Cli, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A principal the key's policy does not name: the CLI's service-error exit code, AWS's error name."""
    key = admin_cli.json("create-key")["KeyMetadata"]
    (tmp_path / "secret.bin").write_bytes(b"not for the outsider")
    sealed = admin_cli.json("encrypt", "--key-id", key["KeyId"], "--plaintext", f"fileb://{tmp_path / 'secret.bin'}")
    (tmp_path / "blob.bin").write_bytes(base64.b64decode(sealed["CiphertextBlob"]))

    outsider = Cli(kms_server, new_pair(kms_server, "cli-outsider", "app"), tmp_path_factory.mktemp("aws-home"))
    refused = outsider.run("decrypt", "--ciphertext-blob", f"fileb://{tmp_path / 'blob.bin'}")
    assert refused.returncode == SERVICE_ERROR, refused.stderr
    assert "AccessDeniedException" in refused.stderr and "Decrypt" in refused.stderr
    assert refused.stdout == ""
    assert "not for the outsider" not in refused.stderr


def test_cli_sign_verify_get_public_key(admin_cli: Cli, tmp_path: Path) -> None:
    """``aws kms sign``, ``verify`` and ``get-public-key`` on an ECDSA and an RSA key; each signature
    also verified by ``cryptography`` with the public key the CLI fetched."""
    document = tmp_path / "document.txt"
    document.write_bytes(b"a release to sign\n" * 100)
    for spec, algorithm in (("ECC_NIST_P256", "ECDSA_SHA_256"), ("RSA_2048", "RSASSA_PSS_SHA_256")):
        key = admin_cli.json("create-key", "--key-spec", spec, "--key-usage", "SIGN_VERIFY")["KeyMetadata"]
        assert key["SigningAlgorithms"] and algorithm in key["SigningAlgorithms"]
        shown = admin_cli.json("get-public-key", "--key-id", key["KeyId"])
        assert shown["KeySpec"] == spec and shown["KeyUsage"] == "SIGN_VERIFY" and shown["KeyId"] == key["Arn"]
        public: Any = serialization.load_der_public_key(base64.b64decode(shown["PublicKey"], validate=True))
        signed = admin_cli.json(
            "sign", "--key-id", key["Arn"], "--message", f"fileb://{document}", "--signing-algorithm", algorithm
        )
        signature = base64.b64decode(signed["Signature"], validate=True)
        (tmp_path / "signature.bin").write_bytes(signature)
        if spec.startswith("ECC"):
            public.verify(signature, document.read_bytes(), ec.ECDSA(hashes.SHA256()))
        else:
            pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
            public.verify(signature, document.read_bytes(), pss, hashes.SHA256())
        checked = admin_cli.json(
            "verify",
            "--key-id",
            key["KeyId"],
            "--message",
            f"fileb://{document}",
            "--signature",
            f"fileb://{tmp_path / 'signature.bin'}",
            "--signing-algorithm",
            algorithm,
        )
        assert checked["SignatureValid"] is True and checked["SigningAlgorithm"] == algorithm
        (tmp_path / "other.txt").write_bytes(b"another document")
        bad = admin_cli.run(
            "verify",
            "--key-id",
            key["KeyId"],
            "--message",
            f"fileb://{tmp_path / 'other.txt'}",
            "--signature",
            f"fileb://{tmp_path / 'signature.bin'}",
            "--signing-algorithm",
            algorithm,
        )
        assert bad.returncode == SERVICE_ERROR and "KMSInvalidSignatureException" in bad.stderr
        with pytest.raises(InvalidSignature):
            if spec.startswith("ECC"):
                public.verify(signature, b"another document", ec.ECDSA(hashes.SHA256()))
            else:
                public.verify(signature, b"another document", pss, hashes.SHA256())
    symmetric = admin_cli.json("create-key")["KeyMetadata"]
    refused = admin_cli.run("get-public-key", "--key-id", symmetric["KeyId"])
    assert refused.returncode == SERVICE_ERROR and "AccessDeniedException" in refused.stderr  # the policy first
    with admin_cli.server.client(admin_cli.server.admin_token) as admin:
        granted = admin.patch(f"/v1/keys/{symmetric['KeyId']}", json={"policy": {"get_public_key": ["kms-admin"]}})
        assert granted.status_code == 200, granted.text
    refused = admin_cli.run("get-public-key", "--key-id", symmetric["KeyId"])
    assert refused.returncode == SERVICE_ERROR and "UnsupportedOperationException" in refused.stderr
