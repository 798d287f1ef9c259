"""``diagnose feedback report``: how the ranking fares against what on-call people said in chat.

Feedback comes from the chat buttons ("right cause", "wrong cause, it was X") and the ``feedback`` command.
Counting rules, chosen so a change of mind or a double click does not count twice:

- one vote per (incident, platform, user): the latest one;
- an incident's verdict is its latest vote; the actual cause is the latest one any "wrong" vote named;
- top-1 accuracy = incidents judged right / incidents rated.

``ranked_first`` counts every stored incident whose diagnosis put the cause first, rated or not, so a cause
that is often first but rarely rated stands out.
"""

from __future__ import annotations

import json
import logging
import sys
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Annotated, Any

import structlog
import typer

from diagnose.service.models import FeedbackRecord, IncidentRecord, Store

feedback_app = typer.Typer(no_args_is_help=True, help="Feedback given in chat on diagnoses.")


@feedback_app.callback()
def _feedback_root() -> None:
    """Feedback given in chat on diagnoses (a group, so `report` stays a subcommand)."""


class ReportFormat(str, Enum):
    text = "text"
    json = "json"


@dataclass
class CauseStats:
    cause: str
    ranked_first: int = 0
    rated: int = 0
    right: int = 0
    wrong: int = 0


@dataclass
class FeedbackReport:
    votes: int
    rated_incidents: int
    right: int
    wrong: int
    top1_accuracy: float | None
    causes: list[CauseStats] = field(default_factory=list)
    confusions: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _when(fb: FeedbackRecord) -> datetime:
    if fb.created_at is None:
        return _EPOCH
    return fb.created_at if fb.created_at.tzinfo else fb.created_at.replace(tzinfo=timezone.utc)


def build_report(feedback: list[FeedbackRecord], incidents: list[IncidentRecord] | None = None) -> FeedbackReport:
    """Aggregate feedback records (in store order; ``created_at`` decides when present)."""
    ordered = sorted(enumerate(feedback), key=lambda p: (_when(p[1]), p[0]))
    latest_vote: dict[tuple[int, str, str], FeedbackRecord] = {}
    for _, fb in ordered:
        latest_vote[(fb.incident_id, fb.platform, fb.user)] = fb
    by_incident: dict[int, list[FeedbackRecord]] = defaultdict(list)
    for _, fb in ordered:
        if latest_vote.get((fb.incident_id, fb.platform, fb.user)) is fb:
            by_incident[fb.incident_id].append(fb)

    stats: dict[str, CauseStats] = {}

    def st(cause: str) -> CauseStats:
        return stats.setdefault(cause, CauseStats(cause))

    for inc in incidents or []:
        top = inc.top_cause()
        if top:
            st(top).ranked_first += 1

    confusions: Counter[tuple[str, str]] = Counter()
    right = wrong = 0
    for votes in by_incident.values():
        final = votes[-1]
        cause = final.cause or "(none)"
        s = st(cause)
        s.rated += 1
        if final.verdict == "right":
            right += 1
            s.right += 1
            continue
        wrong += 1
        s.wrong += 1
        actual = next((v.actual for v in reversed(votes) if v.verdict == "wrong" and v.actual), None)
        if actual:
            confusions[(cause, actual)] += 1
    rated = right + wrong
    return FeedbackReport(
        votes=len(latest_vote), rated_incidents=rated, right=right, wrong=wrong,
        top1_accuracy=(right / rated) if rated else None,
        causes=sorted(stats.values(), key=lambda s: (-s.rated, -s.ranked_first, s.cause)),
        confusions=[{"said": s, "was": w, "count": n} for (s, w), n in
                    sorted(confusions.items(), key=lambda kv: (-kv[1], kv[0]))],
    )


def render_report_text(rep: FeedbackReport) -> str:
    if rep.votes == 0:
        return "No feedback yet. Rate a diagnosis in chat (Right cause / Wrong cause) to fill this report.\n"
    acc = f"{rep.top1_accuracy:.0%}" if rep.top1_accuracy is not None else "n/a"
    out = [f"rated incidents {rep.rated_incidents} ({rep.votes} votes): right {rep.right}, wrong {rep.wrong}",
           f"top-1 accuracy on rated incidents: {acc} ({rep.right}/{rep.rated_incidents})", ""]
    w = max([len("cause")] + [len(c.cause) for c in rep.causes])
    out.append(f"{'cause':<{w}}  ranked_first  rated  right  wrong")
    for c in rep.causes:
        out.append(f"{c.cause:<{w}}  {c.ranked_first:>12}  {c.rated:>5}  {c.right:>5}  {c.wrong:>5}")
    if rep.confusions:
        out += ["", "confusions (said -> was):"]
        out += [f"  {c['said']} -> {c['was']}: {c['count']}" for c in rep.confusions]
    return "\n".join(out) + "\n"


def open_report_store(url: str) -> Store:
    """The service's store at ``url`` (sqlite:///... or postgresql://...)."""
    from diagnose.service.store import open_store  # the service's store module; imported only when used

    return open_store(url)


@feedback_app.command("report")
def report(
    fmt: Annotated[ReportFormat, typer.Option("--format", "-f", help="text or json.")] = ReportFormat.text,
    store_url: Annotated[str | None, typer.Option("--store", help="Database URL; default from DIAGNOSE_STORE / "
                                                                  "DIAGNOSE_DATA_DIR.")] = None,
) -> None:
    """Per cause: how often it was ranked first and rated right/wrong; confusions; top-1 accuracy."""
    from diagnose.interfaces.service_cli import need_service

    need_service()
    from diagnose.service.settings import load_settings

    if not structlog.is_configured():
        # run on its own rather than under `diagnose` (which configures logging): keep the store's logs off
        # stdout, where the report goes; the process's own stderr outlives any captured stream
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
                            logger_factory=structlog.PrintLoggerFactory(file=sys.__stderr__))
    from diagnose.interfaces.service_cli import sqlite_path

    url = store_url or load_settings().store_url()
    path = sqlite_path(url)
    try:
        if path is not None and not path.exists():  # a report never creates a store
            feedback, incidents = [], []
        else:
            store = open_report_store(url)
            feedback = store.list_feedback()
            incidents = store.list_incidents(limit=1_000_000)
    except ImportError as exc:
        typer.echo(f"error: the service store is not available ({exc})", err=True)
        raise typer.Exit(1) from exc
    except Exception as exc:  # noqa: BLE001 - one readable line instead of a traceback for a bad URL or database
        typer.echo(f"error: cannot read the store at {url.split('@')[-1]}: {exc.__class__.__name__}: {exc}", err=True)
        raise typer.Exit(2) from exc
    rep = build_report(feedback, incidents)
    if fmt is ReportFormat.json:
        sys.stdout.write(json.dumps(rep.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(render_report_text(rep))
