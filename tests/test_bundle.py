"""Bundle loading: streaming of large logs, long lines, sysfs trees, host hints."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from diagnose.bundle import LoadLimits, load_inputs
from diagnose.models.records import ColumnBatch
from diagnose.pipeline import gather

SMALL = LoadLimits(stream_bytes=512 * 1024, chunk_bytes=64 * 1024, head_bytes=16 * 1024, max_line_chars=4096)
INFO = "gpu-a01:1234:1234 [0] NCCL INFO AllReduce: opCount {i:x} sendbuff 0x7f recvbuff 0x7f count 1048576 datatype 7\n"
WARN = ("[2026-11-29 10:00:00] gpu-a01:1234:1240 [0] misc/shmutils.cc:90 NCCL WARN Error while creating shared memory "
        "segment /dev/shm/nccl-abc (size 9637888)\n")


def _write_log(path: Path, lines: int, gz: bool = False) -> int:
    body = "".join(INFO.format(i=i) for i in range(lines)) + WARN
    if gz:
        path.write_bytes(gzip.compress(body.encode()))
    else:
        path.write_text(body)
    return lines + 1  # the WARN's line number


def test_large_log_is_streamed_with_exact_line_numbers(tmp_path: Path) -> None:
    warn_line = _write_log(tmp_path / "job.log", 20_000)
    files = load_inputs([tmp_path], SMALL)
    assert files[0].stream is not None and len(files[0].text or "") <= 16 * 1024
    ev = gather([tmp_path], limits=SMALL)
    shm = [f for f in ev.findings if f.kind == "shm_error"]
    assert shm and shm[0].evidence[0].line == warn_line
    assert ev.files[0].format == "nccl_log" and ev.files[0].problem is None


def test_large_gzip_log_is_streamed(tmp_path: Path) -> None:
    warn_line = _write_log(tmp_path / "job.log.gz", 60_000, gz=True)
    ev = gather([tmp_path], limits=SMALL)
    shm = [f for f in ev.findings if f.kind == "shm_error"]
    assert shm and shm[0].evidence[0].line == warn_line


def test_a_giant_line_is_cut_and_the_rest_still_parsed(tmp_path: Path) -> None:
    p = tmp_path / "job.log"
    with p.open("w") as fh:
        fh.write(INFO.format(i=1) * 50)
        fh.write("x" * (3 * 1024 * 1024) + "\n")  # one 3 MiB line, far over max_line_chars
        fh.write(INFO.format(i=2) * 50)
        fh.write(WARN)
    ev = gather([tmp_path], limits=SMALL)
    shm = [f for f in ev.findings if f.kind == "shm_error"]
    assert shm and shm[0].evidence[0].line == 102
    assert "cut" in (ev.files[0].problem or "")


def test_a_long_line_inside_a_streamed_chunk_is_clipped_and_reported_as_in_a_file_read_whole(tmp_path: Path) -> None:
    """A line over max_line_chars that a chunk holds whole (not one cut across chunks) is clipped, and the file says
    so once, counting every chunk's, as a small file read whole does."""
    p = tmp_path / "job.log"
    with p.open("w") as fh:
        for part in range(3):
            fh.write(INFO.format(i=part) * 2000)  # ~220 KB: the long lines fall in different chunks
            fh.write("y" * 10_000 + "\n")  # longer than max_line_chars (4096), shorter than a chunk (64 KB)
        fh.write(WARN)
    ev = gather([tmp_path], limits=SMALL)
    assert ev.files[0].problem == "3 line(s) longer than 4096 characters were clipped"
    shm = [f for f in ev.findings if f.kind == "shm_error"]
    assert shm and shm[0].evidence[0].line == 3 * 2001 + 1


def test_non_streamable_large_file_is_read_head_and_tail(tmp_path: Path) -> None:
    block = ("CA 'mlx5_{i}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n"
             "\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tLink layer: InfiniBand\n")
    (tmp_path / "ibstat.out").write_text("".join(block.format(i=i) for i in range(9000)))
    lim = LoadLimits(stream_bytes=256 * 1024, max_file_bytes=128 * 1024, chunk_bytes=64 * 1024)
    ev = gather([tmp_path], limits=lim)
    assert ev.files[0].format == "ibstat"
    assert "only the first and last" in (ev.files[0].problem or "")
    assert 0 < ev.files[0].records < 9000


