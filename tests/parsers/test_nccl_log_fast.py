"""The NCCL log parser's bulk path: row batches give the same frames as one record object per line would, whole or
in chunks, whatever the line prefix."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from diagnose.evidence.frames import build_frames
from diagnose.models.records import ColumnBatch, ParseResult
from diagnose.parsers import nccl_log

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLES = sorted((ROOT / "tests" / "data" / "nccl_log").glob("*.*")) + sorted(
    p for p in (ROOT / "fixtures").rglob("*") if p.is_file() and p.suffix in (".log", ".out", ".txt", ".md")
)

# Lines of every shape the parser takes apart: launcher prefixes and timestamps (the general regex), WARN lines,
# a long line (clipped text), Graph lines that do not match (no record) or choke the parser (a problem, no record),
# a pid beyond int64, lines that are not NCCL's or make no record.
ODD = (
    "[1,0]<stdout>:gpu-a01:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.5<0>\n"
    "0: gpu-a01:1234:1234 [0] NCCL INFO Using network Socket\n"
    "[default0]:gpu-a01:1234:1240 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n"
    "gpu-a02:99:99 [3] NCCL INFO Channel 01/0 : 1[3] -> 2[4] via P2P/CUMEM/read\n"
    "[2026-02-25 16:33:59] gpu-a02:99:107 [3] misc/socket.cc:578 NCCL WARN socketPollConnect: connect returned\n"
    "gpu-a02:99:99 [3] NCCL INFO Pattern 4, crossNic 0, nChannels 1.2.3, bw 4.0.0/4.0, type NVL/PIX\n"
    "gpu-a02:99:99 [3] NCCL INFO Pattern 4, crossNic 0, nChannels 16, bw 4.0.0/4.0, type NVL/PIX\n"
    "gpu-a02:99:99 [3] NCCL INFO NCCL_IB_HCA set to " + ",".join(f"mlx5_{i}" for i in range(60)) + "\n"
    "gpu-a02:99999999999999999999:99 [3] NCCL INFO Bootstrap : Using eth0:10.1.0.6<0>\n"
    "gpu-a02:99:99 [3] NCCL INFO comm 0x1 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0\n"
    "gpu-a02:99:99 [3] NCCL INFO comm 0x1 rank three\n"
    "gpu-a02:99:99 [3] NCCL INFO ncclCommInitRank comm 0x1 rank 3 nranks 16 cudaDev 3 busId 1b000 - Init START\n"
    "gpu-a02:99:99 [3] NCCL INFO cudaDriverVersion 12040\n"
    "some application output\n"
    "gpu-a02:99:99 [3] NCCL INFO transport/net.cc:1134 -> 6\n"
)


def _texts() -> list[tuple[str, str]]:
    out = [(p.name, p.read_text(encoding="utf-8", errors="replace")) for p in SAMPLES]
    return [(name, text) for name, text in out if "NCCL" in text] + [("odd", ODD), ("odd-crlf", ODD.replace("\n", "\r\n"))]


TEXTS = _texts()


def _assert_same(got: dict[str, pd.DataFrame], want: dict[str, pd.DataFrame]) -> None:
    assert sorted(got) == sorted(want)
    for name, df in want.items():
        pd.testing.assert_frame_equal(got[name], df, check_exact=True)
        for col in df.columns:
            if df[col].dtype == object:  # None stays None, tuples stay tuples
                assert [type(v) for v in got[name][col]] == [type(v) for v in df[col]], (name, col)


def _chunked(text: str, pieces: int) -> list[ParseResult]:
    """Parse ``text`` in ``pieces`` chunks on line boundaries, numbering lines as the pipeline does."""
    lines = text.split("\n")
    step = max(1, len(lines) // pieces)
    out = []
    for start in range(0, len(lines), step):
        res = nccl_log.parse("\n".join(lines[start:start + step]), "x")
        for r in res.records:
            object.__setattr__(r, "line", r.line + start)
            if isinstance(r, ColumnBatch):
                r.shift_lines(start)
        out.append(res)
    return out


@pytest.mark.parametrize(("name", "text"), TEXTS, ids=[n for n, _ in TEXTS])
def test_batches_make_the_frames_records_make(name: str, text: str) -> None:
    res = nccl_log.parse(text, "x")
    _assert_same(build_frames(res.records), build_frames(nccl_log.as_records(res)))


@pytest.mark.parametrize(("name", "text"), TEXTS, ids=[n for n, _ in TEXTS])
def test_chunks_make_the_frames_of_the_whole(name: str, text: str) -> None:
    whole = nccl_log.parse(text, "x")
    parts = _chunked(text, 3)
    _assert_same(build_frames([r for p in parts for r in p.records]), build_frames(whole.records))


def test_types_of_one_chunk_do_not_decide_the_column() -> None:
    # chunk 1: no timestamps, pids within int64; chunk 2: a timestamp and a pid beyond int64
    text = ODD.replace("[2026-02-25 16:33:59] ", "") + "[2026-02-25 16:34:00] " + ODD.splitlines()[8] + "\n" + ODD
    parts = _chunked(text, 2)
    got = build_frames([r for p in parts for r in p.records])
    _assert_same(got, build_frames([r for p in parts for r in nccl_log.as_records(p)]))
    assert got["NcclBootstrap"]["pid"].dtype == object and got["NcclWarn"]["timestamp"].dtype != object


def test_damaged_and_odd_lines() -> None:
    res = nccl_log.parse(ODD, "x")
    assert res.problems == ["line 7: unparseable NCCL INFO line (could not convert string to float: '4.0.0')"]
    recs = nccl_log.as_records(res)
    assert [r.line for r in recs] == sorted(r.line for r in recs)
    by_line = {r.line: r for r in recs}
    assert by_line[1].host == "gpu-a01" and isinstance(by_line[1], nccl_log.NcclNetInit)
    assert by_line[5].timestamp == "2026-02-25 16:33:59" and isinstance(by_line[5], nccl_log.NcclWarn)
    assert 6 not in by_line and 7 not in by_line and 11 not in by_line and 13 not in by_line and 14 not in by_line
    assert by_line[8].text.endswith("\u2026") and len(by_line[8].text) == 240
    assert by_line[9].pid == 99999999999999999999


@pytest.mark.parametrize(("name", "text"), TEXTS[:4], ids=[n for n, _ in TEXTS[:4]])
def test_a_launcher_prefix_changes_nothing_but_the_text(name: str, text: str) -> None:
    # launcher-prefixed lines take the general regex, plain ones the bulk path: the records must agree
    plain = nccl_log.as_records(nccl_log.parse(text, "x"))
    prefixed = nccl_log.as_records(nccl_log.parse("\n".join("0: " + ln for ln in text.split("\n")), "x"))
    assert [(type(r), r.line) for r in plain] == [(type(r), r.line) for r in prefixed]
    for a, b in zip(plain, prefixed, strict=True):
        fields = [f for f in a.__dataclass_fields__ if f != "text"]
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]


# Messages of the kinds parsed in bulk, in the shapes that take another route: leading and trailing blanks, an
# ``ncclCommInitRank`` line _INIT does not parse next to an Init line of another wording (both classified one by one,
# into the table the bulk lines fill), a host in another script (the general regex), a timestamp, an empty message
# followed by a line that starts like a message.
ROUTES = (
    "gpu-a02:99:99 [3] NCCL INFO \t Channel 02/0 : 3[3] -> 4[4] [receive] via NET/IB/1/GDRDMA  \n"
    "gpu-a02:99:99 [3] NCCL INFO ncclCommInitRank comm 0x1 rank 3 nranks 16 cudaDev 3 busId 1b000 - Init START\n"
    "gpu-a02:99:99 [3] NCCL INFO ncclCommInitRank comm 0x1 rank x\n"
    "gpu-a02:99:99 [3] NCCL INFO ncclCommInitRankConfig comm 0x1 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 1b000 "
    "commId 0x9 - Init COMPLETE\n"
    "gpu-a02:99:99 [3] NCCL INFO  comm 0x1 rank 3 nRanks 16 nNodes 2 localRanks 8 \n"
    "gpu-a02:99:99 [3] NCCL INFO Channel 03/0 : garbled\n"
    "gpü-a03:7:7 [1] NCCL INFO Channel 00/0 : 8[1] -> 9[2] via P2P/IPC\n"
    "[2026-02-25 16:34:01] gpu-a02:99:99 [3] NCCL INFO comm 0x1 rank 4 nRanks 16 nNodes 2 localRanks 8\n"
    "gpu-a02:99:99 [3] NCCL INFO \n"
    "Channel 04/0 : 3[3] -> 4[4] via P2P/IPC\n"
    "gpu-a02:99:99 [3] NCCL INFO Using network IB\n"
)


def test_messages_that_name_a_rank_whatever_their_route() -> None:
    res = nccl_log.parse(ROUTES, "x")
    assert res.problems == []
    recs = nccl_log.as_records(res)
    assert [(type(r).__name__, r.line) for r in recs] == [
        ("NcclChannel", 1), ("NcclInitRank", 2), ("NcclInitRank", 4), ("NcclCommInfo", 5), ("NcclChannel", 7),
        ("NcclCommInfo", 8), ("NcclUsingNetwork", 11),
    ]
    ch = recs[0]
    assert (ch.channel, ch.rank, ch.peer, ch.direction, ch.transport, ch.net, ch.net_dev, ch.gdr, ch.via) == (
        2, 3, 4, "receive", "NET", "IB", 1, True, "NET/IB/1/GDRDMA")
    assert (recs[1].phase, recs[1].comm_id, recs[2].phase, recs[2].comm_id) == ("START", None, "COMPLETE", "0x9")
    assert (recs[3].rank, recs[3].local_ranks, recs[3].timestamp, recs[5].rank, recs[5].timestamp) == (
        3, 8, None, 4, "2026-02-25 16:34:01")
    assert (recs[4].host, recs[4].pid, recs[4].dev, recs[4].transport) == ("gpü-a03", 7, 1, "P2P")
    # whole, in chunks of one line, and with every line through the general regex: the same rows
    frames = build_frames(res.records)
    _assert_same(build_frames([r for p in _chunked(ROUTES, 11) for r in p.records]), frames)
    prefixed = nccl_log.parse("".join("0: " + ln for ln in ROUTES.splitlines(keepends=True)), "x")
    got = build_frames(prefixed.records)
    assert sorted(got) == sorted(frames)
    for name, df in frames.items():
        pd.testing.assert_frame_equal(got[name].drop(columns="text"), df.drop(columns="text"), check_exact=True)
