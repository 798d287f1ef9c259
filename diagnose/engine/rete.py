"""The one module that imports durable-rules.

Each rule clause (support, against, expects) compiles to one durable-rules rule that matches a
single finding fact. Facts are asserted ONE AT A TIME (``assert_facts`` on a batch was seen to fire
actions an inconsistent number of times) and a catch-all rule matches every fact, so no fact raises
``MessageNotHandledException``. Matches are collected and sorted: the output never depends on the
order durable-rules fires actions in.

No ``durable.lang.Host`` is used: it starts timer threads that dispatch in the background. A private
``engine.Ruleset`` is built per run and its actions are flushed synchronously.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from durable import engine as _dr

from diagnose.models.diagnosis import Finding
from diagnose.models.rule import Clause, ExpectClause, RuleSpec

_CATCH_ALL = "__any__"
_counter = itertools.count()
_lock = threading.Lock()  # the C engine keeps global state: one run at a time


class EngineError(Exception):
    pass


@dataclass(frozen=True, order=True)
class Match:
    rule_id: str
    clause_id: str
    fid: str


def _value(v: object, thresholds: dict[str, float]) -> object:
    if isinstance(v, str) and v.startswith("$"):
        return thresholds[v[1:]]
    return v


def _condition(finding: str, where: dict[str, object], thresholds: dict[str, float]) -> dict[str, object]:
    terms: list[dict[str, object]] = [{"kind": finding}]
    ops = {"ne": "$neq", "gt": "$gt", "gte": "$gte", "lt": "$lt", "lte": "$lte"}
    for attr, cond in sorted(where.items()):
        if isinstance(cond, dict):
            op, val = next(iter(cond.items()))
            if op == "eq":
                terms.append({attr: _value(val, thresholds)})
            elif op == "in":
                terms.append({"$or": [{attr: _value(x, thresholds)} for x in val]})  # type: ignore[union-attr]
            else:
                terms.append({ops[op]: {attr: _value(val, thresholds)}})
        else:
            terms.append({attr: _value(cond, thresholds)})
    return {"$and": terms} if len(terms) > 1 else terms[0]


def compile_rules(specs: Iterable[RuleSpec], thresholds: dict[str, dict[str, float]]) -> dict[str, dict[str, object]]:
    """durable-rules JSON definition: rule name ``<cause>|<clause>`` -> condition."""
    out: dict[str, dict[str, object]] = {}
    for spec in specs:
        th = thresholds.get(spec.id, {})
        clauses: list[Clause | ExpectClause] = [*spec.evidence.supports, *spec.evidence.against,
                                                *spec.evidence.expects]
        for c in clauses:
            out[f"{spec.id}|{c.id}"] = {"all": [{"m": _condition(c.finding, dict(c.where), th)}]}
    return out


def _fact(n: int, f: Finding) -> dict[str, object]:
    fact: dict[str, object] = {"id": str(n), "fid": f.id, "kind": f.kind}
    for k, v in f.attrs.items():
        if v is not None and k not in fact:
            fact[k] = v
    loc = f.location
    for k in ("host", "device", "port", "rank"):
        v = getattr(loc, k)
        if v is not None and f"loc_{k}" not in fact:
            fact[f"loc_{k}"] = v
    return fact


def _collector(hits: set[Match], rule_id: str, clause_id: str):  # type: ignore[no-untyped-def]
    # durable-rules inspects the action's argument count: exactly one positional argument.
    def action(c):  # type: ignore[no-untyped-def]
        hits.add(Match(rule_id, clause_id, c.m.fid))

    return action


def _noop(c):  # type: ignore[no-untyped-def]
    return None


def match(specs: list[RuleSpec], findings: list[Finding], thresholds: dict[str, dict[str, float]]) -> list[Match]:
    """Every (rule, clause, finding) triple whose condition holds, sorted."""
    definition = compile_rules(specs, thresholds)
    hits: set[Match] = set()
    with _lock:
        name = f"diagnose_{next(_counter)}"
        rules: dict[str, dict[str, object]] = {}
        for rname, cond in definition.items():
            rule_id, clause_id = rname.split("|", 1)

            rules[rname] = {**cond, "run": _collector(hits, rule_id, clause_id)}
        rules[_CATCH_ALL] = {"all": [{"m": {"$ex": {"kind": 1}}}], "run": _noop}
        try:
            ruleset = _dr.Ruleset(name, None, rules)
        except Exception as exc:
            raise EngineError(f"rule compilation failed: {exc}") from exc
        errors: list[BaseException] = []

        def done(err: BaseException | None, _state: object) -> None:
            if err:
                errors.append(err)

        try:
            for n, f in enumerate(findings):
                try:
                    handle = ruleset.assert_fact(_fact(n, f))
                except _dr.MessageNotHandledException:
                    continue
                except _dr.MessageObservedException:
                    continue
                ruleset.do_actions(handle, done)
                if errors:
                    raise EngineError(f"rule action failed: {errors[0]}")
        finally:
            try:
                _dr.durable_rules_engine.delete_ruleset(ruleset._handle)
            except Exception:
                pass
    return sorted(hits)
