"""``diagnose feedback report``: counting rules, and the command on a real store."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from typer.testing import CliRunner

from diagnose.interfaces.chat_cli import build_report, feedback_app, render_report_text
from diagnose.service.models import FeedbackRecord, IncidentRecord

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def fb(inc: int, verdict: str, cause: str, actual: str | None = None, user: str = "ana", minutes: int = 0,
       platform: str = "slack") -> FeedbackRecord:
    return FeedbackRecord(incident_id=inc, verdict=verdict, cause=cause, actual=actual, user=user,  # type: ignore[arg-type]
                          platform=platform, created_at=T0 + timedelta(minutes=minutes))


def incident(i: int, top: str | None) -> IncidentRecord:
    diag = {"causes": [{"id": top}]} if top else None
    return IncidentRecord(id=i, source="chat", external_id=str(i), title="t", created_at=T0, updated_at=T0,
                          diagnosis=diag)


def test_latest_vote_counts_and_confusions_are_paired() -> None:
    records = [
        fb(1, "wrong", "link.bad_cable", minutes=0),               # changed their mind...
        fb(1, "right", "link.bad_cable", minutes=5),               # ...this one counts
        fb(2, "wrong", "link.bad_cable", "link.flapping", user="bo", minutes=1),
        fb(2, "wrong", "link.bad_cable", "link.flapping", user="bo", minutes=2),  # double click: one vote
        fb(3, "wrong", "fabric.congestion", "fabric.adaptive_routing_off", minutes=3),
        fb(4, "wrong", "fabric.congestion", minutes=4),            # wrong, actual unknown
    ]
    incidents = [incident(1, "link.bad_cable"), incident(2, "link.bad_cable"), incident(3, "fabric.congestion"),
                 incident(4, "fabric.congestion"), incident(5, "fabric.congestion"), incident(6, None)]
    rep = build_report(records, incidents)
    assert (rep.rated_incidents, rep.right, rep.wrong, rep.votes) == (4, 1, 3, 4)
    assert rep.top1_accuracy == 0.25
    rows = {c.cause: (c.ranked_first, c.rated, c.right, c.wrong) for c in rep.causes}
    assert rows == {"link.bad_cable": (2, 2, 1, 1), "fabric.congestion": (3, 2, 0, 2)}
    assert rep.confusions == [{"said": "fabric.congestion", "was": "fabric.adaptive_routing_off", "count": 1},
                              {"said": "link.bad_cable", "was": "link.flapping", "count": 1}]
    text = render_report_text(rep)
    assert "top-1 accuracy on rated incidents: 25% (1/4)" in text
    assert "link.bad_cable -> link.flapping: 1" in text


def test_no_feedback_yet() -> None:
    rep = build_report([], [incident(1, "link.bad_cable")])
    assert rep.top1_accuracy is None and rep.rated_incidents == 0
    assert "No feedback yet" in render_report_text(rep)


def test_report_command_reads_the_service_store(tmp_path: Path) -> None:
    from diagnose.service.models import IncidentDraft
    from diagnose.service.store import open_store

    url = f"sqlite:///{(tmp_path / 'd.db').as_posix()}"
    store = open_store(url)
    rec = store.create_manual_incident(IncidentDraft(source="cli", external_id="e1", title="x"))
    store.set_diagnosis(rec.id, {"causes": [{"id": "roce.gid_index"}]})
    store.add_feedback(fb(rec.id, "right", "roce.gid_index", platform="teams"))
    store.close()
    res = CliRunner().invoke(feedback_app, ["report", "-f", "json", "--store", url])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["top1_accuracy"] == 1.0
    assert out["causes"] == [{"cause": "roce.gid_index", "ranked_first": 1, "rated": 1, "right": 1, "wrong": 0}]


def test_report_command_on_an_unreachable_store_is_one_line_exit_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(feedback_app, ["report", "--store", "postgresql://u:secret@127.0.0.1:1/none"])
    assert res.exit_code == 2
    assert "secret" not in res.output and "cannot read the store" in res.output
