"""The port-counter extractor folds old, small, non-moving error counts into one summary finding
(``links.HISTORY_FLOOR``). That is only sound while no rule clause could match such a count: every clause on
``port_counter_errors`` must either need the counter to move (``delta``/``rising``) or ask for a static value at or
above the floor. This test reads the real rule catalog, so a rule edited below the floor fails here."""

from __future__ import annotations

from typing import Any

from diagnose.catalog.loader import load_catalog
from diagnose.evidence.extractors.links import HISTORY_FLOOR


def _resolve(rule: Any, v: Any) -> Any:
    if isinstance(v, str) and v.startswith("$"):
        return rule.thresholds[v[1:]].default
    return v


def _needs_movement(rule: Any, where: dict[str, Any]) -> bool:
    if where.get("rising") is True:
        return True
    if any(isinstance(where.get(k), dict) for k in ("ber", "ber_log10", "per_hour")):
        return True  # rates exist only for a counter that moved (ber_log10 is None at zero errors)
    delta = where.get("delta")
    if isinstance(delta, dict):
        lo = _resolve(rule, delta.get("gte", delta.get("gt")))
        return lo is not None and float(lo) > 0
    return False


def _static_floor(rule: Any, where: dict[str, Any]) -> float | None:
    value = where.get("value")
    if not isinstance(value, dict):
        return None
    if "gte" in value:
        return float(_resolve(rule, value["gte"]))
    if "gt" in value:
        return float(_resolve(rule, value["gt"])) + 1
    return None


def test_no_rule_clause_can_match_a_folded_history_count() -> None:
    checked = 0
    for rule in load_catalog().rules.values():
        ev = rule.evidence
        for clause in [*ev.supports, *ev.against, *getattr(ev, "expects", [])]:
            if clause.finding != "port_counter_errors":
                continue
            checked += 1
            where = clause.where or {}
            if _needs_movement(rule, where):
                continue
            floor = _static_floor(rule, where)
            assert floor is not None and floor >= HISTORY_FLOOR, (
                f"{rule.id}:{clause.id} can match a non-moving count below {HISTORY_FLOOR}, which the extractor "
                f"folds into port_counters_history")
    assert checked >= 8  # the catalog's port-counter clauses were actually looked at
