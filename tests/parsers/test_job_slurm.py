"""Slurm parser (scontrol show job/node, sacct, squeue) against the samples in tests/data/slurm (see its README)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import by_format, registry, slurm
from diagnose.parsers._job import JobInfo, NodeInfo

DATA = Path(__file__).resolve().parents[1] / "data"
OWN = DATA / "slurm"


def _read(name: str) -> str:
    return (OWN / name).read_text(encoding="utf-8")


def _jobs(name: str) -> list[JobInfo]:
    res = slurm.parse(_read(name), f"slurm/{name}", host="login01")
    assert res.format == "slurm"
    assert res.problems == []
    return [r for r in res.records if isinstance(r, JobInfo)]


def _nodes(name: str) -> list[NodeInfo]:
    res = slurm.parse(_read(name), f"slurm/{name}")
    assert res.problems == []
    return [r for r in res.records if isinstance(r, NodeInfo)]


def test_registered_and_schema() -> None:
    assert by_format("slurm") is slurm
    assert not getattr(slurm, "MIXABLE", False)
    assert [f.name for f in dataclasses.fields(JobInfo)] == [
        "source",
        "line",
        "text",
        "host",
        "job_id",
        "name",
        "state",
        "exit_code",
        "reason",
        "nodes",
        "num_nodes",
        "num_tasks",
        "batch_host",
        "start_time",
        "end_time",
    ]
    assert [f.name for f in dataclasses.fields(NodeInfo)][4:] == ["node", "state", "reason", "gres"]
    for cls in (JobInfo, NodeInfo):
        assert cls.__dataclass_params__.frozen and hasattr(cls, "__slots__")  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------------ scontrol job


def test_galaxy_2016_single_node_job() -> None:
    (job,) = _jobs("galaxy_training_scontrol_show_job.txt")
    assert job == JobInfo(
        source="slurm/galaxy_training_scontrol_show_job.txt",
        line=2,
        text="JobId=7 JobName=g2_upload1_anonymous_10_0_2_2",
        host="login01",
        job_id="7",
        name="g2_upload1_anonymous_10_0_2_2",
        state="COMPLETED",
        exit_code="0:0",
        reason=None,  # Reason=None
        nodes=("localhost",),
        num_nodes=1,
        num_tasks=None,  # no NumTasks key in this version
        batch_host="localhost",
        start_time="2016-11-05T14:07:24",
        end_time="2016-11-05T14:07:30",
    )


def test_irush_detail_blocks_multi_node_array_pending() -> None:
    jobs = _jobs("irush-cs_slurm-scripts_get_jobs.t_lines9-277_scontrol_show_job_d.txt")
    assert [j.job_id for j in jobs] == [
        "1",
        "2398617",
        "153291",
        "134238037",
        "2423559",
        "20547",
        "1306093",
        "25686416",
        "25687666",
    ]
    first = jobs[0]
    assert (first.line, first.nodes, first.num_nodes, first.num_tasks, first.batch_host) == (
        1,
        ("node-63", "node-64", "node-65"),
        3,
        8,
        "node-63",
    )
    # the -d detail lines ("Nodes=node-63 CPU_IDs=22-23 ...") do not replace the job's node list
    assert first.state == "RUNNING" and first.exit_code == "0:0"
    array = jobs[1]
    assert (array.line, array.name, array.state, array.nodes) == (33, "parallel.sh", "COMPLETED", ("node-44",))
    pending = jobs[3]
    assert (pending.state, pending.reason, pending.nodes, pending.start_time, pending.end_time) == (
        "PENDING",
        "AssocGrpCpuLimit",
        (),  # NodeList=(null)
        None,  # StartTime=Unknown
        None,
    )
    sched = jobs[5]  # NodeList=(null) SchedNodeList=doppelganger,dune3, NumNodes=2-2
    assert (sched.state, sched.reason, sched.nodes, sched.num_nodes, sched.num_tasks) == (
        "PENDING",
        "PartitionConfig",
        (),
        2,
        2,
    )
    assert jobs[6].num_tasks == 64 and jobs[6].nodes == ("node-12",)
    assert (jobs[8].line, jobs[8].start_time, jobs[8].batch_host) == (241, "2025-03-19T16:31:01", "node-001")


def test_oldest_layout_and_prompts_in_slurm_quickstart() -> None:
    res = slurm.parse(_read("slurm_quickstart_shtml_lines148-227_sinfo_squeue_scontrol.txt"), "q")
    assert res.problems == []
    jobs = [r for r in res.records if isinstance(r, JobInfo)]
    nodes = [r for r in res.records if isinstance(r, NodeInfo)]
    # squeue table: ST codes expanded, NODELIST(REASON) split into nodes or reason
    assert [(j.line, j.job_id, j.name, j.state, j.nodes, j.reason, j.num_nodes) for j in jobs[:3]] == [
        (30, "65646", "chem", "RUNNING", ("adev7", "adev8"), None, 2),
        (31, "65647", "bio", "RUNNING", ("adev14",), None, 1),
        (32, "65648", "math", "PENDING", (), "Resources", 6),
    ]
    # partition blocks are skipped; the node block is the old "State=DOWN* CPUs=8" layout
    assert [(n.line, n.node, n.state, n.reason, n.gres) for n in nodes] == [
        (57, "adev1", "DOWN*", "Not responding [slurm@06/02-14:01:24]", None)
    ]
    old = jobs[3]  # "JobId=65672 UserId=..." then "   Name=math"
    assert (old.line, old.job_id, old.name, old.state, old.nodes, old.start_time) == (
        64,
        "65672",
        "math",
        "PENDING",
        (),
        "06/02-15:27:11",
    )
    assert len(jobs) == 4  # the stray squeue row pasted after the node block is not a job of any table


def test_scontrol_man_page_interactive_prompts() -> None:
    res = slurm.parse(_read("slurm_scontrol_1_lines3302-3338_examples.txt"), "man")
    assert res.problems == []
    (job,) = res.records  # "scontrol: update JobId=71701 ..." is a command, not a job block
    assert isinstance(job, JobInfo)
    assert (job.line, job.job_id, job.name, job.nodes, job.exit_code) == (
        18,
        "71701",
        "hostname",
        ("snowflake0",),
        "0:0",
    )


def test_scontrol_oneliner() -> None:
    (job,) = _jobs("fasrc_slyme_scontrol_oneliner_parallel_RUNNING.out")
    assert (job.job_id, job.name, job.state, job.nodes, job.batch_host, job.num_nodes, job.end_time) == (
        "77454",
        "cpu_user_parallel",
        "RUNNING",
        ("hero4515", "hero4516"),
        "hero4515",
        2,
        "2014-06-26T11:56:28",
    )


def test_constructed_node_fail_job_modern_keys() -> None:
    (job,) = _jobs("var_scontrol_job_node_fail_gpu_24x.txt")
    assert (job.state, job.reason, job.nodes, job.num_nodes, job.num_tasks, job.batch_host) == (
        "NODE_FAIL",
        "NodeDown",
        ("gpu-a001", "gpu-a002", "gpu-a003", "gpu-a004"),
        4,
        32,
        "gpu-a001",
    )


def test_truncated_job_block() -> None:
    res = slurm.parse(_read("var_truncated_galaxy_job_block.txt"), "t")
    (job,) = res.records
    assert isinstance(job, JobInfo) and job.state == "COMPLETED" and job.nodes == ()
    assert res.problems == ["truncated: job 7 block at line 2 ends early"]


# ------------------------------------------------------------------------------------------------ scontrol node


def test_irush_nodes_gpu_gres_and_drain_reason() -> None:
    nodes = _nodes("irush-cs_slurm-scripts_get_nodes.t_lines9-90_scontrol_show_node.txt")
    assert [(n.line, n.node, n.state, n.reason, n.gres) for n in nodes] == [
        (1, "cortex-01", "ALLOCATED", None, "gpu:m60:8"),
        (22, "dumfries-002", "ALLOCATED", None, "gpu:rtx2080:4"),
        (43, "oxygen-04", "IDLE+DRAIN", "memory issues? [root@2019-01-29T10:42:12]", None),
        (64, "cricket", "IDLE", None, "gpu:quadro:1(S:0),vmem:2G"),
    ]


def test_slurm_24_node_reason_after_blank_line() -> None:
    (node,) = _nodes("github_awsome-distributed-ai_issue195_scontrol_show_node_24.05_idle_drain_gres.txt")
    assert (node.node, node.state, node.gres) == ("yigou-dev-102-68", "IDLE+DRAIN", "gpu:nvidia-rtx-3090:1")
    assert node.reason == "gres/gpu count reported lower than configured (0 < 1) [slurm@2024-12-19T11:03:34]"


# ------------------------------------------------------------------------------------------------ sacct / squeue


def test_sacct_parsable2_hetjob_steps() -> None:
    jobs = _jobs("torchx_slurm_scheduler_test_lines350-357_sacct_parsable2_hetjob.txt")
    assert [(j.line, j.job_id, j.name, j.state, j.exit_code) for j in jobs] == [
        (2, "1853+0", "echo-0", "COMPLETED", "0:0"),
        (3, "1853+0.batch", "batch", "COMPLETED", "0:0"),
        (4, "1853+0.0", "echo", "COMPLETED", "0:0"),
        (5, "1853+1", "echo-1", "COMPLETED", "0:0"),
        (6, "1853+1.0", "echo", "COMPLETED", "0:0"),
        (7, "1853+2", "echo-2", "COMPLETED", "0:0"),
        (8, "1853+2.0", "echo", "COMPLETED", "0:0"),
    ]


def test_sacct_failed_and_cancelled_by() -> None:
    failed = _jobs("torchx_slurm_scheduler_test_lines394-397_sacct_parsable2_failed.txt")
    assert [(j.job_id, j.state, j.exit_code) for j in failed] == [
        ("1902", "FAILED", "2:0"),
        ("1902.batch", "FAILED", "2:0"),
        ("1902.0", "FAILED", "2:0"),
    ]
    cancelled = _jobs("torchx_slurm_scheduler_test_lines1083-1086_sacct_parsable2_cancelled_by.txt")
    assert [(j.job_id, j.name, j.state, j.exit_code) for j in cancelled] == [
        ("89", "mesh0-0", "CANCELLED by 2166", "0:0"),
        ("89.batch", "batch", "CANCELLED", "0:15"),
        ("89.0", "process_allocator", "CANCELLED", "0:15"),
    ]


def test_sacct_headerless_parsable2_by_shape() -> None:
    jobs = _jobs("fasrc_slyme_sacct_noheader_parsable2_parallel_COMPLETED.out")
    assert [(j.job_id, j.state, j.nodes, j.start_time, j.end_time) for j in jobs] == [
        ("77454", "COMPLETED", ("hero4515", "hero4516"), "2014-06-26T11:51:28", "2014-06-26T11:52:31"),
        ("77454.batch", "COMPLETED", ("hero4515",), "2014-06-26T11:51:28", "2014-06-26T11:52:31"),
        ("77454.0", "COMPLETED", ("hero4516",), "2014-06-26T11:51:30", "2014-06-26T11:52:31"),
    ]


def test_sacct_headerless_columns_from_format_option() -> None:
    cmd = (
        "$ sacct --noheader --parsable2 --format User,JobID,JobName,State,Partition,NCPUS,NNodes,CPUTime,"
        "TotalCPU,UserCPU,SystemCPU,ReqMem,MaxRSS,Submit,Start,End,NodeList\n"
    )
    res = slurm.parse(cmd + _read("fasrc_slyme_sacct_noheader_parsable2_parallel_COMPLETED.out"), "s")
    jobs = [r for r in res.records if isinstance(r, JobInfo)]
    assert [(j.line, j.job_id, j.name, j.num_nodes, j.nodes) for j in jobs] == [
        (2, "77454", "cpu_user_parallel", 2, ("hero4515", "hero4516")),
        (3, "77454.batch", "batch", 1, ("hero4515",)),
        (4, "77454.0", "orted", 1, ("hero4516",)),
    ]


def test_sacct_default_fixed_width_with_empty_cell() -> None:
    jobs = _jobs("slurm_sacct_1_lines1656-1662_default_fixed_width.txt")
    assert [(j.line, j.job_id, j.name, j.state, j.exit_code) for j in jobs] == [
        (4, "2", "script01", "RUNNING", "0"),
        (5, "3", "script02", "RUNNING", "0"),
        (6, "4", "endscript", "RUNNING", "0"),
        (7, "4.0", None, "COMPLETED", "0"),  # empty Jobname cell: "srun" stays in Partition
    ]


def test_sacct_parsable_with_nodelist_and_trailing_pipe() -> None:
    jobs = _jobs("var_sacct_parsable_nodelist_node_fail.txt")
    assert [(j.job_id, j.state, j.exit_code, j.num_nodes, j.num_tasks, len(j.nodes)) for j in jobs] == [
        ("48213", "NODE_FAIL", "0:0", 4, None, 4),
        ("48213.batch", "CANCELLED", "0:15", 1, 1, 1),
        ("48213.extern", "COMPLETED", "0:0", 4, 4, 4),
        ("48213.0", "CANCELLED", "0:9", 4, 32, 4),
    ]


def test_crlf_ansi_prompt_oneliner_and_squeue() -> None:
    jobs = _jobs("var_crlf_ansi_prompt_oneliner_and_squeue.txt")
    assert [(j.line, j.job_id, j.state, j.nodes, j.reason) for j in jobs] == [
        (2, "77454", "RUNNING", ("hero4515", "hero4516"), None),
        (5, "48213", "NODE_FAIL", ("gpu-a001", "gpu-a002", "gpu-a003", "gpu-a004"), None),
        (6, "48214", "COMPLETING", ("gpu-b07", "gpu-b09"), None),
        (7, "48215", "PENDING", (), "ReqNodeNotAvail, UnavailableNodes:gpu-a003"),
    ]
    assert all(not j.text.endswith("\r") for j in jobs)


def test_bad_node_list_is_a_problem_not_a_crash() -> None:
    res = slurm.parse("JobId=5 JobName=x\n   JobState=RUNNING Reason=None\n   NodeList=gpu[9-3]\n", "s")
    (job,) = res.records
    assert isinstance(job, JobInfo) and job.nodes == () and job.state == "RUNNING"
    assert len(res.problems) == 1 and "gpu[9-3]" in res.problems[0]


# ------------------------------------------------------------------------------------------------ sniffing


def _own_files() -> list[Path]:
    return sorted(p for p in OWN.iterdir() if p.is_file() and p.name != "README.md")


def _other_files() -> list[Path]:
    return sorted(
        f
        for d in DATA.iterdir()
        if d.is_dir() and d.name != "slurm"
        for f in d.iterdir()
        if f.is_file() and f.name != "README.md"
    )


@pytest.mark.parametrize("path", _own_files(), ids=lambda p: p.name)
def test_sniff_claims_own_samples(path: Path) -> None:
    head = path.read_text().replace("\r\n", "\n")[:65536]
    assert slurm.sniff(head) >= 45


@pytest.mark.parametrize("path", _other_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_rejects_other_formats(path: Path) -> None:
    assert slurm.sniff(path.read_text(errors="replace")[:65536]) < 40


@pytest.mark.parametrize("path", _own_files(), ids=lambda p: p.name)
def test_other_parsers_do_not_claim_slurm_samples(path: Path) -> None:
    head = path.read_text().replace("\r\n", "\n")[:65536]
    for mod in registry():
        if getattr(mod, "BINARY", False) or mod is slurm:
            continue
        assert mod.sniff(head) < 40, mod.FORMAT


# ------------------------------------------------------------------------------------------------ robustness


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    res = slurm.parse(text, "fuzz")
    assert res.format == "slurm" and all(r.line >= 1 for r in res.records)
    score = slurm.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "JobId=12 JobName=x",
                "   JobState=NODE_FAIL Reason=NodeDown",
                "   NodeList=gpu[001-00",
                "   NodeList=gpu[001-004]",
                "NodeName=n1 State=DOWN+DRAIN",
                "   Reason=Not responding [slurm@2024]",
                "JobID|JobName|State|ExitCode|NodeList",
                "1|a|FAILED|1:0|n[1-2]",
                "1.batch||CANCELLED",
                "JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)",
                "  42 p n u PD 0:00 2 (Resources)",
                "---------- ----------",
                "$ scontrol show job",
                "",
                "   ",
                "|||",
                "\r",
            ]
        ),
        max_size=30,
    )
)
def test_never_raises_on_shuffled_fragments(parts: list[str]) -> None:
    text = "\n".join(parts)
    res = slurm.parse(text, "fuzz")
    assert all(isinstance(r, (JobInfo, NodeInfo)) for r in res.records)
    assert 0 <= slurm.sniff(text) <= 100
