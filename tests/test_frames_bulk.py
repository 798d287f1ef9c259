"""Records and column batches -> frames: the column-wise builds give what pandas gives row by row.

* records: ``pd.DataFrame.from_records`` of the records' fields (values, dtypes, column order);
* batches of bulk dumps: ``pd.concat`` of a frame per batch, whatever the dtypes pandas infers batch by batch
  (an all-None column next to a text one, int32 next to int64, bool next to int), with ``_lines`` giving each
  row its batch's line index.
"""

from __future__ import annotations

import dataclasses
import operator
from pathlib import Path

import numpy as np
import pandas as pd

from diagnose.evidence.frames import build_frames
from diagnose.models.records import ColumnBatch, LineIndex, field_names
from diagnose.parsers._fabric import FabricLink, FabricNode
from diagnose.pipeline import gather

ROOT = Path(__file__).resolve().parents[1]


def _from_records(records: list) -> pd.DataFrame:  # type: ignore[type-arg]
    cols = field_names(type(records[0]))
    return pd.DataFrame.from_records(list(map(operator.attrgetter(*cols), records)), columns=list(cols))


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert list(got.dtypes) == list(want.dtypes)


def test_record_frames_are_from_records_on_fixture_bundles() -> None:
    bundles = [ROOT / "fixtures" / "link" / "bad_cable" / "positive-fattree64-hca-end",
               ROOT / "fixtures" / "healthy" / "h100-ib-2node-allreduce"]
    for bundle in bundles:
        records = gather([bundle]).records
        frames = build_frames(records)
        by_type: dict[type, list] = {}  # type: ignore[type-arg]
        for r in records:
            if type(r) is not ColumnBatch:
                by_type.setdefault(type(r), []).append(r)
        assert by_type
        for cls, recs in by_type.items():
            _same(frames[cls.__name__], _from_records(recs))


def test_record_frames_with_missing_and_mixed_values() -> None:
    def link(i: int, **kw: object) -> FabricLink:
        base = dict(source="t", line=i, text=f"l{i}", guid=f"0x{i:x}", port=1, peer_guid="0x1", peer_port=2,
                    width="4X", speed="NDR", state=None, phys_state=None, lid=None, peer_lid=3, description="d",
                    peer_description=None)
        return FabricLink(**{**base, **kw})  # type: ignore[arg-type]

    cases = [
        [link(1), link(2, lid=5), link(3, width=None, lid=7)],  # ints and None: floats
        [link(1, lid="7"), link(2, lid=8)],  # text next to a number: objects
        [link(1, state="Active"), link(2, state=None)],  # text and None: text with NaN
        [link(1, peer_port=True), link(2, peer_port=False)],  # bools
        [link(1, port=2**70), link(2, port=1)],  # too big for int64
        [link(1, port=1), link(2, port=True)],  # an int next to a bool: objects
    ]
    for records in cases:
        _same(build_frames(records)["FabricLink"], _from_records(records))
    nodes = [FabricNode(source="n", line=1, text="t", guid="0x1", node_type=None, description=None, ports=None,
                        lid=None)]
    _same(build_frames(nodes)["FabricNode"], _from_records(nodes))


def _batch(lines: LineIndex, **cols: object) -> ColumnBatch:
    return ColumnBatch(source="f", line=1, text="", table="Wide", columns=dict(cols), lines=lines)


def test_bulk_batches_are_the_concatenation_of_their_frames() -> None:
    li = [LineIndex(b"x\n", np.array([0]), np.array([1])) for _ in range(3)]
    obj = lambda *v: np.array(v, dtype=object)  # noqa: E731
    batches = [
        _batch(li[0], host=obj(None, None), guid=obj("0xa", "0xb"), lid=obj(1, None), n=np.array([1, 2]),
               w=np.array([1, 2], dtype=np.int32), b=np.array([True, False]), t=obj("x", "y")),
        _batch(li[1], host=obj("h1", "h2", None), guid=obj("0xc", "0xc", "0xd"), lid=obj(4, 5, 6),
               n=np.array([3, 4, 5]), w=np.array([3, 4, 5]), b=np.array([1, 0, 1]), t=obj("z", "z", "z")),
        _batch(li[0], host=obj("h3"), guid=obj("0xe"), lid=obj(7), n=np.array([6]),
               w=np.array([6], dtype=np.int32), b=np.array([True]), t=obj(1.5)),
    ]
    got = build_frames(batches)["Wide"]
    want = pd.concat([pd.DataFrame(b.columns) for b in batches], ignore_index=True)
    _same(got.drop(columns="_lines"), want)
    assert [x is y for x, y in zip(got["_lines"], [li[0]] * 2 + [li[1]] * 3 + [li[0]], strict=True)] == [True] * 6
    assert list(got["_lines"].cat.categories) == [li[0], li[1]]
    # one batch alone, and batches whose columns differ (what concat fills in)
    _same(build_frames(batches[1:2])["Wide"].drop(columns="_lines"), pd.DataFrame(batches[1].columns))
    odd = _batch(li[2], host=obj("h9"), n=np.array([7]))
    got = build_frames([batches[0], odd])["Wide"]
    want = pd.concat([pd.DataFrame(batches[0].columns), pd.DataFrame(odd.columns)], ignore_index=True)
    _same(got.drop(columns="_lines"), want)
    assert [x is y for x, y in zip(got["_lines"], [li[0], li[0], li[2]], strict=True)] == [True] * 3


def test_record_fields_cover_every_column() -> None:
    assert field_names(FabricLink) == tuple(f.name for f in dataclasses.fields(FabricLink))


def test_row_batches_are_the_frame_of_their_joined_lists() -> None:
    """A line parser's batches (Python lists, no line index): each column has the dtype pandas infers for the joined
    values; a list of nothing but ints is made int64 without pandas' general check, so its edges are here."""
    cases = {
        "ints": [[1, 2], [3]],
        "int_and_bool": [[1, 2], [True]],
        "bool_first": [[True, 1], [2]],
        "int_and_none": [[1, None], [3]],
        "int_and_float": [[1, 2], [2.5]],
        "beyond_int64": [[1, 2**70], [3]],
        "numpy_int_inside": [[1, np.int64(2)], [3]],
        "ints_in_one_batch_text_in_the_next": [[1, 2], ["x"]],
        "text": [["a", None], ["b"]],
    }
    for name, parts in cases.items():
        batches = [ColumnBatch(source="f", line=1, text="", table="Rows", columns={"v": p, "k": list(range(len(p)))})
                   for p in parts]
        joined = [v for p in parts for v in p]
        want = pd.DataFrame({"v": joined, "k": [k for p in parts for k in range(len(p))]})
        _same(build_frames(batches)["Rows"], want)
        _same(build_frames(batches[:1])["Rows"], pd.DataFrame({"v": parts[0], "k": list(range(len(parts[0])))}))
        assert build_frames(batches)["Rows"]["v"].dtype == want["v"].dtype, name
