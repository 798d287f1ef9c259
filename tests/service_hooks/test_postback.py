"""Post-back against a local stand-in HTTP server that records every request and answers from a script.

Checked against the public API documentation:
* Jira Cloud REST v2 "Add comment": POST /rest/api/2/issue/{issueIdOrKey}/comment, body {"body": ...}, basic auth
  email:api_token (https://developer.atlassian.com/cloud/jira/platform/rest/v2/api-group-issue-comments/).
* PagerDuty REST v2 "Create a note on an incident": POST /incidents/{id}/notes, body {"note": {"content": ...}},
  headers Authorization: Token token=..., From: <email>, Accept: application/vnd.pagerduty+json;version=2
  (https://developer.pagerduty.com/api-reference/3df2b685a0dbc-create-a-note-on-an-incident).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from diagnose.models.diagnosis import CauseResult, Diagnosis, EvidenceRef, FileEntry, Location, MissingEvidence, Symptom
from diagnose.service.models import IncidentRecord
from diagnose.service.postback import Delivery, deliver
from diagnose.service.settings import Settings

JIRA_TOKEN = "jira-api-token-0b7e"
PD_TOKEN = "pd-rest-token-8c1d"
NOW = 1_714_644_000.0


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class StandIn:
    """What the server saw, and the responses it still has to give per path (then 200 ``{}``)."""

    url: str
    requests: list[Recorded] = field(default_factory=list)
    script: dict[str, deque[tuple[int, dict[str, str], bytes]]] = field(default_factory=dict)

    def answer(self, path: str, *responses: tuple[int, dict[str, str], bytes]) -> None:
        self.script.setdefault(path, deque()).extend(responses)

    def at(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == path]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    lock = threading.Lock()
    state = StandIn(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                state.requests.append(Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()},
                                               body))
                queue = state.script.get(self.path)
                status, headers, payload = queue.popleft() if queue else (200, {}, b"{}")
            headers = dict(headers)
            delay = float(headers.pop("X-Stand-In-Delay", 0))  # a slow server, for the read-timeout case
            if delay:
                time.sleep(delay)
            try:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the read-timeout case)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def make_settings(url: str, **overrides: object) -> Settings:
    base: dict[str, object] = dict(
        jira_url=url + "/jira/", jira_user="oncall@example.org", jira_token=JIRA_TOKEN,
        pagerduty_api_url=url + "/pd", pagerduty_token=PD_TOKEN, pagerduty_from="oncall@example.org",
        post_url=None, generic_secret=None, max_attempts=4, backoff_base_s=2.0)
    base.update(overrides)
    return Settings(**base)


def cause(i: int, cid: str, score: float, verdict: str, loc: Location) -> CauseResult:
    return CauseResult(
        id=cid, title=f"Title of {cid}", score=score, confidence="high" if score > 0.8 else "low", verdict=verdict,
        summary=f"summary {i}", location=loc,
        evidence=[EvidenceRef(file=f"gpu-d042/perfquery_{n}.txt", line=60 + n, text=f"SymbolErrorCounter:....{i}{n}",
                              finding="port_counter_errors") for n in range(3)],
        playbook=f"playbooks/{cid.replace('.', '/')}.md")


DIAGNOSIS = Diagnosis(
    symptoms=[Symptom(kind="collective_slow", text="busbw 90 GB/s", source="hook")],
    causes=[
        cause(1, "link.bad_cable", 0.98, "confirmed", Location(host="gpu-d042", device="mlx5_2", port=1)),
        cause(2, "link.degraded", 0.41, "inconclusive", Location(host="gpu-d042", device="mlx5_2")),
        cause(3, "fabric.congestion", 0.30, "inconclusive", Location()),
        cause(4, "host.gdr_unavailable", 0.26, "inconclusive", Location(host="gpu-d041")),
    ],
    ruled_out=[],
    missing_evidence=[MissingEvidence(would_decide=["link.degraded"], collect="ibdiagnet2 port counters")],
    files=[FileEntry(path="gpu-d042/perfquery_0.txt", format="perfquery", records=12)],
)
T0 = datetime(2024, 5, 2, 10, 0, tzinfo=timezone.utc)
INCIDENT = IncidentRecord(id=42, source="jira", external_id="OPS-123", title="job 4412 slow", created_at=T0,
                          updated_at=T0, hosts=["gpu-d042"], job_id="4412")


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_jira_comment_url_auth_and_short_body(server: StandIn) -> None:
    sleeps = Sleeps()
    (d,) = deliver(make_settings(server.url), INCIDENT, DIAGNOSIS, {"jira_issue": "OPS-123"}, sleep=sleeps)
    assert d == Delivery(target="jira", ok=True, status_code=200, attempts=1, error=None)
    (req,) = server.requests
    assert req.path == "/jira/rest/api/2/issue/OPS-123/comment"
    expected = "Basic " + base64.b64encode(f"oncall@example.org:{JIRA_TOKEN}".encode()).decode()
    assert req.headers["authorization"] == expected
    assert req.headers["content-type"] == "application/json"
    body = req.json()["body"]
    # top 3 causes only, with their scores; 2 evidence lines each; playbooks named
    assert "{{link.bad_cable}}" in body and "{{link.degraded}}" in body and "{{fabric.congestion}}" in body
    assert "host.gdr_unavailable" not in body
    assert "0.98" in body and "0.41" in body
    assert "gpu\\-d042/mlx5\\_2 port 1" in body  # the location, escaped for wiki markup
    assert "SymbolErrorCounter:....11" in body and "SymbolErrorCounter:....12" not in body
    assert body.count("{noformat}") == 6
    assert "playbooks/link/bad\\_cable.md" in body
    assert sleeps == []


def test_pagerduty_note_headers_and_plain_text(server: StandIn) -> None:
    (d,) = deliver(make_settings(server.url), INCIDENT, DIAGNOSIS, {"pagerduty_incident": "PGR0VU2"}, sleep=Sleeps())
    assert d.ok and d.target == "pagerduty" and d.attempts == 1
    (req,) = server.at("/pd/incidents/PGR0VU2/notes")
    assert req.headers["authorization"] == f"Token token={PD_TOKEN}"
    assert req.headers["from"] == "oncall@example.org"
    assert req.headers["accept"] == "application/vnd.pagerduty+json;version=2"
    content = req.json()["note"]["content"]
    lines = content.splitlines()
    assert lines[0] == "diagnose: incident #42: 4 candidate cause(s), 1 confirmed"
    assert "1. link.bad_cable score 0.98 confirmed (high) at gpu-d042/mlx5_2 port 1" in lines
    assert "   - gpu-d042/perfquery_0.txt:60 SymbolErrorCounter:....10" in lines
    assert "   playbook: playbooks/link/bad_cable.md (diagnose playbook link.bad_cable)" in lines
    assert "4." not in content.split("playbook")[-1] and "host.gdr_unavailable" not in content


def test_retry_on_503_then_success_respects_retry_after(server: StandIn) -> None:
    path = "/jira/rest/api/2/issue/OPS-123/comment"
    server.answer(path, (503, {"Retry-After": "7"}, b'{"errorMessages":["busy"]}'), (503, {}, b""),
                  (201, {}, b'{"id":"10000"}'))
    sleeps = Sleeps()
    (d,) = deliver(make_settings(server.url), INCIDENT, DIAGNOSIS, {"jira_issue": "OPS-123"}, sleep=sleeps)
    assert d == Delivery(target="jira", ok=True, status_code=201, attempts=3, error=None)
    assert len(server.at(path)) == 3
    assert sleeps == [7.0, 4.0]  # Retry-After obeyed, then backoff base 2 s * 2**1


def test_429_with_http_date_retry_after(server: StandIn) -> None:
    path = "/pd/incidents/PGR0VU2/notes"
    server.answer(path, (429, {"Retry-After": "Thu, 02 May 2024 10:00:30 GMT"}, b""), (201, {}, b"{}"))
    sleeps = Sleeps()
    (d,) = deliver(make_settings(server.url), INCIDENT, DIAGNOSIS, {"pagerduty_incident": "PGR0VU2"}, sleep=sleeps,
                   clock=lambda: NOW)
    assert d.ok and d.attempts == 2 and sleeps == [30.0]


def test_no_retry_on_400(server: StandIn) -> None:
    path = "/jira/rest/api/2/issue/OPS-999/comment"
    server.answer(path, (400, {}, b'{"errorMessages":["Issue does not exist or you do not have permission"]}'))
    sleeps = Sleeps()
    (d,) = deliver(make_settings(server.url), INCIDENT, DIAGNOSIS, {"jira_issue": "OPS-999"}, sleep=sleeps)
    assert not d.ok and d.status_code == 400 and d.attempts == 1 and sleeps == []
    assert "Issue does not exist" in (d.error or "")
    assert len(server.at(path)) == 1


def test_gives_up_after_max_attempts_with_capped_backoff(server: StandIn) -> None:
    path = "/pd/incidents/PGR0VU2/notes"
    server.answer(path, *[(502, {}, b"bad gateway")] * 6)
    sleeps = Sleeps()
    settings = make_settings(server.url, max_attempts=6, backoff_base_s=4.0)
    (d,) = deliver(settings, INCIDENT, DIAGNOSIS, {"pagerduty_incident": "PGR0VU2"}, sleep=sleeps)
    assert not d.ok and d.status_code == 502 and d.attempts == 6 and "HTTP 502" in (d.error or "")
    assert sleeps == [4.0, 8.0, 16.0, 30.0, 30.0]
    assert len(server.at(path)) == 6


def test_retry_after_too_long_ends_the_delivery(server: StandIn) -> None:
    server.answer("/pd/incidents/PGR0VU2/notes", (429, {"Retry-After": "3600"}, b""))
    sleeps = Sleeps()
    (d,) = deliver(make_settings(server.url), INCIDENT, DIAGNOSIS, {"pagerduty_incident": "PGR0VU2"}, sleep=sleeps)
    assert not d.ok and d.attempts == 1 and sleeps == [] and "Retry-After 3600" in (d.error or "")


def test_connect_errors_are_retried_and_reported() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    settings = make_settings(f"http://127.0.0.1:{port}", max_attempts=3)
    (d,) = deliver(settings, INCIDENT, DIAGNOSIS, {"jira_issue": "OPS-123"}, sleep=sleeps)
    assert not d.ok and d.status_code is None and d.attempts == 3 and "cannot connect" in (d.error or "")
    assert sleeps == [2.0, 4.0]


def test_post_url_gets_signed_diagnosis_json(server: StandIn) -> None:
    secret = "post-secret-77"
    settings = make_settings(server.url, post_url=server.url + "/sink", generic_secret=secret)
    out = deliver(settings, INCIDENT, DIAGNOSIS, {"jira_issue": "OPS-123", "github_issue": "acme/ops#5"},
                  sleep=Sleeps(), clock=lambda: NOW)
    assert [d.target for d in out] == ["jira", "post_url"] and all(d.ok for d in out)
    (req,) = server.at("/sink")
    payload = req.json()
    assert payload["incident_id"] == 42 and payload["incident"]["external_id"] == "OPS-123"
    assert Diagnosis.model_validate(payload["diagnosis"]) == DIAGNOSIS  # the CLI's JSON contract, whole
    assert payload["markdown"].startswith("## diagnose: triage result")
    assert payload["summary"].startswith("diagnose: incident #42")
    assert payload["reply_to"] == {"jira_issue": "OPS-123", "github_issue": "acme/ops#5"}
    ts = req.headers["x-diagnose-timestamp"]
    assert ts == str(int(NOW))
    expected = "sha256=" + hmac.new(secret.encode(), ts.encode() + b"." + req.body, hashlib.sha256).hexdigest()
    assert req.headers["x-diagnose-signature"] == expected
    assert not any(r.path.startswith("/github") for r in server.requests)


def test_unconfigured_targets_are_reported_not_attempted(server: StandIn) -> None:
    settings = make_settings(server.url, jira_token=None, pagerduty_from=None)
    out = deliver(settings, INCIDENT, DIAGNOSIS, {"jira_issue": "OPS-1", "pagerduty_incident": "P1"}, sleep=Sleeps())
    assert [(d.target, d.ok, d.attempts) for d in out] == [("jira", False, 0), ("pagerduty", False, 0)]
    assert "DIAGNOSE_JIRA_TOKEN" in (out[0].error or "") and "DIAGNOSE_PAGERDUTY_FROM" in (out[1].error or "")
    assert server.requests == []
    assert deliver(make_settings(server.url), INCIDENT, DIAGNOSIS, {}, sleep=Sleeps()) == []


def test_empty_diagnosis_note_says_so_and_names_what_to_collect(server: StandIn) -> None:
    empty = Diagnosis(symptoms=[], causes=[], ruled_out=[],
                      missing_evidence=[MissingEvidence(would_decide=["link.bad_cable"], collect="perfquery -x twice")],
                      files=[])
    (d,) = deliver(make_settings(server.url), INCIDENT, empty, {"pagerduty_incident": "PGR0VU2"}, sleep=Sleeps())
    content = server.requests[0].json()["note"]["content"]
    assert d.ok and "no cause is supported" in content and "collect perfquery -x twice" in content


def test_playbook_base_turns_paths_into_links(server: StandIn) -> None:
    base = "https://github.com/diagnose/diagnose/blob/main/"
    deliver(make_settings(server.url), INCIDENT, DIAGNOSIS, {"jira_issue": "OPS-123"}, sleep=Sleeps(),
            playbook_base=base)
    body = server.requests[0].json()["body"]
    assert f"|{base}playbooks/link/bad_cable.md]" in body


def test_misconfigured_url_is_a_failed_delivery_not_an_exception() -> None:
    settings = make_settings("http://127.0.0.1:9", post_url="ftp://files.example.org/drop")
    (d,) = deliver(settings, INCIDENT, DIAGNOSIS, {}, sleep=Sleeps())
    assert d.target == "post_url" and not d.ok and d.attempts == 1 and "UnsupportedProtocol" in (d.error or "")


def test_read_timeout_is_not_retried_to_avoid_a_double_comment(server: StandIn) -> None:
    path = "/jira/rest/api/2/issue/OPS-123/comment"
    server.answer(path, (201, {"X-Stand-In-Delay": "1.0"}, b"{}"))
    sleeps = Sleeps()
    with httpx.Client(timeout=httpx.Timeout(0.2)) as client:
        (d,) = deliver(make_settings(server.url), INCIDENT, DIAGNOSIS, {"jira_issue": "OPS-123"}, client=client,
                       sleep=sleeps)
    assert not d.ok and d.attempts == 1 and "ReadTimeout" in (d.error or "") and sleeps == []
    assert len(server.at(path)) == 1
