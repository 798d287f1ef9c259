"""Records cross between processes (the parse child sends back what it parsed) as pickles of their field values."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pytest

from diagnose.bundle import LoadLimits, load_inputs
from diagnose.models.records import ColumnBatch, Record, _remake
from diagnose.stages import parse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _records() -> list[Record]:
    limits, ev = LoadLimits(), parse.Evidence()
    for bf in load_inputs([FIXTURES], limits):
        parse.parse_file(bf, ev, limits)
    return ev.records


@pytest.mark.slow
def test_every_record_type_round_trips_through_its_field_values() -> None:
    records = _records()
    kinds = {type(r) for r in records}
    assert len(kinds) >= 30  # the fixtures hold most record types
    seen: set[type] = set()
    for r in records:
        if type(r) in seen and not isinstance(r, ColumnBatch):
            continue
        seen.add(type(r))
        fn, (cls, values) = r.__reduce__()
        assert fn is _remake and cls is type(r) and len(values) == len(dataclasses.fields(r))
        back = pickle.loads(pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL))
        assert type(back) is type(r)
        if isinstance(r, ColumnBatch):
            assert (back.table, back.source, back.line, list(back.columns)) == (r.table, r.source, r.line,
                                                                               list(r.columns))
            assert all(np.array_equal(np.asarray(back.columns[k], dtype=object), np.asarray(r.columns[k],
                                                                                             dtype=object))
                       for k in r.columns)
        else:
            assert back == r
            assert copy.deepcopy(r) == r and copy.copy(r) == r
    assert seen == kinds
