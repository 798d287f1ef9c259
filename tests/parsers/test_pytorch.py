"""Tests for diagnose.parsers.pytorch (see tests/data/pytorch_log/README.md for the samples' sources)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import by_format, pytorch
from diagnose.parsers.pytorch import CudaError, DesyncReport, PgError, WatchdogTimeout

DATA = Path(__file__).resolve().parent.parent / "data"
OWN = DATA / "pytorch_log"
STAS00 = "stas00_ml-engineering_debug_pytorch_md_lines2976-3070_desync_and_flight_recorder.md"


def _parse(name: str, host: str | None = None):
    return pytorch.parse((OWN / name).read_text(), f"pytorch_log/{name}", host)


def _of(result, cls):
    return [r for r in result.records if isinstance(r, cls)]


def test_registered_and_mixable():
    assert by_format("pytorch_log") is pytorch
    assert pytorch.MIXABLE is True


def test_record_schemas():
    def names(cls):
        return [f.name for f in dataclasses.fields(cls)]

    base = ["source", "line", "text", "host"]
    assert names(WatchdogTimeout) == base + [
        "rank",
        "seq",
        "op_type",
        "numel_in",
        "numel_out",
        "timeout_ms",
        "ran_ms",
        "pg",
    ]
    assert names(DesyncReport) == base + ["rank", "lagging_ranks", "detail"]
    assert names(PgError) == base + ["rank", "kind", "message", "nccl_error", "last_error"]
    assert names(CudaError) == base + ["code", "message"]


# ---------------------------------------------------------------------------------------------------------------
# real sample


def test_stas00_watchdog_and_desync():
    res = _parse(STAS00, host="h1")
    assert res.problems == []
    [wd] = _of(res, WatchdogTimeout)
    assert (wd.rank, wd.seq, wd.op_type, wd.numel_in, wd.numel_out, wd.timeout_ms, wd.ran_ms, wd.pg) == (
        0,
        2,
        "ALLREDUCE",
        4,
        4,
        8000,
        8097,
        None,
    )
    assert wd.line == 24 and wd.host == "h1"
    [ds] = _of(res, DesyncReport)
    assert ds.rank == 0
    assert ds.lagging_ranks == (1,)
    assert ds.detail == "[1] finished collective #2, but didn't join collective #3 (count from 1)"
    assert ds.line == 26
    assert _of(res, PgError) == [] and _of(res, CudaError) == []


# ---------------------------------------------------------------------------------------------------------------
# variations


def test_glog_nccl_error_with_last_error_on_next_line():
    res = _parse("var_glog_nccl_error_last_error_next_line.log")
    assert res.problems == []
    errs = _of(res, PgError)
    assert [(e.line, e.rank, e.kind) for e in errs] == [
        (3, 5, "taking_down"),
        (4, 5, "watchdog_exception"),
        (15, 2, "nccl_error"),
        (19, 7, "nccl_error"),
    ]
    wd = errs[1]
    assert wd.nccl_error == "remote process exited or there was a network error"
    assert wd.last_error == (
        "NET/IB : Got completion from peer 10.10.3.17<45231> with error 12, opcode 0, len 0, vendor err 129 (Recv)"
    )
    assert wd.message.startswith(
        "[PG ID 0 PG GUID 0(default_pg) Rank 5] Process group watchdog thread terminated"
    )
    dist = errs[2]
    assert dist.message.startswith("torch.distributed.DistBackendError: NCCL error in: ")
    assert dist.nccl_error == "unhandled system error"
    assert dist.last_error == (
        "socketPollConnect: connect to 10.10.3.17<51423> returned Connection refused, exceeded error retry count "
        "after 35 attempts"
    )
    aborted = errs[3]
    assert aborted.nccl_error is None and "communicator was aborted" in aborted.message
    # the ncclXxxError:/Last error: continuation lines are folded into their error, not separate records
    assert len(res.records) == 4


def test_watchdog_pg_prefix_heartbeat_and_never_joined_desync():
    res = _parse("var_watchdog_pg_prefix_heartbeat_desync.log")
    assert res.problems == []
    wds = _of(res, WatchdogTimeout)
    got = [
        (w.line, w.rank, w.seq, w.op_type, w.numel_in, w.numel_out, w.timeout_ms, w.ran_ms, w.pg) for w in wds
    ]
    assert got == [
        (1, 1, 2231, "ALLREDUCE", 4194304, 4194304, 600000, 600048, "PG ID 0 PG GUID 0(default_pg)"),
        (3, 0, 1184, "_ALLGATHER_BASE", 26214, 209712, 600000, 600051, "PG ID 1 PG GUID 3(undefined)"),
        # only logged inside what(): kept once, with its own PG prefix
        (8, 5, 517, "_REDUCE_SCATTER_BASE", 8388608, 1048576, 600000, 600013, "PG 3"),
        # old releases print no Numel fields
        (11, 7, 40017, "ALLREDUCE", None, None, 1800000, 1800342, None),
    ]
    [ds] = _of(res, DesyncReport)
    assert (ds.rank, ds.lagging_ranks, ds.line) == (0, (3,), 5)
    assert "never joined any collectives" in ds.detail
    kinds = [(e.line, e.rank, e.kind) for e in _of(res, PgError)]
    assert kinds == [
        (6, 0, "watchdog_exception"),
        (8, 5, "watchdog_exception"),
        (9, 4, "heartbeat"),
        (10, 4, "heartbeat"),
    ]


def test_cuda_error_spellings():
    res = _parse("var_cuda_errors.log")
    assert res.problems == []
    got = [(c.line, c.code, c.message) for c in _of(res, CudaError)]
    assert got == [
        (4, 802, "system not yet initialized"),
        (6, 802, "system not yet initialized"),
        (7, 802, "cudaErrorSystemNotReady"),
        (8, 802, "system not yet initialized"),
        (9, 802, "system not yet initialized"),
        (10, 700, "an illegal memory access was encountered"),
        (11, 802, "system not yet initialized"),
        (12, 719, "unspecified launch failure"),
    ]


def test_nccl_spelled_cuda_failure():
    line = "node017:40112:40190 [0] init.cc:1912 NCCL WARN Cuda failure 'system not yet initialized'"
    [c] = _of(pytorch.parse(line, "x"), CudaError)
    assert (c.code, c.message) == (802, "system not yet initialized")


def test_single_line_nccl_error_with_inline_last_error():
    line = (
        "  what():  NCCL error: remote process exited or there was a network error, NCCL version 2.14.3 "
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely. "
        "Last error: NET/IB : Got completion from peer 10.1.2.3<40000> with error 12, opcode 0, len 0, vendor err 129"
    )
    [e] = _of(pytorch.parse(line, "x"), PgError)
    assert e.kind == "nccl_error"
    assert e.nccl_error == "remote process exited or there was a network error"
    assert e.last_error.startswith("NET/IB : Got completion from peer 10.1.2.3<40000> with error 12")


def test_standalone_nccl_code_line_and_dist_backend_error():
    text = (
        "[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving "
        "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset "
        "by peer\n"
        "ncclInternalError: Internal check failed.\n"
        "Last error:\n"
        "Net : Connection closed by remote peer node3<50260>\n"
    )
    res = pytorch.parse(text, "x")
    errs = _of(res, PgError)
    assert [(e.kind, e.rank) for e in errs] == [("dist_backend_error", 1), ("nccl_error", None)]
    assert errs[1].nccl_error == "internal error"
    assert errs[1].last_error == "Net : Connection closed by remote peer node3<50260>"


def test_truncated_watchdog_line_is_reported():
    text = (
        "[rank2]:[E1203 11:42:07.310294785 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=2231, OpType=ALLRED"
    )
    res = pytorch.parse(text, "x")
    [w] = _of(res, WatchdogTimeout)
    assert (w.rank, w.seq, w.ran_ms) == (2, 2231, None)
    assert res.problems


# ---------------------------------------------------------------------------------------------------------------
# sniff


@pytest.mark.parametrize(
    "path", sorted(p for p in OWN.iterdir() if p.name != "README.md"), ids=lambda p: p.name
)
def test_sniff_claims_own_samples(path: Path):
    assert pytorch.sniff(path.read_text()[:65536]) >= 65


def test_sniff_claims_error_mixed_in_other_output():
    head = "\n".join(f"step {i} loss 2.{i:03d}" for i in range(300))
    head += (
        "\n[rank3]:[E1203 11:42:07.310294785 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=9, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600011 milliseconds before timing out.\n"
    )
    assert pytorch.sniff(head) >= 40


def _other_files():
    for d in sorted(p for p in DATA.iterdir() if p.is_dir() and p.name != "pytorch_log"):
        for f in sorted(d.iterdir()):
            if f.is_file() and f.name != "README.md":
                yield f


@pytest.mark.parametrize("path", list(_other_files()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_rejects_other_formats(path: Path):
    assert pytorch.sniff(path.read_text(errors="replace")[:65536]) < 40


def test_sniff_nccl_only_cuda_failure_is_not_claimed():
    line = "node017:40112:40190 [0] init.cc:1912 NCCL WARN Cuda failure 'system not yet initialized'\n"
    assert pytorch.sniff(line) < 40


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str):
    res = pytorch.parse(text, "fuzz")
    assert res.format == "pytorch_log"
    score = pytorch.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "[rank3]:",
                "[E1203 11:42:07.3 ProcessGroupNCCL.cpp:616] ",
                "[Rank 1] ",
                "[PG ID 0 PG GUID 0(default_pg) Rank 2] ",
                "Watchdog caught collective operation timeout: ",
                "WorkNCCL(SeqNum=",
                "9" * 40,
                ", OpType=ALLREDUCE",
                ") ran for ",
                "NCCL error in: a.cpp:1, ",
                "unhandled system error",
                "\nncclSystemError: x",
                "\nLast error:\n",
                "what():  ",
                "Process group watchdog thread terminated with exception: ",
                "\t - [0] Timeout at collective: X, #3",
                "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
                "\t   - [1, 2] joined",
                "\t     [4] finished collective #3",
                "CUDA error: ",
                "cudaErrorUnknown",
                "\n",
                " ",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_never_raises_on_log_like_fragments(text: str):
    res = pytorch.parse(text, "fuzz")
    assert not any("stopped early" in p for p in res.problems)


def test_cuda_failure_inside_last_error_is_also_a_cuda_error():
    text = (
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:3763, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
        "[rank0]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank0]: Last error:\n"
        "[rank0]: Cuda failure 'system not yet initialized'\n"
    )
    res = pytorch.parse(text, "x")
    [err] = _of(res, PgError)
    assert (err.rank, err.nccl_error, err.last_error) == (
        0,
        "unhandled cuda error",
        "Cuda failure 'system not yet initialized'",
    )
    [cuda] = _of(res, CudaError)
    assert (cuda.line, cuda.code) == (4, 802)
