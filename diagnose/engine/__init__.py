"""Inference: findings + rules -> ranked, explained causes. Knows no specific rule."""

from __future__ import annotations

from collections import defaultdict

import structlog

from diagnose.catalog.loader import Catalog
from diagnose.engine.rete import match
from diagnose.engine.scoring import Scored, score_all
from diagnose.models.diagnosis import (
    CauseResult,
    Diagnosis,
    EvidenceRef,
    FileEntry,
    Finding,
    Location,
    MissingEvidence,
    RuledOut,
    RunSettings,
    Symptom,
    ThresholdSetting,
)
from diagnose.symptoms import SYMPTOM_SOURCE

log = structlog.get_logger("diagnose.engine")

MAX_EVIDENCE = 12
# a cause resting on weak clauses only (a low busbw that many causes explain) is listed only once its
# score says it is worth a look; below this it is noise in a ranking that already has a better answer
WEAK_ONLY_FLOOR = 0.25
WEIGHT_RANK = {"strong": 0, "moderate": 1, "weak": 2}


def thresholds_of(cat: Catalog, overrides: dict[str, float] | None = None) -> dict[str, dict[str, float]]:
    """Defaults from each rule; ``overrides`` maps ``<cause id>.<name>`` to a value."""
    out: dict[str, dict[str, float]] = {}
    for rid, spec in cat.rules.items():
        out[rid] = {k: t.default for k, t in spec.thresholds.items()}
    for key, val in (overrides or {}).items():
        rid, _, name = key.rpartition(".")
        if rid in out and name in out[rid]:
            out[rid][name] = val
    return out


def _location(sc: Scored) -> Location:
    clauses = {c.id: c for c in sc.spec.evidence.supports}
    best: tuple[tuple[int, int, str], Location] | None = None
    # a weak clause never places a cause that stronger evidence found job-wide (a host's error trace beside the
    # job's bootstrap failures); it places one only when it is all there is
    firm = any(clauses[cid].weight != "weak" for cid, _ in sc.supports)
    for cid, fs in sc.supports:
        if firm and clauses[cid].weight == "weak":
            continue
        for f in fs:
            loc = f.location
            if loc.is_empty():
                continue
            specific = sum(v is not None for v in loc.model_dump().values())
            key = (WEIGHT_RANK[clauses[cid].weight], -specific, loc.label())
            if best is None or key < best[0]:
                best = (key, loc)
    return best[1] if best else Location()


def _refs(groups: list[tuple[str, list[Finding]]], limit: int) -> list[EvidenceRef]:
    out: list[EvidenceRef] = []
    seen: set[tuple[str, int]] = set()
    for _cid, fs in groups:
        for f in fs:
            for e in f.evidence:
                if (e.file, e.line) in seen:
                    continue
                seen.add((e.file, e.line))
                out.append(e)
                if len(out) >= limit:
                    return out
    return out


def _ordered(sc: Scored, groups: list[tuple[str, list[Finding]]], clauses: list[object]) -> list[tuple[str, list[Finding]]]:
    w = {c.id: WEIGHT_RANK[c.weight] for c in clauses}  # type: ignore[attr-defined]
    return sorted(groups, key=lambda g: (w.get(g[0], 9), g[0]))


DIFFERENTIAL_MIN = 3  # with a symptom, at least this many causes are named, however thin the evidence


def _differential(scored: list[Scored], listed: set[str], symptoms: list[Symptom],
                  missing: dict[str, set[str]], formats: set[str]) -> list[CauseResult]:
    """With a symptom, no confirmed cause and fewer than DIFFERENTIAL_MIN causes on the evidence, the likeliest others (by score: the
    rule's prior, what the symptom and its setting say, any weak clause), never one the evidence rules out, each
    with what to collect to decide it. They rank after every cause the evidence names and stay inconclusive."""
    kinds = {s.kind for s in symptoms if s.kind != "unknown"}
    if not symptoms or len(listed) >= DIFFERENTIAL_MIN:
        return []
    text = next((s.text for s in symptoms if s.source in ("cli", "ticket", "alert", "chat")), symptoms[0].text)
    out: list[CauseResult] = []
    for sc in scored:  # scored is sorted by score, then id
        spec = sc.spec
        if spec.id in listed or sc.verdict == "ruled_out" or sc.against:
            continue
        if kinds and not sc.explains_symptom:
            continue
        ev = _refs(_ordered(sc, sc.supports, list(spec.evidence.supports)), MAX_EVIDENCE)
        if not ev:
            ev = [EvidenceRef(file=SYMPTOM_SOURCE, line=1, text=text[:240], finding="symptom")]
        out.append(CauseResult(
            id=spec.id, title=spec.title, score=sc.score, confidence="low", verdict="inconclusive",
            summary="Not shown by the evidence: " + ("a likely cause of this symptom in this setting."
                                                     if not sc.supports else "weakly suggested by "
                                                     + "; ".join(fs[0].summary for _, fs in sc.supports[:2])),
            location=_location(sc), evidence=ev, playbook=spec.playbook,
        ))
        for col in spec.collect[:1]:
            if not formats.intersection(col.formats):
                missing[col.command].add(spec.id)
        if len(listed) + len(out) >= DIFFERENTIAL_MIN:
            break
    return out


