"""Static checks of the Kubernetes manifests in deploy/k8s (no cluster needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.support import ANY_ADDRESS, K8S, SECRET_NAME, k8s_documents, load_yaml

PROBE_PATHS = {"readinessProbe": "/v1/ready", "livenessProbe": "/v1/health"}


@pytest.fixture(scope="module")
def documents() -> list[tuple[Path, dict[str, Any]]]:
    return k8s_documents()


def _only(documents: list[tuple[Path, dict[str, Any]]], kind: str) -> dict[str, Any]:
    found = [doc for _, doc in documents if doc["kind"] == kind]
    assert len(found) == 1, f"one {kind} expected, found {len(found)}"
    return found[0]


def _pod_specs(documents: list[tuple[Path, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {
        doc["kind"]: doc["spec"]["template"]["spec"] for _, doc in documents if doc["kind"] in {"Deployment", "Job"}
    }


def _config(documents: list[tuple[Path, dict[str, Any]]]) -> dict[str, str]:
    config = [doc for _, doc in documents if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "keymanager-env"]
    assert len(config) == 1
    data = config[0]["data"]
    assert all(isinstance(v, str) for v in data.values()), "ConfigMap values are strings"
    return dict(data)


def test_every_manifest_parses_and_names_itself(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    assert documents
    for path, doc in documents:
        assert isinstance(doc, dict), path.name
        assert doc.get("apiVersion") and doc.get("kind"), path.name
        assert doc["metadata"].get("name"), path.name


def test_kustomization_lists_every_manifest_but_the_secret_template() -> None:
    kustomization = load_yaml(K8S / "kustomization.yaml")
    assert kustomization["kind"] == "Kustomization"
    resources = kustomization["resources"]
    for resource in resources:
        assert (K8S / resource).is_file(), resource
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(resources) == manifests - {"secret.template.yaml"}
    assert kustomization["namespace"] == "keymanager"
    assert [i["name"] for i in kustomization["images"]] == ["keymanager"]


def test_deployment_replicas_and_security(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    deployment = _only(documents, "Deployment")
    assert deployment["spec"]["replicas"] >= 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["args"] == ["serve"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    anti = pod["affinity"]["podAntiAffinity"]
    terms = anti.get("preferredDuringSchedulingIgnoredDuringExecution", []) + anti.get(
        "requiredDuringSchedulingIgnoredDuringExecution", []
    )
    assert terms, "replicas are spread by pod anti-affinity"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    for term in terms:
        selector = term.get("podAffinityTerm", term)["labelSelector"]["matchLabels"]
        assert selector.items() <= labels.items()


def test_probes_over_https(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    (container,) = _only(documents, "Deployment")["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["https"] == 8443
    for probe, path in PROBE_PATHS.items():
        http = container[probe]["httpGet"]
        assert http["path"] == path, probe
        assert http["scheme"] == "HTTPS", probe
        assert http["port"] in ("https", 8443), probe


def test_resources(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    for kind, pod in _pod_specs(documents).items():
        for container in pod["containers"]:
            resources = container["resources"]
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources[bound]), f"{kind}: {bound}"


def test_pin_and_tls_are_secret_files(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    config = _config(documents)
    assert config["KM_ENV"] == "production"
    assert config["KM_HOST"] == ANY_ADDRESS
    assert "KM_PKCS11_PIN" not in config, "the PIN itself is never in a ConfigMap"
    for key in config:
        if SECRET_NAME.search(key):
            assert key.endswith(("_FILE", "_LABEL")), key
    for kind, pod in _pod_specs(documents).items():
        (container,) = pod["containers"]
        assert {"configMapRef": {"name": "keymanager-env"}} in container["envFrom"], kind
        secret_volumes = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        for setting, secret in (
            ("KM_PKCS11_PIN_FILE", "keymanager-pkcs11"),
            ("KM_TLS_CERT", "keymanager-tls"),
            ("KM_TLS_KEY", "keymanager-tls"),
        ):
            directory = str(Path(config[setting]).parent)
            assert directory in mounts, f"{kind}: {setting} is not on a mounted volume"
            assert secret_volumes.get(mounts[directory]) == secret, f"{kind}: {setting} not from {secret}"
        database = {e["name"]: e for e in container.get("env", [])}["KM_DATABASE_URL"]
        assert database["valueFrom"]["secretKeyRef"]["name"] == "keymanager-database", kind
        writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
        assert writable == {config["KM_VAR_DIR"], "/tmp"}, kind


def test_pdb_selects_the_deployment(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    deployment = _only(documents, "Deployment")
    pdb = _only(documents, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_service_selects_the_deployment(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    deployment = _only(documents, "Deployment")
    service = _only(documents, "Service")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert port["port"] == 8443 and port["targetPort"] == "https"


def test_job_runs_init_and_does_not_match_the_service(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    job = _only(documents, "Job")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["init"]
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"]["runAsNonRoot"] is True
    job_labels = job["spec"]["template"]["metadata"]["labels"]
    for kind in ("Service", "PodDisruptionBudget"):
        doc = _only(documents, kind)
        selector = doc["spec"]["selector"]
        selector = selector.get("matchLabels", selector)
        assert not selector.items() <= job_labels.items(), f"the {kind} must not select the init Job's pod"


def test_secret_template_holds_placeholders_only(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    secrets = [(path, doc) for path, doc in documents if doc["kind"] == "Secret"]
    assert secrets
    for path, doc in secrets:
        assert path.name == "secret.template.yaml"
        assert "data" not in doc, "placeholders in stringData, readable as such"
        for key, value in doc["stringData"].items():
            assert "REPLACE-ME" in value, f"{doc['metadata']['name']}.{key} looks like a real value"
