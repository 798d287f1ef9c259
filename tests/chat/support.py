"""Helpers for the chat bot tests: the real service over HTTP, a Slack Web API stand-in, signing done here.

- ``ChatService`` (made by the ``make_service`` fixture): the service (``create_app(..., start_worker=False)``
  with its SQLite store) under uvicorn on a free 127.0.0.1 port, every chat platform configured, Slack's Web
  API pointed at the stand-in, and builders for each platform's documented request payloads.
  Instead of the service's worker, which needs the bundle store and the grouping topology, ``ChatWorker``
  diagnoses chat-asked incidents of known jobs with the real :func:`diagnose.pipeline.triage` on a fixture
  bundle and stores the result with ``store.set_diagnosis``, exactly as the worker ends.
- ``StandIn``: an HTTP server that answers Slack's ``auth.test`` and ``chat.postMessage`` and records every POST
  (Web API calls, Slack ``response_url`` and Mattermost ``response_url`` deliveries).
- Signatures are computed here from the vendors' documents, independently of the code under test.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx

ROOT = Path(__file__).resolve().parents[2]
BAD_CABLE = ROOT / "fixtures" / "link" / "bad_cable" / "positive-symbol-errors-rising"

SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # the example secret of Slack's signing document
SLACK_BOT_TOKEN = "xoxb-test-0000-chat"
TEAMS_SECRET = base64.b64encode(b"teams outgoing webhook key 32 b!").decode()
MATTERMOST_TOKEN = "mm-slash-token-4f9b"
WORKER_JOBS = {"50213": BAD_CABLE, "50214": BAD_CABLE, "50215": BAD_CABLE, "50216": BAD_CABLE}


# ---------------------------------------------------------------------------------------------- signing


def slack_sign(body: bytes, ts: int | None = None, secret: str = SLACK_SECRET) -> dict[str, str]:
    """Slack v0 signing: ``v0=`` + hex HMAC-SHA256 of ``v0:{ts}:{body}``.
    https://api.slack.com/authentication/verifying-requests-from-slack"""
    ts = int(time.time()) if ts is None else ts
    base = b"v0:" + str(ts).encode() + b":" + body
    sig = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": sig}


def teams_sign(body: bytes, secret_b64: str = TEAMS_SECRET) -> dict[str, str]:
    """Teams outgoing webhook: ``Authorization: HMAC`` + base64 HMAC-SHA256 of the body, key base64-decoded.
    https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-outgoing-webhook"""
    mac = hmac.new(base64.b64decode(secret_b64), body, hashlib.sha256).digest()
    return {"Authorization": "HMAC " + base64.b64encode(mac).decode()}


MATTERMOST_USER_ID = "rbx8fw4fa3gd3n1bq8dtmy3qea"


def mattermost_trigger_id(user_id: str = MATTERMOST_USER_ID, at: float | None = None) -> str:
    """A slash command's ``trigger_id`` as the Mattermost server makes one (model/integration_action.go,
    ``GenerateTriggerId``): base64 of ``<26-char id>:<user id>:<epoch ms>:`` + base64 of its signature (a stand-in
    signature here: the server's key is not ours to check)."""
    import uuid

    ms = int((time.time() if at is None else at) * 1000)
    data = f"{uuid.uuid4().hex[:26]}:{user_id}:{ms}:"
    return base64.b64encode((data + base64.b64encode(b"s" * 64).decode()).encode()).decode()


# ---------------------------------------------------------------------------------------------- stand-in


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class StandIn:
    """Slack Web API and response_url stand-in that records what the bot sent."""

    base_url: str
    records: list[Recorded] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)

    def add(self, rec: Recorded) -> None:
        with self.cond:
            self.records.append(rec)
            self.cond.notify_all()

    def wait_for(self, pred: Callable[[Recorded], bool], timeout: float = 30.0) -> Recorded:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for r in self.records:
                    if pred(r):
                        return r
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"nothing matching arrived; got {[r.path for r in self.records]}")
                self.cond.wait(left)

    def paths(self) -> list[str]:
        with self.cond:
            return [r.path for r in self.records]


