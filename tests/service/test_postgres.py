"""PostgreSQL specifics, on a throw-away server (skipped with the reason when no postgres binaries exist).

The store contract itself runs on PostgreSQL through the parametrized tests in test_store.py; here: the whole
service over HTTP on PostgreSQL, concurrent migrations, and errors that never show the database password.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from diagnose.service.bench import alertmanager_payload, free_socket
from diagnose.service.store import SCHEMA_VERSION, StoreError, open_store

TOKEN = "pg-test-token"


def test_the_service_runs_on_postgresql(pg_server: Any, service: Any, recorder: Any) -> None:
    url = pg_server.new_database()
    svc = service(store=url, alertmanager_token=TOKEN, post_url=recorder.url)
    assert svc.store.backend == "postgresql"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    codes = [httpx.post(f"{svc.base_url}/hooks/alertmanager", json=alertmanager_payload(i % 3), headers=auth,
                        timeout=30).status_code for i in range(6)]
    assert sorted(codes) == [200, 200, 200, 202, 202, 202]
    svc.worker.run_until_idle()
    listed = httpx.get(f"{svc.base_url}/incidents").json()
    assert len(listed) == 3 and {x["status"] for x in listed} == {"waiting_for_evidence"}
    assert len(recorder.posts) == 3
    health = httpx.get(f"{svc.base_url}/healthz").json()
    assert health["store"] == "ok" and health["store_backend"] == "postgresql" and health["queue_depth"] == 0


def test_concurrent_first_starts_migrate_once(pg_server: Any) -> None:
    url = pg_server.new_database()
    errors: list[BaseException] = []
    stores: list[Any] = []
    barrier = threading.Barrier(4)

    def start() -> None:
        barrier.wait()
        try:
            stores.append(open_store(url))
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == [] and len(stores) == 4
        assert all(s.schema_version() == SCHEMA_VERSION for s in stores)
        with stores[0]._tx() as tx:
            assert tx.one("SELECT COUNT(*) AS n FROM schema_version")["n"] == 1
    finally:
        for s in stores:
            s.close()


def test_an_unreachable_server_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there
    with pytest.raises(StoreError) as info:
        open_store(f"postgresql://diagnose:s3cret-pw@127.0.0.1:{port}/diagnose")
    assert "s3cret-pw" not in str(info.value) and "***" in str(info.value)
    assert f"127.0.0.1:{port}" in str(info.value)
