"""The Slack bot over HTTP, signed as Slack signs, with the Web API answered by a recording stand-in."""

from __future__ import annotations

import json
import time
from typing import Any

from typer.testing import CliRunner

from .support import (
    SLACK_BOT_TOKEN,
    ChatService,
    playbook_first_step,
    slack_sign,
    store_diagnosed_incident,
)


def _texts(blocks: list[dict[str, Any]]) -> str:
    """Every piece of visible text in a Block Kit message."""
    out: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if isinstance(x.get("text"), str):
                out.append(x["text"])
            for v in x.values():
                if isinstance(v, (dict, list)):
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(blocks)
    return "\n".join(out)


def _elements(blocks: list[dict[str, Any]], action_id: str) -> list[dict[str, Any]]:
    return [e for b in blocks if b["type"] == "actions" for e in b["elements"] if e["action_id"] == action_id]


def _assert_slack_limits(msg: dict[str, Any]) -> None:
    blocks = msg["blocks"]
    assert 0 < len(blocks) <= 50
    for b in blocks:
        if b["type"] == "section":
            assert len(b["text"]["text"]) <= 3000
        if b["type"] == "header":
            assert len(b["text"]["text"]) <= 150


def test_url_verification_challenge_is_echoed(svc: ChatService) -> None:
    # https://api.slack.com/events/url_verification
    body = json.dumps({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                       "type": "url_verification"}).encode()
    r = svc.post("/slack/events", body, {"Content-Type": "application/json", **slack_sign(body)})
    assert r.status_code == 200
    assert "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" in r.text


