"""Schemathesis against a real server over TLS: every documented route, as each role.

The OpenAPI description is the contract. For each of four callers (an admin, an app named in
the keys' policies, an auditor, nobody) every operation gets fuzzed cases, valid (positive)
and invalid (negative: wrong types, missing or unknown fields, out-of-range values), its
``key`` parameter often one of three real keys; then the admin gets schemathesis's
deterministic coverage phase. A case fails on a 5xx, a status the description does not list
for that route, a body, content type or header outside the description, an error body that is
not exactly ``{"error": {"code", "message"}, "request_id"}``, invalid data accepted, or an
unexpected method not answered 405 with ``Allow``. The run is bounded: a fixed number of cases
per operation and mode (derandomized, no shrinking), a request timeout, and a deadline over
the whole module.

schemathesis's pytest integration (``schemathesis.pytest.from_fixture``) does not run under
pytest 9.2 (it sets ``Node._nodeid``), so the cases are drawn with its Python API: each
operation's ``as_strategy`` under hypothesis ``given``, and the coverage phase through
``create_test`` (the builder that integration uses), checked by ``call_and_validate``.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    CheckContext,
    not_a_server_error,
)
from schemathesis.generation.hypothesis.builder import HypothesisTestConfig, HypothesisTestMode, create_test
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from tests.security.conftest import Server, running_server

pytestmark = pytest.mark.interop  # make test-interop: schemathesis

ROLES = ("app", "auditor", "anonymous", "admin")  # admin last: its cases change and delete the keys
FUZZED_PER_OPERATION = 4
RUN_DEADLINE_SECONDS = 300.0  # a safety bound under load; the run takes ~45-60 s on 2 shared cores
KEYS = {"fuzz-cbc": "AES_256_CBC_HMAC_SHA256", "fuzz-gcm": "AES_256_GCM", "fuzz-hmac": "HMAC_SHA256"}
REFUSALS = ["400", "401", "403", "404", "405", "409", "413", "415", "422", "429"]


def error_shape(ctx: CheckContext, response: schemathesis.Response, case: schemathesis.Case) -> bool | None:
    """Every 4xx/5xx is exactly the documented error body, JSON, with the request id of its header."""
    if response.status_code < 400 or case.operation.label == "GET /v1/ready":  # its 503 is a Readiness
        return None
    assert response.headers.get("content-type", [""])[0].startswith("application/json"), response.headers
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error", "request_id"}, body
    assert isinstance(body["error"], dict) and set(body["error"]) == {"code", "message"}, body
    assert all(isinstance(body["error"][k], str) and body["error"][k] for k in ("code", "message")), body
    assert body["request_id"] == response.headers.get("x-request-id", [""])[0], body
    assert "Traceback" not in response.text
    return True


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    unsupported_method,
    error_shape,
]


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of its own: the fuzzed admin creates, changes and deletes keys and principals."""
    with running_server(tmp_path_factory.mktemp("fuzz")) as started:
        yield started


@pytest.fixture(scope="module")
def role_headers(fuzz_server: Server) -> dict[str, dict[str, str]]:
    """The headers of each role; the app is named for every use of the three fuzz keys."""
    headers = {"admin": {"Authorization": f"Bearer {fuzz_server.admin_token}"}, "anonymous": {}}
    with fuzz_server.client(fuzz_server.admin_token) as admin:
        for role in ("app", "auditor"):
            made = admin.post("/v1/principals", json={"name": f"fuzz-{role}", "role": role})
            assert made.status_code == 201, made.text
            headers[role] = {"Authorization": f"Bearer {made.json()['token']}"}
        uses = ("encrypt", "decrypt", "generate_data_key", "reencrypt", "mac")
        for name, algorithm in KEYS.items():
            body = {"name": name, "algorithm": algorithm, "policy": {use: ["fuzz-app"] for use in uses}}
            assert admin.post("/v1/keys", json=body).status_code == 201
    return headers


