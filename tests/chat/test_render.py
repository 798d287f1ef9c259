"""Rendering keeps within each platform's limits, however large the diagnosis; answers from the store."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from diagnose.chat.answers import Answers, Asker, IncidentAnswer, QueuedAnswer, WhyAnswer
from diagnose.chat.render import mattermost_message, slack_message, teams_message, to_doc, with_feedback
from diagnose.models.diagnosis import (
    CauseResult,
    Diagnosis,
    EvidenceRef,
    FileEntry,
    Location,
    MissingEvidence,
    RuledOut,
    Symptom,
)
from diagnose.service.models import FeedbackRecord, IncidentDraft, IncidentRecord

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


def _huge_diagnosis(n_causes: int = 40, n_evidence: int = 60, width: int = 400) -> Diagnosis:
    def ev(i: int, j: int) -> EvidenceRef:
        return EvidenceRef(file=f"host-{i:03d}/very/long/path/to/nccl-rank-{j:05d}.log", line=j + 1,
                           text=(f"NCCL WARN <{i}:{j}> & rank *{j}* " + "x" * width)[:width], finding="f")

    causes = [CauseResult(id=f"link.cause_{i:02d}", title="T" * 200, score=0.5, confidence="medium",
                          verdict="inconclusive", summary="S" * 2000, location=Location(host=f"h{i}", device="mlx5_0"),
                          evidence=[ev(i, j) for j in range(n_evidence)], against=[ev(i, 999)],
                          playbook=f"playbooks/link/cause_{i:02d}.md") for i in range(n_causes)]
    return Diagnosis(symptoms=[Symptom(kind="collective_slow", text="slow", source="chat")], causes=causes,
                     ruled_out=[RuledOut(id=f"fabric.r{i}", why="W" * 500) for i in range(30)],
                     missing_evidence=[MissingEvidence(would_decide=["a.b"], collect="C" * 800)] * 5,
                     files=[FileEntry(path=f"f{i}", format="nccl_log", records=1) for i in range(300)])


def _incident(d: Diagnosis | None, **kw: Any) -> IncidentRecord:
    return IncidentRecord(id=kw.pop("id", 9), source="alertmanager", external_id="fp", title="N" * 400,
                          created_at=kw.pop("created_at", NOW), updated_at=NOW,
                          diagnosis=d.model_dump(mode="json") if d else None, **kw)


def _slack_ok(msg: dict[str, Any]) -> None:
    blocks = msg["blocks"]
    assert len(blocks) <= 50
    total = 0
    for b in blocks:
        if b["type"] == "header":
            assert len(b["text"]["text"]) <= 150
        if b["type"] == "section":
            assert len(b["text"]["text"]) <= 3000
            total += len(b["text"]["text"])
        if b["type"] == "context":
            assert len(b["elements"]) <= 10
        if b["type"] == "actions":
            assert len(b["elements"]) <= 25
            for e in b["elements"]:
                if e["type"] == "button":
                    assert len(e["text"]["text"]) <= 75 and len(e["value"]) <= 2000
                else:
                    assert len(e["options"]) <= 100
                    assert all(len(o["value"]) <= 150 and len(o["text"]["text"]) <= 75 for o in e["options"])
    assert total <= 12_000  # Slack rejects ~13k characters of blocks (msg_blocks_too_long)
    assert len(msg["text"]) <= 3000


@pytest.mark.parametrize("expanded", [frozenset(), frozenset({"link.cause_00", "link.cause_01"})])
def test_huge_diagnosis_fits_every_platform(expanded: frozenset[str]) -> None:
    d = _huge_diagnosis()
    doc = with_feedback(to_doc(IncidentAnswer(_incident(d, status="diagnosed"), d, expanded=expanded)),
                        [f"x.cause_{i:03d}" for i in range(150)])
    _slack_ok(slack_message(doc))
    teams = teams_message(doc)
    assert len(json.dumps(teams, ensure_ascii=False).encode()) <= 28 * 1024
    mm = mattermost_message(doc, "https://bot.example/mattermost/actions", lambda c: {**c, "sig": "0" * 64})
    assert len(mm["text"]) <= 16383
    assert "link.cause_00" in mm["text"]  # the top cause survives the cuts


def test_collapsed_evidence_shows_two_lines_and_a_control_everywhere() -> None:
    d = _huge_diagnosis(n_causes=2, n_evidence=7, width=60)
    doc = to_doc(IncidentAnswer(_incident(d, status="diagnosed"), d))
    first, third = d.causes[0].evidence[0].text, d.causes[0].evidence[2].text
    slack = json.dumps(slack_message(doc))
    assert json.dumps(first.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))[1:-1] in slack
    assert "Show evidence (6 more)" in slack  # 5 more evidence lines and 1 against
    mm = mattermost_message(doc)["text"]
    assert first in mm and third not in mm
    card = json.dumps(teams_message(doc))
    assert "Action.ShowCard" in card


def test_pending_and_failed_incidents() -> None:
    pending = to_doc(IncidentAnswer(_incident(None, status="diagnosing"), None))
    assert any("Still diagnosing" in ln.text for ln in pending.intro)
    failed = to_doc(IncidentAnswer(_incident(None, status="failed", error="bundle store unreachable"), None))
    assert any("failed: bundle store unreachable" in ln.text for ln in failed.intro)
    assert "Still diagnosing" in mattermost_message(pending)["text"]


class MemStore:
    """A minimal in-memory Store for the answer logic (the HTTP tests use the service's SQLite store)."""

    def __init__(self) -> None:
        self.incidents: dict[int, IncidentRecord] = {}
        self.feedback: list[FeedbackRecord] = []

    def add(self, rec: IncidentRecord) -> IncidentRecord:
        self.incidents[rec.id] = rec
        return rec

    def get_incident(self, incident_id: int) -> IncidentRecord | None:
        return self.incidents.get(incident_id)

    def list_incidents(self, limit: int = 20, status: str | None = None) -> list[IncidentRecord]:
        rows = sorted(self.incidents.values(), key=lambda r: -r.id)
        return [r for r in rows if status is None or r.status == status][:limit]

    def find_incident(self, source: str, external_id: str) -> IncidentRecord | None:
        return next((r for r in self.incidents.values() if (r.source, r.external_id) == (source, external_id)), None)

    def create_manual_incident(self, draft: IncidentDraft) -> IncidentRecord:
        now = datetime.now(timezone.utc)
        return self.add(IncidentRecord(id=max(self.incidents, default=0) + 1, created_at=now, updated_at=now,
                                       **draft.model_dump(exclude={"state", "bundle_refs", "reply_to"})))

    def add_feedback(self, fb: FeedbackRecord) -> None:
        self.feedback.append(fb)

    def list_feedback(self) -> list[FeedbackRecord]:
        return list(self.feedback)


def test_job_reuses_a_recent_incident_and_creates_one_otherwise(bad_cable_diagnosis: dict[str, Any]) -> None:
    store = MemStore()
    now = datetime.now(timezone.utc)
    store.add(_incident(Diagnosis.model_validate(bad_cable_diagnosis), id=1, job_id="4412", status="diagnosed",
                        created_at=now - timedelta(minutes=30)))
    store.add(_incident(None, id=2, job_id="5000", status="diagnosed", created_at=now - timedelta(days=2)))
    answers = Answers(store)  # type: ignore[arg-type]
    asker = Asker("ana", "slack")
    got = answers.answer(answers.parse("job 4412"), asker)
    assert isinstance(got, IncidentAnswer) and got.incident.id == 1
    stale = answers.answer(answers.parse("job 5000 nccl timeout"), asker)
    assert isinstance(stale, QueuedAnswer) and not stale.reused
    new = store.get_incident(stale.incident.id)
    assert new is not None and new.source == "chat" and new.job_id == "5000" and new.text == "nccl timeout"
    again = answers.answer(answers.parse("job 5000"), asker)
    assert isinstance(again, QueuedAnswer) and again.reused and again.incident.id == stale.incident.id


def test_wait_gives_up_at_the_deadline_without_sleeping_for_real() -> None:
    store = MemStore()
    store.add(_incident(None, id=3, status="open"))
    t = [1000.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        t[0] += s

    answers = Answers(store, clock=lambda: t[0], sleep=sleep)  # type: ignore[arg-type]
    res = answers.wait(3, timeout_s=5.0, poll_s=2.0)
    assert isinstance(res, IncidentAnswer) and res.state == "pending"
    assert slept == [2.0, 2.0, 1.0]


def test_why_gives_evidence_for_and_against_or_the_ruled_out_reason(bad_cable_diagnosis: dict[str, Any]) -> None:
    store = MemStore()
    d = Diagnosis.model_validate(bad_cable_diagnosis)
    store.add(_incident(d, id=4, status="diagnosed"))
    answers = Answers(store)  # type: ignore[arg-type]
    top = d.causes[0]
    why = answers.why(top.id, 4)
    assert isinstance(why, WhyAnswer) and why.rank == 1 and why.result == top
    text = mattermost_message(to_doc(why))["text"]
    for e in top.evidence:
        assert f"{e.file}:{e.line}" in text
    ruled = d.ruled_out[0]
    why_r = answers.why(ruled.id, None)  # the newest incident naming it
    assert isinstance(why_r, WhyAnswer) and why_r.incident is not None and why_r.incident.id == 4
    assert ruled.why[:60] in mattermost_message(to_doc(why_r))["text"]
    absent = answers.why("gpu.throttling", 4)
    assert isinstance(absent, WhyAnswer) and absent.result is None and absent.would_show


def test_feedback_rejects_what_cannot_be_rated(bad_cable_diagnosis: dict[str, Any]) -> None:
    store = MemStore()
    store.add(_incident(None, id=5, status="diagnosing"))
    store.add(_incident(Diagnosis.model_validate(bad_cable_diagnosis), id=6, status="diagnosed"))
    answers = Answers(store)  # type: ignore[arg-type]
    asker = Asker("ana", "mattermost")
    assert not answers.feedback(5, "right", None, asker).ok
    assert not answers.feedback(99, "right", None, asker).ok
    assert not answers.feedback(6, "wrong", "link.bad_cable", asker).ok  # that is the top cause
    assert not answers.feedback(6, "wrong", "no.such_cause", asker).ok
    assert store.feedback == []
    assert answers.feedback(6, "wrong", "link.flapping", asker).ok
    assert [(f.verdict, f.cause, f.actual) for f in store.feedback] == [("wrong", "link.bad_cable", "link.flapping")]


def test_recent_lists_top_causes() -> None:
    store = MemStore()
    d = _huge_diagnosis(n_causes=1, n_evidence=1, width=10)
    store.add(_incident(d, id=7, status="diagnosed", created_at=NOW - timedelta(minutes=12)))
    store.add(_incident(None, id=8, status="failed", created_at=NOW - timedelta(hours=3)))
    doc = to_doc(Answers(store).recent(), now=NOW)  # type: ignore[arg-type]
    lines = [ln.text for p in doc.parts for ln in p.lines]
    assert lines[0].startswith("`#8` failed · 3 h ago") and lines[0].endswith("failed")
    assert lines[1].startswith("`#7` diagnosed · 12 min ago") and "`link.cause_00`" in lines[1]
