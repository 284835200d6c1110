"""The service through a real PgBouncer in transaction mode: the store uses nothing a transaction
pooler breaks (session state, advisory locks held across transactions, prepared statements when
``KM_DATABASE_PREPARED_STATEMENTS=false``), and many client connections share a few server ones.

``keymanager init`` migrates through PgBouncer, then ``keymanager serve --workers 2`` (each worker:
its audit writer's lanes and its pool) runs keys, crypto, rotation and the audit log through a
PgBouncer allowed two server connections to the database.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.e2e.conftest import keymanager
from tests.replicas.conftest import Installation, Load, Node, app_and_key, audited_request_ids, install, running
from tests.support.pgbouncer import Bouncer, pgbouncer
from tests.support.postgres import create_database, drop_database

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def bouncer() -> Iterator[tuple[Bouncer, str]]:
    """A throwaway database and a PgBouncer (transaction mode, 2 server connections) in front of it."""
    url = create_database()
    server = make_url(url)
    try:
        with pgbouncer(server.host or "127.0.0.1", server.port or 5432, pool_size=2) as running_bouncer:
            yield running_bouncer, url
    finally:
        drop_database(url)


@pytest.fixture(scope="module")
def bounced(
    bouncer: tuple[Bouncer, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Installation, Node]]:
    running_bouncer, url = bouncer
    through = running_bouncer.url(make_url(url).database or "")
    home = tmp_path_factory.mktemp("pgbouncer")
    installation = install(
        home, through, KM_DATABASE_PREPARED_STATEMENTS="false", KM_AUDIT_WRITER_LANES="2", KM_MIN_PENDING_DAYS="0"
    )
    with running(installation, "bounced", "--workers", "2") as node:
        yield installation, node


def server_connections(url: str) -> int:
    """Connections of the database's own server to it, but this one."""
    server = make_url(url)
    with psycopg.connect(
        f"host={server.host} port={server.port} user={server.username} dbname=postgres", autocommit=True
    ) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (server.database,)
        ).fetchone()
    return int(row[0]) if row else 0


def test_keys_crypto_and_the_audit_log_work_through_a_transaction_pooler(
    bounced: tuple[Installation, Node], bouncer: tuple[Bouncer, str]
) -> None:
    installation, node = bounced
    token = app_and_key(node, installation.admin_token, "bounced")
    with node.client(token) as app, node.client(installation.admin_token) as admin:
        for n in range(20):  # each statement many times: a prepared one would fail through PgBouncer 1.18
            plaintext = base64.b64encode(f"field {n}".encode()).decode()
            sealed = app.post("/v1/keys/bounced/encrypt", json={"plaintext": plaintext})
            assert sealed.status_code == 200, sealed.text
            opened = app.post("/v1/decrypt", json={"ciphertext": sealed.json()["ciphertext"]})
            assert (opened.status_code, opened.json().get("plaintext")) == (200, plaintext)
        assert admin.post("/v1/keys/bounced/rotate").status_code == 200
        assert app.post("/v1/keys/bounced/encrypt", json={"plaintext": "aGk="}).json()["key_version"] == 2
        assert admin.patch("/v1/keys/bounced", json={"description": "through pgbouncer"}).status_code == 200
        verdict = admin.get("/v1/audit/verify").json()
    assert verdict["ok"] is True, verdict
    with Load([node], token, "bounced", threads=8) as load:
        load.wait_for(300)
    assert not load.refused, load.refused
    assert set(load.acknowledged) <= audited_request_ids(node, installation.admin_token)
    assert server_connections(bouncer[1]) <= bouncer[0].pool_size  # the workers' connections shared two
    checked = keymanager("audit", "verify", env=installation.env, cwd=installation.home)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    log = bouncer[0].log.read_text(errors="replace")
    assert "prepared statement" not in log and "ERROR" not in log, log[-2000:]
    assert "ERROR" not in Path(node.log).read_text(errors="replace")
