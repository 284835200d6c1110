"""The OpenAPI document lists every route with its request schema; the policy schema is exact."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from keymanager.domain.key_specs import SPECS

POLICY_FIELDS = {
    "encrypt",
    "decrypt",
    "generate_data_key",
    "reencrypt",
    "mac",
    "tokenize",
    "detokenize",
    "get_key_material",
    "sign",
    "verify",
    "get_public_key",
    "derive_shared_secret",
    "generate_data_key_pair",
    "not_before",
    "not_after",
}

REQUEST_SCHEMAS = {
    ("post", "/v1/principals"): "PrincipalCreate",
    ("post", "/v1/keys"): "KeyCreate",
    ("patch", "/v1/keys/{key}"): "KeyPatch",
    ("post", "/v1/keys/{key}/encrypt"): "EncryptRequest",
    ("post", "/v1/keys/{key}/decrypt"): "DecryptRequest",
    ("post", "/v1/decrypt"): "DecryptRequest",
}
WITHOUT_BODY = {
    ("get", "/v1/health"),
    ("get", "/v1/ready"),
    ("get", "/v1/principals"),
    ("get", "/v1/whoami"),
    ("delete", "/v1/principals/{name}"),
    ("get", "/v1/keys"),
    ("get", "/v1/keys/{key}"),
}


def _document(client: TestClient) -> dict[str, Any]:
    response = client.get("/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


def _schema_name(ref: str) -> str:
    return ref.rsplit("/", 1)[1]


def test_every_route_is_listed(client: TestClient) -> None:
    document = _document(client)
    listed = {(method, path) for path, item in document["paths"].items() for method in item}
    assert set(REQUEST_SCHEMAS) | WITHOUT_BODY <= listed
    # Every operation that takes a body names a component schema for it.
    schemas = document["components"]["schemas"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody")
            if body is None:
                continue
            content = body["content"]
            if "application/json" in content:
                assert _schema_name(content["application/json"]["schema"]["$ref"]) in schemas, (method, path)


def test_request_schemas(client: TestClient) -> None:
    document = _document(client)
    schemas = document["components"]["schemas"]
    for (method, path), name in REQUEST_SCHEMAS.items():
        operation = document["paths"][path][method]
        content = operation["requestBody"]["content"]["application/json"]
        assert operation["requestBody"].get("required") is True
        ref = _schema_name(content["schema"]["$ref"])
        assert ref.removesuffix("-Input") == name
        assert schemas[ref]["type"] == "object"
        assert schemas[ref].get("additionalProperties") is False, ref
    for method, path in WITHOUT_BODY:
        assert "requestBody" not in document["paths"][path][method]
    assert set(schemas["EncryptRequest"]["properties"]) == {"plaintext", "context", "algorithm"}
    assert schemas["EncryptRequest"]["required"] == ["plaintext"]
    assert set(schemas["DecryptRequest"]["properties"]) == {"ciphertext", "context", "algorithm"}
    key_create = document["paths"]["/v1/keys"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    create = schemas[_schema_name(key_create["$ref"])]
    assert set(create["properties"]) == {
        "name",
        "algorithm",
        "description",
        "policy",
        "rotation_period_days",
        "token_format",
        "origin",
        "usage",
    }
    algorithm = schemas[_schema_name(create["properties"]["algorithm"]["$ref"])]
    assert set(algorithm["enum"]) == set(SPECS)  # every row of the table of key types, nothing else


def test_error_responses_are_documented(client: TestClient) -> None:
    document = _document(client)
    error = document["components"]["schemas"]["ErrorBody"]
    assert set(error["properties"]) == {"error", "request_id"}
    for method, path in REQUEST_SCHEMAS:
        responses = document["paths"][path][method]["responses"]
        for status in ("400", "401", "403", "413", "422", "503"):
            assert _schema_name(responses[status]["content"]["application/json"]["schema"]["$ref"]) == "ErrorBody"


def test_policy_schema_has_exactly_the_operations_and_times(client: TestClient) -> None:
    schemas = _document(client)["components"]["schemas"]
    policy_schemas = [name for name in schemas if name.startswith("PolicyBody")]
    assert policy_schemas
    for name in policy_schemas:
        assert set(schemas[name]["properties"]) == POLICY_FIELDS, name
    create = schemas.get("KeyCreate") or schemas["KeyCreate-Input"]
    assert _schema_name(create["properties"]["policy"]["$ref"]).startswith("PolicyBody")
