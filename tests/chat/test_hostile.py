"""Hostile requests to the chat endpoints: bodies over the limit are refused while streaming (and before the body
when Content-Length says so), signed bodies that cannot be decoded are 422 (never 500), and a replayed request is
401 on every platform."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from .support import (
    MATTERMOST_TOKEN,
    ChatService,
    mattermost_trigger_id,
    slack_sign,
    store_diagnosed_incident,
    teams_sign,
)

CHAT_PATHS = ("/slack/events", "/teams/messages", "/mattermost/command", "/mattermost/actions")
DEEP = b"[" * 100_000 + b"]" * 100_000
LONG_INT = b'{"n": ' + b"7" * 5000 + b"}"


@pytest.fixture(scope="module")
def small(make_service: Any) -> ChatService:
    return make_service(max_body_bytes=4096)


@pytest.mark.parametrize("path", CHAT_PATHS)
def test_a_chunked_body_over_the_limit_is_413_unsigned_or_not(small: ChatService, path: str) -> None:
    def chunks():  # no Content-Length: Transfer-Encoding: chunked
        for _ in range(64):
            yield b"x" * 1024

    r = httpx.post(small.base_url + path, content=chunks(), timeout=30,
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 413


@pytest.mark.parametrize("path", CHAT_PATHS)
def test_a_declared_length_over_the_limit_is_413_before_the_body_is_sent(small: ChatService, path: str) -> None:
    port = int(small.base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {256 * 1024 * 1024}\r\n\r\n".encode())
        assert s.recv(64).startswith(b"HTTP/1.1 413")  # answered with not one byte of the 256 MiB sent


@pytest.mark.parametrize("raw", [DEEP, LONG_INT, b'{"text": "\xff\xfe"}', b"[1, 2"], ids=["deep", "long-int",
                                                                                          "bad-utf8", "truncated"])
def test_a_signed_body_that_cannot_be_decoded_is_422(svc: ChatService, raw: bytes) -> None:
    r = svc.post("/teams/messages", raw, {"Content-Type": "application/json", **teams_sign(raw)})
    assert r.status_code == 422
    r = svc.post("/slack/events", raw, {"Content-Type": "application/json", **slack_sign(raw)})
    assert r.status_code == 422
    form = b"payload=" + raw.replace(b"%", b"%25").replace(b"&", b"%26")
    r = svc.post("/slack/events", form, {"Content-Type": "application/x-www-form-urlencoded", **slack_sign(form)})
    assert r.status_code == 422
    # the button endpoint authenticates the decoded context: an undecodable body is refused as such
    r = svc.post("/mattermost/actions", raw, {"Content-Type": "application/json"})
    assert r.status_code == 422


def test_a_teams_activity_that_is_not_an_object_is_422(svc: ChatService) -> None:
    raw = b'["not", "an", "activity"]'
    assert svc.post("/teams/messages", raw, {"Content-Type": "application/json", **teams_sign(raw)}).status_code == 422


def test_a_replayed_mattermost_command_is_401_and_runs_once(svc: ChatService,
                                                            bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    body, headers = svc.mattermost_command(f"feedback {inc} right", user="mm-replayer")
    assert svc.post("/mattermost/command", body, headers).status_code == 200
    again = svc.post("/mattermost/command", body, headers)
    assert again.status_code == 401 and "replayed" in again.json()["error"]
    assert len([f for f in svc.store.list_feedback() if f.incident_id == inc]) == 1
    # the same words asked again (a new trigger_id) are a new command
    body2, headers2 = svc.mattermost_command(f"feedback {inc} right", user="mm-replayer")
    assert svc.post("/mattermost/command", body2, headers2).status_code == 200


def test_a_mattermost_command_with_a_stale_or_foreign_trigger_is_401(svc: ChatService) -> None:
    stale = mattermost_trigger_id(at=time.time() - 3600)
    body, headers = svc.mattermost_command("recent", trigger_id=stale)
    r = svc.post("/mattermost/command", body, headers)
    assert r.status_code == 401 and "stale" in r.json()["error"]
    foreign = mattermost_trigger_id(user_id="someoneelse00000000000000a")
    body, headers = svc.mattermost_command("recent", trigger_id=foreign)
    r = svc.post("/mattermost/command", body, headers)
    assert r.status_code == 401 and "another user" in r.json()["error"]


def test_a_mattermost_command_without_a_trigger_is_keyed_by_its_body(svc: ChatService) -> None:
    body, headers = svc.mattermost_command("recent", trigger_id="")
    assert svc.post("/mattermost/command", body, headers).status_code == 200
    assert svc.post("/mattermost/command", body, headers).status_code == 401


def test_every_platform_refuses_a_replay_with_401(svc: ChatService) -> None:
    body, headers = svc.slack_command("recent")
    assert [svc.post("/slack/events", body, headers).status_code for _ in range(2)] == [200, 401]
    act = svc.teams_activity("recent", act_id=uuid.uuid4().hex)
    th = {"Content-Type": "application/json", **teams_sign(act)}
    assert [svc.post("/teams/messages", act, th).status_code for _ in range(2)] == [200, 401]
    mm, mh = svc.mattermost_command("recent")
    assert [svc.post("/mattermost/command", mm, mh).status_code for _ in range(2)] == [200, 401]


def test_a_slack_request_signed_for_another_body_is_still_401(svc: ChatService) -> None:
    body = urlencode({"command": "/diagnose", "text": "recent", "token": MATTERMOST_TOKEN}).encode()
    ts = str(int(time.time()))
    sig = "v0=" + hmac.new(b"wrong", b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    r = svc.post("/slack/events", body, {"Content-Type": "application/x-www-form-urlencoded",
                                         "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig})
    assert r.status_code == 401
    assert json.loads(r.text)["error"] == "bad signature"


def test_a_replayed_mattermost_button_click_is_401_and_stores_feedback_once(
        svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    from .test_mattermost import _action, click_body

    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    msg = svc.post("/mattermost/command", *svc.mattermost_command(f"incident {inc}")).json()
    body = click_body(_action(msg, "right")["integration"]["context"], user="mm-clicker")
    first = svc.post("/mattermost/actions", body, {"Content-Type": "application/json"})
    again = svc.post("/mattermost/actions", body, {"Content-Type": "application/json"})
    assert first.status_code == 200 and again.status_code == 401 and "replayed" in again.json()["error"]
    assert len([f for f in svc.store.list_feedback() if f.incident_id == inc]) == 1


def test_a_chat_command_while_the_store_is_gone_is_answered_not_500(make_service: Any) -> None:
    fresh: ChatService = make_service()
    fresh.worker.stop_evt.set()  # the tests' stand-in worker polls the store
    fresh.worker.thread.join(30)
    db = fresh.store_url[len("sqlite:///"):]
    os.unlink(db)
    body, headers = fresh.mattermost_command("job 77001")
    r = fresh.post("/mattermost/command", body, headers)
    assert r.status_code == 200 and "store cannot be used" in r.json()["text"]
    assert not os.path.exists(db)
