"""What the bot answers, before any platform formatting.

Every platform module parses the text with :mod:`diagnose.chat.grammar`, asks :class:`Answers` and hands
the result to :mod:`diagnose.chat.render`. Nothing here knows about Slack, Teams or Mattermost, so the
three bots cannot drift apart in what they say; they differ only in layout and in how they reply later.

Answers come from the :class:`~diagnose.service.models.Store`: stored incidents and their diagnosis JSON
(the CLI's ``--format json`` contract), and, for ``job``/``host``, a new incident queued with
``store.create_manual_incident`` that the service's worker diagnoses while the bot polls the store.
"""

from __future__ import annotations

import queue
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

import structlog
from pydantic import ValidationError

from diagnose.catalog.loader import Catalog, load_catalog
from diagnose.chat.grammar import BadCommand, Command, Parsed, parse
from diagnose.models.diagnosis import CauseResult, Diagnosis, MissingEvidence, RuledOut
from diagnose.service.models import FeedbackRecord, IncidentDraft, IncidentRecord, Store

log = structlog.get_logger("diagnose.service.chat")

PLAYBOOK_STEP_SECTIONS = ("Confirm", "Mitigate", "Fix", "Verify", "Escalate")
FINISHED = frozenset({"diagnosed", "failed", "resolved"})


@dataclass(frozen=True)
class Asker:
    """Who asked, for the incident title and for feedback records. ``user`` is a display name or id."""

    user: str
    platform: Literal["slack", "teams", "mattermost"]


@dataclass(frozen=True)
class HelpAnswer:
    error: str | None = None
    suggestions: tuple[str, ...] = ()


@dataclass(frozen=True)
class NoticeAnswer:
    text: str
    ok: bool = True


@dataclass(frozen=True)
class IncidentAnswer:
    """A stored incident; ``diagnosis`` is None while it is diagnosed, when it failed, or when unreadable."""

    incident: IncidentRecord
    diagnosis: Diagnosis | None
    expanded: frozenset[str] = frozenset()
    problem: str | None = None

    @property
    def state(self) -> Literal["diagnosed", "pending", "failed"]:
        if self.diagnosis is not None:
            return "diagnosed"
        if self.incident.status == "failed" or self.problem:
            return "failed"
        return "pending"


@dataclass(frozen=True)
class QueuedAnswer:
    """A ``job``/``host`` request that waits for the worker; ``reused`` when an open incident already existed."""

    incident: IncidentRecord
    scope: str
    reused: bool


@dataclass(frozen=True)
class WhyAnswer:
    cause: str
    title: str
    incident: IncidentRecord | None
    result: CauseResult | None = None
    rank: int | None = None
    ruled_out: RuledOut | None = None
    missing: tuple[MissingEvidence, ...] = ()
    would_show: tuple[str, ...] = ()
    note: str | None = None


@dataclass(frozen=True)
class PlaybookAnswer:
    cause: str
    title: str
    path: str
    front: dict[str, object]
    sections: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class RecentAnswer:
    incidents: tuple[IncidentRecord, ...]


Answer = HelpAnswer | NoticeAnswer | IncidentAnswer | QueuedAnswer | WhyAnswer | PlaybookAnswer | RecentAnswer


class DaemonPool:
    """At most ``workers`` daemon threads for late answers; further tasks wait in a queue.

    Daemon threads, unlike a ThreadPoolExecutor's, do not hold the process for minutes at shutdown while they
    wait for the worker: a late answer lost in a restart is asked for again with ``incident N``.
    """

    def __init__(self, workers: int, name: str) -> None:
        self.workers = workers
        self.name = name
        self._q: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]]] = queue.SimpleQueue()
        self._started = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._lock:
            if self._started < self.workers:
                self._started += 1
                threading.Thread(target=self._run, name=f"{self.name}-{self._started}", daemon=True).start()
        self._q.put((fn, args))

    def _run(self) -> None:
        while True:
            fn, args = self._q.get()
            try:
                fn(*args)
            except Exception as exc:  # noqa: BLE001 - keep the thread; say what failed
                log.error("chat_late_answer_failed", pool=self.name, error=f"{exc.__class__.__name__}: {exc}")


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)


