"""The service over real HTTP (uvicorn on a free loopback port): the door (401/413/422/404, dedup), the
incidents API and its diagnosis JSON contract, form bodies, health and metrics."""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import jsonschema

from diagnose.service.bench import alertmanager_payload

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

TOKEN = "am-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BAD_CABLE = FIXTURES / "link" / "bad_cable" / "positive-symbol-errors-rising"


def post(svc: Any, body: Any = None, *, headers: dict[str, str] | None = None, source: str = "alertmanager",
         **kw: Any) -> httpx.Response:
    h = AUTH if headers is None else headers
    if body is not None:
        kw["json"] = body
    return httpx.post(f"{svc.base_url}/hooks/{source}", headers=h, timeout=30, **kw)


def test_unsigned_or_wrongly_signed_requests_get_401_and_nothing_is_stored(service: Any) -> None:
    svc = service(alertmanager_token=TOKEN)
    assert post(svc, alertmanager_payload(1), headers={}).status_code == 401
    r = post(svc, alertmanager_payload(1), headers={"Authorization": "Bearer wrong-token"})
    assert r.status_code == 401 and "unauthorized" in r.json()["detail"]
    # a source with no secret configured refuses everything
    assert post(svc, {"action": "opened"}, source="github", headers={"X-GitHub-Event": "issues"}).status_code == 401
    assert svc.store.list_requests() == []
    metrics = httpx.get(f"{svc.base_url}/metrics").text
    assert 'diagnose_hook_requests_total{outcome="unauthorized",source="alertmanager"} 2.0' in metrics


