"""The columnar perfquery parser must give exactly what the line parser gives, on every real capture we have."""

from __future__ import annotations

import gzip
import re
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


# ---------------------------------------------------------------------------------------- synthetic dumps
# Shapes the numpy decoding treats specially: long runs of headers and commands, runs cut short by other lines,
# commands without a trailing port or with a non-canonical -G, edges of the buffer, long digit runs, names at
# the edge of the 32-byte window, dumps without the usual padding, CRLF. Each must parse as the line parser does.

_NAMES = ["PortSelect", "CounterSelect", "PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts",
          "SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
          "PortRcvRemotePhysicalErrors", "ExcessiveBufferOverrunErrors", "VL15Dropped", "PortXmitWait"]


def _dump(ports: int = 40, *, seed: int = 1, date_every: int = 0, cmd: str = "$ perfquery -x -G {guid} {port}",
          pad: int = 33, extended: bool = True, tail: str = " (CapMask: 0x5300 CapMask2: 0x0000002)") -> str:
    rng = np.random.default_rng(seed)
    out = ["$ date", "Fri Jun 14 02:49:28 UTC 2024"]
    for i in range(ports):
        if date_every and i % date_every == 0:
            out += ["$ date", f"Fri Jun 14 02:{49 + i // 60:02d}:{i % 60:02d} UTC 2024"]
        guid, port = f"0xfc6a1c0300fa{i // 4:04x}", i % 4 + 1
        out.append(cmd.format(guid=guid, port=port))
        kind = "Port extended counters" if extended else "Port counters"
        out.append(f"# {kind}: Lid {i // 4 + 1} port {port}{tail}")
        for name in _NAMES:
            value = ("0x0000" if name == "CounterSelect" else
                     str(port if name == "PortSelect" else int(rng.integers(0, 10 ** int(rng.integers(1, 19))))))
            out.append(name + ":" + "." * max(1, pad - len(name) - 1) + value)
    return "\n".join(out) + "\n"


_SYNTHETIC = {
    "runs": _dump(),
    "snapshots_repeat": _dump(20) + _dump(20, seed=2),
    "date_every_port": _dump(date_every=1),
    "date_every_5": _dump(date_every=5),
    "G_right_after_perfquery": _dump(cmd="$ perfquery -G {guid} {port}"),
    "guid_upper_and_short": _dump(cmd="$ perfquery -x --Guid=0X{port}ABC {port}"),
    "no_guid": _dump(cmd="$ perfquery -x 11 {port}"),
    "no_trailing_port": _dump(cmd="$ perfquery -x -G {guid}"),
    "basic_no_tail": _dump(extended=False, tail=""),
    "tail_spaces": _dump(tail="   "),
    "tail_for_the_state_machine": _dump(tail="  (CapMask: 0x5300)"),
    "unpadded": _dump(400, pad=0),  # more distinct windows than _MAX_WINDOWS
    "crlf": _dump().replace("\n", "\r\n"),
    "no_final_newline": _dump().rstrip("\n"),
    "starts_with_counter": "SymbolErrorCounter:..............7\n" + _dump(),
    "short_first_line": "A:.1\n" + _dump(),
    "tiny": "X:.5",
}


def _variants() -> dict[str, str]:
    v = dict(_SYNTHETIC)
    base = _dump()
    v["name_31"] = base.replace("VL15Dropped:", "V" * 31 + ":", 3)
    v["name_32"] = base.replace("VL15Dropped:", "V" * 32 + ":", 3)
    for name, digits in (("digits_19", "1234567890123456789"), ("digits_19_big", "9999999999999999999"),
                         ("digits_20_zeros", "00000000000000000042"), ("digits_21", "123456789012345678901"),
                         ("digits_30", "1" * 30)):
        v[name] = re.sub(r"PortXmitWait:\.+\d+", "PortXmitWait:." + digits, base, count=1)
    v["lid_long"] = base.replace("Lid 3 port", "Lid 123456789 port", 1)
    v["hdr_other_port"] = base.replace("port 2 (", "port 255 (", 2)
    # the usual command is read without the regex only when its -G argument is exactly 0x and 16 lower-case hex
    # digits; these are next to it and must not be taken for it
    v["guid_upper"] = base.replace("-G 0xfc6a1c0300fa0002", "-G 0xFC6A1C0300FA0002")
    v["guid_17_digits"] = base.replace("-G 0xfc6a1c0300fa0002", "-G 0xfc6a1c0300fa00021")
    v["guid_not_hex"] = base.replace("-G 0xfc6a1c0300fa0002", "-G 0xfc6a1c0300fa000g")
    v["guid_ends_line"] = base.replace("-G 0xfc6a1c0300fa0002 ", "-G 0xfc6a1c0300fa0002\n$ perfquery -x ")
    v["guid_then_more"] = base.replace("-G 0xfc6a1c0300fa0002 3", "-G 0xfc6a1c0300fa0002 -x 3")
    v["non_ascii"] = base.replace("Fri Jun", "Fr\u00e9 Jun", 1).replace("-G 0xfc6a1c0300fa0002", "-G 0xfc6a1c0300fa0002\u00e9")
    return v


@pytest.mark.parametrize("name", sorted(_variants()))
def test_synthetic_bulk_equals_line_parser(name: str) -> None:
    text = _variants()[name]
    bulk = _bulk(text)
    if bulk is None:
        assert name in {"digits_19_big", "digits_21", "digits_30", "tiny"}, "bulk path refused"
        return
    rows, problems, batch = bulk
    slow_rows, slow_problems, slow_text = _slow(text)
    assert rows == slow_rows
    assert problems == slow_problems
    for line in list(slow_text)[::7]:
        assert batch.lines is not None and batch.lines.text(line) == slow_text[line]


def test_long_runs_take_the_vectorised_path() -> None:
    """Dumps with a header per port give long runs of header/command lines: the bulk path must take them."""
    for name in ("runs", "snapshots_repeat", "G_right_after_perfquery", "unpadded", "crlf"):
        assert _bulk(_SYNTHETIC[name]) is not None, name
