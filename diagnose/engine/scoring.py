"""Differential scoring: evidence for and against each cause, combined in log-odds.

Each cause starts at its prior (``RuleSpec.prior``, a base rate among incidents). Every support
clause that matched adds its weight once (strong 4.0, moderate 2.0, weak 1.0 nats); every against
clause that matched subtracts (strong 5.0, moderate 2.5, weak 1.0); an *expects* clause whose
evidence is absent although its source was collected subtracts its weight. A cause that explains
an observed symptom gains 0.5; when symptoms were observed and it explains none, it loses 1.5 (a cause
of slow collectives is a poor answer to a failed init, however strong its own evidence).
The score is the logistic of the sum. A cause is *confirmed* when its score reaches the rule's
``confirm.min_score`` and it has at least ``min_strong`` strong clauses or ``or_min_moderate``
moderate ones, and no strong clause against it; *ruled out* when evidence against matched and its
score is under 0.2; otherwise *inconclusive*.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from diagnose.engine.rete import Match
from diagnose.models.diagnosis import Finding, Symptom
from diagnose.models.rule import RuleSpec

SUPPORT_W = {"strong": 4.0, "moderate": 2.0, "weak": 1.0}
AGAINST_W = {"strong": 5.0, "moderate": 2.5, "weak": 1.0}
SYMPTOM_W = 0.5
UNEXPLAINED_W = 1.5  # a cause that explains none of the observed symptoms: a slow-path cause for a failed init
RULED_OUT_BELOW = 0.2


@dataclass
class Scored:
    spec: RuleSpec
    score: float
    verdict: str
    confidence: str
    supports: list[tuple[str, list[Finding]]] = field(default_factory=list)  # (clause id, findings)
    against: list[tuple[str, list[Finding]]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # expects clause ids that were absent
    explains_symptom: bool = False


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def score_all(
    specs: list[RuleSpec],
    matches: list[Match],
    findings: dict[str, Finding],
    symptoms: list[Symptom],
    formats_present: set[str],
) -> list[Scored]:
    by_rule: dict[str, dict[str, list[Finding]]] = defaultdict(lambda: defaultdict(list))
    for m in matches:
        by_rule[m.rule_id][m.clause_id].append(findings[m.fid])
    kinds = {s.kind for s in symptoms if s.kind != "unknown"}
    out: list[Scored] = []
    for spec in specs:
        hit = by_rule.get(spec.id, {})
        logit = math.log(spec.prior / (1 - spec.prior))
        sc = Scored(spec, 0.0, "inconclusive", "low")
        n_strong = n_mod = 0
        for c in spec.evidence.supports:
            if c.id in hit:
                logit += SUPPORT_W[c.weight]
                sc.supports.append((c.id, hit[c.id]))
                n_strong += c.weight == "strong"
                n_mod += c.weight == "moderate"
        strong_against = False
        for a in spec.evidence.against:
            if a.id in hit:
                logit -= AGAINST_W[a.weight]
                sc.against.append((a.id, hit[a.id]))
                strong_against |= a.weight == "strong"
        for e in spec.evidence.expects:
            if e.id not in hit and formats_present.intersection(e.if_formats):
                logit -= AGAINST_W[e.weight]
                sc.missing.append(e.id)
        if kinds:
            sc.explains_symptom = bool(kinds.intersection(spec.explains))
            logit += SYMPTOM_W if sc.explains_symptom else -UNEXPLAINED_W
        sc.score = round(_sigmoid(logit), 4)
        enough = n_strong >= spec.confirm.min_strong or n_mod + n_strong >= spec.confirm.or_min_moderate
        if sc.supports and enough and sc.score >= spec.confirm.min_score and not strong_against:
            sc.verdict = "confirmed"
        elif (sc.against or sc.missing) and sc.score < RULED_OUT_BELOW:
            sc.verdict = "ruled_out"
        if sc.verdict == "confirmed":
            sc.confidence = "high" if sc.score >= 0.85 and n_strong else "medium"
        else:
            sc.confidence = "medium" if sc.score >= 0.5 else "low"
        out.append(sc)
    out.sort(key=lambda s: (-s.score, s.spec.id))
    return out
