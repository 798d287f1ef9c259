"""The per-host small files of a large bundle (ibstat, dmesg) on their quick paths: folder walk, binary check,
line prefilters and memos, and the hand-over of small files to an idle second process. Each quick path must give
what the general one gives on the real samples."""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import random
import re
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from diagnose import pipeline
from diagnose.bundle import LoadLimits, load_inputs, loader
from diagnose.models.records import ColumnBatch, positional_maker
from diagnose.parsers import _ib, dmesg, ibstat
from diagnose.runtime import ParallelExecutor

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def _texts() -> list[tuple[Path, str]]:
    out = []
    for p in sorted(DATA.rglob("*")) + sorted((ROOT / "fixtures").rglob("*")):
        if p.is_file() and p.suffix != ".gz":
            raw = p.read_bytes()
            if b"\0" not in raw[:4096]:
                out.append((p, raw.decode("utf-8", errors="replace")))
    return out


TEXTS = _texts()


# ------------------------------------------------------------------------------------------------------ ibstat


def test_every_shell_line_holds_a_shell_hint() -> None:
    """ibstat only asks shell_line about lines with a hint: no line shell_line acts on may lack one."""
    extra = ["[root@gpu-a001 ~]# ibstat", "user@host:~$ ibstat mlx5_0", "$ ibstat", "# ibstat -l", "> ibstat",
             "ibpanic: [1] main: stat failed", "ibwarn: x", "ibstat: iberror: failed", "Failed to open mlx5_0",
             "No IB devices found", "Fatal error: x", "Invalid port requested for device", "(venv) [a@b c]$ ls"]
    acted = 0
    for line in extra + [ln for _, t in TEXTS for ln in t.split("\n")]:
        records: list[Any] = []
        kind, _ = _ib.shell_line(line, 1, "s", "ibstat", ("ibstat",), None, records)
        if kind is not None:
            acted += 1
            assert ibstat._SHELL_HINT.search(line), line
            assert any(h in line for h in ibstat._SHELL_HINTS), line
    assert acted > 100


@pytest.mark.parametrize("path", sorted((DATA / "ibstat").glob("*.txt")), ids=lambda p: p.name)
def test_ibstat_split_path_equals_the_cleaning_path(path: Path) -> None:
    """Plain text is split directly; text with CR takes iter_lines and checks every line for shell hints."""
    text = path.read_text()
    plain = ibstat.parse(text, "s", "h")
    crlf = ibstat.parse(text.replace("\n", "\r\n"), "s", "h")
    assert plain.records == crlf.records and plain.problems == crlf.problems
    assert plain.records


def test_ibstat_line_memo_matches_the_pattern() -> None:
    lines = {ln for p, t in TEXTS if "ibstat" in p.name for ln in t.split("\n")}
    lines |= {"CA: 'mlx5_0'", "Switch 'sw1'", "Port 12:", "State : Active", "Rate: 400 (NDR)", "Bogus: 1", ""}
    for line in lines:
        assert ibstat._shape(line) == ibstat._shape_of(line), line


def test_ibstat_field_heads_agree_with_the_line_pattern() -> None:
    """A line whose text before its first colon is a field head is that field, its value the rest stripped;
    every other line is left to the whole-line pattern, which then finds no field in it either."""
    lines = {ln for p, t in TEXTS if "ibstat" in p.name for ln in t.split("\n")}
    lines |= {"CA: 'mlx5_0'", "CA type:'x'", "Switch type: y", "Port 12:", "Port GUID:", "State : Active", "State:",
              "  Link layer :  IB  ", "\x0bState: Init\x0c", "\u00a0State: Armed", "State\u00a0: Armed", "Bogus: 1",
              "Port\u00a02:", "CA 'a:b'", "SM lid: 1: 2", "\tRate\t:\t400 (NDR)\r", "Base lid", ""}
    fields = 0
    for line in lines:
        head, colon, rest = line.partition(":")
        field = ibstat._field_heads[head] if colon else None
        shape = ibstat._shape_of(line)
        if field is not None:
            fields += 1
            assert shape == (*field, rest.strip()), line
        else:
            assert shape is None or shape[0] in (ibstat._NODE, ibstat._PORT), line
    assert fields > 100


