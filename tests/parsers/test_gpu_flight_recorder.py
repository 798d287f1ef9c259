"""PyTorch flight-recorder parser: pickle (restricted) and JSON dumps in tests/data/pytorch_flight_recorder."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from diagnose.parsers import flight_recorder
from diagnose.parsers._gpu import FlightRecorderEntry, FlightRecorderPg

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch_flight_recorder"


def entries(res) -> list[FlightRecorderEntry]:
    return [r for r in res.records if isinstance(r, FlightRecorderEntry)]


def pgs(res) -> list[FlightRecorderPg]:
    return [r for r in res.records if isinstance(r, FlightRecorderPg)]


def test_pickle_rank0_has_a_started_but_not_completed_collective() -> None:
    data = (DATA / "var_nccl_trace_rank_0").read_bytes()
    assert flight_recorder.sniff_bytes(data) == 95
    res = flight_recorder.parse_bytes(data, "dumps/nccl_trace_rank_0", host="node-a")
    assert res.format == "pytorch_flight_recorder" and res.problems == []
    es = entries(res)
    assert [(e.rank, e.pg_name, e.collective_seq_id, e.op, e.state, e.line) for e in es] == [
        (0, "0", 1, "nccl:all_reduce", "completed", 1),
        (0, "0", 2, "nccl:all_reduce", "completed", 2),
        (0, "0", 3, "nccl:all_reduce", "started", 3),
    ]
    hung = es[2]
    assert hung == FlightRecorderEntry(
        source="dumps/nccl_trace_rank_0",
        line=3,
        text="entries[2]: nccl:all_reduce pg=0 seq=3 state=started",
        host="node-a",
        rank=0,
        pg_id="0",
        pg_desc="default_pg",
        collective_seq_id=3,
        p2p_seq_id=0,
        op="nccl:all_reduce",
        state="started",
        input_sizes="[[1024, 4096]]",
        time_created_ns=1724779240036775119,
        timeout_ms=600000,
        pg_name="0",
        record_id=2,
        time_discovered_started_ns=1724779240037775119,
        time_discovered_completed_ns=None,
        retired=False,
        is_p2p=False,
        duration_ms=None,
        frame="train_step at /workspace/train.py:92",
        version="2.5",
    )
    (pg,) = pgs(res)
    assert (pg.rank, pg.pg_id, pg.pg_desc, pg.ranks, pg.last_enqueued, pg.last_started, pg.last_completed) == (
        0, "0", "default_pg", "[0, 1]", 3, 3, 2,
    )


def test_pickle_rank1_never_enqueued_the_third_collective() -> None:
    res = flight_recorder.parse_bytes((DATA / "var_nccl_trace_rank_1").read_bytes(), "nccl_trace_rank_1")
    assert res.problems == []
    assert [(e.rank, e.collective_seq_id, e.state) for e in entries(res)] == [(1, 1, "completed"), (1, 2, "completed")]
    assert [(p.last_enqueued, p.last_completed) for p in pgs(res)] == [(2, 2)]


def test_json_form_matches_the_pickle() -> None:
    text = (DATA / "var_nccl_trace_rank_0.json").read_text(encoding="utf-8")
    assert flight_recorder.sniff(text) == 90
    res = flight_recorder.parse(text, "nccl_trace_rank_0.json")
    assert res.problems == []
    from_json = [(e.rank, e.pg_name, e.collective_seq_id, e.state, e.time_discovered_completed_ns, e.timeout_ms)
                 for e in entries(res)]
    pick = flight_recorder.parse_bytes((DATA / "var_nccl_trace_rank_0").read_bytes(), "nccl_trace_rank_0")
    assert from_json == [(e.rank, e.pg_name, e.collective_seq_id, e.state, e.time_discovered_completed_ns, e.timeout_ms)
                         for e in entries(pick)]
    assert all(e.line == 1 and e.frame is None for e in entries(res))  # dump_json writes one line, no frames
    assert [(p.last_started, p.last_completed) for p in pgs(res)] == [(3, 2)]  # strings in JSON
    # the same JSON handed over as bytes
    assert len(entries(flight_recorder.parse_bytes(text.encode(), "nccl_trace_rank_0.json"))) == 3


def test_hostile_pickle_is_refused_and_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    for proto in (2, 3, 4, 5):
        payload = pickle.dumps({"version": "2.5", "pg_config": {}, "entries": [Evil()]}, protocol=proto)
        res = flight_recorder.parse_bytes(payload, "nccl_trace_rank_0")
        assert res.records == []
        assert len(res.problems) == 1 and res.problems[0].startswith("refused: pickle references global ")
        assert "system" in res.problems[0]
    # a protocol-0 GLOBAL/REDUCE pickle
    res = flight_recorder.parse_bytes(b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.", "x")
    assert res.records == []  # not a protocol 2-5 pickle: not even unpickled
    assert not marker.exists()


def test_builtins_global_is_refused_too() -> None:
    payload = pickle.dumps({"version": "2.5", "pg_config": {}, "entries": [{"f": print}]}, protocol=2)
    res = flight_recorder.parse_bytes(payload, "x")
    assert res.records == [] and len(res.problems) == 1
    assert res.problems[0].startswith("refused: pickle references global ") and res.problems[0].endswith(
        "print; the file was not loaded"
    )


def test_truncated_pickle_and_json() -> None:
    data = (DATA / "var_nccl_trace_rank_0").read_bytes()
    res = flight_recorder.parse_bytes(data[: len(data) // 2], "nccl_trace_rank_0")
    assert res.records == [] and res.problems[0].startswith("truncated or corrupt pickle:")
    text = (DATA / "var_nccl_trace_rank_0.json").read_text(encoding="utf-8")
    res = flight_recorder.parse(text[:700], "nccl_trace_rank_0.json")
    assert res.records == [] and res.problems[0].startswith("truncated JSON flight-recorder dump")


def _deep_pickle(n: int) -> bytes:
    """Protocol 2 opcodes for {'entries': [{'input_sizes': [[[...n levels...]]]}]} (too deep for pickle.dumps)."""
    return (
        b"\x80\x02}(X\x07\x00\x00\x00entries](}X\x0b\x00\x00\x00input_sizes"
        + b"]" * n + b"a" * (n - 1) + b"seu."
    )


def test_hostile_shapes_are_bounded() -> None:
    cyc: list = []
    cyc.append(cyc)
    dump = {"version": "2.5", "pg_config": "nope", "pg_status": [1], "entries": [
        {"input_sizes": cyc, "process_group": "x", "collective_seq_id": True, "frames": 5},
        {"input_sizes": [list(range(10_000))] * 1000, "state": 7},
        "not a dict",
    ]}
    res = flight_recorder.parse_bytes(pickle.dumps(dump, protocol=4), "nccl_trace_rank_9")
    es = entries(res)
    assert [(e.rank, e.collective_seq_id, e.state, e.pg_name) for e in es] == [(9, None, None, None),
                                                                                (9, None, "7", None)]
    assert all(len(e.input_sizes or "") <= 120 for e in es)
    assert res.problems == ["1 entries are not dicts"]
    deep = flight_recorder.parse_bytes(_deep_pickle(200_000), "nccl_trace_rank_4")
    assert deep.problems == [] and [(e.rank, e.input_sizes) for e in entries(deep)] == [(4, "[[[[[[[...]]]]]]]")]


def test_not_a_dump() -> None:
    assert flight_recorder.sniff_bytes(pickle.dumps([1, 2, 3], protocol=2)) == 0
    res = flight_recorder.parse_bytes(pickle.dumps([1, 2, 3], protocol=2), "x")
    assert res.records == [] and res.problems == ["not a flight-recorder dump (top level is list, not a dict)"]
    assert flight_recorder.sniff('{"entries": []}') == 0


def test_pipeline_takes_the_pickle_through_the_binary_path(tmp_path: Path) -> None:
    from diagnose.pipeline import gather

    dump_dir = tmp_path / "fr"
    dump_dir.mkdir()
    (dump_dir / "nccl_trace_rank_0").write_bytes((DATA / "var_nccl_trace_rank_0").read_bytes())
    hostile = pickle.dumps({"pg_config": {}, "entries": [print]}, protocol=2)
    (dump_dir / "nccl_trace_rank_1").write_bytes(hostile)
    ev = gather([dump_dir])
    by_path = {f.path.rsplit("/", 1)[-1]: f for f in ev.files}
    assert (by_path["nccl_trace_rank_0"].format, by_path["nccl_trace_rank_0"].records) == (
        "pytorch_flight_recorder",
        4,
    )
    assert by_path["nccl_trace_rank_1"].records == 0
    assert "refused: pickle references global" in (by_path["nccl_trace_rank_1"].problem or "")
    ranks = {r.rank for r in ev.records if isinstance(r, FlightRecorderEntry)}
    assert ranks == {0}
