"""The reporter's own sentences in a bundle, and versions reported by several sources.

The texts are lines of the field corpus (verbatim pastes from public threads, fixtures/field/*/README.md cites each).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.pipeline import gather
from diagnose.symptoms import is_prose

FIELD = Path(__file__).resolve().parent.parent / "fixtures" / "field"


def _lines(case: str, name: str) -> list[str]:
    return (FIELD / case / name).read_text().splitlines()


def test_sentences_are_prose_and_tool_lines_are_not() -> None:
    report = _lines("286-pxb-pix-p2p-hang-vtd-bios", "report.txt")
    assert is_prose("all_reduce_perf works fine only with those linked through SYS. The rest will result in hanging.")
    assert is_prose("Setting NCCL_P2P_DISABLE=1 did workaround but got really low speed.")
    assert not is_prose("NCCL version 2.10.X")
    assert sum(map(is_prose, report)) == 2
    topo = _lines("286-pxb-pix-p2p-hang-vtd-bios", "nvidia-smi-topo.txt")
    assert not any(map(is_prose, topo))
    log = _lines("015-nccl-version-mismatch-one-node", "nccl-node4.log")
    assert not any(is_prose(ln) for ln in log if "NCCL INFO" in ln)
    gids = _lines("134-k8s-pod-roce-version-num-hang-pin-gid", "show_gids.out")
    assert not any(map(is_prose, gids))


@pytest.fixture(scope="module")
def p2p_case():  # type: ignore[no-untyped-def]
    return gather([FIELD / "286-pxb-pix-p2p-hang-vtd-bios"])


def test_a_file_of_prose_is_read_as_the_report(p2p_case) -> None:  # type: ignore[no-untyped-def]
    fmt = {Path(f.path).name: f.format for f in p2p_case.files}
    assert fmt["report.txt"] == "prose"
    kinds = {f.kind: f for f in p2p_case.findings}
    # "Setting NCCL_P2P_DISABLE=1 did workaround": the reporter's words, so P2P off is what avoids the failure
    over = kinds["nccl_transport_override"]
    assert over.attrs["effect"] == "p2p_off" and over.attrs["workaround"] is True
    assert over.evidence[0].file.endswith("report.txt") and over.evidence[0].line == 5


def test_without_a_symptom_the_reports_sentences_say_what_failed(p2p_case) -> None:  # type: ignore[no-untyped-def]
    assert [s.kind for s in p2p_case.symptoms] == ["collective_timeout"]
    assert p2p_case.symptoms[0].source.endswith("report.txt:3")


def test_versions_of_two_sources_differ_but_two_wheels_of_one_do_not(tmp_path: Path) -> None:
    case = FIELD / "015-nccl-version-mismatch-one-node"
    one = tmp_path / "one"
    one.mkdir()
    # one pip list holding nvidia-nccl-cu11 and nvidia-nccl-cu12: one environment, not two stacks
    (one / "pip.out").write_text((case / "pip-freeze-nccl-node1.out").read_text())
    assert "component_versions_differ" not in {f.kind for f in gather([one]).findings}
    both = tmp_path / "both"
    both.mkdir()
    for name in ("pip-freeze-nccl-node1.out", "pip-freeze-nccl-nodes2-4.out"):
        (both / name).write_text((case / name).read_text())
    differ = [f for f in gather([both]).findings if f.kind == "component_versions_differ"]
    assert len(differ) == 1
    assert differ[0].attrs["component"] == "nccl" and differ[0].attrs["sources"] == 2
    assert differ[0].attrs["loaded"] is False  # package lists, not what a process printed


def test_two_nodes_banners_are_loaded_versions() -> None:
    ev = gather([FIELD / "015-nccl-version-mismatch-one-node"])
    differ = [f for f in ev.findings if f.kind == "component_versions_differ"]
    assert differ and differ[0].attrs["loaded"] is True


def test_an_allocation_failure_at_init_makes_the_memlock_limit_a_suspect() -> None:
    ev = gather([], "OpenMPI over UCX/InfiniBand jobs fail during MPI_Init with memory allocation errors from UCX")
    assert "init_failure" in {s.kind for s in ev.symptoms}
    assert "context_alloc_failure" in {f.kind for f in ev.findings}
    assert "context_alloc_failure" not in {f.kind for f in gather([], "MPI_Init hangs on 4 nodes").findings}


@pytest.mark.parametrize(("text", "kinds"), [
    ("all_reduce is slow, links look clean, no link errors", ["collective_slow"]),
    ("training hangs; no Xid in dmesg", ["collective_timeout"]),
    ("it does not crash but hangs", ["collective_timeout"]),
    ("no hang, but busbw is 40 GB/s", ["collective_slow"]),
    ("never any symbol errors, yet the link flaps", ["link_errors"]),
    ("the job segfaults without a timeout", ["process_crash"]),
])
def test_a_denied_mention_is_no_symptom_and_a_clause_turn_ends_the_denial(text: str, kinds: list[str]) -> None:
    from diagnose.symptoms import classify

    assert classify(text) == kinds


def test_a_wrapped_markdown_paragraph_is_read_whole_at_its_first_line(tmp_path: Path) -> None:
    from diagnose.symptoms import prose_records

    text = (FIELD / "305-roce-pfc-settings-lost-traffic-on-prio0" / "report.txt").read_text()
    recs = prose_records(text, "report.txt")
    assert len(recs) == 1 and recs[0].line == 1
    assert "global-pause fabric" in recs[0].text and "rx_prio0_packets" in recs[0].text
    (tmp_path / "report.txt").write_text(text)
    kinds = {f.kind for f in gather([tmp_path], "4-node inference over RoCE freezes under load").findings}
    assert "context_global_pause" in kinds


@pytest.mark.parametrize(("case", "name"), [
    ("286-pxb-pix-p2p-hang-vtd-bios", "nvidia-smi-topo.txt"),
    ("015-nccl-version-mismatch-one-node", "nccl-node4.log"),
    ("134-k8s-pod-roce-version-num-hang-pin-gid", "show_gids.out"),
    ("004-mtu-mismatch-local-access-violation", "ibstat.out")])
def test_runs_of_tool_lines_are_no_paragraph(case: str, name: str) -> None:
    from diagnose.symptoms import prose_records

    text = (FIELD / case / name).read_text()
    lines = text.split("\n")
    # (a tool's line that reads as a sentence, a torchrun warning, stays a sentence of its own)
    assert all(r.text == lines[r.line - 1] for r in prose_records(text, name))


def test_a_long_sentence_without_function_words_is_still_prose_and_a_log_line_is_not() -> None:
    report = _lines("139-kernel-7-0-regression-reg-mr-enomem", "report.txt")
    assert is_prose(report[0])  # "On three GB10 systems connected directly over QSFP/RoCE, startup fails with kernel ..."
    assert not is_prose(_lines("139-kernel-7-0-regression-reg-mr-enomem", "nccl.log")[0])
    assert not is_prose("NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory on the device")


def test_a_failure_tied_to_a_kernel_release_weighs_the_rdma_stack_in_the_kernel() -> None:
    case = FIELD / "139-kernel-7-0-regression-reg-mr-enomem"
    kinds = {f.kind for f in gather([case], "NCCL startup fails with ibv_reg_mr Cannot allocate memory").findings}
    assert "context_kernel_tied" in kinds
    for said in ("after upgrading the kernel to 6.8 NCCL hangs", "NCCL fails on kernel 5.15"):
        assert "context_kernel_tied" in {f.kind for f in gather([], said).findings}
    for said in ("the job fails with kernel parameter iommu=pt set", "a kernel module failed to load"):
        assert "context_kernel_tied" not in {f.kind for f in gather([], said).findings}
