"""The columnar perfquery parser must give exactly what the line parser gives, on every real capture we have."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from diagnose.models.records import ColumnBatch
from diagnose.parsers import perfquery
from diagnose.parsers.perfquery import PortCounter

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "tests" / "data" / "perfquery").glob("*.out")) + sorted(
    (ROOT / "tests" / "data" / "perfquery").glob("*.txt")) + sorted(
    p for p in (ROOT / "fixtures").rglob("*perfquery*") if p.is_file())


def _read(p: Path) -> str:
    raw = p.read_bytes()
    if p.suffix == ".gz":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace")


def _slow(text: str) -> tuple[set[tuple], list[str], dict[int, str]]:
    records: list = []
    problems: list[str] = []
    perfquery._parse(text, "f", "h0", records, problems)
    rows = {(r.line, r.host, r.lid, r.guid, r.port, r.counter, r.value, r.extended, r.snapshot, r.timestamp)
            for r in records if isinstance(r, PortCounter)}
    return rows, problems, {r.line: r.text for r in records if isinstance(r, PortCounter)}


def _bulk(text: str) -> tuple[set[tuple], list[str], ColumnBatch] | None:
    records: list = []
    problems: list[str] = []
    if not perfquery._parse_bulk(text.encode(), "f", "h0", records, problems):
        return None
    batch = next(r for r in records if isinstance(r, ColumnBatch))
    c = batch.columns
    rows = set()
    for name in c:
        if not name.startswith("v:"):
            continue
        counter = name[2:]
        vals, lines = c[name], c[f"l:{counter}"]
        for i in np.flatnonzero(vals >= 0):
            rows.add((int(lines[i]), c["host"][i], c["lid"][i], c["guid"][i], c["port"][i], counter, int(vals[i]),
                      bool(c["extended"][i]), int(c["snapshot"][i]), c["timestamp"][i]))
    return rows, problems, batch


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_bulk_equals_line_parser(path: Path) -> None:
    text = _read(path)
    bulk = _bulk(text)
    if bulk is None:
        pytest.skip("a mixed capture: the line parser handles it")
    rows, problems, batch = bulk
    slow_rows, slow_problems, slow_text = _slow(text)
    assert rows == slow_rows
    assert problems == slow_problems
    for line in list(slow_text)[:50]:
        assert batch.lines is not None and batch.lines.text(line) == slow_text[line]


def test_most_captures_take_the_bulk_path() -> None:
    taken = sum(_bulk(_read(p)) is not None for p in SAMPLES)
    assert taken >= len(SAMPLES) // 2, f"only {taken} of {len(SAMPLES)} captures parsed in bulk"


def test_truncated_last_block_reported_like_the_line_parser() -> None:
    text = _read(ROOT / "tests" / "data" / "perfquery" / "var_two_snapshots_with_date.txt")
    cut = text[: text.rstrip().rfind("\n")] + "\nPortXmitWa"  # the last counter line cut before its colon
    bulk = _bulk(cut)
    assert bulk is not None
    assert bulk[1] == _slow(cut)[1]
    assert any(p.startswith("truncated") for p in bulk[1])


def test_chunk_offset_shifts_every_line_column() -> None:
    text = _read(ROOT / "tests" / "data" / "perfquery" / "var_two_snapshots_with_date.txt")
    _, _, batch = _bulk(text)  # type: ignore[misc]
    before = {k: np.array(v) for k, v in batch.columns.items() if k in batch.line_columns}
    first = int(batch.columns["l:symbol_error"][0])
    want = batch.lines.text(first)  # type: ignore[union-attr]
    batch.shift_lines(100)
    for k, v in before.items():
        assert (batch.columns[k][v > 0] == v[v > 0] + 100).all()
        assert (batch.columns[k][v == 0] == 0).all()
    assert batch.lines.text(first + 100) == want  # type: ignore[union-attr]