def test_positional_maker_makes_the_records_the_keyword_constructor_makes() -> None:
    values = {"source": "s", "line": 3, "text": "t", "host": None, "device": "mlx5_0", "port": 1, "state": "Active",
              "phys_state": "LinkUp", "rate_gbps": 400.0, "width": None, "speed": "NDR", "link_layer": "InfiniBand",
              "lid": 7, "sm_lid": 1, "port_guid": "0x1", "node_guid": None, "ca_type": "MT4129", "firmware": "28",
              "active_mtu": 4096, "max_mtu": None}
    made = positional_maker(_ib.IbPort)(*values.values())
    want = _ib.IbPort(**values)
    assert type(made) is _ib.IbPort and made == want and hash(made) == hash(want)
    assert pickle.loads(pickle.dumps(made)) == want
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.state = "Down"  # type: ignore[misc]


def test_dmesg_message_values_land_in_their_fields() -> None:
    """The memoised message values fill each record class's fields between host and timestamp, in order."""
    bodies = {
        "mlx5_core 0000:19:00.0 ib0: mlx5_fw_fatal:1:(pid 5): Port module event: module 0, Cable unplugged":
            {"bdf": "0000:19:00.0", "netdev": "ib0", "category": "module_event"},
        "nvidia-peermem: module loaded": {"category": "loaded", "message": "module loaded"},
        "ib0: lost carrier": {"category": "ib_link", "device": "ib0", "message": "lost carrier"},
    }
    for body, want in bodies.items():
        cls, values = dmesg._message_of(body)  # type: ignore[misc]
        rec = dmesg._MAKE[cls]("s", 1, "t", "h", *values, "12.5")
        assert rec == cls(source="s", line=1, text="t", host="h", timestamp="12.5",
                          **dict(zip([f.name for f in dataclasses.fields(cls)][4:-1], values, strict=True)))
        assert rec.timestamp == "12.5" and all(getattr(rec, k) == v for k, v in want.items()), body


def test_ibstat_sniff_scores() -> None:
    for _, text in TEXTS:
        head = text[:65536]
        nodes = len(ibstat._SNIFF_NODE.findall(head))
        keys = len(ibstat._SNIFF_KEY.findall(head))
        ports = len(ibstat._SNIFF_PORT.findall(head))
        if nodes and keys >= 2:
            want = 95 if keys >= 5 else 80
        elif not nodes and ports and keys >= 4 and "Physical state: " in head:
            want = 45
        else:
            want = 0
        assert ibstat.sniff(head) == want


# ------------------------------------------------------------------------------------------------------- dmesg


@pytest.mark.slow
def test_dmesg_message_memo_matches_the_patterns() -> None:
    bodies = {dmesg._peel(ln)[0] for p, t in TEXTS for ln in t.split("\n")[:3000]}
    for body in bodies:
        assert dmesg._message(body) == dmesg._message_of(body), body


@pytest.mark.parametrize("path", sorted((DATA / "dmesg").glob("*.log")), ids=lambda p: p.name)
def test_dmesg_cold_and_warm_memo_agree(path: Path) -> None:
    text = path.read_text()
    dmesg._message.cache_clear()
    cold = dmesg.parse(text, "s", "h")
    warm = dmesg.parse(text, "s", "h")
    assert cold.records == warm.records and cold.problems == warm.problems


def test_dmesg_peel_bracket_shortcut() -> None:
    """A line starting with "[" can only carry a bracketed timestamp: the other prefixes never match it."""
    for _, text in TEXTS:
        for ln in text.split("\n"):
            if ln.startswith("["):
                for rx in (dmesg._PDSH_RE, dmesg._SYSLOG_RE, dmesg._PRINTK_LEVEL_RE, dmesg._DECODE_RE,
                           dmesg._ISO_TS_RE):
                    assert rx.match(ln) is None


def test_dmesg_strong_pattern_first_characters() -> None:
    """The first-character check in front of the strong-line pattern rejects no line the pattern matches."""
    plain = re.compile(dmesg._SNIFF_STRONG)
    extra = ["x nvidia_peermem y", "AER: x", "eth0: lost carrier", "mlx5_core 0000:3b:00.0: x", "amlx5_core 0000:3b:"]
    hits = 0
    for ln in extra + [ln for _, t in TEXTS for ln in t.split("\n")]:
        m = plain.search(ln)
        assert (m and m.span()) == ((m2 := dmesg._SNIFF_STRONG_RE.search(ln)) and m2.span()), ln
        hits += m is not None
    assert hits > 100


def test_dmesg_negative_words_cover_the_pattern() -> None:
    for _, text in TEXTS:
        for m in dmesg._SNIFF_NEG_RE.finditer(text):
            assert any(w in m.group(0) for w in dmesg._SNIFF_NEG_WORDS)


# ------------------------------------------------------------------------------------------------------ loader