def test_non_streamable_file_within_the_cap_is_read_whole_without_a_note(tmp_path: Path) -> None:
    # over the streaming size (so it takes the capped path) but under max_file_bytes: every block is read
    block = ("CA 'mlx5_{i}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n"
             "\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tLink layer: InfiniBand\n")
    body = "".join(block.format(i=i) for i in range(3000))
    (tmp_path / "ibstat.out").write_text(body)
    (tmp_path / "ibstat2.out.gz").write_bytes(gzip.compress(body.encode()))
    lim = LoadLimits(stream_bytes=64 * 1024, max_file_bytes=1024 * 1024, chunk_bytes=16 * 1024)
    assert len(body) > lim.stream_bytes and len(body) < lim.max_file_bytes
    ev = gather([tmp_path], limits=lim)
    for fe in ev.files:
        assert fe.format == "ibstat" and fe.problem is None, fe
        assert fe.records == 3000


def test_sysfs_tree_is_folded_into_one_file(tmp_path: Path) -> None:
    root = tmp_path / "node07" / "sys" / "class" / "infiniband" / "mlx5_0"
    (root / "ports" / "1" / "counters").mkdir(parents=True)
    (root / "ports" / "1" / "counters" / "symbol_error").write_text("12\n")
    (root / "ports" / "1" / "state").write_text("4: ACTIVE\n")
    (root / "fw_ver").write_text("28.39.1002\n")
    files = load_inputs([tmp_path])
    assert [f.path for f in files] == ["node07/sys/class/infiniband (sysfs tree)"]
    assert files[0].host_hint == "node07"
    assert files[0].text is not None
    assert "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:12" in files[0].text.splitlines()


