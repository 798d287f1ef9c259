"""The stand-in matcher: the clause conditions of :mod:`diagnose.engine.rete`, evaluated in Python.

durable-rules ships as a source package with a C extension; where it cannot be imported (no C compiler on the
image, or a CPython whose C API it does not build against: 3.13 removed ``PyEval_CallObject``), this matcher takes
its place, chosen once at start-up (:data:`diagnose.engine.rete.ENGINE`, printed by ``diagnose --version``). It
reads the same compiled conditions (``{"$and": [...]}`` of ``{"kind": k}``, ``{attr: v}``, ``{"$or": [...]}`` and
``{"$lt": {attr: v}}`` terms) against the same fact dictionaries, with durable-rules' semantics:

* a term on an attribute the fact does not have is false, whatever its operator (``$neq`` too);
* numbers compare as numbers, booleans being the numbers 1 and 0; a number and a string that reads as a number
  compare as numbers (``"2"`` equals ``2``); a boolean and a string, or a number and any other string, compare as
  their text (``True`` is ``"true"``): what durable-rules' C engine does with mixed JSON types;
* every (rule, clause, fact) whose condition holds is one match; the result is sorted.

(durable-rules also takes an empty string to equal any number; no finding carries an empty attribute for a rule
to compare, and this matcher does not copy that.)

tests/test_engine_equivalence.py runs both matchers over every fixture bundle and requires identical diagnoses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import cast

_ORDER = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b,
          "$lte": lambda a, b: a <= b}


def _is_num(v: object) -> bool:
    return isinstance(v, int | float)  # bool is an int


def _text(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _as_num(v: object) -> float | None:
    if _is_num(v):
        return float(v)  # type: ignore[arg-type]
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return None
        return f if f == f and abs(f) != float("inf") else None
    return None


def _pair(have: object, want: object) -> tuple[object, object] | None:
    """The two values as durable-rules compares them: two numbers, or two texts (None: not comparable)."""
    if have is None or want is None:
        return None
    if _is_num(have) and _is_num(want):
        return float(have), float(want)  # type: ignore[arg-type]
    if isinstance(have, bool) or isinstance(want, bool):
        return _text(have), _text(want)
    if _is_num(have) or _is_num(want):
        h, w = _as_num(have), _as_num(want)
        if h is not None and w is not None:
            return h, w
    if isinstance(have, str | int | float) and isinstance(want, str | int | float):
        return _text(have), _text(want)
    return None


def _eq(fact: Mapping[str, object], attr: str, want: object) -> bool:
    if attr not in fact:
        return False
    p = _pair(fact[attr], want)
    return p is not None and p[0] == p[1]


def holds(cond: Mapping[str, object], fact: Mapping[str, object]) -> bool:
    """Whether one compiled condition holds for one fact."""
    if "$and" in cond:
        return all(holds(t, fact) for t in cast("Iterable[Mapping[str, object]]", cond["$and"]))
    if "$or" in cond:
        return any(holds(t, fact) for t in cast("Iterable[Mapping[str, object]]", cond["$or"]))
    if "$ex" in cond:
        return all(a in fact for a in cast("Iterable[str]", cond["$ex"]))
    (op, arg), = cond.items()
    if op == "$neq":
        (attr, want), = cast("Mapping[str, object]", arg).items()
        return attr in fact and not _eq(fact, attr, want)
    if op in _ORDER:
        (attr, want), = cast("Mapping[str, object]", arg).items()
        if attr not in fact:
            return False
        p = _pair(fact[attr], want)
        return p is not None and bool(_ORDER[op](p[0], p[1]))
    return _eq(fact, op, arg)
