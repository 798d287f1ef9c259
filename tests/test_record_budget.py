"""The record budget (LoadLimits.max_record_bytes, see diagnose.budget): what parsing makes of a bundle is bounded,
past it the file that passed it and every later one are listed with the limit, and which files those are never
depends on how many processes parsed or in which order they finished."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from diagnose import pipeline
from diagnose.budget import Held, RecordBudget, record_bytes
from diagnose.bundle import LoadLimits
from diagnose.bundle.hostile import NCCL, _log_block
from diagnose.models.records import ColumnBatch
from diagnose.parsers import nccl_log
from diagnose.runtime import ParallelExecutor, Stages
from diagnose.stages.parse import load, parse_file

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SMALL = dict(stream_bytes=16 * 1024, chunk_bytes=4096)  # the fabric fixture's counter dumps count as large


def _dense(d: Path, n: int, size: int) -> None:
    """``n`` NCCL logs of ``size`` bytes whose every line is a channel record, after a small log with a finding."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "a-first.log").write_text(NCCL)
    for i in range(n):
        (d / f"rank{i:02d}.log").write_bytes(_log_block(size))


def _budget_notes(ev: pipeline.Evidence) -> list[str]:
    return [f.path for f in ev.files if f.problem and "record budget" in f.problem]


def test_the_estimate_grows_with_rows_and_text_and_is_the_same_for_the_same_records() -> None:
    one = nccl_log.parse(_log_block(20_000).decode(), "a.log").records
    two = nccl_log.parse(_log_block(40_000).decode(), "a.log").records
    assert record_bytes(one) == record_bytes(nccl_log.parse(_log_block(20_000).decode(), "a.log").records)
    assert 1.8 < record_bytes(two) / record_bytes(one) < 2.2
    batch = next(r for r in one if isinstance(r, ColumnBatch))
    rows = len(batch.columns["line"])  # type: ignore[arg-type]
    # each row: a pointer or number per column, and its line's text
    assert record_bytes([batch]) > rows * (8 * len(batch.columns) + min(map(len, batch.columns["text"])))  # type: ignore[arg-type]


def test_held_fits_until_its_limit_and_no_limit_is_none() -> None:
    h = Held()
    h.begin(100, serial=True)
    assert h.fits(100) and not h.fits(101)
    h.charge(60)
    assert h.fits(40) and not h.fits(41)
    h.begin(0, serial=False)
    assert h.fits(10**15)


def test_past_the_budget_the_file_that_passed_it_and_the_later_ones_are_listed_and_the_rest_diagnosed(
        tmp_path: Path) -> None:
    _dense(tmp_path / "b", 6, 200_000)
    whole = pipeline.gather([tmp_path / "b"], limits=LoadLimits())
    assert not _budget_notes(whole)
    per_file = whole.record_bytes // 6
    ev = pipeline.gather([tmp_path / "b"], limits=LoadLimits(max_record_bytes=int(per_file * 3.5)))
    assert _budget_notes(ev) == ["rank03.log", "rank04.log", "rank05.log"]
    kept = {f.path: f.records for f in ev.files}
    assert kept["rank00.log"] == kept["rank02.log"] > 0 and kept["rank03.log"] == 0
    assert ev.record_bytes <= per_file * 3.5
    assert kept["a-first.log"] > 0  # the files before the cut are read as usual
    first = next(f for f in ev.files if f.path == "rank03.log")
    assert "spent by this file" in (first.problem or "")
    later = next(f for f in ev.files if f.path == "rank05.log")
    assert (later.problem or "").endswith("is spent: not read")


def test_a_file_streamed_from_disk_is_stopped_mid_file_by_the_budget(tmp_path: Path) -> None:
    d = tmp_path / "b"
    d.mkdir()
    (d / "big.log").write_bytes(_log_block(600_000))  # streamed: past stream_bytes, read chunk by chunk
    limits = LoadLimits(max_record_bytes=256 * 1024, **SMALL)
    ev = pipeline.gather([d], limits=limits)
    (f,) = ev.files
    assert f.records == 0 and "record budget" in (f.problem or "") and ev.record_bytes == 0


def _fabric_bundle(tmp_path: Path) -> Path:
    """Counter dumps a second process takes (the fabric fixture), and dense logs for this one."""
    b = tmp_path / "bundle"
    shutil.copytree(ROOT / "fixtures/link/bad_cable/positive-fattree64-hca-end", b)
    _dense(b / "logs", 4, 12_000)
    return b


def _files(ev: pipeline.Evidence) -> list[tuple[str, int, str | None]]:
    return [(f.path, f.records, f.problem) for f in ev.files]


@pytest.mark.parametrize("fork", [True, False], ids=["forked child", "one core"])
def test_which_files_pass_the_budget_does_not_depend_on_a_second_process(tmp_path: Path, fork: bool) -> None:
    b = _fabric_bundle(tmp_path)
    whole = pipeline.gather([b], limits=LoadLimits(**SMALL))
    limit = int(whole.record_bytes * 0.7)
    serial = pipeline.gather([b], limits=LoadLimits(max_record_bytes=limit, **SMALL))
    assert _budget_notes(serial)  # the budget binds
    loads = []

    def counted(*a: Any) -> Any:
        loads.append(1)
        return load(*a)

    two = ParallelExecutor(min_bytes=1, fork=fork, stages=Stages(load=counted))
    parallel = pipeline.gather([b], limits=LoadLimits(max_record_bytes=limit, **SMALL), executor=two)
    assert len(loads) == (2 if fork else 1)  # in two processes: found past the budget, parsed again in path order
    assert _files(parallel) == _files(serial)
    assert [f.model_dump_json() for f in parallel.findings] == [f.model_dump_json() for f in serial.findings]


def test_a_budget_passed_in_the_second_process_loses_nothing_within_it(tmp_path: Path) -> None:
    """The child's share passes the budget there (as it would with the parent's records beside it): the files it
    took are parsed here instead, where the whole bundle is counted."""
    b = _fabric_bundle(tmp_path)
    serial = pipeline.gather([b], limits=LoadLimits(**SMALL))
    parent = os.getpid()

    def over_in_the_child(*a: Any, **k: Any) -> None:
        if os.getpid() != parent:
            raise RecordBudget(1)
        parse_file(*a, **k)

    over = pipeline.gather([b], limits=LoadLimits(**SMALL), executor=ParallelExecutor(
        min_bytes=1, fork=True, stages=Stages(parse_file=over_in_the_child)))
    assert _files(over) == _files(serial)
