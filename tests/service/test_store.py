"""The store on both backends (SQLite and PostgreSQL, parametrized): dedup, atomic claims with leases, backoff,
idempotent incident upsert with grouping, the post-back outbox, feedback, migrations."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from diagnose.service.models import FeedbackRecord, IncidentDraft, PortRef
from diagnose.service.store import SCHEMA_VERSION, StoreError, open_store

T0 = 1_800_000_000.0


IBSTAT = {"path": "gpu-a001/ibstat.out", "format": "ibstat", "records": 4, "problem": None}  # evidence read

def draft(ext: str, state: str = "firing", hosts: tuple[str, ...] = ("gpu-a001",), **kw: Any) -> IncidentDraft:
    return IncidentDraft(source=kw.pop("source", "alertmanager"), external_id=ext, title=kw.pop("title", "IB errors"),
                         text=kw.pop("text", "symbol errors rising"), hosts=list(hosts), state=state, **kw)


def queue(store: Any, n: int, now: float = T0) -> list[int]:
    return [store.accept_request("alertmanager", f"fp{i}:firing", {"content-type": "application/json"}, "{}",
                                 now=now).request_id for i in range(n)]


def test_reopening_keeps_data_and_a_newer_schema_is_refused(store: Any, store_url: str) -> None:
    rid = queue(store, 1)[0]
    assert store.schema_version() == SCHEMA_VERSION
    again = open_store(store_url)
    try:
        assert again.get_request(rid) is not None
        with again._tx() as tx:
            tx.run("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    finally:
        again.close()
    with pytest.raises(StoreError, match="newer than this diagnose"):
        open_store(store_url)


def test_same_dedup_key_is_a_duplicate_of_the_first_and_never_queued(store: Any) -> None:
    first = store.accept_request("alertmanager", "abc:firing", {"x-a": "1"}, '{"a": 1}', now=T0)
    second = store.accept_request("alertmanager", "abc:firing", {"x-a": "2"}, '{"a": 2}', now=T0 + 1)
    other_source = store.accept_request("pagerduty", "abc:firing", {}, "{}", now=T0)
    no_key = [store.accept_request("generic", None, {}, "{}", now=T0) for _ in range(2)]
    assert not first.duplicate and second.duplicate and second.request_id == first.request_id
    assert not other_source.duplicate and other_source.request_id != first.request_id
    assert not any(a.duplicate for a in no_key) and no_key[0].request_id != no_key[1].request_id
    dups = store.list_requests(status="duplicate")
    assert [(d.duplicate_of, d.body) for d in dups] == [(first.request_id, '{"a": 2}')]
    claimed = []
    while (r := store.claim_next(60, 5, now=T0 + 2)) is not None:
        claimed.append(r.id)
    assert sorted(claimed) == sorted([first.request_id, other_source.request_id, *(a.request_id for a in no_key)])


def test_rejected_requests_are_kept_with_their_reason_and_never_claimed(store: Any) -> None:
    rid = store.reject_request("jira", {"content-type": "application/json"}, "{not json", "body is not JSON", now=T0)
    rows = store.list_requests(status="rejected")
    assert [(r.id, r.error, r.body) for r in rows] == [(rid, "body is not JSON", "{not json")]
    assert store.claim_next(60, 5, now=T0 + 10) is None


def test_a_claim_is_exclusive_until_its_lease_expires(store: Any) -> None:
    rid = queue(store, 1)[0]
    a = store.claim_next(30, 5, now=T0)
    assert a is not None and a.id == rid and a.status == "processing" and a.attempts == 1
    assert store.claim_next(30, 5, now=T0 + 29) is None
    b = store.claim_next(30, 5, now=T0 + 31)  # the first worker died: its lease ran out
    assert b is not None and b.id == rid and b.attempts == 2 and b.claim_token != a.claim_token
    # the first worker wakes up: its result is refused, the second one's is taken
    assert store.mark_done(rid, a.claim_token, {}, now=T0 + 32) is False
    assert store.get_request(rid).status == "processing"
    assert store.mark_done(rid, b.claim_token, {}, now=T0 + 33) is True
    assert store.get_request(rid).status == "done"


def test_a_request_whose_worker_keeps_dying_is_failed_not_claimed_forever(store: Any) -> None:
    rid = queue(store, 1)[0]
    for k in range(3):
        assert store.claim_next(10, 3, now=T0 + k * 20) is not None
    assert store.claim_next(10, 3, now=T0 + 100) is None
    r = store.get_request(rid)
    assert r.status == "failed" and "3 times" in (r.error or "")


def test_failures_back_off_exponentially_then_fail_with_the_error(store: Any) -> None:
    rid = queue(store, 1)[0]
    now, waits = T0, []
    for _ in range(3):
        r = store.claim_next(60, 4, now=now)
        assert r is not None and r.id == rid
        assert store.mark_failed(rid, r.claim_token, "boom", max_attempts=4, backoff_base_s=2, backoff_max_s=5,
                                 now=now) == "pending"
        due = store.get_request(rid).next_attempt_at
        waits.append(due - now)
        assert store.claim_next(60, 4, now=due - 0.5) is None  # not before its time
        now = due
    assert waits == [2, 4, 5]  # base * 2**(n-1), capped at backoff_max_s
    r = store.claim_next(60, 4, now=now)
    assert store.mark_failed(rid, r.claim_token, "still boom", max_attempts=4, backoff_base_s=2, backoff_max_s=5,
                             now=now) == "failed"
    final = store.get_request(rid)
    assert (final.status, final.error, final.attempts) == ("failed", "still boom", 4)
    assert store.mark_failed(rid, r.claim_token, "late", max_attempts=4, backoff_base_s=2, backoff_max_s=5) == "lost"


def test_concurrent_claims_never_hand_out_a_request_twice(store: Any) -> None:
    ids = queue(store, 40)
    got: list[int] = []
    lock = threading.Lock()

    def drain() -> None:
        while (r := store.claim_next(600, 5, now=T0)) is not None:
            with lock:
                got.append(r.id)

    threads = [threading.Thread(target=drain) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(ids)


def test_upsert_is_idempotent(store: Any) -> None:
    d = draft("fp-1", ports=[PortRef(host="gpu-a001", device="mlx5_0", port=1)], reply_to={"jira_issue": "OPS-1"})
    a = store.upsert_incident(d, now=T0)
    b = store.upsert_incident(d, now=T0 + 1)
    assert a.created and not b.created and a.incident.id == b.incident.id
    assert a.needs_triage and b.needs_triage  # still undiagnosed: a re-run after a crash diagnoses it
    inc = store.get_incident(a.incident.id)
    assert inc.alert_count == 1 and inc.status == "open"
    assert inc.ports == [PortRef(host="gpu-a001", device="mlx5_0", port=1)]
    assert store.get_reply_to(inc.id) == {"jira_issue": "OPS-1"}
    assert len(store.list_incidents()) == 1


def test_alerts_behind_one_switch_within_the_window_are_one_incident(store: Any) -> None:
    first = store.upsert_incident(draft("fp-1", hosts=("gpu-a001",)), group_key="leaf-a-r2", group_window_s=300,
                                  now=T0)
    second = store.upsert_incident(draft("fp-2", hosts=("gpu-a002",)), group_key="leaf-a-r2", group_window_s=300,
                                   now=T0 + 100)
    again = store.upsert_incident(draft("fp-2", hosts=("gpu-a002",)), group_key="leaf-a-r2", group_window_s=300,
                                  now=T0 + 101)
    other_leaf = store.upsert_incident(draft("fp-3"), group_key="leaf-b-r1", group_window_s=300, now=T0 + 102)
    late = store.upsert_incident(draft("fp-4"), group_key="leaf-a-r2", group_window_s=300, now=T0 + 100 + 301)
    assert second.grouped and second.incident.id == first.incident.id and not second.needs_triage
    assert not again.grouped and again.incident.id == first.incident.id  # a re-run counts nothing twice
    inc = store.get_incident(first.incident.id)
    assert inc.alert_count == 2 and inc.hosts == ["gpu-a001", "gpu-a002"] and inc.group_key == "leaf-a-r2"
    assert other_leaf.incident.id != first.incident.id
    assert late.created and late.incident.id != first.incident.id  # the window is measured from the last alert
    assert store.find_incident("alertmanager", "fp-2").id == first.incident.id


def test_a_group_resolves_when_its_last_alert_does_and_refiring_reopens_it(store: Any) -> None:
    a = store.upsert_incident(draft("fp-1"), group_key="leaf", group_window_s=300, now=T0)
    store.upsert_incident(draft("fp-2"), group_key="leaf", group_window_s=300, now=T0 + 1)
    store.set_diagnosis(a.incident.id, {"causes": [], "files": [IBSTAT]}, now=T0 + 2)
    r1 = store.upsert_incident(draft("fp-1", state="resolved"), now=T0 + 3)
    assert not r1.resolved and store.get_incident(a.incident.id).status == "diagnosed"
    r2 = store.upsert_incident(draft("fp-2", state="resolved",
                                     ends_at=datetime(2027, 1, 15, 8, 0, tzinfo=timezone.utc)), now=T0 + 4)
    assert r2.resolved and not r2.needs_triage
    inc = store.get_incident(a.incident.id)
    assert inc.status == "resolved" and inc.ends_at == datetime(2027, 1, 15, 8, 0, tzinfo=timezone.utc)
    refire = store.upsert_incident(draft("fp-1"), now=T0 + 5000)
    assert refire.incident.id == a.incident.id and refire.needs_triage and refire.incident.status == "open"
    # an alert first seen resolved is recorded, never diagnosed
    only_resolved = store.upsert_incident(draft("fp-9", state="resolved"), now=T0)
    assert only_resolved.created and only_resolved.incident.status == "resolved" and not only_resolved.needs_triage


def test_done_stores_every_diagnosis_and_queues_one_postback_each(store: Any) -> None:
    rid = queue(store, 1)[0]
    inc = store.upsert_incident(draft("fp-1"), request_id=rid, now=T0).incident
    r = store.claim_next(60, 5, now=T0)
    diag = {"schema_version": 1, "symptoms": [], "causes": [{"id": "link.bad_cable"}], "ruled_out": [],
            "missing_evidence": [], "files": [IBSTAT]}
    assert store.mark_done(rid, r.claim_token, {inc.id: (diag, ["ibstat read for gpu-a001"])}, now=T0 + 1)
    got = store.get_incident(inc.id)
    assert got.status == "diagnosed" and got.diagnosis == diag and got.top_cause() == "link.bad_cable"
    assert store.incident_extras(inc.id)["evidence_notes"] == ["ibstat read for gpu-a001"]
    claimed = store.claim_delivery(60, now=T0 + 2)
    assert claimed is not None and claimed.id == inc.id
    assert store.claim_delivery(60, now=T0 + 3) is None  # being sent
    again = store.claim_delivery(60, now=T0 + 63)  # the sender died before recording: sent again
    assert again is not None and again.id == inc.id

    class D:
        target, ok, status_code, attempts, error = "post_url", True, 200, 1, None

    store.record_delivery(inc.id, [D()], now=T0 + 64)
    assert store.claim_delivery(60, now=T0 + 1000) is None  # recorded: never posted again
    assert [(d.target, d.ok, d.status_code) for d in store.list_deliveries(inc.id)] == [("post_url", True, 200)]
    c = store.counts()
    assert c["requests"] == {"done": 1} and c["incidents"] == {"diagnosed": 1} and c["deliveries_pending"] == 0


def test_a_manual_incident_is_stored_and_queued_once(store: Any) -> None:
    d = draft("chat-42", source="chat", title="job 4412 slow", state="open", job_id="4412")
    inc = store.create_manual_incident(d)
    again = store.create_manual_incident(d)
    assert again.id == inc.id and store.find_incident("chat", "chat-42").job_id == "4412"
    pending = store.list_requests(status="pending")
    assert len(pending) == 1 and IncidentDraft.model_validate_json(pending[0].body) == d
    assert len(store.list_requests(status="duplicate")) == 1


def test_feedback_round_trips(store: Any) -> None:
    inc = store.upsert_incident(draft("fp-1"), now=T0).incident
    at = datetime(2027, 1, 15, 9, 30, tzinfo=timezone.utc)
    fb = [FeedbackRecord(incident_id=inc.id, verdict="wrong", cause="link.bad_cable", actual="link.degraded",
                         user="alice", platform="slack", created_at=at),
          FeedbackRecord(incident_id=inc.id, verdict="right", cause="link.bad_cable", user="bob", platform="teams",
                         created_at=at)]
    for f in fb:
        store.add_feedback(f)
    assert store.list_feedback() == fb


def test_leases_of_a_dead_local_process_are_released_at_once(store: Any) -> None:
    from diagnose.service.store import HOSTNAME

    rid = queue(store, 1)[0]
    r = store.claim_next(600, 5, now=T0)
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(child.stdout)
    with store._tx() as tx:  # as if that (now exited) process had claimed it
        tx.run("UPDATE requests SET claim_token = ? WHERE id = ?", (f"{HOSTNAME}:{dead_pid}:x", rid))
    assert store.claim_next(600, 5, now=T0 + 1) is None
    assert store.release_dead_leases(now=T0 + 1) == 1
    again = store.claim_next(600, 5, now=T0 + 1)
    assert again is not None and again.id == rid and r.attempts == 1 and again.attempts == 2
    # a lease held by this very process is never taken away
    assert store.release_dead_leases(now=T0 + 2) == 0


def test_a_storm_upserted_from_many_threads_at_once_is_one_incident(store: Any) -> None:
    barrier = threading.Barrier(6)
    results: list[Any] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        barrier.wait()
        res = store.upsert_incident(draft(f"fp-{i}", hosts=(f"gpu-a{i:03d}",)), group_key="leaf-a-r0",
                                    group_window_s=300, now=T0 + i * 0.001)
        with lock:
            results.append(res)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    [inc] = store.list_incidents()
    assert inc.alert_count == 6 and len(inc.hosts) == 6
    assert sum(r.created for r in results) == 1 and sum(r.needs_triage for r in results) == 1


def test_a_diagnosis_from_no_recognised_file_waits_for_evidence(store: Any) -> None:
    a = store.upsert_incident(draft("fp-9"), now=T0)
    unread = {"path": "notes.txt", "format": "unknown", "records": 0, "problem": None}
    store.set_diagnosis(a.incident.id, {"causes": [], "files": [unread]}, now=T0 + 1)
    assert store.get_incident(a.incident.id).status == "waiting_for_evidence"
    # its alert firing again diagnoses it again (a bundle may have arrived since)
    again = store.upsert_incident(draft("fp-9"), now=T0 + 2)
    assert again.needs_triage
    store.set_diagnosis(a.incident.id, {"causes": [], "files": [IBSTAT]}, now=T0 + 3)
    assert store.get_incident(a.incident.id).status == "diagnosed"


def test_a_version_1_store_is_migrated_and_keeps_its_requests(tmp_path: Path) -> None:
    import sqlite3

    from diagnose.service.store import _SCHEMA_V1

    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    for stmt in _SCHEMA_V1:
        conn.execute(stmt.format(pk="INTEGER PRIMARY KEY AUTOINCREMENT"))
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (1)")
    conn.execute("INSERT INTO requests (source, dedup_key, received_at, body, status, next_attempt_at)"
                 " VALUES ('alertmanager', 'k', 1, '{}', 'pending', 1)")
    conn.commit()
    conn.close()
    store = open_store(f"sqlite:///{path}")
    try:
        assert store.schema_version() == SCHEMA_VERSION == 2
        (req,) = store.list_requests()
        assert (req.dedup_key, req.status, req.replays, req.last_received_at) == ("k", "pending", 0, None)
        assert store.accept_request("alertmanager", "k", {}, "{}").duplicate
        assert store.list_requests(status="duplicate")[0].duplicate_of == req.id
    finally:
        store.close()
