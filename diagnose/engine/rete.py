"""The one module that imports durable-rules.

Each rule clause (support, against, expects) compiles to one durable-rules rule that matches a
single finding fact. Facts are asserted ONE AT A TIME (``assert_facts`` on a batch was seen to fire
actions an inconsistent number of times) and a catch-all rule matches every fact, so no fact raises
``MessageNotHandledException``. Matches are collected and sorted: the output never depends on the
order durable-rules fires actions in.

No ``durable.lang.Host`` is used: it starts timer threads that dispatch in the background. A private
``engine.Ruleset`` is built per run and its actions are flushed synchronously.

Where durable-rules cannot be imported (a source package with a C extension: no compiler on the image, or a
CPython it does not build on), :mod:`diagnose.engine.pymatch` evaluates the same compiled conditions with the same
semantics; ``DIAGNOSE_ENGINE=python`` chooses it explicitly. :data:`ENGINE` names the matcher in use.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from diagnose.engine import pymatch
from diagnose.models.diagnosis import Finding
from diagnose.models.rule import Clause, ExpectClause, RuleSpec


def _load_durable() -> tuple[Any, str]:
    if os.environ.get("DIAGNOSE_ENGINE", "").strip().lower() == "python":
        return None, "python matcher (DIAGNOSE_ENGINE=python)"
    try:
        from durable import engine as dr
    except Exception as exc:  # noqa: BLE001 - ImportError, or an undefined C symbol on a newer CPython
        return None, f"python matcher (durable-rules unavailable: {type(exc).__name__}: {str(exc)[:120]})"
    try:
        from importlib.metadata import version

        v = version("durable-rules")
    except Exception:  # noqa: BLE001
        v = "?"
    return dr, f"durable-rules {v}"


_dr, ENGINE = _load_durable()

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
                terms.append({"$or": [{attr: _value(x, thresholds)} for x in val]})
            else:
                terms.append({ops[op]: {attr: _value(val, thresholds)}})
        else:
            terms.append({attr: _value(cond, thresholds)})
    return {"$and": terms} if len(terms) > 1 else terms[0]


_NUM_MAX = 1e15  # beyond it a number prints with an exponent, which durable-rules' JSON reader does not parse


def _num(v: object) -> object:
    """A fact's number as both matchers can compare it: floats rounded in plain decimal range (durable-rules reads
    no exponent, 1e-14), and a number beyond +-1e15 (an integer past int64 in a corrupt counter file, which the C
    engine rejects with error 204) clamped to it; never inf or NaN (None: the attribute is left out)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return v
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if abs(v) >= _NUM_MAX:
        return math.copysign(_NUM_MAX, v)
    return round(v, 6) if isinstance(v, float) else v


def _fact(n: int, f: Finding) -> dict[str, object]:
    fact: dict[str, object] = {"id": str(n), "fid": f.id, "kind": f.kind}
    for k, v in f.attrs.items():
        if v is not None and k not in fact:
            num = _num(v)
            if num is not None:
                fact[k] = num
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


def _by_kind(specs: Iterable[RuleSpec], thresholds: dict[str, dict[str, float]]) -> dict[str, dict[str, object]]:
    """The compiled clauses grouped by the finding kind they match: kind -> {rule name: condition}."""
    groups: dict[str, dict[str, object]] = {}
    for spec in specs:
        th = thresholds.get(spec.id, {})
        clauses: list[Clause | ExpectClause] = [*spec.evidence.supports, *spec.evidence.against,
                                                *spec.evidence.expects]
        for c in clauses:
            groups.setdefault(c.finding, {})[f"{spec.id}|{c.id}"] = {
                "all": [{"m": _condition(c.finding, dict(c.where), th)}]
            }
    return groups


def match(specs: list[RuleSpec], findings: list[Finding], thresholds: dict[str, dict[str, float]]) -> list[Match]:
    """Every (rule, clause, finding) triple whose condition holds, sorted.

    One durable-rules ruleset per finding kind: the C engine refuses very large rulesets (error 204),
    and a fact then only meets the clauses that can match it. Facts of a kind no rule mentions are
    not asserted at all.
    """
    groups = _by_kind(specs, thresholds)
    if _dr is None:
        return _match_python(groups, findings)
    hits: set[Match] = set()
    with _lock:
        rulesets: dict[str, Any] = {}  # durable.engine.Ruleset
        try:
            for kind, definition in sorted(groups.items()):
                rules: dict[str, dict[str, object]] = {}
                for rname, cond in definition.items():
                    rule_id, clause_id = rname.split("|", 1)
                    rules[rname] = {**cond, "run": _collector(hits, rule_id, clause_id)}  # type: ignore[dict-item]
                rules[_CATCH_ALL] = {"all": [{"m": {"$ex": {"kind": 1}}}], "run": _noop}
                try:
                    rulesets[kind] = _dr.Ruleset(f"diagnose_{next(_counter)}", None, rules)
                except Exception as exc:
                    raise EngineError(f"rule compilation failed for finding kind '{kind}': {exc}") from exc
            errors: list[BaseException] = []

            def done(err: BaseException | None, _state: object) -> None:
                if err:
                    errors.append(err)

            for n, f in enumerate(findings):
                ruleset = rulesets.get(f.kind)
                if ruleset is None:
                    continue
                try:
                    handle = ruleset.assert_fact(_fact(n, f))
                except (_dr.MessageNotHandledException, _dr.MessageObservedException):
                    continue
                ruleset.do_actions(handle, done)
                if errors:
                    raise EngineError(f"rule action failed: {errors[0]}")
        finally:
            for rs in rulesets.values():
                try:
                    _dr.durable_rules_engine.delete_ruleset(rs._handle)  # noqa: SLF001 - durable-rules has no public one
                except Exception:  # noqa: BLE001 - best effort cleanup
                    pass
    return sorted(hits)


def _match_python(groups: dict[str, dict[str, object]], findings: list[Finding]) -> list[Match]:
    """The same matches through :mod:`diagnose.engine.pymatch` (no durable-rules)."""
    hits: set[Match] = set()
    for n, f in enumerate(findings):
        definition = groups.get(f.kind)
        if definition is None:
            continue
        fact = _fact(n, f)
        for rname, cond in definition.items():
            if pymatch.holds(cond["all"][0]["m"], fact):  # type: ignore[index]
                rule_id, clause_id = rname.split("|", 1)
                hits.add(Match(rule_id, clause_id, f.id))
    return sorted(hits)
