"""Static checks of the Kubernetes manifests in deploy/k8s (no cluster needed)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from keymanager.config import Settings
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
    assert ports["https"] == 8443 == int(_config(documents)["KM_PORT"])
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
            ("KM_TLS_CLIENT_CA", "keymanager-tls"),
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
    ports = {p["name"]: (p["port"], p["targetPort"], p["protocol"]) for p in service["spec"]["ports"]}
    assert ports == {"https": (8443, "https", "TCP"), "kmip": (5696, "kmip", "TCP")}


def test_every_door_has_its_port(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    """HTTPS (REST, the AWS KMS API, XKS by path) and KMIP, whose client certificates need a CA
    that the Secret holds (the image has no development CA: without one the pods do not start)."""
    config = _config(documents)
    (container,) = _only(documents, "Deployment")["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: (p["containerPort"], p["protocol"]) for p in container["ports"]}
    assert ports == {"https": (8443, "TCP"), "kmip": (int(config["KM_KMIP_PORT"]), "TCP")}
    assert int(config["KM_KMIP_PORT"]) == Settings.model_fields["kmip_port"].default == 5696
    assert config["KM_TLS_CLIENT_CA"] == "/etc/keymanager/tls/ca.crt"
    template = [doc for path, doc in documents if path.name == "secret.template.yaml"]
    tls = next(doc for doc in template if doc["metadata"]["name"] == "keymanager-tls")
    assert "ca.crt" in tls["stringData"]


def test_the_network_policy_admits_the_doors_ports_only(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    deployment = _only(documents, "Deployment")
    policy = _only(documents, "NetworkPolicy")
    assert policy["apiVersion"] == "networking.k8s.io/v1"
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert "Ingress" in policy["spec"]["policyTypes"]
    (rule,) = policy["spec"]["ingress"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert {(p["port"], p["protocol"]) for p in rule["ports"]} == {(p["name"], "TCP") for p in container["ports"]}
    assert "from" not in rule  # from anywhere: the doors are the service (narrow it per installation)


_UNITS = {"": 1, "k": 1000, "M": 1000**2, "G": 1000**3, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}


def _bytes(quantity: str) -> int:
    """A Kubernetes quantity of bytes (``2304Mi``, ``2Gi``, ``512``)."""
    number, unit = re.fullmatch(r"([0-9]+)([kMG]|[KMGT]i)?", quantity).groups()  # type: ignore[union-attr]
    return int(number) * _UNITS[unit or ""]


def test_the_var_volume_holds_the_spool_of_every_worker(documents: list[tuple[Path, dict[str, Any]]]) -> None:
    """``KM_MAX_SPOOL_BYTES`` per worker process (one per CPU of the limit), with 256 Mi for the rest of
    ``KM_VAR_DIR``, fits the ``var`` emptyDir (a spool beyond its sizeLimit gets the pod evicted), the
    node reserves as much, and one stream of ``KM_MAX_STREAM_BYTES`` fits the quota."""
    config = _config(documents)
    pod = _only(documents, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mount = next(m["name"] for m in container["volumeMounts"] if m["mountPath"] == config["KM_VAR_DIR"])
    volume = next(v for v in pod["volumes"] if v["name"] == mount)
    size = _bytes(volume["emptyDir"]["sizeLimit"])
    cpu = str(container["resources"]["limits"]["cpu"])
    workers = math.ceil(int(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu))
    spool = int(config.get("KM_MAX_SPOOL_BYTES", Settings.model_fields["max_spool_bytes"].default))
    stream = int(config.get("KM_MAX_STREAM_BYTES", Settings.model_fields["max_stream_bytes"].default))
    assert workers * spool + 256 * 1024**2 <= size, (workers, spool, size)
    assert size - workers * spool <= 512 * 1024**2, "the volume is sized to the spool, not far beyond it"
    assert stream <= spool
    assert _bytes(container["resources"]["requests"]["ephemeral-storage"]) >= size


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