def load_diagnosis(incident: IncidentRecord) -> tuple[Diagnosis | None, str | None]:
    """The incident's stored diagnosis as the model, or the reason it cannot be read."""
    if incident.diagnosis is None:
        return None, None
    try:
        return Diagnosis.model_validate(incident.diagnosis), None
    except ValidationError as exc:
        return None, f"stored diagnosis does not match schema_version 1 ({exc.error_count()} problem(s))"


def playbook_steps(section_text: str) -> tuple[str, ...]:
    """Split a playbook section into its steps: numbered items or bullets, each with its continuation lines.

    Continuation lines are dedented by the item's marker width so fences start at column 0, which chat
    markdown needs to recognise them; prose wrapped in the source is joined back into one line, because
    chat clients turn every newline into a line break.
    """
    steps: list[list[str]] = []
    indent = 0
    in_fence = False
    prose_open = False
    for ln in section_text.split("\n"):
        m = None if in_fence else re.match(r"^(\d+\.|[-*])\s+", ln)
        if m:
            steps.append([ln.rstrip()])
            indent = len(m.group(0))
            prose_open = True
            continue
        if not steps:
            steps.append([])
            indent = 0
        lead = len(ln) - len(ln.lstrip(" "))
        text = ln[min(lead, indent):].rstrip()
        if text.lstrip().startswith("```"):
            in_fence = not in_fence
            steps[-1].append(text.lstrip())
            prose_open = False
            continue
        if in_fence:
            steps[-1].append(text)
        elif not text.strip():
            prose_open = False
        elif prose_open and steps[-1]:
            steps[-1][-1] += " " + text.strip()
        else:
            steps[-1].append(text.strip())
            prose_open = True
    return tuple("\n".join(s).strip() for s in steps if "\n".join(s).strip())