def _draw_real_keys(described: dict[str, Any]) -> None:
    """Let the ``key`` path parameter be one of the real keys about half of the time."""
    for operations in described["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] == "key":
                    parameter["schema"] = {"anyOf": [{"enum": list(KEYS)}, parameter["schema"]]}


@pytest.fixture(scope="module")
def api_schema(fuzz_server: Server) -> Any:
    """The server's own OpenAPI description, loaded by schemathesis."""
    described = httpx.get(f"{fuzz_server.url}/openapi.json", verify=_tls(fuzz_server), timeout=10).json()
    _draw_real_keys(described)
    config = schemathesis.Config.from_dict(
        {
            "base-url": fuzz_server.url,
            "tls-verify": str(fuzz_server.ca),
            "request-timeout": 10,
            "generation": {"mode": "all"},
            "phases": {"coverage": {"enabled": True}},
            "checks": {"negative_data_rejection": {"expected-statuses": REFUSALS}},
        }
    )
    return schemathesis.openapi.from_dict(described, config=config)


@pytest.fixture(scope="module")
def deadline() -> float:
    """The whole fuzz run (every role) ends before this monotonic time."""
    return time.monotonic() + RUN_DEADLINE_SECONDS


def _tls(server: Server) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(server.ca))


class Runner:
    """Sends cases as one role over one TLS session, counting them and collecting failures."""

    def __init__(self, api_schema: Any, headers: dict[str, str], deadline: float) -> None:
        self.schema, self.headers, self.deadline = api_schema, headers, deadline
        self.session = requests.Session()
        self.session.verify = str(api_schema.config.tls_verify)
        self.ran = 0
        self.failures: list[str] = []

    def send(self, case: schemathesis.Case) -> None:
        assert time.monotonic() < self.deadline, f"the fuzz run took over {RUN_DEADLINE_SECONDS} s"
        self.ran += 1
        case.call_and_validate(session=self.session, headers=self.headers, checks=CHECKS)

    def run(self, label: str, test: Callable[[], None]) -> None:
        """Run one hypothesis test; one failing operation must not hide the others."""
        try:
            test()
        except Unsatisfiable:
            pass  # nothing of this operation can be made invalid (no body, a free-form path)
        except (Exception, BaseExceptionGroup) as exc:
            self.failures.append(f"{label}: {str(exc)[:1500]}")

    def report(self, what: str) -> None:
        self.session.close()
        print(f"{what}: {self.ran} cases, {len(self.failures)} failing")
        assert not self.failures, "\n\n".join(self.failures)


@pytest.mark.parametrize("role", ROLES)
def test_every_route_keeps_the_documented_contract(
    api_schema: Any, role_headers: dict[str, dict[str, str]], role: str, deadline: float
) -> None:
    """Fuzzed valid and invalid cases of every operation, as ``role``."""
    runner = Runner(api_schema, role_headers[role], deadline)
    for result in api_schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz = settings(
                max_examples=FUZZED_PER_OPERATION,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )(given(operation.as_strategy(generation_mode=mode))(runner.send))
            runner.run(f"{operation.label} ({mode.value}, {role})", fuzz)
    runner.report(f"fuzz {role}")
    assert runner.ran >= 150


def test_coverage_cases_as_admin(api_schema: Any, role_headers: dict[str, dict[str, str]], deadline: float) -> None:
    """schemathesis's coverage phase as the admin (the one role whose requests get past
    authorisation everywhere): boundary values, each field with every wrong JSON type
    (``"enabled": 0`` among them), missing required fields and parameters, unexpected methods
    (405 with ``Allow``). Deterministic: the same cases every run."""
    runner = Runner(api_schema, role_headers["admin"], deadline)
    explicit = settings(phases=[Phase.explicit], database=None, deadline=None, suppress_health_check=list(HealthCheck))
    for result in api_schema.get_all_operations():
        operation = result.ok()
        config = HypothesisTestConfig(project=api_schema.config, modes=[HypothesisTestMode.COVERAGE], settings=explicit)
        test = create_test(operation=operation, test_func=runner.send, config=config)
        runner.run(f"{operation.label} (coverage)", test)
    runner.report("coverage admin")
    assert runner.ran >= 500


def test_undocumented_methods_are_405_with_allow(fuzz_server: Server, api_schema: Any) -> None:
    """Every path answers every method it does not document with 405 naming the ones it does."""
    methods = {"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
    documented: dict[str, set[str]] = {}
    for result in api_schema.get_all_operations():
        operation = result.ok()
        documented.setdefault(operation.path, set()).add(operation.method.upper())
    with fuzz_server.client(fuzz_server.admin_token) as admin:
        for path, allowed in documented.items():
            concrete = path.replace("{key}", "fuzz-cbc").replace("{name}", "fuzz-app")
            for method in sorted(methods - allowed):
                response = admin.request(method, concrete)
                assert response.status_code == 405, (method, path, response.text)
                assert set(response.headers["allow"].split(", ")) == allowed, (method, path)
                assert response.json()["error"]["code"] == "method_not_allowed"
