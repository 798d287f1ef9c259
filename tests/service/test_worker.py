"""The worker without HTTP: retries with backoff then failure, permanent failures, manual incidents,
post-backs exactly once, body parsing and dedup keys, and the symptom-only diagnosis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diagnose.service.bench import alertmanager_payload
from diagnose.service.models import IncidentDraft
from diagnose.service.settings import Settings
from diagnose.service.worker import BodyError, dedup_key, parse_body, triage_incident

T0 = 1_800_000_000.0


def accept(store: Any, payload: dict[str, Any], now: float = T0) -> int:
    from diagnose.service.hooks import HOOKS

    drafts = HOOKS["alertmanager"].normalize(payload, Settings(_env_file=None))
    return store.accept_request("alertmanager", dedup_key(drafts), {"content-type": "application/json"},
                                json.dumps(payload), now=now).request_id


def test_failures_are_retried_with_backoff_then_failed_with_the_error(make: Any, tmp_path: Path) -> None:
    worker, store = make(max_attempts=3, backoff_base_s=10, backoff_max_s=15)
    (tmp_path / "data" / "incidents").write_text("a file where the evidence folders should go")
    rid = accept(store, alertmanager_payload(1))
    now, delays = T0, []
    for attempt in (1, 2):
        assert worker.run_once(now=now)
        r = store.get_request(rid)
        assert (r.status, r.attempts) == ("pending", attempt) and "incidents" in (r.error or "")
        delays.append(r.next_attempt_at - now)
        assert not worker.run_once(now=r.next_attempt_at - 1)  # nothing due before the backoff ends
        now = r.next_attempt_at
    assert delays == [10, 15]
    assert worker.run_once(now=now)
    r = store.get_request(rid)
    assert (r.status, r.attempts) == ("failed", 3) and r.error
    [inc] = store.list_incidents()
    assert inc.status == "failed" and inc.error == r.error and inc.diagnosis is None
    assert not worker.run_once(now=now + 10_000)


def test_a_payload_that_no_longer_normalizes_fails_at_once(make: Any) -> None:
    worker, store = make(max_attempts=5)
    rid = store.accept_request("alertmanager", None, {"content-type": "application/json"}, '{"version": "1"}',
                               now=T0).request_id
    assert worker.run_once(now=T0)
    r = store.get_request(rid)
    assert (r.status, r.attempts) == ("failed", 1) and "version" in (r.error or "")


def test_a_manual_incident_is_diagnosed_from_its_text(make: Any) -> None:
    worker, store = make()
    inc = store.create_manual_incident(IncidentDraft(
        source="chat", external_id="slack-C01-1700000000.1234", title="job 4412 hangs",
        text="AllReduce timed out after 600 s, watchdog fired on gpu-a003", hosts=["gpu-a003"], job_id="4412"))
    assert inc.status == "open"
    worker.run_until_idle()
    got = store.get_incident(inc.id)
    assert got.status == "waiting_for_evidence"  # its text alone: no bundle for gpu-a003 yet
    kinds = {(s["kind"], s["source"]) for s in got.diagnosis["symptoms"]}
    assert ("collective_timeout", "chat") in kinds


def test_a_diagnosis_is_posted_back_once_even_when_the_worker_stops_before_posting(make: Any, recorder: Any) -> None:
    worker, store = make(post_url=recorder.url)
    rid = accept(store, alertmanager_payload(4))
    # a worker that stored the diagnosis and died before its post-back: the outbox says 'pending'
    req = store.claim_next(600, 5, now=T0)
    inc = store.upsert_incident(IncidentDraft(source="alertmanager", external_id=f"{4:016x}", title="IB errors"),
                                request_id=rid, now=T0).incident
    diag = triage_incident([], "symbol errors on gpu-b004", "hook").model_dump(mode="json")
    assert store.mark_done(rid, req.claim_token, {inc.id: (diag, [])}, now=T0)
    assert recorder.posts == []
    assert worker.run_once()  # the next worker finds the pending post-back
    assert len(recorder.posts) == 1
    assert not worker.run_until_idle()
    assert len(recorder.posts) == 1
    [d] = store.list_deliveries(inc.id)
    assert d.ok and d.status_code == 200


def test_worker_threads_start_and_stop(make: Any) -> None:
    worker, store = make(worker_threads=2)
    assert not worker.alive()
    worker.start()
    try:
        assert worker.alive()
    finally:
        worker.stop()
    assert not worker.alive()


def test_bodies_are_read_as_json_or_forms() -> None:
    assert parse_body(b'{"a": [1, 2]}', "application/json") == {"a": [1, 2]}
    assert parse_body(b'{"a": 1}', "") == {"a": 1}
    assert parse_body(b"payload=%7B%22zen%22%3A+%22x%22%7D", "application/x-www-form-urlencoded") == {"zen": "x"}
    assert parse_body(b"text=hello+world&user_name=bob", "application/x-www-form-urlencoded; charset=utf-8") == {
        "text": "hello world", "user_name": "bob"}
    multipart = (b"--XyZ\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nhost gpu-a003\r\n--XyZ--\r\n")
    assert parse_body(multipart, "multipart/form-data; boundary=XyZ") == {"text": "host gpu-a003"}
    for raw, ctype in ((b"{nope", "application/json"), (b"\xff\xfe", "application/json"),
                       (b"payload=%7Bnot-json", "application/x-www-form-urlencoded")):
        with pytest.raises(BodyError):
            parse_body(raw, ctype)


def test_dedup_key_is_the_alert_state_and_episode() -> None:
    def d(state: str, start: str | None = "2026-11-29T10:00:00Z") -> IncidentDraft:
        return IncidentDraft(source="alertmanager", external_id="abc", title="t", state=state, starts_at=start)

    assert dedup_key([d("firing")]) == dedup_key([d("firing")])
    assert dedup_key([d("firing")]) != dedup_key([d("resolved")])
    assert dedup_key([d("firing")]) != dedup_key([d("firing", "2026-11-30T10:00:00Z")])  # fired again later
    assert dedup_key([]) is None
    many = [IncidentDraft(source="alertmanager", external_id=f"{i:032x}", title="t") for i in range(50)]
    assert dedup_key(many) == dedup_key(list(reversed(many))) and len(dedup_key(many)) < 100


def test_symptom_only_diagnosis_matches_the_cli_on_an_unrecognised_bundle(tmp_path: Path) -> None:
    """With no evidence, the service's diagnosis is what ``diagnose triage`` gives for the same symptom when the
    bundle holds nothing it recognises (only the files list differs)."""
    from diagnose.pipeline import triage

    symptom = ("AllReduce busbw dropped to 40 GB/s on 16 nodes; NCCL_IB_DISABLE=1 was set in the launch script;\n"
               "NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129")
    (tmp_path / "notes.txt").write_text("lunch at noon\n")
    cli = triage([tmp_path], symptom, symptom_source="hook").model_dump(mode="json")
    service = triage_incident([], symptom, "hook").model_dump(mode="json")
    assert [f["format"] for f in cli.pop("files")] == ["unknown"] and service.pop("files") == []
    assert service == cli
    assert service["causes"]  # the text alone supports causes


def test_the_heartbeat_keeps_a_long_claim_leased(make: Any) -> None:
    import time

    from diagnose.service.worker import _Heartbeat

    worker, store = make()
    rid = accept(store, alertmanager_payload(9), now=time.time())
    req = store.claim_next(3, 5)  # a 3 s lease: beats every second
    first = req.lease_until
    with _Heartbeat(store, rid, req.claim_token, 3):
        deadline = time.monotonic() + 30
        while store.get_request(rid).lease_until <= first:
            assert time.monotonic() < deadline, "the lease was never extended"
            time.sleep(0.05)
    assert store.claim_next(3, 5) is None  # still ours
