"""The find stage: the symptom, the frames of the parsed records, every extractor's findings, and what they imply.

Values in, values out, in one process: :mod:`diagnose.runtime` may run part of the extractors elsewhere, and merges
their results with :func:`merged` so that the findings are these either way.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from diagnose.evidence.context import Context, finding
from diagnose.evidence.extractors import FABRIC_TABLES, all_extractors
from diagnose.evidence.scan import scan
from diagnose.models.diagnosis import EvidenceRef, Finding, Symptom
from diagnose.models.records import ColumnBatch, Record
from diagnose.stages.parse import Evidence, settled
from diagnose.symptoms import SYMPTOM_SOURCE, FreeText, classify, from_text, implied_symptom, text_records

log = structlog.get_logger("diagnose.pipeline")
all_extractors()  # every extractor (and networkx, pandas' parts they use) imported once, not once per run

EMITS = frozenset({"extractor_failed", "file_problem"})  # the kinds this stage adds to the extractors' (see derive)
Extractor = Callable[[Context], list[Finding]]
Outcomes = dict[str, tuple[list[Finding], str | None]]
"""extractor name -> (its findings, the error that stopped it as ``Class: message``, or None)."""


def add_symptoms(ev: Evidence, symptom: str | None, source: str) -> None:
    """The symptom's words as symptoms and records of their own (its stated settings and known messages count as
    evidence); with no symptom that says what failed, the reporter's sentences in the bundle may (a report.txt's
    "hangs")."""
    if symptom and symptom.strip():
        ev.symptoms.extend(from_text(symptom, source))
        ev.records.extend(text_records(symptom))
        ev.records.extend(settled(scan(symptom, SYMPTOM_SOURCE), ev.records))
    if not any(s.kind != "unknown" for s in ev.symptoms):
        for r in ev.records:
            if isinstance(r, FreeText) and r.source != SYMPTOM_SOURCE:
                for kind in classify(r.text):
                    if all(s.kind != kind for s in ev.symptoms):
                        ev.symptoms.append(Symptom(kind=kind, text=r.text, source=f"{r.source}:{r.line}"))  # type: ignore[arg-type]
        if len(ev.symptoms) > 1:
            ev.symptoms = [s for s in ev.symptoms if s.kind != "unknown"]


def run_some(ctx: Context, todo: list[tuple[str, Extractor]]) -> Outcomes:
    """Run extractors, each on its own: one extractor's bug never hides the others' findings."""
    out: Outcomes = {}
    for name, fn in todo:
        try:
            out[name] = (fn(ctx), None)
        except Exception as exc:  # noqa: BLE001 - one extractor bug never hides the others' findings
            out[name] = ([], f"{exc.__class__.__name__}: {exc}")
    return out


def run_extractors(ctx: Context) -> list[Finding]:
    """Every extractor's findings, in registry order (a failed one's error as a finding of its own)."""
    todo = all_extractors()
    return merged(todo, run_some(ctx, todo))


def merged(todo: list[tuple[str, Extractor]], here: Outcomes) -> list[Finding]:
    """Every extractor's findings in registry order, a failed one's error as a finding of its own."""
    raw: list[Finding] = []
    for name, _fn in todo:
        found, error = here[name]
        raw.extend(found)
        if error is not None:
            log.warning("extractor_failed", extractor=name, error=error)
            raw.append(finding("extractor_failed", f"Extractor {name} failed: {error}", attrs={"extractor": name}))
    return raw


def derive(ev: Evidence, raw: list[Finding]) -> Evidence:
    """``ev`` with its findings: ``raw`` and a finding per file that gave nothing but a problem, in one order (kind,
    place, first evidence line), numbered per kind; and the symptoms they imply (a busbw far below line rate is a
    slow collective, :func:`implied_symptom`) when no symptom said so."""
    raw = list(raw)
    for fe in ev.files:
        if fe.problem and (fe.format in ("unreadable", "unknown", "empty") or fe.records == 0):
            raw.append(finding("file_problem", f"{fe.path}: {fe.problem}",
                               evidence=[EvidenceRef(file=fe.path, line=0, text=fe.problem or "", finding="file_problem")]))
    raw.sort(key=lambda f: (f.kind, f.location.label(), [(e.file, e.line) for e in f.evidence[:1]], f.summary))
    counts: dict[str, int] = {}
    for f in raw:
        counts[f.kind] = counts.get(f.kind, 0) + 1
        ev.findings.append(f.model_copy(update={"id": f"{f.kind}#{counts[f.kind]}"}))
    seen: set[str] = {s.kind for s in ev.symptoms}
    for f in ev.findings:
        implied = implied_symptom(f.kind, f.attrs)
        if implied and implied not in seen and f.evidence:
            e = f.evidence[0]
            ev.symptoms.append(Symptom(kind=implied, text=f.summary, source=f"{e.file}:{e.line}"))  # type: ignore[arg-type]
            seen.add(implied)
    log.info("findings_extracted", findings=len(ev.findings), symptoms=len(ev.symptoms))
    return ev


def owned(records: list[Record]) -> tuple[list[Record], list[Record]]:
    """``records`` split into the fabric tables' (:data:`FABRIC_TABLES`) and the rest, each in order."""
    mine: list[Record] = []
    rest: list[Record] = []
    for r in records:
        (mine if table_of(r) in FABRIC_TABLES else rest).append(r)
    return mine, rest


def table_of(r: Record) -> str:
    """The frame a record lands in (a column batch names its table)."""
    return r.table if isinstance(r, ColumnBatch) else type(r).__name__  # type: ignore[attr-defined,no-any-return]
