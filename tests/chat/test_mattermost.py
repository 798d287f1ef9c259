"""The Mattermost slash command and its buttons over HTTP, authenticated as Mattermost does (token)."""

from __future__ import annotations

import copy
import json
from typing import Any

from .support import (
    MATTERMOST_USER_ID,
    ChatService,
    mattermost_trigger_id,
    playbook_first_step,
    store_diagnosed_incident,
)

CHANNEL = "fdnkf8p1wbrp3xr5y7f7ms5ecr"


def _command(svc: ChatService, text: str, **kw: Any) -> Any:
    return svc.post("/mattermost/command", *svc.mattermost_command(text, **kw))


def click_body(ctx: dict[str, Any], *, channel: str = CHANNEL, user: str = "bo") -> bytes:
    """The request Mattermost sends to an action's integration URL
    (https://developers.mattermost.com/integrate/plugins/interactive-messages/), with a fresh trigger_id."""
    return json.dumps({"user_id": MATTERMOST_USER_ID, "user_name": user, "channel_id": channel,
                       "channel_name": "gpu-oncall", "team_id": "rdc9bgriktyx9p4kowh3dmgqyc", "team_domain": "infra",
                       "post_id": "8tkq4oj8ujbczrwenz5gzhubgc", "trigger_id": mattermost_trigger_id(), "type": "",
                       "data_source": "", "context": ctx}).encode()


def _click(svc: ChatService, ctx: dict[str, Any], *, channel: str = CHANNEL, user: str = "bo") -> Any:
    return svc.post("/mattermost/actions", click_body(ctx, channel=channel, user=user),
                    {"Content-Type": "application/json"})


def _action(msg: dict[str, Any], action_id: str) -> dict[str, Any]:
    return next(a for att in msg.get("attachments", []) for a in att["actions"] if a["id"] == action_id)


def test_bad_token_is_401_and_nothing_runs(svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    r = _command(svc, f"feedback {inc} right", token="guessed-token")
    assert r.status_code == 401
    body, headers = svc.mattermost_command(f"feedback {inc} right", token="")
    headers.pop("Authorization")
    assert svc.post("/mattermost/command", body, headers).status_code == 401
    assert [f for f in svc.store.list_feedback() if f.incident_id == inc] == []


def test_playbook_is_answered_in_channel_with_its_steps(svc: ChatService) -> None:
    r = _command(svc, "playbook link.bad_cable")
    assert r.status_code == 200
    msg = r.json()
    assert msg["response_type"] == "in_channel"
    assert len(msg["text"]) <= 16383
    for section in ("Confirm", "Mitigate", "Fix", "Verify", "Escalate"):
        assert playbook_first_step("link.bad_cable", section) in msg["text"], section
    assert "```bash\nLID=$(ibstat mlx5_3 1" in msg["text"]


def test_incident_lists_ranked_causes_with_signed_buttons(svc: ChatService,
                                                          bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    r = _command(svc, f"incident {inc}")
    assert r.status_code == 200
    msg = r.json()
    text = msg["text"]
    causes = bad_cable_diagnosis["causes"]
    positions = [text.index(f"`{c['id']}`") for c in causes]
    assert positions == sorted(positions)
    ev = causes[0]["evidence"]
    assert ev[0]["text"] in text and ev[-1]["text"] not in text
    button = _action(msg, "evidence0")
    assert button["integration"]["url"] == f"{svc.base_url}/mattermost/actions"
    assert button["integration"]["context"]["incident"] == inc and "sig" in button["integration"]["context"]


def test_evidence_button_updates_the_post_with_all_evidence(svc: ChatService,
                                                            bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    msg = _command(svc, f"incident {inc}").json()
    r = _click(svc, _action(msg, "evidence0")["integration"]["context"])
    assert r.status_code == 200
    update = r.json()["update"]
    for e in bad_cable_diagnosis["causes"][0]["evidence"]:
        assert e["text"] in update["message"]
    assert any(a["id"] == "right" for att in update["props"]["attachments"] for a in att["actions"])


def test_forged_or_moved_button_is_401_and_stores_nothing(svc: ChatService,
                                                         bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    other = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    msg = _command(svc, f"incident {inc}").json()
    ctx = _action(msg, "right")["integration"]["context"]
    forged = copy.deepcopy(ctx)
    forged["incident"] = other
    assert _click(svc, forged).status_code == 401
    assert _click(svc, {k: v for k, v in ctx.items() if k != "sig"}).status_code == 401
    assert _click(svc, ctx, channel="anotherchannelid0000000000").status_code == 401
    assert [f for f in svc.store.list_feedback() if f.incident_id in (inc, other)] == []


def test_wrong_it_was_menu_stores_the_actual_cause(svc: ChatService, bad_cable_diagnosis: dict[str, Any]) -> None:
    inc = store_diagnosed_incident(svc.store, bad_cable_diagnosis)
    msg = _command(svc, f"incident {inc}").json()
    menu = _action(msg, "itwas")
    assert "link.port_down" in [o["value"] for o in menu["options"]]
    ctx = {**menu["integration"]["context"], "selected_option": "link.port_down"}
    r = _click(svc, ctx, user="kim")
    assert r.status_code == 200 and "wrong" in r.json()["ephemeral_text"]
    fb = [f for f in svc.store.list_feedback() if f.incident_id == inc]
    assert len(fb) == 1
    assert (fb[0].verdict, fb[0].cause, fb[0].actual, fb[0].user, fb[0].platform) == (
        "wrong", "link.bad_cable", "link.port_down", "kim", "mattermost")


def test_job_is_answered_now_and_again_through_response_url(svc: ChatService) -> None:
    r = _command(svc, "job 50216 allreduce hangs", response_key="mm-job")
    assert r.status_code == 200
    created = [i for i in svc.store.list_incidents(limit=50) if i.job_id == "50216"]
    assert len(created) == 1 and f"Incident {created[0].id}" in r.json()["text"]
    rec = svc.standin.wait_for(lambda x: x.path == "/mattermost/response/mm-job")
    assert rec.body["response_type"] == "in_channel"
    assert "`link.bad_cable`" in rec.body["text"]


def test_bad_command_gets_ephemeral_help(svc: ChatService) -> None:
    msg = _command(svc, "why").json()
    assert msg["response_type"] == "ephemeral"
    assert "`why` needs a cause id" in msg["text"] and "recent" in msg["text"]
