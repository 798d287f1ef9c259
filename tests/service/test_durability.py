"""The store never acknowledges what it cannot keep: a deleted or replaced SQLite file, a full disk, a lost
PostgreSQL connection and a full queue are each a 503 (with ``Retry-After``, one log line, ``/healthz`` saying
why), and every request answered 202 is still there after a restart."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from diagnose.service.bench import alertmanager_payload
from diagnose.service.store import SqlStore, open_store

TOKEN = "am-token-for-durability"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def post(svc: Any, body: Any) -> httpx.Response:
    return httpx.post(f"{svc.base_url}/hooks/alertmanager", headers=AUTH, json=body, timeout=30)


def health(svc: Any) -> httpx.Response:
    return httpx.get(f"{svc.base_url}/healthz", timeout=30)


def test_a_deleted_database_file_is_503_and_nothing_acknowledged_is_lost_after_a_restart(
        service: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    svc = service(alertmanager_token=TOKEN, data_dir=data)
    acked = []
    for i in range(5):
        r = post(svc, alertmanager_payload(i))
        assert r.status_code == 202
        acked.append(r.json()["request_id"])
    assert health(svc).json()["store"] == "ok"
    db = data / "diagnose.db"
    db.unlink()  # under the running service

    with structlog.testing.capture_logs() as logs:
        refused = [post(svc, alertmanager_payload(100 + i)) for i in range(3)]
    assert [r.status_code for r in refused] == [503, 503, 503]
    assert all(r.headers["retry-after"] == "30" and r.json()["store"] == "gone" for r in refused)
    assert "deleted" in refused[0].json()["detail"]
    door = [e for e in logs if e["event"] == "hook_store_unavailable"]
    assert len(door) == 3 and all(e["state"] == "gone" for e in door)  # one line per refused request
    assert not any("exc_info" in e or "exception" in e for e in logs)
    h = health(svc)
    assert h.status_code == 503 and h.json()["status"] == "unhealthy" and h.json()["store"] == "gone"
    # nothing may quietly recreate an empty database at the path while the service runs
    assert httpx.get(f"{svc.base_url}/requests", timeout=30).status_code == 200
    assert not db.exists()

    svc.server.stop()  # the restart: the copy of what the service still saw becomes the store again
    assert db.exists()
    again = service(alertmanager_token=TOKEN, data_dir=data)
    kept = {r.id: r.status for r in again.store.list_requests(limit=100)}
    assert set(kept) == set(acked) and set(kept.values()) == {"pending"}
    assert health(again).json()["store"] == "ok"
    r = post(again, alertmanager_payload(100))  # the refused request, retried by its sender
    assert r.status_code == 202 and r.json()["request_id"] not in acked


def test_a_database_replaced_under_the_service_is_503_and_the_old_state_is_kept_beside_it(
        service: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    svc = service(alertmanager_token=TOKEN, data_dir=data)
    first = post(svc, alertmanager_payload(1)).json()["request_id"]
    db = data / "diagnose.db"
    other = tmp_path / "other.db"
    sqlite3.connect(other).close()
    os.replace(other, db)  # a restore from a backup, a deploy copying a file over it

    r = post(svc, alertmanager_payload(2))
    assert r.status_code == 503 and r.json()["store"] == "replaced"
    assert health(svc).json()["store"] == "replaced"
    svc.server.stop()
    kept = sorted(data.glob("diagnose.db.rescued-*"))
    assert len(kept) == 1  # the file now at the path is the operator's: the lost state waits beside it
    old = open_store(f"sqlite:///{kept[0]}")
    try:
        assert [x.id for x in old.list_requests()] == [first]
    finally:
        old.close()


def _limit_pages(store: SqlStore, pages: int) -> None:
    """SQLite's own "database or disk is full" (SQLITE_FULL), as a full disk gives it: no page past ``pages``."""
    with store._lock:
        conns = list(store._all)
    for c in conns:
        c.execute(f"PRAGMA max_page_count = {pages}")


def test_a_full_disk_is_503_with_one_line_and_healthz_says_full_until_it_has_room(
        service: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    svc = service(alertmanager_token=TOKEN)
    assert post(svc, alertmanager_payload(0)).status_code == 202
    store = svc.store
    limit: dict[str, int] = {}
    connect = SqlStore._connect

    def limited(self: SqlStore) -> Any:
        conn = connect(self)
        if "pages" in limit:
            conn.execute(f"PRAGMA max_page_count = {limit['pages']}")
        return conn

    monkeypatch.setattr(SqlStore, "_connect", limited)
    limit["pages"] = int(store._read().one("PRAGMA page_count")["page_count"])
    _limit_pages(store, limit["pages"])
    big = alertmanager_payload(1)
    big["commonAnnotations"] = {"description": "x" * 200_000}  # needs new pages, which the "disk" has not

    with structlog.testing.capture_logs() as logs:
        r = post(svc, big)
    assert r.status_code == 503 and r.json()["store"] == "full" and "full" in r.json()["detail"]
    assert [e["event"] for e in logs if e.get("log_level") in ("warning", "error")] == ["hook_store_unavailable"]
    h = health(svc)
    assert h.status_code == 503 and h.json()["store"] == "full"

    limit.pop("pages")
    _limit_pages(store, 1 << 30)  # room again
    assert health(svc).json()["store"] == "ok"
    assert post(svc, big).status_code == 202
    assert {x.status for x in store.list_requests()} == {"pending"}


def test_a_postgresql_connection_lost_before_the_acknowledgement_is_503_then_the_next_reconnects(
        service: Any, pg_server: Any) -> None:
    import psycopg

    url = pg_server.new_database()
    svc = service(alertmanager_token=TOKEN, store=url)
    assert post(svc, alertmanager_payload(1)).status_code == 202
    with psycopg.connect(pg_server.admin_url, autocommit=True) as admin:
        killed = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                               " WHERE datname = %s AND pid <> pg_backend_pid()", (url.rsplit("/", 1)[1],)).fetchall()
    assert killed
    statuses = [post(svc, alertmanager_payload(2)).status_code for _ in range(2)]
    # the connection that was cut answers 503 (not stored, the sender retries); the retry reconnects
    assert statuses in ([503, 202], [202, 200])
    assert [x.status for x in svc.store.list_requests() if x.status != "duplicate"] == ["pending", "pending"]


def test_a_full_queue_is_503_with_retry_after_and_a_copy_of_a_queued_request_is_still_counted(service: Any) -> None:
    svc = service(alertmanager_token=TOKEN, max_queue=2, retry_after_s=7)
    assert [post(svc, alertmanager_payload(i)).status_code for i in range(2)] == [202, 202]
    r = post(svc, alertmanager_payload(3))
    assert r.status_code == 503 and r.headers["retry-after"] == "7" and r.json()["store"] == "queue_full"
    assert post(svc, alertmanager_payload(1)).status_code == 200  # a duplicate takes no room
    h = health(svc).json()
    assert h["queue_depth"] == 2 and h["max_queue"] == 2 and h["queue_full"] is True and h["status"] == "unhealthy"
    metrics = httpx.get(f"{svc.base_url}/metrics", timeout=30).text
    assert "diagnose_queue_depth 2.0" in metrics and "diagnose_queue_limit 2.0" in metrics
    assert 'diagnose_hook_requests_total{outcome="queue_full",source="alertmanager"} 1.0' in metrics
    # the worker drains one: there is room again, and nothing accepted was dropped
    svc.worker.run_once()
    assert post(svc, alertmanager_payload(3)).status_code == 202
    assert sorted(x.status for x in svc.store.list_requests() if x.status != "duplicate") == \
        ["done", "pending", "pending"]