def test_oversized_bodies_get_413_even_chunked_without_content_length(service: Any) -> None:
    svc = service(alertmanager_token=TOKEN, max_body_bytes=2048)
    big = {"version": "4", "pad": "x" * 5000, "alerts": []}
    assert post(svc, big).status_code == 413

    def chunks():  # no Content-Length: httpx sends Transfer-Encoding: chunked
        for _ in range(10):
            yield b" " * 1000

    r = httpx.post(f"{svc.base_url}/hooks/alertmanager", headers=AUTH, content=chunks(), timeout=30)
    assert r.status_code == 413 and "2048" in r.json()["detail"]
    # a Content-Length that claims more than the limit is refused before the body is read
    with socket.create_connection(("127.0.0.1", svc.server.port), timeout=10) as s:
        s.sendall(b"POST /hooks/alertmanager HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                  + b"\r\nContent-Type: application/json\r\nContent-Length: 999999\r\n\r\n{}")
        assert s.recv(64).startswith(b"HTTP/1.1 413")
    assert svc.store.list_requests() == []
    # a body just under the limit is fine
    assert post(svc, alertmanager_payload(1)).status_code == 202


def test_malformed_or_unknown_payloads_get_422_and_are_kept_as_rejected(service: Any) -> None:
    svc = service(alertmanager_token=TOKEN)
    r1 = post(svc, content=b'{"version": "4", "alerts": [', headers={**AUTH, "Content-Type": "application/json"})
    r2 = post(svc, {"version": "3", "alerts": []})
    assert r1.status_code == 422 and "not JSON" in r1.json()["detail"]
    assert r2.status_code == 422 and '"4"' in r2.json()["detail"]
    rejected = httpx.get(f"{svc.base_url}/requests", params={"status": "rejected"}).json()
    assert {r["id"] for r in rejected} == {r1.json()["request_id"], r2.json()["request_id"]}
    by_id = {r["id"]: r for r in rejected}
    assert by_id[r1.json()["request_id"]]["body"] == '{"version": "4", "alerts": ['
    assert by_id[r2.json()["request_id"]]["error"] == r2.json()["detail"]
    assert all("authorization" not in r["headers"] for r in rejected)  # the token is never stored
    assert svc.worker.run_until_idle() == 0  # nothing to process


def test_unknown_source_is_404(service: Any) -> None:
    svc = service(alertmanager_token=TOKEN)
    assert post(svc, alertmanager_payload(1), source="nagios").status_code == 404


def test_the_same_alert_twice_is_processed_once(service: Any, recorder: Any) -> None:
    svc = service(alertmanager_token=TOKEN, post_url=recorder.url)
    first = post(svc, alertmanager_payload(7))
    second = post(svc, alertmanager_payload(7))
    assert first.status_code == 202 and first.json()["status"] == "accepted"
    assert second.status_code == 200 and second.json() == {"request_id": first.json()["request_id"],
                                                           "status": "duplicate"}
    svc.worker.run_until_idle()
    c = svc.store.counts()
    assert c["requests"] == {"done": 1, "duplicate": 1}
    assert c["incidents"] == {"waiting_for_evidence": 1}  # no bundle for the host: diagnosed from the alert text
    assert len(recorder.posts) == 1


def test_an_alert_with_no_evidence_still_gets_a_diagnosis_from_its_text(service: Any) -> None:
    svc = service(alertmanager_token=TOKEN)
    payload = alertmanager_payload(3, host="gpu-z999")
    payload["alerts"][0]["annotations"]["summary"] = "NCCL WARN NET/IB : Got completion with error 12 on gpu-z999"
    assert post(svc, payload).status_code == 202
    svc.worker.run_until_idle()
    [inc] = httpx.get(f"{svc.base_url}/incidents").json()
    full = httpx.get(f"{svc.base_url}/incidents/{inc['id']}").json()
    assert full["status"] == "waiting_for_evidence" and full["diagnosis"]["files"] == []
    assert {s["kind"] for s in full["diagnosis"]["symptoms"]} >= {"connection_error"}
    assert full["diagnosis"]["missing_evidence"]  # and what to collect for it
    assert full["evidence_notes"]  # what was searched and not found is shown to the engineer


def test_incident_api_serves_the_triage_json_contract(service: Any, tmp_path: Path) -> None:
    from diagnose.pipeline import triage
    from diagnose.render.json_out import json_schema, render_json

    bundles = tmp_path / "bundles"
    shutil.copytree(BAD_CABLE, bundles / "gpu-d042")
    svc = service(alertmanager_token=TOKEN, bundles=bundles)
    assert post(svc, alertmanager_payload(11, host="gpu-d042")).status_code == 202
    assert post(svc, alertmanager_payload(12, host="gpu-z001")).status_code == 202
    svc.worker.run_until_idle()
    listed = httpx.get(f"{svc.base_url}/incidents").json()
    assert len(listed) == 2 and all("diagnosis" not in x for x in listed)
    by_status = httpx.get(f"{svc.base_url}/incidents", params={"status": "diagnosed"}).json()
    assert [x["hosts"] for x in by_status] == [["gpu-d042"]]  # gpu-z001 has no bundle: waiting_for_evidence
    inc = next(x for x in listed if x["hosts"] == ["gpu-d042"])
    assert inc["top_cause"] == "link.bad_cable"
    full = httpx.get(f"{svc.base_url}/incidents/{inc['id']}").json()
    assert full["alert_count"] == 1 and full["deliveries"] == []
    jsonschema.validate(full["diagnosis"], json.loads(json_schema()))
    symptom = "\n".join(x for x in (full["title"], full["text"]) if x)
    expected = json.loads(render_json(triage([bundles / "gpu-d042"], symptom, symptom_source="hook")))
    assert full["diagnosis"] == expected
    assert expected["causes"][0]["location"]["host"] == "gpu-d042"
    assert httpx.get(f"{svc.base_url}/incidents/99999").status_code == 404
    assert httpx.get(f"{svc.base_url}/incidents", params={"status": "resolved"}).json() == []
    assert httpx.get(f"{svc.base_url}/incidents", params={"status": "bogus"}).status_code == 422


def test_a_resolved_alert_resolves_the_incident_without_new_triage(service: Any, recorder: Any) -> None:
    svc = service(alertmanager_token=TOKEN, post_url=recorder.url)
    assert post(svc, alertmanager_payload(5)).status_code == 202
    svc.worker.run_until_idle()
    [inc] = httpx.get(f"{svc.base_url}/incidents").json()
    before = httpx.get(f"{svc.base_url}/incidents/{inc['id']}").json()
    resolved = alertmanager_payload(5, status="resolved")
    resolved["alerts"][0]["endsAt"] = "2026-11-29T11:00:00Z"
    r = post(svc, resolved)
    assert r.status_code == 202 and r.json()["status"] == "accepted"  # another state: not a duplicate
    svc.worker.run_until_idle()
    after = httpx.get(f"{svc.base_url}/incidents/{inc['id']}").json()
    assert after["status"] == "resolved" and after["ends_at"] == "2026-11-29T11:00:00Z"
    assert after["diagnosis"] == before["diagnosis"] and after["deliveries"] == before["deliveries"]
    assert len(recorder.posts) == 1  # posted when diagnosed, not again on resolution


def test_github_form_delivery_is_read_like_json(service: Any) -> None:
    # https://docs.github.com/en/webhooks/webhook-events-and-payloads#issues (content type form: payload=<json>)
    svc = service(github_secret="gh-secret")
    issue = {"action": "opened", "issue": {"number": 17, "title": "NCCL timeout on gpu-a003",
                                           "body": "allreduce hangs, watchdog timeout", "labels": [],
                                           "html_url": "https://github.com/acme/cluster/issues/17",
                                           "created_at": "2026-11-29T10:00:00Z", "state": "open"},
             "repository": {"full_name": "acme/cluster"}, "sender": {"login": "alice"}}
    body = urlencode({"payload": json.dumps(issue)}).encode()
    sig = "sha256=" + hmac.new(b"gh-secret", body, hashlib.sha256).hexdigest()
    r = httpx.post(f"{svc.base_url}/hooks/github", content=body, timeout=30,
                   headers={"Content-Type": "application/x-www-form-urlencoded", "X-GitHub-Event": "issues",
                            "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
                            "X-Hub-Signature-256": sig})
    assert r.status_code == 202, r.text
    [req] = svc.store.list_requests()
    assert req.headers["x-github-delivery"] == "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    assert "x-hub-signature-256" not in req.headers
    svc.worker.run_until_idle()
    [inc] = svc.store.list_incidents()
    assert inc.source == "github" and "gpu-a003" in inc.hosts and inc.status == "waiting_for_evidence"


def test_background_worker_health_and_metrics(service: Any) -> None:
    svc = service(alertmanager_token=TOKEN, start_worker=True)
    health = httpx.get(f"{svc.base_url}/healthz")
    assert health.status_code == 200 and health.json()["worker"] == "alive" and health.json()["store"] == "ok"
    assert TOKEN not in health.text
    assert httpx.post(f"{svc.base_url}/slack/events", content=b"{}").status_code != 404  # the chat routes are in
    rid = post(svc, alertmanager_payload(21)).json()["request_id"]
    deadline = time.monotonic() + 120
    while svc.store.get_request(rid).status != "done":
        assert time.monotonic() < deadline, "the worker did not finish the request"
        time.sleep(0.1)
    metrics = httpx.get(f"{svc.base_url}/metrics").text
    assert 'diagnose_requests_processed_total{outcome="done",source="alertmanager"} 1.0' in metrics
    assert 'diagnose_request_processing_seconds_count{source="alertmanager"} 1.0' in metrics
    assert "diagnose_queue_depth 0.0" in metrics
    assert 'diagnose_incidents{status="waiting_for_evidence"} 1.0' in metrics


def test_an_alert_storm_behind_one_leaf_is_one_incident(service: Any, tmp_path: Path) -> None:
    topo = next((FIXTURES / "link" / "bad_cable" / "positive-fattree64-hca-end" / "fabric").glob("ibnetdiscover*"))
    svc = service(alertmanager_token=TOKEN, topology=topo, group_window_s=600)
    for i, host in enumerate(("gpu-a001", "gpu-a002", "gpu-a003")):
        assert post(svc, alertmanager_payload(100 + i, host=host)).status_code == 202
    svc.worker.run_until_idle()
    incidents = httpx.get(f"{svc.base_url}/incidents").json()
    assert len(incidents) == 1
    assert incidents[0]["alert_count"] == 3 and incidents[0]["group_key"]
    assert sorted(incidents[0]["hosts"]) == ["gpu-a001", "gpu-a002", "gpu-a003"]


def test_hook_bench_answers_and_stores_every_request() -> None:
    from diagnose.service.bench import run_hook_bench, table

    res = run_hook_bench(n=50, concurrency=10)
    assert res["ok"] and res["status_codes"] == {202: 50} and res["stored"] == 50
    assert "50 of 50 accepted" in table(res)


def test_incidents_cli_reads_the_store(service: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from diagnose.interfaces.service_cli import _standalone

    bundles = tmp_path / "bundles"
    shutil.copytree(BAD_CABLE, bundles / "gpu-d042")
    svc = service(alertmanager_token=TOKEN, bundles=bundles)
    assert post(svc, alertmanager_payload(31, host="gpu-d042")).status_code == 202
    svc.worker.run_until_idle()
    [inc] = httpx.get(f"{svc.base_url}/incidents").json()
    api = httpx.get(f"{svc.base_url}/incidents/{inc['id']}").json()
    env_file = tmp_path / "diagnose.env"
    env_file.write_text(f"DIAGNOSE_STORE={svc.settings.store_url()}\n")
    cli, runner = _standalone(), CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(cli, ["incidents", *args, "--config", str(env_file)], env={"COLUMNS": "200"})

    listed = run("list", "--format", "json")
    assert listed.exit_code == 0, listed.output
    assert [x["id"] for x in json.loads(listed.stdout)] == [inc["id"]]
    shown = run("show", str(inc["id"]), "--format", "json")
    assert shown.exit_code == 0 and json.loads(shown.stdout) == api
    md = run("show", str(inc["id"]), "--format", "markdown")
    assert md.exit_code == 0 and "`link.bad_cable`" in md.stdout and md.stdout.startswith(f"# Incident {inc['id']}")
    text = run("show", str(inc["id"]))
    assert text.exit_code == 0 and "link.bad_cable" in text.stdout and "Ranked causes" in text.stdout
    table = run("list", "--status", "diagnosed")
    assert table.exit_code == 0 and "link.bad_cable" in table.stdout
    missing = run("show", "4242")
    assert missing.exit_code == 2 and "no incident 4242" in missing.output
    bad = run("list", "--status", "sleeping")
    assert bad.exit_code == 2
    nofile = runner.invoke(cli, ["incidents", "list", "--config", str(tmp_path / "nope.env")])
    assert nofile.exit_code == 2 and "no such config file" in nofile.output


def test_read_endpoints_need_the_read_token_when_one_is_set(service: Any) -> None:
    svc = service(alertmanager_token=TOKEN, read_token="reader-secret")
    assert post(svc, alertmanager_payload(5, host="gpu-r001")).status_code == 202
    svc.worker.run_until_idle()
    for path in ("/incidents", "/requests", "/incidents/1"):
        anon = httpx.get(f"{svc.base_url}{path}")
        assert anon.status_code == 401 and anon.headers["www-authenticate"] == "Bearer"
        assert "gpu-r001" not in anon.text  # nothing of the incident leaks in the refusal
        assert httpx.get(f"{svc.base_url}{path}", headers={"Authorization": "Bearer wrong"}).status_code == 401
        # the hook's own token is not a read token
        assert httpx.get(f"{svc.base_url}{path}", headers=AUTH).status_code == 401
    ok = httpx.get(f"{svc.base_url}/incidents", headers={"Authorization": "Bearer reader-secret"})
    assert ok.status_code == 200 and ok.json()[0]["hosts"] == ["gpu-r001"]
    # probes and scrapers stay open: they carry no incident data
    assert httpx.get(f"{svc.base_url}/healthz").status_code == 200
    assert httpx.get(f"{svc.base_url}/metrics").status_code == 200