@dataclass
class Answers:
    """Platform-neutral answers over one store and the rule catalog.

    ``recent_s``: a ``job``/``host`` question reuses that job's or host's incident when it was created within
    this many seconds (re-running triage for every person who asks in the channel helps nobody).
    ``clock``/``sleep`` are injectable so polling can be exercised without real waiting.
    """

    store: Store
    catalog: Catalog | None = None
    recent_s: float = 6 * 3600.0
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    _ids: list[str] = field(default_factory=list, init=False, repr=False)

    def _cat(self) -> Catalog:
        if self.catalog is None:
            self.catalog = load_catalog()
        return self.catalog

    def cause_ids(self) -> list[str]:
        if not self._ids:
            cat = self._cat()
            self._ids = sorted(set(cat.rules) | set(cat.playbooks))
        return self._ids

    def parse(self, text: str) -> Parsed:
        return parse(text, self.cause_ids())

    # ------------------------------------------------------------------ dispatch

    def answer(self, parsed: Parsed, asker: Asker) -> Answer:
        """Answer one parsed message. ``job``/``host`` may return a :class:`QueuedAnswer`: see :meth:`wait`.

        A store that cannot be used now (its file gone, a full disk, PostgreSQL unreachable) is said in the answer,
        not raised: the platform would show a bare error and retry."""
        from diagnose.service.store import StoreError

        try:
            return self._answer(parsed, asker)
        except StoreError as exc:
            log.warning("chat_store_unavailable", platform=asker.platform, error=str(exc)[:300])
            return NoticeAnswer("The incident store cannot be used right now; nothing was recorded. Try again in a "
                                "minute (the service's /healthz says why).", ok=False)

    def _answer(self, parsed: Parsed, asker: Asker) -> Answer:
        if isinstance(parsed, BadCommand):
            log.info("chat_bad_command", platform=asker.platform, reason=parsed.reason)
            return HelpAnswer(parsed.reason, parsed.suggestions)
        cmd: Command = parsed
        log.info("chat_command", platform=asker.platform, verb=cmd.verb, arg=cmd.arg, incident=cmd.incident_id,
                 free_text=cmd.free_text)
        if cmd.verb == "help":
            return HelpAnswer()
        if cmd.verb == "incident" and cmd.incident_id is not None:
            return self.incident(cmd.incident_id)
        if cmd.verb in ("job", "host") and cmd.arg:
            return self.scope(cmd, asker)
        if cmd.verb == "why" and cmd.arg:
            return self.why(cmd.arg, cmd.incident_id)
        if cmd.verb == "playbook" and cmd.arg:
            return self.playbook(cmd.arg)
        if cmd.verb == "recent":
            return self.recent()
        if cmd.verb == "feedback" and cmd.incident_id is not None and cmd.verdict:
            return self.feedback(cmd.incident_id, cmd.verdict, cmd.arg, asker)
        return HelpAnswer(f"`{cmd.verb}` is missing its argument")

    # ------------------------------------------------------------------ incidents

    def incident(self, incident_id: int, expanded: frozenset[str] = frozenset()) -> IncidentAnswer | NoticeAnswer:
        inc = self.store.get_incident(incident_id)
        if inc is None:
            return NoticeAnswer(f"There is no incident {incident_id}. `recent` lists the latest ones.", ok=False)
        diag, problem = load_diagnosis(inc)
        if problem:
            log.warning("chat_diagnosis_unreadable", incident=incident_id, problem=problem)
        return IncidentAnswer(inc, diag, expanded=expanded, problem=problem)

    def find_recent(self, kind: Literal["job", "host"], value: str) -> IncidentRecord | None:
        """The newest incident of this job or host created within ``recent_s`` that did not fail."""
        cutoff = datetime.fromtimestamp(self.clock() - self.recent_s, tz=timezone.utc)
        best: IncidentRecord | None = None
        v = value.lower()
        for inc in self.store.list_incidents(limit=200):
            if kind == "job":
                hit = (inc.job_id or "").lower() == v
            else:
                hit = v in (h.lower() for h in inc.hosts)
            if not hit or inc.status == "failed" or _aware(inc.created_at) < cutoff:
                continue
            if best is None or _aware(inc.created_at) > _aware(best.created_at):
                best = inc
        return best

    def scope(self, cmd: Command, asker: Asker) -> IncidentAnswer | QueuedAnswer:
        """``job``/``host``: a recent incident when there is one, else a new one queued for the worker."""
        kind: Literal["job", "host"] = "job" if cmd.verb == "job" else "host"
        value = cmd.arg or ""
        label = f"{kind} {value}"
        found = self.find_recent(kind, value)
        if found is not None:
            diag, problem = load_diagnosis(found)
            if diag is not None:
                return IncidentAnswer(found, diag)
            if found.status not in FINISHED and not problem:
                return QueuedAnswer(found, label, reused=True)
        now = datetime.fromtimestamp(self.clock(), tz=timezone.utc)
        draft = IncidentDraft(
            source="chat",
            external_id=f"{asker.platform}:{kind}:{value}:{uuid.uuid4().hex[:12]}",
            title=f"{label}: asked in {asker.platform} by {asker.user}" + (f": {cmd.symptom}" if cmd.symptom else ""),
            text=cmd.symptom or "",
            hosts=[value] if kind == "host" else [],
            job_id=value if kind == "job" else None,
            starts_at=now - timedelta(hours=1),
            labels={"asked_by": asker.user, "platform": asker.platform, "scope": kind},
        )
        rec = self.store.create_manual_incident(draft)
        log.info("chat_incident_created", incident=rec.id, platform=asker.platform, scope=kind)
        return QueuedAnswer(rec, label, reused=False)

    def wait(self, incident_id: int, timeout_s: float, poll_s: float = 1.0) -> IncidentAnswer | NoticeAnswer:
        """Poll the store until the worker finished the incident or ``timeout_s`` passed; the latest state."""
        deadline = self.clock() + timeout_s
        while True:
            inc = self.store.get_incident(incident_id)
            if inc is None:
                return NoticeAnswer(f"Incident {incident_id} disappeared from the store.", ok=False)
            if inc.status in FINISHED or inc.diagnosis is not None:
                break
            left = deadline - self.clock()
            if left <= 0:
                break
            self.sleep(min(poll_s, left))
        return self.incident(incident_id)

    # ------------------------------------------------------------------ why / playbook / recent

    def _rule_title(self, cause: str) -> str:
        cat = self._cat()
        if cause in cat.rules:
            return cat.rules[cause].title
        pb = cat.playbooks.get(cause)
        return str(pb.front.get("title", cause)) if pb else cause

    def _would_show(self, cause: str) -> tuple[str, ...]:
        spec = self._cat().rules.get(cause)
        if spec is None:
            return ()
        return tuple(f"{c.weight}: {c.says}" for c in spec.evidence.supports)

    def why(self, cause: str, incident_id: int | None) -> WhyAnswer | NoticeAnswer:
        """Evidence for and against ``cause`` in one incident (the given one, else the newest that names it)."""
        title = self._rule_title(cause)
        inc: IncidentRecord | None = None
        if incident_id is not None:
            inc = self.store.get_incident(incident_id)
            if inc is None:
                return NoticeAnswer(f"There is no incident {incident_id}.", ok=False)
        else:
            for cand in self.store.list_incidents(limit=50):
                d, _ = load_diagnosis(cand)
                if d and (any(c.id == cause for c in d.causes) or any(r.id == cause for r in d.ruled_out)):
                    inc = cand
                    break
            if inc is None:
                return WhyAnswer(cause, title, None, would_show=self._would_show(cause),
                                 note="No recent incident lists this cause. What would show it:")
        diag, problem = load_diagnosis(inc)
        if diag is None:
            state = f"failed: {inc.error or problem}" if (inc.status == "failed" or problem) else "still diagnosing"
            return NoticeAnswer(f"Incident {inc.id} has no diagnosis yet ({state}).", ok=inc.status != "failed")
        missing = tuple(m for m in diag.missing_evidence if cause in m.would_decide)
        for rank, c in enumerate(diag.causes, 1):
            if c.id == cause:
                return WhyAnswer(cause, title, inc, result=c, rank=rank, missing=missing)
        for r in diag.ruled_out:
            if r.id == cause:
                return WhyAnswer(cause, title, inc, ruled_out=r, missing=missing)
        return WhyAnswer(cause, title, inc, missing=missing, would_show=self._would_show(cause),
                         note="No evidence in this incident supports it (causes without support are not listed). "
                              "What would show it:")

    def playbook(self, cause: str) -> PlaybookAnswer | NoticeAnswer:
        pb = self._cat().playbooks.get(cause)
        if pb is None:
            return NoticeAnswer(f"No playbook for `{cause}`.", ok=False)
        sections = tuple((name, playbook_steps(pb.sections[name])) for name in PLAYBOOK_STEP_SECTIONS
                         if pb.sections.get(name))
        return PlaybookAnswer(cause, str(pb.front.get("title", cause)), pb.path, dict(pb.front), sections)

    def recent(self, limit: int = 10) -> RecentAnswer:
        return RecentAnswer(tuple(self.store.list_incidents(limit=limit)))

    # ------------------------------------------------------------------ feedback

    def feedback(self, incident_id: int, verdict: Literal["right", "wrong"], actual: str | None,
                 asker: Asker) -> NoticeAnswer:
        """Store a verdict on the cause ranked first *now*; ``actual`` only counts for ``wrong``."""
        inc = self.store.get_incident(incident_id)
        if inc is None:
            return NoticeAnswer(f"There is no incident {incident_id}.", ok=False)
        top = inc.top_cause()
        if top is None:
            return NoticeAnswer(f"Incident {incident_id} has no ranked cause to rate yet.", ok=False)
        if actual is not None and actual not in self.cause_ids():
            return NoticeAnswer(f"`{actual}` is not a known cause id.", ok=False)
        if verdict == "wrong" and actual == top:
            return NoticeAnswer(f"`{actual}` is the cause ranked first; say `right` if it was.", ok=False)
        fb = FeedbackRecord(incident_id=incident_id, verdict=verdict, cause=top,
                            actual=actual if verdict == "wrong" else None, user=asker.user,
                            platform=asker.platform,
                            created_at=datetime.fromtimestamp(self.clock(), tz=timezone.utc))
        self.store.add_feedback(fb)
        log.info("chat_feedback", incident=incident_id, verdict=verdict, cause=top, actual=fb.actual,
                 platform=asker.platform)
        if verdict == "right":
            return NoticeAnswer(f"Thanks {asker.user}: incident {incident_id} recorded as right (`{top}`).")
        was = f", it was `{actual}`" if actual else ""
        return NoticeAnswer(f"Thanks {asker.user}: incident {incident_id} recorded as wrong (`{top}`{was}).")