def infer(
    cat: Catalog,
    findings: list[Finding],
    symptoms: list[Symptom],
    formats: set[str],
    files: list[FileEntry],
    overrides: dict[str, float] | None = None,
    origins: dict[str, str] | None = None,
) -> Diagnosis:
    specs = cat.sorted_rules()
    by_id = {f.id: f for f in findings}
    matches = match(specs, findings, thresholds_of(cat, overrides))
    scored = score_all(specs, matches, by_id, symptoms, formats)
    causes: list[CauseResult] = []
    ruled_out: list[RuledOut] = []
    missing: dict[str, set[str]] = defaultdict(set)
    for sc in scored:
        spec = sc.spec
        sup = _ordered(sc, sc.supports, list(spec.evidence.supports))
        weights = {c.id: c.weight for c in spec.evidence.supports}
        weak_only = all(weights[cid] == "weak" for cid, _ in sc.supports)
        listed = sc.supports and sc.verdict != "ruled_out" and not (weak_only and sc.score < WEAK_ONLY_FLOOR)
        if listed:
            summary_parts: list[str] = []
            seen_f: set[str] = set()
            for _cid, fs in sup:
                if fs[0].id not in seen_f and len(summary_parts) < 3:
                    seen_f.add(fs[0].id)
                    summary_parts.append(fs[0].summary)
            causes.append(CauseResult(
                id=spec.id, title=spec.title, score=sc.score, confidence=sc.confidence,  # type: ignore[arg-type]
                verdict=sc.verdict,  # type: ignore[arg-type]
                summary=" ".join(summary_parts), location=_location(sc),
                evidence=_refs(sup, MAX_EVIDENCE),
                against=_refs(_ordered(sc, sc.against, list(spec.evidence.against)), 6),
                playbook=spec.playbook,
            ))
        if sc.verdict == "ruled_out" or (not sc.supports and (sc.against or sc.missing)):
            why = []
            ag = {a.id: a for a in spec.evidence.against}
            for cid, fs in _ordered(sc, sc.against, list(spec.evidence.against)):
                why.append(f"{ag[cid].why} ({fs[0].summary})" if fs[0].summary else ag[cid].why)
            ex = {e.id: e for e in spec.evidence.expects}
            for cid in sc.missing:
                why.append(ex[cid].why)
            ruled_out.append(RuledOut(id=spec.id, why=" ".join(why)))
        if sc.verdict == "inconclusive" and sc.supports:
            for col in spec.collect:
                if not formats.intersection(col.formats):
                    missing[col.command].add(spec.id)
    if not any(c.verdict == "confirmed" for c in causes) and symptoms:
        kinds = {s.kind for s in symptoms}
        for spec in specs:
            if kinds.intersection(spec.explains) and spec.severity in ("critical", "high"):
                for col in spec.collect[:1]:
                    if not formats.intersection(col.formats):
                        missing[col.command].add(spec.id)
    causes.sort(key=lambda c: (c.verdict != "confirmed", -c.score, c.id))
    if not any(c.verdict == "confirmed" for c in causes):  # a confirmed cause needs no list of guesses after it
        causes += _differential(scored, {c.id for c in causes}, symptoms, missing, formats)
    miss = [MissingEvidence(would_decide=sorted(ids), collect=cmd) for cmd, ids in missing.items()]
    miss.sort(key=lambda m: (-len(m.would_decide), m.collect))
    log.info("inferred", causes=len(causes), confirmed=sum(c.verdict == "confirmed" for c in causes),
             ruled_out=len(ruled_out))
    return Diagnosis(
        settings=run_settings(cat, overrides, origins), symptoms=symptoms, causes=causes,
        ruled_out=sorted(ruled_out, key=lambda r: r.id), missing_evidence=miss[:8], files=files,
    )


def run_settings(cat: Catalog, overrides: dict[str, float] | None,
                 origins: dict[str, str] | None = None) -> RunSettings | None:
    """The header of a diagnosis run with site settings: each threshold set away from its default, with where it
    was set, and the site rule packs; None when the built-in catalog ran as shipped."""
    th: dict[str, ThresholdSetting] = {}
    for key, val in sorted((overrides or {}).items()):
        rid, _, name = key.rpartition(".")
        spec = cat.rules.get(rid)
        if spec is None or name not in spec.thresholds or spec.thresholds[name].default == val:
            continue
        th[key] = ThresholdSetting(value=val, default=spec.thresholds[name].default,
                                   origin=(origins or {}).get(key, "caller"))
    packs = [p.name for p in cat.sites]
    return RunSettings(thresholds=th, rule_packs=packs) if th or packs else None