def test_host_hint_from_folder_and_not_from_tool_folders(tmp_path: Path) -> None:
    for rel in ("gpu-a017/dmesg.txt", "dmesg_mlx5_core/x.log", "positive-x1/ibstat.out", "node-3/logs/y.log"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("hello\n")
    hints = {f.path: f.host_hint for f in load_inputs([tmp_path])}
    assert hints == {"gpu-a017/dmesg.txt": "gpu-a017", "dmesg_mlx5_core/x.log": None,
                     "positive-x1/ibstat.out": None, "node-3/logs/y.log": "node-3"}


@pytest.mark.slow
def test_name_shortcut_sniffs_every_fixture_file_like_the_full_round() -> None:
    """The short way for well-named files (ibstat.txt, dmesg.txt...) must pick what asking every sniffer picks."""
    from diagnose.bundle.sniff import HEAD_CHARS, _named_sure, sniff_file

    root = Path(__file__).resolve().parents[1]
    checked = shortcut_taken = 0
    for p in sorted((root / "fixtures").rglob("*")) + sorted((root / "tests" / "data").rglob("*")):
        if not p.is_file() or p.name in ("README.md", "expect.yaml", "truth.yaml"):
            continue
        raw = p.read_bytes()
        if p.suffix == ".gz":
            try:
                raw = gzip.decompress(raw)
            except OSError:
                continue
        if b"\0" in raw[:4096]:
            continue
        text = raw.decode("utf-8", errors="replace")
        quick, full = sniff_file(p.name, text), sniff_file(p.name, text, shortcut=False)
        assert quick.formats == full.formats, p
        checked += 1
        shortcut_taken += _named_sure(text[:HEAD_CHARS], p.name.lower()) is not None
    assert checked > 300 and shortcut_taken > 50, (checked, shortcut_taken)


def test_a_bulk_dump_is_read_whole_up_to_the_bulk_limit(tmp_path: Path) -> None:
    """Bulk parsers get every byte of a plain or gzip file, and nothing beyond ``max_bulk_bytes``: not even a file
    that grew past it after it was listed (its listed size is below the limit)."""
    from diagnose.bundle.loader import StreamSource, read_whole

    body = b"".join(b"PortXmitData:....................%d\n" % i for i in range(50_000))
    (tmp_path / "pq.txt").write_bytes(body)
    (tmp_path / "pq.txt.gz").write_bytes(gzip.compress(body))
    plain = StreamSource(tmp_path / "pq.txt", False, len(body))
    packed = StreamSource(tmp_path / "pq.txt.gz", True, (tmp_path / "pq.txt.gz").stat().st_size)
    assert read_whole(plain, LoadLimits()) == body
    assert read_whole(packed, LoadLimits()) == body
    tight = LoadLimits(max_bulk_bytes=len(body) - 1)
    assert read_whole(plain, tight) is None
    assert read_whole(packed, tight) is None
    grown = StreamSource(tmp_path / "pq.txt", False, 1024)  # listed when it was 1 KiB
    assert read_whole(grown, tight) is None
    assert read_whole(grown, LoadLimits(max_bulk_bytes=len(body))) == body


def test_the_preview_lists_what_loading_gives_with_only_the_large_files_read(tmp_path: Path) -> None:
    from diagnose.bundle.loader import preview_inputs

    _write_log(tmp_path / "job.log", 20_000)  # large: streamed
    (tmp_path / "h1").mkdir()
    (tmp_path / "h1" / "dmesg.txt").write_text("[    1.0] mlx5_core 0000:17:00.0: firmware version 28.39.1002\n")
    (tmp_path / "h2").mkdir()
    (tmp_path / "h2" / "dmesg.txt").write_text("[    1.0] nothing\n")
    (tmp_path / "README.md").write_text("fixture notes")  # not evidence, in either
    loaded = load_inputs([tmp_path, tmp_path / "h1" / "dmesg.txt"], SMALL)
    preview = preview_inputs([tmp_path, tmp_path / "h1" / "dmesg.txt"], SMALL)
    assert preview is not None
    assert [b.path for b in preview] == [b.path for b in loaded]  # the same file given twice: dmesg.txt#2 too
    assert "dmesg.txt" in [b.path for b in preview] and "h1/dmesg.txt" in [b.path for b in preview]
    by_path = {b.path: b for b in preview}
    assert by_path["job.log"].stream == next(b for b in loaded if b.path == "job.log").stream
    assert by_path["job.log"].text and by_path["h2/dmesg.txt"].text is None


def test_no_preview_where_the_list_depends_on_what_the_files_hold(tmp_path: Path) -> None:
    """Archives (their members), captured sysfs trees (folded into one file) and symlinks are only known read."""
    from diagnose.bundle.loader import preview_inputs

    for name, make in [("archive", lambda d: (d / "logs.tar.gz").write_bytes(gzip.compress(b"x"))),
                       ("sysfs", lambda d: (d / "sys/class/infiniband/mlx5_0/ports/1/state").parent.mkdir(
                           parents=True) or (d / "sys/class/infiniband/mlx5_0/ports/1/state").write_text("4: ACTIVE")),
                       ("symlink", lambda d: (d / "link.txt").symlink_to(d / "a.txt"))]:
        d = tmp_path / name
        d.mkdir()
        (d / "a.txt").write_text("[    1.0] nothing\n")
        assert preview_inputs([d], SMALL) is not None
        make(d)
        assert preview_inputs([d], SMALL) is None, name
    assert preview_inputs([tmp_path / "missing"], SMALL) is None


def test_a_mapped_dump_parses_as_the_same_bytes_read(tmp_path: Path) -> None:
    """The parse child maps dumps instead of reading them: the bulk parser and its line-parser fallback (a capture
    with terminal escapes) give the same records from the map as from the bytes."""
    import mmap

    from diagnose.bundle.loader import StreamSource, read_whole
    from diagnose.parsers import perfquery

    sample = (Path(__file__).parent / "data/perfquery/var_two_snapshots_with_date.txt").read_bytes()
    for name, body in [("plain.txt", sample * 200), ("escapes.txt", b"\x1b[0m" + sample)]:
        path = tmp_path / name
        path.write_bytes(body)
        src = StreamSource(path, False, len(body))
        mapped = read_whole(src, LoadLimits(), mapped=True)
        assert isinstance(mapped, mmap.mmap) and mapped[:] == body
        got, want = perfquery.parse_bytes_bulk(mapped, name), perfquery.parse_bytes_bulk(body, name)
        assert not got.problems and len(got.records) == len(want.records) > 0
        for a, b in zip(got.records, want.records, strict=True):
            if isinstance(a, ColumnBatch):
                assert a.table == b.table and list(a.columns) == list(b.columns)
                assert all(list(a.columns[k]) == list(b.columns[k]) for k in a.columns)
                lines = [int(x) for x in a.columns["line"]]
                assert a.lines.texts(lines) == b.lines.texts(lines)  # read from the map, from the bytes
            else:
                assert a == b
        del got
        mapped.close()
    assert read_whole(StreamSource(tmp_path / "plain.txt", False, 10), LoadLimits(max_bulk_bytes=100),
                      mapped=True) is None  # grown past the limit since it was listed


def test_listing_a_folder_leaves_no_garbage_for_the_collector(tmp_path: Path) -> None:
    """The listing's objects are freed as soon as it returns (by reference counts): gather pauses the cyclic
    collector while it loads, so a cycle left here would hold them until the end of the run."""
    import gc

    from diagnose.bundle.loader import _walk

    for i in range(3):
        (tmp_path / f"h{i}").mkdir()
        (tmp_path / f"h{i}" / "ibstat.txt").write_text("x\n")
    gc.collect()
    assert [rel for rel, _, _ in _walk(tmp_path)] == ["h0/ibstat.txt", "h1/ibstat.txt", "h2/ibstat.txt"]
    assert gc.collect() == 0


@settings(max_examples=300, deadline=None)
@example(["\n", "a", "a", "a"], 2)  # the last line (no line end) is the longest
@example(["a", "a", "a", "\n", "a"], 2)  # the first
@example(["a", "\n", "a", "a", "a", "\n", "a"], 2)  # one between
@example(["é", "é", "\n"], 2)  # 4 bytes, 2 characters: not over
@example(["a", "\r", "a", "a", "\r\n"], 2)  # carriage returns end lines too
@example(["a", "a", "\x1b]", "\n", "\x07", "a", "a", "a"], 4)  # a title sequence over a line end joins two lines
@given(st.lists(st.sampled_from(["a", "é", "漢", "\r", "\r\n", "\n", "\x1b[31m", "\x1b]", "\x07", " "]),
                max_size=60),
       st.integers(min_value=1, max_value=12))
def test_decoding_clips_long_lines_exactly_as_measuring_every_line_would(pieces: list[str], limit: int) -> None:
    """The longest line is measured in bytes first (never shorter than in characters once decoded, line ends and
    escape codes normalised); the lines are split and measured only when that bound is over the limit. The result
    is what measuring every decoded line gives."""
    from diagnose.bundle.loader import ANSI_RE, _decode

    data = "".join(pieces).encode("utf-8")
    text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    text = ANSI_RE.sub("", text)
    lines = text.split("\n")
    expected = "\n".join(ln[:limit] for ln in lines)
    clipped = sum(len(ln) > limit for ln in lines)
    problems: list[str] = []
    assert _decode(data, LoadLimits(max_line_chars=limit), problems) == expected
    assert problems == ([f"{clipped} line(s) longer than {limit} characters were clipped"] if clipped else [])


def test_a_large_binary_file_is_read_whole_up_to_the_cap(tmp_path: Path) -> None:
    """A flight-recorder pickle past the streaming size is parsed from all of its bytes (its head alone is a
    truncated pickle); past the cap on files read whole it is reported, not cut."""
    import copy
    import pickle

    from diagnose.parsers.flight_recorder import FlightRecorderEntry

    sample = Path(__file__).resolve().parent / "data" / "pytorch_flight_recorder" / "var_nccl_trace_rank_0"
    dump = pickle.loads(sample.read_bytes())  # the project's own test sample: plain containers
    dump["entries"] = [{**e, "record_id": k} for k, e in enumerate(copy.deepcopy(dump["entries"] * 400))]
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(dump, protocol=4))
    size = (tmp_path / "nccl_trace_rank_0").stat().st_size
    ev = gather([tmp_path], limits=LoadLimits(stream_bytes=64 * 1024, head_bytes=16 * 1024))
    assert size > 64 * 1024
    assert len([r for r in ev.records if isinstance(r, FlightRecorderEntry)]) == len(dump["entries"])
    capped = gather([tmp_path], limits=LoadLimits(stream_bytes=64 * 1024, max_file_bytes=size - 1))
    assert capped.files[0].problem and "not read" in capped.files[0].problem


def test_a_large_log_is_sniffed_at_its_end_too(tmp_path: Path) -> None:
    """A job log past the streaming size whose nccl-tests table comes last (NCCL's INFO lines first) is claimed for
    nccl-tests too, as the same log read whole is: the sniffers see its end, not only its head."""
    table = (Path(__file__).resolve().parent / "data" / "nccl_tests" /
             "a3mega_ztan-NCCL-test-result_all_reduce_perf_2x8_H100.md").read_text()
    p = tmp_path / "job.log"
    with p.open("w") as fh:
        fh.write(INFO.format(i=1) * 8000)  # ~0.9 MB of NCCL INFO lines: streamed with SMALL
        fh.write(table)
    whole = gather([tmp_path], limits=LoadLimits())
    streamed = gather([tmp_path], limits=SMALL)
    assert streamed.files[0].format == whole.files[0].format
    assert "nccl_tests" in streamed.files[0].format
    assert [f.attrs for f in streamed.findings if f.kind == "busbw_measured"] == \
        [f.attrs for f in whole.findings if f.kind == "busbw_measured"] != []
