"""Card-number tokens through a real server over TLS: the README's curl example, as written."""

from __future__ import annotations

from keymanager.domain.tokens import luhn_residue
from tests.e2e.conftest import Server
from tests.e2e.test_server import run_readme_block


def test_readme_tokens_example_runs_as_written(server: Server) -> None:
    out = run_readme_block(server, "tokens").splitlines()
    assert out[0] == '{"alphabet":"digits","keep_first":0,"keep_last":4,"luhn":"valid"}'
    token = out[1]
    assert len(token) == 16 and token.isdigit() and token.endswith("1111") and token != "4111111111111111"
    assert luhn_residue(token) == 0
    assert out[2] == "4111111111111111"


def test_readme_import_example_runs_as_written(server: Server) -> None:
    """A key wrapped by openssl under the service's RSA public key imports and encrypts."""
    out = run_readme_block(server, "import").splitlines()
    assert out == ["pending_import", '{"state":"enabled","origin":"external","primary_version":1}']