def standin_handler(standin: StandIn) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            ctype = self.headers.get("content-type", "")
            if "json" in ctype:
                body: Any = json.loads(raw or b"{}")
            else:
                body = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
            standin.add(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if self.path.endswith("/auth.test"):
                out: Any = {"ok": True, "url": "https://example.slack.com/", "team": "Example", "user": "diagnose",
                            "team_id": "T0001", "user_id": "UBOT0001", "bot_id": "BBOT0001", "is_enterprise_install": False}
            elif self.path.endswith("/chat.postMessage"):
                out = {"ok": True, "channel": body.get("channel"), "ts": f"{time.time():.6f}",
                       "message": {"text": body.get("text", "")}}
            else:
                out = None
            data = json.dumps(out).encode() if out is not None else b"ok"
            self.send_response(200)
            self.send_header("content-type", "application/json" if out is not None else "text/plain")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return H


# ---------------------------------------------------------------------------------------------- service


class UvicornThread:
    def __init__(self, app: Any) -> None:
        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def start(self) -> UvicornThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


class ChatWorker:
    """Diagnoses chat-asked incidents of the jobs in ``WORKER_JOBS`` with the real triage, like the service's
    worker does at its end (``set_diagnosis``); other incidents stay queued."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.stop_evt = threading.Event()
        self.done: list[int] = []
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        from diagnose.pipeline import triage

        while not self.stop_evt.is_set():
            for inc in self.store.list_incidents(limit=50, status="open"):
                if inc.source != "chat" or inc.job_id not in WORKER_JOBS:
                    continue
                self.store.set_incident_status(inc.id, "diagnosing")
                d = triage([str(WORKER_JOBS[inc.job_id])], inc.text or inc.title, symptom_source="chat")
                self.store.set_diagnosis(inc.id, d.model_dump(mode="json"))
                self.done.append(inc.id)
            self.stop_evt.wait(0.05)


@dataclass
class ChatService:
    base_url: str
    store: Any
    settings: Any
    standin: StandIn
    store_url: str
    server: UvicornThread
    worker: ChatWorker

    def post(self, path: str, body: bytes, headers: dict[str, str], timeout: float = 30.0) -> httpx.Response:
        return httpx.post(self.base_url + path, content=body, headers=headers, timeout=timeout)

    # -- Slack payloads (https://api.slack.com/interactivity/slash-commands#app_command_handling) --------
    def slack_command(self, text: str, *, user: str = "ana", ts: int | None = None,
                      response_key: str = "cmd") -> tuple[bytes, dict[str, str]]:
        body = urlencode({
            "token": "gIkuvaNzQIHg97ATvDxqgjtO", "team_id": "T0001", "team_domain": "example",
            "channel_id": "C2147483705", "channel_name": "gpu-oncall", "user_id": "U2147483697", "user_name": user,
            "command": "/diagnose", "text": text, "api_app_id": "A123456",
            "response_url": f"{self.standin.base_url}/slack/response/{response_key}",
            "trigger_id": "13345224609.738474920.8088930838d88f008e0"}).encode()
        return body, {"Content-Type": "application/x-www-form-urlencoded", **slack_sign(body, ts)}

    def slack_event(self, text: str, *, event_id: str, thread_ts: str | None = None) -> tuple[bytes, dict[str, str]]:
        """An Events API ``app_mention`` callback (https://api.slack.com/events/app_mention)."""
        event = {"type": "app_mention", "user": "U061F7AUR", "text": f"<@UBOT0001> {text}",
                 "ts": "1515449522.000016", "channel": "C0LAN2Q65", "event_ts": "1515449522.000016"}
        if thread_ts:
            event["thread_ts"] = thread_ts
        body = json.dumps({"token": "ZZZZZZWSxiZZZ2yIvs3peJ", "team_id": "T0001", "api_app_id": "A123456",
                           "event": event, "type": "event_callback", "event_id": event_id,
                           "event_time": 1515449522,
                           "authorizations": [{"team_id": "T0001", "user_id": "UBOT0001", "is_bot": True}]}).encode()
        return body, {"Content-Type": "application/json", **slack_sign(body)}

    def slack_action(self, action: dict[str, Any], *, user: str = "ana",
                     response_key: str = "act") -> tuple[bytes, dict[str, str]]:
        """A ``block_actions`` payload (https://api.slack.com/reference/interaction-payloads/block-actions)."""
        payload = {"type": "block_actions", "user": {"id": "U2147483697", "username": user, "name": user,
                                                     "team_id": "T0001"},
                   "api_app_id": "A123456", "token": "gIkuvaNzQIHg97ATvDxqgjtO",
                   "container": {"type": "message", "message_ts": "1548261231.000200", "channel_id": "C2147483705",
                                 "is_ephemeral": False},
                   "trigger_id": "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
                   "team": {"id": "T0001", "domain": "example"},
                   "channel": {"id": "C2147483705", "name": "gpu-oncall"},
                   "response_url": f"{self.standin.base_url}/slack/response/{response_key}",
                   "actions": [{"block_id": "b1", "action_ts": "1548426417.840180", **action}]}
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return body, {"Content-Type": "application/x-www-form-urlencoded", **slack_sign(body)}

    # -- Teams (outgoing webhook activity) -----------------------------------------------------------------
    def teams_activity(self, text: str, *, act_id: str, ts: float | None = None, user: str = "Tim Jones") -> bytes:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() if ts is None else ts)) + ".437Z"
        return json.dumps({
            "type": "message", "id": act_id, "timestamp": stamp, "localTimestamp": stamp,
            "serviceUrl": "https://smba.trafficmanager.net/amer/", "channelId": "msteams",
            "from": {"id": "29:1XJKJMvc5GBtc2JwZq0oj8tHZmzrQgFmB25ATiQWA85gQtHieVkKilBZ9XHoq9j7Zaqt7CZ", "name": user,
                     "aadObjectId": "f5e1fa2e-7d8c-4c1d-9f7a-1c2e3b4a5d6f"},
            "conversation": {"isGroup": True, "id": "19:253b1f341670408fb6fcb3ac2ca23b8b@thread.skype;messageid=1"},
            "recipient": None, "textFormat": "plain", "attachmentLayout": None, "membersAdded": [],
            "membersRemoved": [], "topicName": None, "historyDisclosed": None, "locale": None,
            "text": f"<at>diagnose</at> {text}\n", "summary": None,
            "attachments": [{"contentType": "text/html", "content": f"<div><span itemscope=\"\" itemtype=\"http://"
                             f"schema.skype.com/Mention\" itemid=\"0\">diagnose</span> {text}</div>"}],
            "entities": [{"type": "clientInfo", "locale": "en-US", "country": "US", "platform": "Web"}],
            "channelData": {"teamsChannelId": "19:253b1f341670408fb6fcb3ac2ca23b8b@thread.skype",
                            "teamsTeamId": "19:712a3c48f5b2460f9d05c8b2e2b1e42d@thread.skype",
                            "tenant": {"id": "72f988bf-86f1-41af-91ab-2d7cd011db47"}},
            "action": None, "replyToId": None, "value": None, "name": None, "relatesTo": None, "code": None,
        }).encode()

    # -- Mattermost slash command (https://developers.mattermost.com/integrate/slash-commands/custom/) ---
    def mattermost_command(self, text: str, *, token: str = MATTERMOST_TOKEN, user: str = "bo",
                           response_key: str = "mm", trigger_id: str | None = None,
                           user_id: str = MATTERMOST_USER_ID) -> tuple[bytes, dict[str, str]]:
        body = urlencode({
            "channel_id": "fdnkf8p1wbrp3xr5y7f7ms5ecr", "channel_name": "gpu-oncall", "command": "/diagnose",
            "response_url": f"{self.standin.base_url}/mattermost/response/{response_key}",
            "team_domain": "infra", "team_id": "rdc9bgriktyx9p4kowh3dmgqyc", "text": text, "token": token,
            "trigger_id": mattermost_trigger_id() if trigger_id is None else trigger_id,
            "user_id": user_id, "user_name": user}).encode()
        return body, {"Content-Type": "application/x-www-form-urlencoded", "Authorization": f"Token {token}"}


