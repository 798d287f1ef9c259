"""NCCL RAS parser (ncclras text, JSON, monitor mode) against tests/data/nccl_ras (see its README)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import by_format, nccl_ras, registry
from diagnose.parsers._job import RasRank, RasSummary, norm_comm_hash

DATA = Path(__file__).resolve().parents[1] / "data"
OWN = DATA / "nccl_ras"


def _parse(name: str, problems: list[str] | None = None, text: str | None = None):
    res = nccl_ras.parse(text if text is not None else (OWN / name).read_text(encoding="utf-8"), f"nccl_ras/{name}")
    assert res.format == "nccl_ras"
    assert res.problems == (problems or [])
    ranks = [r for r in res.records if isinstance(r, RasRank)]
    summ = {r.key: r.value for r in res.records if isinstance(r, RasSummary)}
    return res, ranks, summ


def _r(r: RasRank) -> tuple:
    return (r.line, r.rank, r.comm, r.host, r.gpu, r.pid, r.status)


def test_registered_and_schema() -> None:
    assert by_format("nccl_ras") is nccl_ras
    assert nccl_ras.MIXABLE is True
    assert [f.name for f in dataclasses.fields(RasRank)] == [
        "source",
        "line",
        "text",
        "host",
        "rank",
        "comm",
        "gpu",
        "pid",
        "status",
        "collective_counts",
    ]
    assert [f.name for f in dataclasses.fields(RasSummary)][4:] == ["key", "value"]
    assert norm_comm_hash("cf264af53edbe986") == "0xcf264af53edbe986"
    assert norm_comm_hash("0x2fda2edc54faea7") == "0x02fda2edc54faea7"
    assert norm_comm_hash("not hex") is None


# ------------------------------------------------------------------------------------------------ text reports


def test_issue1911_full_report_allgather_mismatch() -> None:
    res, ranks, s = _parse("github_nccl_issue1911_ras_2.26.2_mismatch_allgather.txt")
    assert s["nccl_version"] == "2.26.2" and s["cuda_compiled_version"] == "12.6"
    assert (s["cuda_runtime_version"], s["cuda_driver_version"]) == ("12060", "12060")
    assert (s["nodes"], s["processes_per_node"], s["gpus_per_process"], s["processes"], s["gpus"]) == (
        "4",
        "8",
        "1",
        "32",
        "32",
    )
    assert s["collection_time_sec"] == "0.00"
    assert (s["group.0.comms"], s["group.0.ranks_per_comm"], s["group.0.status"], s["group.0.errors"]) == (
        "1",
        "32",
        "RUNNING",
        "MISMATCH",
    )
    assert s["warning.MISMATCH.0xfa93daea854b060b"] == (
        "Communicator ranks have different AllGather operation counts; "
        "30 ranks have launched up to operation 640; 2 ranks have launched up to operation 641"
    )
    assert [_r(r) for r in ranks] == [
        (28, 12, "0xfa93daea854b060b", "10.137.190.124", 4, 323032, "launched up to operation 641 (AllGather)"),
        (29, 13, "0xfa93daea854b060b", "10.137.190.124", 5, 323033, "launched up to operation 641 (AllGather)"),
    ]
    assert ranks[0].text == "  Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124"


def test_issue1762_inconsistent_layout_outlier_nocomm_and_cut_excerpt() -> None:
    res, ranks, s = _parse(
        "github_nccl_issue1762_ras_2.27.3_outlier_node_nocomm_excerpt.txt",
        problems=["truncated: report ends before the Warnings section"],
    )
    layouts = [(r.line, r.value) for r in res.records if isinstance(r, RasSummary) and r.key == "layout.nodes"]
    assert layouts == [
        (9, "1: processes_per_node=8, gpus_per_process=1"),
        (10, "1: processes_per_node=2, gpus_per_process=1"),
    ]
    assert (s["nodes"], s["processes"], s["gpus"]) == ("2", "10", "10")
    assert s["outlier_node"] == "10.4.109.13: 60004,60035"
    assert (s["group.2.status"], s["group.2.errors"], s["group.2.ranks_in_group"]) == (
        "NOCOMM",
        "INCOMPLETE,MISMATCH",
        "0",
    )
    assert s["error.INCOMPLETE"] == "Missing communicator data from 1 job process"
    assert s["error.INCOMPLETE.0x93d7000200000001"] == "Missing communicator data from 255 ranks"
    assert [_r(r) for r in ranks] == [
        (33, None, None, "10.4.109.13", 0, 60004, "missing"),
        (37, 1, "0xb3398875b8b2a063", "10.4.109.13", 0, 60004, "missing"),
    ]


# Real pastes that interleave the report with PyTorch lines (tests/data/nccl_ras/mixed, outside the per-folder
# cross-format checks on purpose): nccl_ras and the mixable pytorch_log parser both claim them.
MIXED = {
    "github_nccl_issue1730_ras_2.26.2_ok_then_pytorch_watchdog.txt": {"pytorch_log"},
    "github_nccl_issue1762_ras_2.27.3_with_pytorch_warning.txt": {"pytorch_log"},
}


def _claims(path: Path) -> set[str]:
    head = path.read_text()[:65536]
    return {
        m.FORMAT for m in registry() if not getattr(m, "BINARY", False) and m is not nccl_ras and m.sniff(head) >= 40
    }


def test_mixed_pastes() -> None:
    assert {p.name for p in (OWN / "mixed").iterdir()} == set(MIXED)
    for name, others in MIXED.items():
        path = OWN / "mixed" / name
        assert nccl_ras.sniff(path.read_text()) >= 85
        assert _claims(path) == others
    res, ranks, s = _parse("mixed/github_nccl_issue1730_ras_2.26.2_ok_then_pytorch_watchdog.txt")
    assert ranks == []
    assert (s["nodes"], s["processes"], s["collection_time_sec"], s["group.0.errors"]) == ("32", "256", "0.01", "OK")
    assert not any(k.startswith(("error.", "warning.")) for k in s)
    res, ranks, s = _parse(
        "mixed/github_nccl_issue1762_ras_2.27.3_with_pytorch_warning.txt",
        problems=["truncated: report ends before the Warnings section"],
    )
    assert [(r.line, r.pid, r.status) for r in ranks] == [(34, 60004, "missing"), (38, 60004, "missing")]
    assert s["nccl_version"] == "2.27.3"


def test_doc_status_mismatch_groups_assign_status_to_ranks() -> None:
    res, ranks, s = _parse("nccl_docs_ras_rst_lines128-146_finalize_init_status_mismatch.txt")
    assert [(r.rank, r.status) for r in ranks] == [
        (0, "status RUNNING"),
        (8, "status RUNNING"),
        (16, "status RUNNING"),
        (24, "status RUNNING"),
        (4, "status FINALIZE"),
        (20, "status FINALIZE"),
    ]
    assert {r.comm for r in ranks} == {"0x9e17999afaa87dbb"}
    assert (ranks[3].host, ranks[3].pid, ranks[3].gpu) == ("172.16.64.222", 2405067, 0)
    assert (s["group.0.status"], s["group.0.ranks_per_node"], s["group.2.status"]) == ("FINALIZE", "1-2", "INIT")
    assert s["warning.MISMATCH.0x9e17999afaa87dbb"].startswith("Communicator ranks have different status; 26 ranks")


def test_doc_incomplete_missing_rank_and_timeout() -> None:
    res, ranks, s = _parse("nccl_docs_ras_rst_lines162-184_incomplete_timeout.txt")
    assert [_r(r) for r in ranks] == [
        (13, None, None, "172.16.64.213", 5, 3487984, "missing"),
        (17, 21, "0xcf264af53edbe986", None, None, None, "missing"),  # "The missing rank: 21"
    ]
    assert s["collection_time_sec"] == "2.05"
    assert s["group.0.ranks_per_node"] == "7-8"
    assert s["warning.TIMEOUT"] == "Encountered 2 communication timeouts while gathering communicator data"


def test_doc_dead_process_excerpt() -> None:
    res, ranks, s = _parse(
        "nccl_docs_ras_rst_lines196-205_dead_process.txt",
        problems=["truncated: report ends before the Warnings section"],
    )
    assert [(r.line, r.rank, r.pid, r.host, r.gpu, r.status) for r in ranks] == [
        (6, None, 3487984, "172.16.64.213", 5, "dead"),
        (10, 21, None, None, None, "missing"),
    ]
    assert s["error.DEAD"] == "1 job process is considered dead (unreachable via the RAS network)"


def test_doc_collective_count_mismatch_without_op_type() -> None:
    res, ranks, s = _parse("nccl_docs_ras_rst_lines93-105_warnings_mismatch_op_counts.txt")
    assert [r.rank for r in ranks] == [0, 2, 3, 4, 5, 7]
    assert {r.status for r in ranks} == {"launched up to operation 6649"}
    assert {r.pid for r in ranks} == {483072, 483074, 483075, 483076, 483077, 483079}


def test_doc_small_blocks() -> None:
    _res, _ranks, s = _parse("nccl_docs_ras_rst_lines58-63_job_summary.txt")
    assert (s["nodes"], s["gpus"]) == ("4", "32")
    _res, _ranks, s = _parse(
        "nccl_docs_ras_rst_lines69-74_communicators_ok.txt",
        problems=["truncated: report ends before the Errors section"],
    )
    assert (s["group.0.comms"], s["group.0.ranks_in_group"], s["group.0.errors"]) == ("8", "32", "OK")
    _res, _ranks, s = _parse(
        "nccl_docs_ras_rst_lines83-85_communicators_mismatch_row.txt",
        problems=["truncated: report ends before the Errors section"],
    )
    assert s["group.0.errors"] == "MISMATCH"


def test_nccl_2_30_wider_columns_and_examples() -> None:
    _res, ranks, s = _parse("nccl_examples_08_ras_fault_detection_README_healthy_2.30.7.txt")
    assert (s["nccl_version"], s["nodes"], s["processes_per_node"], s["gpus"]) == ("2.30.7", "2", "4", "8")
    assert (s["collection_time_sec"], s["group.0.status"], s["group.0.errors"]) == ("0.002", "RUNNING", "OK")
    _res, ranks, s = _parse("nccl_examples_08_ras_fault_detection_README_exit_incomplete.txt")
    assert [_r(r) for r in ranks] == [
        (13, None, None, "node1", 3, 3748990, "missing"),
        (17, 7, "0x1bdb83b038775869", "node1", 3, 3748990, "missing"),
    ]
    _res, ranks, s = _parse("nccl_examples_08_ras_fault_detection_README_exit_dead.txt")
    assert s["communicators"] == "none collected"
    assert [(r.pid, r.status) for r in ranks] == [(3748990, "dead")]
    _res, ranks, s = _parse("nccl_examples_08_ras_fault_detection_README_sleep_straggler.txt")
    assert [_r(r) for r in ranks] == [
        (15, 7, "0x78db921d1c117b4a", "node1", 3, 1650386, "launched up to operation 60 (AllReduce)")
    ]


def test_monitor_text_event_and_banner() -> None:
    _res, ranks, _s = _parse("nccl_docs_ras_rst_lines317-317_monitor_peer_dead.txt")
    assert [_r(r) for r in ranks] == [(1, None, None, "172.16.64.245", 1, 1524345, "PEER_DEAD")]
    _res, ranks, s = _parse("nccl_docs_ras_rst_lines310-311_monitor_banner.txt")
    assert ranks == [] and s["monitor"].startswith("RAS Monitor Mode - watching for peer changes")


def test_error_entry_with_rank_errors_and_socket_address_event() -> None:
    # shapes of src/ras/client_support.cc (rasClientBreakDownErrors, rasClientsNotifyEvent); values ours
    text = (
        "Errors\n======\n\n"
        "#1-3 (00000000deadbeef) ERROR\n"
        "  Asynchronous errors on 2 ranks\n"
        "  2 ranks reported Remote process error\n"
        "  Rank 3 -- GPU 1 (NVML 5) managed by process 4242 on node 10.0.0.7\n"
        "  Rank 9 -- [process information not found]\n"
        "\nWarnings\n========\n\n"
        "[2026-01-02 03:04:05] PEER_UNRESPONSIVE: 10.0.0.8<28028> no keep-alive for 5s\n"
    )
    _res, ranks, s = _parse("inline", text=text)
    assert [_r(r) for r in ranks] == [
        (7, 3, "0x00000000deadbeef", "10.0.0.7", 1, 4242, "async error: Remote process error"),
        (8, 9, "0x00000000deadbeef", None, None, None, "async error: Remote process error"),
        (13, None, None, "10.0.0.8", None, None, "PEER_UNRESPONSIVE"),
    ]
    assert (
        s["error.ERROR.0x00000000deadbeef"] == "Asynchronous errors on 2 ranks; 2 ranks reported Remote process error"
    )


# ------------------------------------------------------------------------------------------------ JSON


def test_doc_json_status_2_29() -> None:
    _res, ranks, s = _parse("nccl_docs_ras_rst_lines223-278_json_status_2.29.1.json")
    assert (s["nccl_version"], s["timestamp"], s["communicators_count"], s["collection_time_sec"]) == (
        "2.29.1",
        "2025-12-19 13:06:53",
        "1",
        "0.000",
    )
    assert s["comm.0xae94423cfbb2ef4a.missing_ranks_count"] == "1"
    assert [_r(r) for r in ranks] == [
        (16, 0, "0xae94423cfbb2ef4a", "172.16.64.245", 0, 1524344, "running"),
        (39, 1, "0xae94423cfbb2ef4a", "172.16.64.245", 1, 1524345, "not responding"),
    ]
    assert ranks[0].collective_counts == (
        ("Broadcast", 0),
        ("Reduce", 0),
        ("AllGather", 0),
        ("ReduceScatter", 0),
        ("AllReduce", 0),
    )
    assert ranks[1].collective_counts == ()


def test_ray_a10g_capture_one_rank_behind() -> None:
    _res, ranks, s = _parse("ray_ncclras_a10g_mismatch_2.28.9.json")
    assert s["comm.0xf31e5874c3f25459.secondary_hash"] == "0xc4a40ef4528a7a56:0x2fda2edc54faea7"
    assert [(r.rank, r.host, r.pid, dict(r.collective_counts)["AllReduce"]) for r in ranks] == [
        (0, "10.0.69.85", 6299, 101),
        (1, "10.0.109.86", 6247, 100),
        (2, "10.0.120.166", 6283, 101),
        (3, "10.0.92.51", 6261, 101),
    ]
    assert {r.status for r in ranks} == {"running"} and [r.line for r in ranks] == [16, 37, 58, 79]


def test_nccl_2_28_9_missing_comma_is_repaired() -> None:
    _res, ranks, s = _parse("ray_test_nv_hang_detector_callback_DEAD_RANK_RAS_JSON_2.28.9_missing_comma.json")
    assert [_r(r) for r in ranks] == [
        (16, 0, "0xa1349768e9517ed7", "10.0.77.184", 0, 10018, "running"),
        (39, 1, "0xa1349768e9517ed7", "10.0.77.184", 1, 10017, "not responding"),
    ]


def test_monitor_json_event() -> None:
    _res, ranks, _s = _parse("nccl_docs_ras_rst_lines323-334_monitor_json_peer_dead.json")
    assert [_r(r) for r in ranks] == [(4, None, None, "172.16.64.245", 1, 1524345, "PEER_DEAD")]


def test_truncated_json_and_crlf_text() -> None:
    text = (OWN / "ray_ncclras_a10g_mismatch_2.28.9.json").read_text()
    cut = "\n".join(text.split("\n")[:50]) + '\n          "cuda_d'
    _res, ranks, s = _parse(
        "cut", problems=["truncated: JSON report starting at line 1 ends early (closed for parsing)"], text=cut
    )
    assert [r.rank for r in ranks] == [0, 1] and s["comm.0xf31e5874c3f25459.size"] == "4"
    crlf = (OWN / "github_nccl_issue1911_ras_2.26.2_mismatch_allgather.txt").read_text().replace("\n", "\r\n")
    _res, ranks, s = _parse("crlf", text=crlf)
    assert [r.rank for r in ranks] == [12, 13] and s["group.0.errors"] == "MISMATCH"
    assert all("\r" not in r.text for r in _res.records)


# ------------------------------------------------------------------------------------------------ sniffing


def _own_files() -> list[Path]:
    return sorted(p for p in OWN.iterdir() if p.is_file() and p.name != "README.md")


def _other_files() -> list[Path]:
    return sorted(
        f
        for d in DATA.iterdir()
        if d.is_dir() and d.name != "nccl_ras"
        for f in d.iterdir()
        if f.is_file() and f.name != "README.md"
    )


@pytest.mark.parametrize("path", _own_files(), ids=lambda p: p.name)
def test_sniff_claims_own_samples(path: Path) -> None:
    assert nccl_ras.sniff(path.read_text()[:65536]) >= 70


@pytest.mark.parametrize("path", _other_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_rejects_other_formats(path: Path) -> None:
    assert nccl_ras.sniff(path.read_text(errors="replace")[:65536]) < 40


@pytest.mark.parametrize("path", _own_files(), ids=lambda p: p.name)
def test_other_parsers_do_not_claim_ras_samples(path: Path) -> None:
    assert _claims(path) == set()


def test_nccl_log_ras_info_lines_are_not_a_report() -> None:
    line = "rtptest1621:405884:407462 [0] NCCL INFO RAS client listening socket at ::1<28028>\n"
    assert nccl_ras.sniff(line * 20) == 0


# ------------------------------------------------------------------------------------------------ robustness


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    res = nccl_ras.parse(text, "fuzz")
    assert res.format == "nccl_ras" and all(r.line >= 1 for r in res.records)
    score = nccl_ras.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "Job summary",
                "===========",
                "  Nodes  Processes         GPUs",
                "          per node  per process",
                "(total)   per node  per process    (total)  (total)",
                "      4          8            1         32       32",
                "Communicators... (0.00s)",
                "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
                "    0         1         4       7-8        32        32   RUNNING  INCOMPLETE",
                "Errors",
                "Warnings",
                "#0-0 (cf264af53edbe986) INCOMPLETE",
                "  Rank 21 -- GPU 5 managed by process 1 on node h",
                "  The missing ranks: 1,2",
                "  2 ranks reported Internal error",
                "INCOMPLETE",
                "{",
                "}",
                '  "communicators": [',
                '  "rank": 1,',
                '"nvml_dev": 1',
                "[2025-12-19 13:07:07] PEER_DEAD: Process 1 on node h managing GPU 1",
                "",
            ]
        ),
        max_size=40,
    )
)
def test_never_raises_on_shuffled_fragments(parts: list[str]) -> None:
    text = "\n".join(parts)
    res = nccl_ras.parse(text, "fuzz")
    assert all(isinstance(r, (RasRank, RasSummary)) for r in res.records)
    assert 0 <= nccl_ras.sniff(text) <= 100
