"""Old error counts: the port-counter extractor folds old, small, non-moving error counts into one summary finding
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


_PORT = ("# Port extended counters: Lid {lid} port 1 (CapMask: 0x5A00 CapMask2: 0x0000000)\n"
         "PortXmitData:....................{xd}\nPortRcvData:.....................{xd}\n"
         "SymbolErrorCounter:..............{sym}\nLinkErrorRecoveryCounter:........0\n"
         "LinkDownedCounter:...............{down}\nPortRcvErrors:...................0\n"
         "PortXmitDiscards:................0\nLocalLinkIntegrityErrors:........0\n"
         "ExcessiveBufferOverrunErrors:....0\nPortXmitWait:....................0\n")


def test_old_small_counts_are_folded_and_live_or_large_ones_are_not(tmp_path) -> None:
    from diagnose.pipeline import gather

    lines = []
    for snap in range(2):
        lines.append(f"Sun Nov 29 10:{10 + snap * 5}:00 UTC 2026\n")
        for p in range(22):
            down = 3 if p < 20 else 12  # 20 ports with an old LinkDowned of 3, one with 12 (kept: over the floor)
            sym = (2 + 48 * snap) if p == 21 else 0  # one port whose symbol errors rise now (kept: live)
            lines.append(_PORT.format(lid=100 + p, xd=10**9 * (snap + 1), sym=sym, down=down if p != 21 else 0))
    host = tmp_path / "gpu-h001"
    host.mkdir()
    (host / "perfquery.txt").write_text("".join(lines))
    findings = gather([tmp_path]).findings
    per_port = [f for f in findings if f.kind == "port_counter_errors"]
    assert sorted((f.attrs["counter"], f.attrs["value"]) for f in per_port) == [("link_downed", 12),
                                                                              ("symbol_error", 50)]
    [history] = [f for f in findings if f.kind == "port_counters_history"]
    assert history.attrs["counters"] == 20 and history.attrs["n_link_downed"] == 20
    assert history.evidence and all("LinkDownedCounter" in e.text for e in history.evidence)