def chat_settings(data_dir: Path, standin: StandIn, **overrides: Any) -> Any:
    from diagnose.service.settings import Settings

    values: dict[str, Any] = {
        "data_dir": data_dir, "SLACK_SIGNING_SECRET": SLACK_SECRET, "SLACK_BOT_TOKEN": SLACK_BOT_TOKEN,
        "slack_api_url": standin.base_url + "/api/", "teams_secret": TEAMS_SECRET,
        "mattermost_token": MATTERMOST_TOKEN, "max_request_age_s": 300,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def store_diagnosed_incident(store: Any, diagnosis: dict[str, Any], *, job_id: str = "50213",
                             title: str = "NCCL busbw low on job 50213") -> int:
    """An incident stored through the Store protocol and given ``diagnosis`` as the worker would."""
    import uuid

    from diagnose.service.models import IncidentDraft

    rec = store.create_manual_incident(IncidentDraft(
        source="cli", external_id=f"test-{uuid.uuid4().hex}", title=title, job_id=job_id,
        hosts=["gpu-d041", "gpu-d042"]))
    store.set_diagnosis(rec.id, diagnosis)
    return int(rec.id)


def playbook_first_step(cause: str, section: str = "Confirm") -> str:
    """The first sentence of a playbook section's first step, read straight from playbooks/ (not via the bot)."""
    domain, name = cause.split(".", 1)
    text = (ROOT / "playbooks" / domain / f"{name}.md").read_text()
    body = text.split(f"## {section}\n", 1)[1]
    first = body.lstrip().split("\n", 1)[0]
    assert first.startswith("1. ") or first.startswith("- "), first
    return first[3:].split(":")[0].split(".")[0].strip() if first.startswith("1. ") else first[2:].split(":")[0]