def test_bad_signature_is_401_and_nothing_runs(svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    body, headers = svc.slack_command(f"feedback {inc} right")
    forged = {**headers, **slack_sign(body, secret="not-the-signing-secret")}
    r = svc.post("/slack/events", body, forged)
    assert r.status_code == 401
    unsigned = {k: v for k, v in headers.items() if not k.startswith("X-Slack")}
    assert svc.post("/slack/events", body, unsigned).status_code == 401
    tampered = body.replace(b"right", b"wrong")
    assert svc.post("/slack/events", tampered, headers).status_code == 401
    assert [f for f in svc.store.list_feedback() if f.incident_id == inc] == []


def test_stale_timestamp_is_401_and_nothing_runs(svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    body, headers = svc.slack_command(f"feedback {inc} right", ts=int(time.time()) - 301)
    r = svc.post("/slack/events", body, headers)
    assert r.status_code == 401
    # well past the 5-minute window: a future stamp only gets closer to "now" while the request is in flight
    future = svc.slack_command(f"feedback {inc} right", ts=int(time.time()) + 360)
    assert svc.post("/slack/events", *future).status_code == 401
    assert [f for f in svc.store.list_feedback() if f.incident_id == inc] == []


def test_replayed_request_is_401_and_runs_once(svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    body, headers = svc.slack_command(f"feedback {inc} right", user="replayer")
    first = svc.post("/slack/events", body, headers)
    assert first.status_code == 200
    assert "recorded as right" in first.json()["text"]
    second = svc.post("/slack/events", body, headers)
    assert second.status_code == 401
    assert len([f for f in svc.store.list_feedback() if f.incident_id == inc]) == 1


def test_playbook_command_answers_with_the_playbook_steps(svc: ChatService) -> None:
    body, headers = svc.slack_command("playbook link.bad_cable")
    r = svc.post("/slack/events", body, headers)
    assert r.status_code == 200
    msg = r.json()
    assert msg["response_type"] == "in_channel"
    _assert_slack_limits(msg)
    text = _texts(msg["blocks"])
    assert "link.bad_cable" in msg["blocks"][0]["text"]["text"]
    for section in ("Confirm", "Mitigate", "Fix", "Verify", "Escalate"):
        assert playbook_first_step("link.bad_cable", section) in text, section
    assert "perfquery -x $LID 1 &gt; pq.0" in text  # a command from the playbook, escaped as Slack requires


def test_incident_command_lists_ranked_causes_with_collapsed_evidence(
        svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    body, headers = svc.slack_command(f"incident {inc}")
    r = svc.post("/slack/events", body, headers)
    assert r.status_code == 200
    msg = r.json()
    _assert_slack_limits(msg)
    text = _texts(msg["blocks"])
    causes = bad_cable_diagnosis["causes"]
    positions = [text.index(f"`{c['id']}`") for c in causes]
    assert positions == sorted(positions)
    top = causes[0]
    assert f"{top['score']:.2f}" in text and top["verdict"] in text
    ev = top["evidence"]
    assert len(ev) > 2
    assert ev[0]["text"] in text and ev[1]["text"] in text
    assert ev[-1]["text"] not in text  # collapsed until "Show evidence"
    show = _elements(msg["blocks"], "diag_show_evidence")
    assert len(show) == 1 and "Show evidence" in show[0]["text"]["text"]
    assert _elements(msg["blocks"], "diag_right") and _elements(msg["blocks"], "diag_it_was")


def test_show_evidence_button_replaces_the_message_with_all_evidence(
        svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    msg = svc.post("/slack/events", *svc.slack_command(f"incident {inc}")).json()
    button = _elements(msg["blocks"], "diag_show_evidence")[0]
    key = f"show-{inc}"
    r = svc.post("/slack/events", *svc.slack_action(
        {"action_id": button["action_id"], "type": "button", "value": button["value"], "text": button["text"]},
        response_key=key))
    assert r.status_code == 200
    rec = svc.standin.wait_for(lambda x: x.path == f"/slack/response/{key}")
    assert rec.body["replace_original"] is True
    text = _texts(rec.body["blocks"])
    for e in bad_cable_diagnosis["causes"][0]["evidence"]:
        assert f"{e['file']}:{e['line']}" in text
    assert not _elements(rec.body["blocks"], "diag_show_evidence")


def test_app_mention_is_answered_in_thread(svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    body, headers = svc.slack_event(f"incident {inc}", event_id=f"Ev{inc}MENTION")
    r = svc.post("/slack/events", body, headers)
    assert r.status_code == 200
    rec = svc.standin.wait_for(lambda x: x.path == "/api/chat.postMessage"
                               and f"Incident {inc}:" in x.body.get("text", ""))
    assert rec.headers["authorization"] == f"Bearer {SLACK_BOT_TOKEN}"
    assert rec.body["channel"] == "C0LAN2Q65"
    assert rec.body["thread_ts"] == "1515449522.000016"
    assert "link.bad_cable" in _texts(rec.body["blocks"])


def test_job_command_is_acked_then_answered_through_response_url(svc: ChatService) -> None:
    body, headers = svc.slack_command("job 50214 AllReduce busbw dropped to 90 GB/s", response_key="job50214")
    r = svc.post("/slack/events", body, headers)
    assert r.status_code == 200
    ack = r.json()
    created = [i for i in svc.store.list_incidents(limit=50) if i.job_id == "50214"]
    assert len(created) == 1 and created[0].source == "chat"
    assert created[0].labels["asked_by"] == "ana" and "busbw dropped" in created[0].text
    assert f"Incident {created[0].id}" in _texts(ack["blocks"])
    rec = svc.standin.wait_for(lambda x: x.path == "/slack/response/job50214")
    assert rec.body["response_type"] == "in_channel"
    assert "`link.bad_cable`" in _texts(rec.body["blocks"])


def test_free_text_mention_is_normalized_to_a_job_and_answered(svc: ChatService) -> None:
    body, headers = svc.slack_event("why is allreduce slow on job 50215?", event_id="EvFREETEXT50215")
    assert svc.post("/slack/events", body, headers).status_code == 200
    rec = svc.standin.wait_for(lambda x: x.path == "/api/chat.postMessage" and "job 50215" in x.body.get("text", "")
                               and "link.bad_cable" in _texts(x.body.get("blocks", [])))
    inc = [i for i in svc.store.list_incidents(limit=50) if i.job_id == "50215"]
    assert len(inc) == 1 and "allreduce slow" in inc[0].text
    assert rec.body["thread_ts"] == "1515449522.000016"


def test_bad_command_gets_help_only_for_the_asker(svc: ChatService) -> None:
    r = svc.post("/slack/events", *svc.slack_command("frobnicate the fabric"))
    assert r.status_code == 200
    msg = r.json()
    assert msg["response_type"] == "ephemeral"
    text = _texts(msg["blocks"])
    assert "unknown command" in text
    for usage in ("incident &lt;id&gt;", "job &lt;id&gt;", "host &lt;name&gt;", "why &lt;cause&gt;",
                  "playbook &lt;cause&gt;", "recent"):
        assert usage in text


def test_unknown_cause_is_answered_with_the_closest_ids(svc: ChatService) -> None:
    msg = svc.post("/slack/events", *svc.slack_command("playbook link.bad_cabel")).json()
    text = _texts(msg["blocks"])
    assert "link.bad_cable" in text and "unknown cause" in text


def test_feedback_buttons_are_stored_and_reported(make_service: Any, bad_cable_diagnosis: dict[str, Any]) -> None:
    from diagnose.interfaces.chat_cli import feedback_app

    fresh: ChatService = make_service()
    right_inc = store_diagnosed_incident(fresh.store, bad_cable_diagnosis)
    wrong_inc = store_diagnosed_incident(fresh.store, bad_cable_diagnosis)
    msg = fresh.post("/slack/events", *fresh.slack_command(f"incident {right_inc}")).json()
    right = _elements(msg["blocks"], "diag_right")[0]
    r = fresh.post("/slack/events", *fresh.slack_action(
        {"action_id": "diag_right", "type": "button", "value": right["value"], "text": right["text"]},
        user="ana", response_key="fb-right"))
    assert r.status_code == 200
    note = fresh.standin.wait_for(lambda x: x.path == "/slack/response/fb-right")
    assert note.body["response_type"] == "ephemeral" and "right" in note.body["text"]

    msg = fresh.post("/slack/events", *fresh.slack_command(f"incident {wrong_inc}")).json()
    select = _elements(msg["blocks"], "diag_it_was")[0]
    option = next(o for o in select["options"] if o["text"]["text"] == "fabric.congestion")
    r = fresh.post("/slack/events", *fresh.slack_action(
        {"action_id": "diag_it_was", "type": "static_select", "selected_option": option,
         "placeholder": select["placeholder"]}, user="bo", response_key="fb-wrong"))
    assert r.status_code == 200
    fresh.standin.wait_for(lambda x: x.path == "/slack/response/fb-wrong")

    fb = {f.incident_id: f for f in fresh.store.list_feedback()}
    assert fb[right_inc].verdict == "right" and fb[right_inc].cause == "link.bad_cable"
    assert fb[right_inc].user == "ana" and fb[right_inc].platform == "slack"
    assert fb[wrong_inc].verdict == "wrong" and fb[wrong_inc].actual == "fabric.congestion"

    runner = CliRunner()
    res = runner.invoke(feedback_app, ["report", "--format", "json", "--store", fresh.store_url])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["rated_incidents"] == 2 and rep["top1_accuracy"] == 0.5
    row = next(c for c in rep["causes"] if c["cause"] == "link.bad_cable")
    assert (row["ranked_first"], row["rated"], row["right"], row["wrong"]) == (2, 2, 1, 1)
    assert rep["confusions"] == [{"said": "link.bad_cable", "was": "fabric.congestion", "count": 1}]
    text = runner.invoke(feedback_app, ["report", "--store", fresh.store_url])
    assert text.exit_code == 0
    assert "link.bad_cable -> fabric.congestion: 1" in text.output and "50%" in text.output


def test_bolt_rejects_a_bad_signature_with_401_on_its_own(svc: ChatService) -> None:
    """The route checks signatures first; bolt's own verification must also answer 401, not run listeners."""
    from slack_bolt import BoltRequest

    from diagnose.chat.answers import Answers
    from diagnose.chat.slack import SlackBot

    bot = SlackBot(svc.settings, Answers(svc.store))
    body, headers = svc.slack_command("recent")
    bad = {k.lower(): v for k, v in headers.items()}
    bad["x-slack-signature"] = "v0=" + "0" * 64
    resp = bot.app.dispatch(BoltRequest(body=body.decode(), headers=bad))
    assert resp.status == 401
    good = bot.app.dispatch(BoltRequest(body=body.decode(), headers={k.lower(): v for k, v in headers.items()}))
    assert good.status == 200
