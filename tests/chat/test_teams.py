"""The Teams outgoing webhook over HTTP, signed as Teams signs (base64 HMAC-SHA256 of the raw body)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from .support import ChatService, playbook_first_step, store_diagnosed_incident, teams_sign


def _send(svc: ChatService, text: str, *, act_id: str | None = None, ts: float | None = None,
          user: str = "Tim Jones") -> Any:
    body = svc.teams_activity(text, act_id=act_id or uuid.uuid4().hex, ts=ts, user=user)
    return svc.post("/teams/messages", body, {"Content-Type": "application/json", **teams_sign(body)})


def _card_texts(x: Any) -> list[str]:
    out: list[str] = []
    if isinstance(x, dict):
        if x.get("type") == "TextBlock":
            out.append(x["text"])
        for v in x.values():
            out += _card_texts(v)
    elif isinstance(x, list):
        for v in x:
            out += _card_texts(v)
    return out


def test_bad_hmac_is_401_and_nothing_runs(svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    body = svc.teams_activity(f"feedback {inc} right", act_id=uuid.uuid4().hex)
    wrong_key = teams_sign(body, secret_b64="d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkh")
    assert svc.post("/teams/messages", body, {"Content-Type": "application/json", **wrong_key}).status_code == 401
    assert svc.post("/teams/messages", body, {"Content-Type": "application/json"}).status_code == 401
    signed = teams_sign(body)
    altered = body.replace(b"right", b"wrong")
    assert svc.post("/teams/messages", altered, {"Content-Type": "application/json", **signed}).status_code == 401
    assert [f for f in svc.store.list_feedback() if f.incident_id == inc] == []


def test_stale_activity_is_401_and_nothing_runs(svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    assert _send(svc, f"feedback {inc} right", ts=time.time() - 301).status_code == 401
    assert [f for f in svc.store.list_feedback() if f.incident_id == inc] == []


def test_replayed_activity_id_is_401_and_runs_once(svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    act = uuid.uuid4().hex
    first = _send(svc, f"feedback {inc} right", act_id=act)
    assert first.status_code == 200 and "recorded as right" in first.json()["text"]
    assert _send(svc, f"feedback {inc} right", act_id=act).status_code == 401
    fb = [f for f in svc.store.list_feedback() if f.incident_id == inc]
    assert len(fb) == 1 and fb[0].platform == "teams" and fb[0].user == "Tim Jones"


def test_playbook_is_answered_with_its_steps(svc: ChatService) -> None:
    r = _send(svc, "playbook link.bad_cable")
    assert r.status_code == 200
    msg = r.json()
    assert msg["type"] == "message"
    for section in ("Confirm", "Mitigate", "Fix", "Verify", "Escalate"):
        assert playbook_first_step("link.bad_cable", section) in msg["text"], section
    assert "perfquery -x $LID 1 > pq.0" in msg["text"]
    assert len(r.content) <= 28 * 1024


def test_incident_is_answered_with_an_adaptive_card_of_ranked_causes(
        svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    r = _send(svc, f"incident {inc}")
    assert r.status_code == 200 and len(r.content) <= 28 * 1024
    msg = r.json()
    att = msg["attachments"][0]
    assert att["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = att["content"]
    assert card["type"] == "AdaptiveCard"
    texts = "\n".join(_card_texts(card["body"]))
    for c in bad_cable_diagnosis["causes"]:
        assert c["id"] in texts
    ev = bad_cable_diagnosis["causes"][0]["evidence"]
    cause_box = next(b for b in card["body"] if b["type"] == "Container")
    visible = [it for it in cause_box["items"] if it["type"] == "TextBlock"]
    action_sets = [it for it in cause_box["items"] if it["type"] == "ActionSet"]
    assert ev[0]["text"] in "\n".join(_card_texts(visible)) and ev[-1]["text"] not in "\n".join(_card_texts(visible))
    show = action_sets[0]["actions"][0]
    assert show["type"] == "Action.ShowCard" and show["title"].startswith("Show evidence")
    assert ev[-1]["text"] in "\n".join(_card_texts(show["card"]))


def test_mention_is_stripped_and_help_follows_a_bad_command(svc: ChatService) -> None:
    r = _send(svc, "help")
    assert r.status_code == 200
    assert "playbook <cause>" in r.json()["text"]
    bad = _send(svc, "reboot everything").json()["text"]
    assert "unknown command `reboot`" in bad and "incident <id>" in bad


@pytest.mark.slow
def test_job_not_ready_in_five_seconds_is_answered_queued(svc: ChatService) -> None:
    r = _send(svc, "job 77001 nccl timeout")
    assert r.status_code == 200
    created = [i for i in svc.store.list_incidents(limit=50) if i.job_id == "77001"]
    assert len(created) == 1
    text = r.json()["text"]
    assert f"incident {created[0].id}" in text and f"`incident {created[0].id}`" in text


def test_wrong_feedback_with_actual_cause_by_command(svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    r = _send(svc, f"feedback {inc} wrong link.flapping", user="Ola")
    assert r.status_code == 200
    fb = [f for f in svc.store.list_feedback() if f.incident_id == inc]
    assert len(fb) == 1 and fb[0].verdict == "wrong" and fb[0].actual == "link.flapping"
    assert fb[0].cause == "link.bad_cable" and fb[0].user == "Ola"
