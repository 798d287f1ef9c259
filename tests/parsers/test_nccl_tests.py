"""Tests for diagnose.parsers.nccl_tests (see tests/data/nccl_tests/README.md for the samples' sources)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import by_format, nccl_tests
from diagnose.parsers.nccl_tests import NcclTestsRank, NcclTestsRow, NcclTestsRun, NcclTestsSummary

DATA = Path(__file__).resolve().parent.parent / "data"
OWN = DATA / "nccl_tests"
A3MEGA = "a3mega_ztan-NCCL-test-result_all_reduce_perf_2x8_H100.md"
COREWEAVE = "coreweave_nccl-tests_README.md"


def _parse(name: str, host: str | None = None):
    return nccl_tests.parse((OWN / name).read_text(), f"nccl_tests/{name}", host)


def _of(result, cls):
    return [r for r in result.records if isinstance(r, cls)]


def test_registered_and_mixable():
    assert by_format("nccl_tests") is nccl_tests
    assert nccl_tests.MIXABLE is True


def test_record_schemas():
    def names(cls):
        return [f.name for f in dataclasses.fields(cls)]

    base = ["source", "line", "text", "host"]
    assert names(NcclTestsRun) == base + [
        "collective",
        "nthread",
        "ngpus",
        "min_bytes",
        "max_bytes",
        "run_index",
        "when",
    ]
    assert names(NcclTestsRank) == base + ["run_index", "rank", "group", "pid", "device", "bus", "gpu_name"]
    assert names(NcclTestsRow) == base + [
        "run_index",
        "size_bytes",
        "count",
        "dtype",
        "redop",
        "root",
        "oop_time_us",
        "oop_algbw",
        "oop_busbw",
        "oop_wrong",
        "ip_time_us",
        "ip_algbw",
        "ip_busbw",
        "ip_wrong",
    ]
    assert names(NcclTestsSummary) == base + ["run_index", "avg_busbw", "out_of_bounds"]


# ---------------------------------------------------------------------------------------------------------------
# real samples


def test_a3mega_all_reduce_2x8_h100():
    res = _parse(A3MEGA, host="launcher")
    assert res.problems == []
    [run] = _of(res, NcclTestsRun)
    assert (run.collective, run.nthread, run.ngpus, run.min_bytes, run.max_bytes, run.run_index) == (
        "all_reduce",
        1,
        1,
        8,
        8589934592,
        0,
    )
    assert run.line == 10  # "nThread ..." lost its '#' in the markdown
    ranks = _of(res, NcclTestsRank)
    assert [r.rank for r in ranks] == list(range(16))
    assert {r.host for r in ranks[:8]} == {"ztan-mig-235z"} and {r.host for r in ranks[8:]} == {
        "ztan-mig-gq73"
    }
    r0 = ranks[0]
    assert (r0.group, r0.pid, r0.device, r0.bus, r0.gpu_name, r0.line) == (
        0,
        6899,
        0,
        "0000:04:00",
        "NVIDIA H100 80GB HBM3",
        13,
    )
    assert (ranks[15].pid, ranks[15].device, ranks[15].bus) == (6740, 7, "0000:8c:00")
    rows = _of(res, NcclTestsRow)
    assert len(rows) == 31
    assert [r.size_bytes for r in rows] == [8 * 2**i for i in range(31)]
    first, last = rows[0], rows[-1]
    assert (first.count, first.dtype, first.redop, first.root) == (2, "float", "sum", -1)
    assert (first.oop_time_us, first.oop_busbw, first.oop_wrong, first.ip_time_us) == (135.8, 0.0, 0, 123.5)
    assert (last.size_bytes, last.count) == (8589934592, 2147483648)
    assert (last.oop_time_us, last.oop_algbw, last.oop_busbw, last.oop_wrong) == (47535.0, 180.71, 338.82, 0)
    assert (last.ip_time_us, last.ip_algbw, last.ip_busbw, last.ip_wrong) == (47743.0, 179.92, 337.35, 0)
    assert all(r.host == "launcher" for r in rows)
    [summ] = _of(res, NcclTestsSummary)
    assert (summ.avg_busbw, summ.out_of_bounds, summ.run_index, summ.line) == (70.742, 0, 0, 65)


def test_coreweave_readme_runs_without_nthread_headers():
    res = _parse(COREWEAVE)
    assert res.problems == []
    runs = _of(res, NcclTestsRun)
    assert [r.run_index for r in runs] == [0, 1, 2, 3]
    assert (runs[0].nthread, runs[0].min_bytes, runs[0].max_bytes) == (1, 4, 2147483648)
    # the GB200 tables start at a "#  Rank" line: implicit runs without header fields
    assert all(r.nthread is None and r.ngpus is None for r in runs[1:])
    summaries = _of(res, NcclTestsSummary)
    assert [(s.run_index, s.avg_busbw, s.out_of_bounds) for s in summaries] == [
        (0, 373.187, 0),
        (1, 745.53, 0),
        (2, 688.487, 0),
        (3, 297.808, 0),
    ]
    rows = _of(res, NcclTestsRow)
    assert [sum(1 for r in rows if r.run_index == i) for i in range(4)] == [5, 5, 6, 6]
    big = [r for r in rows if r.run_index == 3][-1]
    assert (big.size_bytes, big.oop_busbw, big.ip_busbw) == (17179869184, 405.74, 404.77)
    ranks = _of(res, NcclTestsRank)
    assert [(r.run_index, r.rank, r.host, r.bus, r.gpu_name) for r in ranks] == [
        (1, 71, "slurm-gb200-207-171", "0x01", "NVIDIA Graphics Device"),
        (2, 143, "slurm-gb200-207-171", "0x01", "NVIDIA Graphics Device"),
        (3, 1439, "slurm-gb200-218-073", "0x01", "NVIDIA GB200"),
    ]


# ---------------------------------------------------------------------------------------------------------------
# variations


def test_interleaved_nccl_info_lines_are_skipped():
    res = _parse("var_interleaved_nccl_info_all_gather.log")
    assert res.problems == []
    [run] = _of(res, NcclTestsRun)
    assert (run.collective, run.min_bytes, run.max_bytes, run.line) == ("all_gather", 1048576, 1073741824, 4)
    assert [(r.rank, r.host) for r in _of(res, NcclTestsRank)] == [
        (0, "node017"),
        (1, "node017"),
        (8, "node018"),
        (9, "node018"),
    ]
    rows = _of(res, NcclTestsRow)
    assert len(rows) == 6
    assert {r.redop for r in rows} == {"none"}
    assert all(r.oop_wrong is None and r.ip_wrong is None for r in rows)  # "-c 0" prints N/A
    assert rows[2].line == 24  # after the interleaved NCCL INFO line 23
    assert (rows[-1].oop_busbw, rows[-1].ip_busbw) == (67.55, 67.59)
    [summ] = _of(res, NcclTestsSummary)
    assert (summ.avg_busbw, summ.out_of_bounds) == (49.0375, 0)


def test_old_format_table_cut_mid_row():
    res = _parse("var_old_format_truncated.log")
    ranks = _of(res, NcclTestsRank)
    assert [(r.rank, r.group, r.pid, r.bus, r.gpu_name) for r in ranks] == [
        (0, None, 30417, "0x3b", "Tesla V100-SXM2-32GB"),
        (1, None, 30417, "0x5e", "Tesla V100-SXM2-32GB"),
    ]
    rows = _of(res, NcclTestsRow)
    assert len(rows) == 5
    assert (rows[0].redop, rows[0].root, rows[0].oop_wrong, rows[0].ip_wrong) == ("sum", None, 0, 0)  # 0e+00
    cut = rows[-1]
    assert (cut.size_bytes, cut.oop_time_us, cut.oop_busbw, cut.oop_wrong) == (1048576, 68.91, 15.22, 0)
    assert (cut.ip_time_us, cut.ip_algbw, cut.ip_busbw, cut.ip_wrong) == (None, None, None, None)
    assert _of(res, NcclTestsSummary) == []
    assert len(res.problems) == 2
    assert "line 14" in res.problems[0] and "Avg bus bandwidth" in res.problems[1]


def test_two_runs_alltoall_broadcast():
    res = _parse("var_alltoall_then_broadcast.log")
    assert res.problems == []
    runs = _of(res, NcclTestsRun)
    assert [(r.run_index, r.collective, r.ngpus, r.max_bytes) for r in runs] == [
        (0, "alltoall", 8, 134217728),
        (1, "broadcast", 8, 67108864),
    ]
    rows = _of(res, NcclTestsRow)
    bcast = [r for r in rows if r.run_index == 1]
    assert [(r.redop, r.root) for r in bcast] == [("none", 0), ("none", 0)]
    assert [r.oop_wrong for r in bcast] == [0, 2]
    assert [(s.run_index, s.avg_busbw, s.out_of_bounds) for s in _of(res, NcclTestsSummary)] == [
        (0, 109.495, 0),
        (1, 207.61, 2),
    ]


def test_row_cut_after_size_is_reported():
    text = (OWN / "var_alltoall_then_broadcast.log").read_text().splitlines()[:11]
    text.append("   134217728")
    res = nccl_tests.parse("\n".join(text) + "\n", "x")
    assert len(_of(res, NcclTestsRow)) == 2
    assert any("line 12" in p for p in res.problems)


# ---------------------------------------------------------------------------------------------------------------
# sniff


@pytest.mark.parametrize(
    "path", sorted(p for p in OWN.iterdir() if p.name != "README.md"), ids=lambda p: p.name
)
def test_sniff_claims_own_samples(path: Path):
    assert nccl_tests.sniff(path.read_text()[:65536]) >= 80


def _other_files():
    for d in sorted(p for p in DATA.iterdir() if p.is_dir() and p.name != "nccl_tests"):
        for f in sorted(d.iterdir()):
            if f.is_file() and f.name != "README.md":
                yield f


@pytest.mark.parametrize("path", list(_other_files()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_rejects_other_formats(path: Path):
    assert nccl_tests.sniff(path.read_text(errors="replace")[:65536]) < 40


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str):
    res = nccl_tests.parse(text, "fuzz")
    assert res.format == "nccl_tests"
    assert all(r is not None and r.line >= 1 for r in res.records)
    score = nccl_tests.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "# nThread 1 nGpus 8 minBytes 8 maxBytes 9",
                "#  Rank  0 Group  0 Pid 1 on h device 0 [0x1] G",
                "#       size         count      type   redop    root     time   algbw   busbw #wrong     time",
                "   algbw",
                "      1048576  262144  float  sum  -1  ",
                "1.5 ",
                "N/A ",
                "0e+00 ",
                "9" * 40,
                " 1e999",
                "nan ",
                "# Out of bounds values : 0 OK",
                "# Avg bus bandwidth    : ",
                "# Collective test starting: alltoall_perf",
                "h:1:1 [0] NCCL INFO x",
                "\n",
                " ",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_never_raises_on_table_fragments(text: str):
    res = nccl_tests.parse(text, "fuzz")
    assert not any("stopped early" in p for p in res.problems)
    assert all(r.line >= 1 for r in res.records)


@pytest.mark.parametrize(
    "head",
    [
        (
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
            "   busbw #wrong\n"
        ),
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n",
    ],
    ids=["table-header-only", "nthread-header-only"],
)
def test_sniff_claims_a_lone_header(head: str):
    noise = "\n".join(f"node01:1:1 [0] NCCL INFO line {i}" for i in range(100)) + "\n"
    assert nccl_tests.sniff(noise + head) >= 80


_A3 = DATA / "nccl_tests" / "a3mega_ztan-NCCL-test-result_all_reduce_perf_2x8_H100.md"


def _busbw(ev: Any) -> list[dict[str, Any]]:
    return sorted((f.attrs for f in ev.findings if f.kind == "busbw_measured"), key=lambda a: (a["nodes"], a["busbw_gbs"]))


def test_each_files_runs_are_measured_apart(tmp_path: Path) -> None:
    """Two nccl-tests outputs (here one on both nodes, one on a single node) both number their run 0: each gives its
    own busbw finding, with its own nodes."""
    from diagnose.pipeline import gather

    text = _A3.read_text()
    (tmp_path / "both.txt").write_text(text)
    (tmp_path / "one.txt").write_text(text.replace("ztan-mig-gq73", "ztan-mig-235z"))
    assert [a["nodes"] for a in _busbw(gather([tmp_path]))] == [1, 2]


def test_a_large_output_is_parsed_whole_with_every_run_kept(tmp_path: Path) -> None:
    """Past the streaming size, nccl-tests output is still parsed whole: cut into chunks, a chunk's first rows would
    make a run of their own and every chunk would number its runs from 0 again."""
    from diagnose.bundle import LoadLimits
    from diagnose.pipeline import gather

    small = LoadLimits(stream_bytes=64 * 1024, chunk_bytes=16 * 1024)
    (tmp_path / "big.txt").write_text(_A3.read_text() * 40)  # ~440 KB, 40 runs
    whole = _busbw(gather([tmp_path]))
    assert len(whole) == 40 and {a["nodes"] for a in whole} == {2}
    assert _busbw(gather([tmp_path], limits=small)) == whole


@pytest.mark.parametrize("cell", ["inf", "-inf", "nan", "1" + "0" * 400])
def test_a_non_finite_cell_is_a_located_problem_and_the_rest_of_the_row_is_read(cell: str) -> None:
    text = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
            "   busbw #wrong\n"
            f"   134217728      33554432     float     sum      -1   1040.6  128.98  {cell}      0   1041.2  128.91"
            "  112.79      0\n")
    res = nccl_tests.parse(text, "t.txt")
    (row,) = [r for r in res.records if isinstance(r, NcclTestsRow)]
    assert row.oop_busbw is None and row.oop_algbw == 128.98 and row.ip_busbw == 112.79 and row.ip_wrong == 0
    assert any(p.startswith("line 2: out-of-place busbw") and "not a finite number" in p for p in res.problems)
    assert not any("truncated nccl-tests row" in p for p in res.problems), res.problems