def test_looks_binary_counts_like_the_byte_loop() -> None:
    text_chars = bytes(range(32, 127)) + b"\n\r\t\b\f\x1b"
    rng = random.Random(7)
    for n in (1, 10, 100, 8192, 9000):
        for weight in (0.0, 0.2, 0.3, 0.5, 1.0):
            sample = bytes(rng.randrange(256) if rng.random() < weight else rng.randrange(32, 127) for _ in range(n))
            sample = sample.replace(b"\0", b"\1")
            chunk = sample[:8192]
            want = sum(1 for b in chunk if b not in text_chars and b < 128) / max(1, len(chunk)) > 0.30
            assert loader._looks_binary(sample) is want


def test_walk_lists_what_rglob_lists(tmp_path: Path) -> None:
    root = tmp_path / "b"
    for rel in ("a.txt", ".hidden", "gpu-a1/ibstat.txt", "gpu-a1/x/y/z.log", "gpu-a10/dmesg.txt", "gpu-a2/d.txt",
                "B/upper.txt", "empty/.keep"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    (root / "emptydir").mkdir()
    (root / "inside").symlink_to(root / "a.txt")
    (root / "outside").symlink_to(tmp_path)
    (root / "dangling").symlink_to(tmp_path / "nope")
    (root / "dirlink").symlink_to(root / "gpu-a1")
    os.mkfifo(root / "fifo")
    # special files (the FIFO) are listed too: load_inputs reports them instead of skipping them unseen
    want = sorted(f for f in root.rglob("*") if f.is_file() or f.is_symlink() or f.is_fifo())
    got = loader._walk(root)
    assert [Path(p) for _, p, _ in got] == want
    assert [rel for rel, _, _ in got] == [f.relative_to(root).as_posix() for f in want]
    assert [link for _, _, link in got] == [f.is_symlink() for f in want]


def test_archives_known_by_content_or_name(tmp_path: Path) -> None:
    ib = (DATA / "ibstat" / "heioy_ibstat_mlx4_fdr.txt").read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("node1/ibstat.txt")
        info.size = len(ib)
        tf.addfile(info, io.BytesIO(ib))
    (tmp_path / "capture.bin").write_bytes(buf.getvalue())  # a tar without a tar name
    with zipfile.ZipFile(tmp_path / "z.data", "w") as zf:
        zf.writestr("node2/ibstat.txt", ib)
    shutil.copy(tmp_path / "capture.bin", tmp_path / "named.tar")
    files = {f.path: f for f in load_inputs([tmp_path])}
    assert set(files) == {"capture.bin/node1/ibstat.txt", "named.tar/node1/ibstat.txt", "z.data/node2/ibstat.txt"}
    assert all(f.text == ib.decode() for f in files.values())
    single = load_inputs([tmp_path / "capture.bin"])
    assert [f.path for f in single] == ["capture.bin/node1/ibstat.txt"]


# ---------------------------------------------------------------------------------------------------- pipeline


def _bundle(tmp_path: Path, hosts: int) -> Path:
    b = tmp_path / "bundle"
    shutil.copytree(ROOT / "fixtures/link/bad_cable/positive-fattree64-hca-end", b)
    ib = sorted((DATA / "ibstat").glob("*.txt"))
    dm = sorted((DATA / "dmesg").glob("*.log"))
    for i in range(hosts):
        d = b / f"gpu-z{i:03d}"
        d.mkdir()
        shutil.copy(ib[i % len(ib)], d / "ibstat.txt")
        shutil.copy(dm[i % len(dm)], d / "dmesg.txt")
    return b


def _result(ev: pipeline.Evidence) -> tuple[Any, ...]:
    records = [(r.source, r.table, {k: list(v) for k, v in r.columns.items()}) if isinstance(r, ColumnBatch) else r
               for r in ev.records]  # a batch's numpy columns compared by value
    return records, ev.files, ev.formats, [f.model_dump_json() for f in ev.findings]


@pytest.mark.parametrize("fork", [True, False], ids=["forked child", "one core"])
def test_small_files_with_a_real_second_process_give_the_same_result(tmp_path: Path, fork: bool) -> None:
    bundle = _bundle(tmp_path, 24)
    small = dict(stream_bytes=16 * 1024, chunk_bytes=4096)
    serial = pipeline.gather([bundle], limits=LoadLimits(**small))
    two = ParallelExecutor(min_bytes=1, hand_over=4, fork=fork)
    parallel = pipeline.gather([bundle], limits=LoadLimits(**small), executor=two)
    assert _result(parallel) == _result(serial)
