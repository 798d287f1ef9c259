"""Launch parser (mpirun/srun/torchrun lines, #SBATCH directives, hostfiles) against tests/data/launch (see README)
and against the launch lines that real samples of other folders contain."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import by_format, launch, registry
from diagnose.parsers._job import LaunchSpec

DATA = Path(__file__).resolve().parents[1] / "data"
OWN = DATA / "launch"

Row = tuple[int, str, tuple[str, ...], int | None, int | None, int | None, str | None]


def _rows(path: Path, problems: list[str] | None = None) -> list[Row]:
    res = launch.parse(path.read_text(encoding="utf-8"), str(path.relative_to(DATA)))
    assert res.format == "launch"
    assert res.problems == (problems or [])
    assert all(isinstance(r, LaunchSpec) for r in res.records)
    return [
        (r.line, r.launcher, r.hosts, r.slots_per_host, r.nprocs, r.nnodes, r.rdzv_endpoint)
        for r in res.records
        if isinstance(r, LaunchSpec)
    ]


def own(name: str) -> Path:
    return OWN / name


def test_registered_mixable_and_schema() -> None:
    assert by_format("launch") is launch
    assert launch.MIXABLE is True
    assert [f.name for f in dataclasses.fields(LaunchSpec)][4:] == [
        "launcher",
        "hosts",
        "slots_per_host",
        "nprocs",
        "nnodes",
        "rdzv_endpoint",
    ]
    assert LaunchSpec.__dataclass_params__.frozen and hasattr(LaunchSpec, "__slots__")  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------------ mpirun


def test_mpirun_np_N_derives_node_count() -> None:
    assert _rows(own("nvidia_nccl-tests_README_lines41-47_mpirun_np_N.md")) == [(6, "mpirun", (), 8, 64, 8, None)]


def test_ompi_host_option_forms_and_mpmd() -> None:
    assert _rows(own("ompi_docs_scheduling_rst_host_option.txt")) == [
        (1, "mpirun", ("a", "b", "c"), None, 3, 3, None),
        (2, "mpirun", ("a", "b", "c"), None, None, 3, None),  # a has no :N, so no total is claimed
        (3, "mpirun", ("a", "b"), None, 2, 2, None),  # MPMD: -n 1 ... : -n 1 ...
    ]


def test_mpirun_host_variables_and_nested_torchrun() -> None:
    # mpirun -H $1,$2 -np 2 -npernode 1 ... bash -c "... && torchrun --nproc_per_node 8 --nnodes=2 ...=$FIRST_HOST ..."
    assert _rows(own("stas00_ml-engineering_stabs_incoming_md_lines22-36_mpirun_H_torchrun.sh")) == [
        (1, "mpirun", (), 1, 2, 2, None),
        (1, "torchrun", (), 8, 16, 2, "$FIRST_HOST"),
    ]


def test_prompt_crlf_ansi_line() -> None:
    res = launch.parse(own("var_prompt_crlf_ansi_mpirun.log").read_text(), "s")
    (spec,) = res.records
    assert isinstance(spec, LaunchSpec)
    assert (spec.launcher, spec.hosts, spec.slots_per_host, spec.nprocs, spec.nnodes, spec.host) == (
        "mpirun",
        ("gpu-a01", "gpu-a02"),
        8,
        16,
        2,
        "login01",
    )
    assert spec.text.startswith("[alice@login01 ~]$ mpirun") and "\r" not in spec.text


def test_truncated_continuation() -> None:
    assert _rows(
        own("var_truncated_continuation.txt"), problems=["truncated: launch line 1 ends with a line continuation"]
    ) == [(1, "mpirun", ("spt01", "spt02", "pt01", "pt02"), 8, 32, 4, None)]


# ------------------------------------------------------------------------------------------------ slurm


def test_slurm_quickstart_prompts_short_options_and_hostlist() -> None:
    res = launch.parse(own("slurm_quickstart_shtml_lines243-300_srun_sbatch.txt").read_text(), "q")
    assert res.problems == []
    got = [(r.line, r.launcher, r.hosts, r.nprocs, r.nnodes, r.host) for r in res.records if isinstance(r, LaunchSpec)]
    assert got == [
        (2, "srun", (), None, 3, "adev0"),  # adev0: srun -N3 -l /bin/hostname
        (13, "srun", (), 4, None, "adev0"),  # adev0: srun -n4 -l /bin/hostname
        (43, "srun", (), None, None, None),  # the script shown by `cat my.script`
        (44, "srun", (), None, None, None),
        (46, "sbatch", ("adev9", "adev10"), 4, 2, "adev0"),  # sbatch -n4 -w "adev[9-10]" ...
    ]  # "#SBATCH --time=1" gives no shape, "0: adev3" output lines are no hostfile


def test_sbatch_directives_srun_nodelist_and_torchrun_in_srun() -> None:
    assert _rows(own("var_srun_nodelist_sbatch_directives.sh")) == [
        (2, "sbatch", (), 8, 32, 4, None),
        (7, "srun", ("gpu-a001", "gpu-a002", "gpu-a003", "gpu-a004"), 8, 32, 4, None),  # its "-n 50" is the program's
        (8, "srun", (), 1, 4, 4, None),
        (8, "torchrun", (), 8, 32, 4, "gpu-a001:29500"),
    ]


def test_env_only_sbatch_script_is_not_a_launch() -> None:
    script = (
        "#!/bin/bash\n#SBATCH --job-name=env-setup\n#SBATCH --time=00:10:00\n\n"
        "export NCCL_DEBUG=INFO\nexport NCCL_IB_HCA=mlx5_0,mlx5_3\nexport NCCL_SOCKET_IFNAME=bond0\n"
    )
    assert launch.sniff(script) < 40
    assert launch.parse(script, "s").records == []  # an sbatch script that only exports variables is env's


# ------------------------------------------------------------------------------------------------ torchrun


def test_stas00_torchrun_launcher_script_variables() -> None:
    # GPUS_PER_NODE=8 resolves; NNODES=$SLURM_NNODES does not; MASTER_ADDR=$(scontrol ...) stays a variable
    assert _rows(own("stas00_ml-engineering_torchrun-launcher.slurm")) == [
        (6, "sbatch", (), 1, 2, 2, None),
        (42, "torchrun", (), 8, None, None, "$MASTER_ADDR:6000"),  # LAUNCHER="python -u -m torch.distributed.run ..."
        (84, "srun", (), None, None, None, None),  # srun $SRUN_ARGS bash -c "$CMD" (not counted twice)
    ]


def test_pyxis_sbatch_srun_python_m_torch_distributed_run() -> None:
    assert _rows(own("stas00_ml-engineering_all_reduce_bench_pyxis.sbatch")) == [
        (2, "sbatch", (), 1, 2, 2, None),
        (14, "srun", (), None, None, None, None),
        (14, "torchrun", (), 8, None, None, "${MASTER_ADDR}:6000"),
    ]


def test_salloc_and_one_line_srun_torch_distributed_run() -> None:
    assert _rows(own("stas00_ml-engineering_network_benchmarks_README_lines160-165_srun_torch_distributed_run.md")) == [
        (3, "sbatch", (), 1, 4, 4, None),  # salloc --nodes=4 --ntasks-per-node=1 ...
        (4, "srun", (), 1, 4, 4, None),
        (4, "torchrun", (), 8, 32, 4, "$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1):6000"),
    ]


# ------------------------------------------------------------------------------------------------ hostfiles


def test_ompi_hostfile_after_cat_and_mpirun() -> None:
    assert _rows(own("ompi_docs_scheduling_rst_by_slot_hostfile_transcript.txt")) == [
        (2, "hostfile", ("node0", "node1"), 2, 4, 2, None),
        (4, "mpirun", (), None, 8, None, None),
    ]


def test_ompi_commented_hostfile_whole_file() -> None:
    assert _rows(own("ompi_docs_scheduling_rst_example_hostfile.txt")) == [
        (5, "hostfile", ("foo.example.com", "bar.example.com"), None, None, 2, None)
    ]


def test_mpich_hostfile_with_counts_and_comments() -> None:
    assert _rows(own("mpich_hydra_doc_hosts_file_with_comments.txt")) == [
        (3, "hostfile", ("donner", "foo", "shakey"), None, 7, 3, None)
    ]


def test_gpu_hostfile_and_bare_hostfile() -> None:
    assert _rows(own("var_hostfile_gpu_slots.txt")) == [
        (1, "hostfile", ("gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04"), 8, 32, 4, None)
    ]
    bare = own("var_bare_hostfile.txt")
    assert 0 < launch.sniff(bare.read_text()) < 40  # only the file name could make it a hostfile
    assert _rows(bare) == [(1, "hostfile", ("gpu-a01", "gpu-a02", "gpu-a03"), None, None, 3, None)]


# ------------------------------------------------------------------------------------------------ other folders

# Real samples of other formats that contain real launch lines: launch must claim them (it is mixable) and read them.
IN_OTHER_FOLDERS: dict[str, list[Row]] = {
    "env/coreweave_nccl-test-distributed-h100-64.slurm": [
        (3, "sbatch", (), 8, 64, 8, None),
        (38, "srun", (), None, None, None, None),
    ],
    "env/coreweave_nccl-test-distributed-gb300-roce-nvl72-enroot.slurm": [
        (3, "sbatch", (), 4, 64, 16, None),
        (96, "srun", (), None, None, None, None),
    ],
    "env/coreweave_nccl-test-distributed-h100-64-mpijob.yaml": [(27, "mpirun", (), None, 64, None, None)],
    "env/var_launch_line.txt": [(1, "torchrun", (), 8, 16, 2, "10.0.17.5:29500")],
    "env/var_sbatch_exports_mpirun_x.sbatch": [
        (2, "sbatch", (), 8, 16, 2, None),
        (19, "mpirun", (), 8, 16, 2, None),  # --map-by ppr:8:node
        (27, "srun", (), None, None, None, None),
    ],
    "nccl_tests/var_interleaved_nccl_info_all_gather.log": [(1, "mpirun", (), 8, 16, 2, None)],
    "nccl_tests/a3mega_ztan-NCCL-test-result_all_reduce_perf_2x8_H100.md": [(3, "mpirun", (), 8, 16, 2, None)],
    "nccl_tests/coreweave_nccl-tests_README.md": [
        (199, "sbatch", (), None, None, None, None),
        (206, "sbatch", (), None, None, 4, None),
    ],
    "nccl_log/stas00_net_ib_completion_error.md": [(5, "torchrun", (), 1, 2, 2, "10.2.0.4:6000")],
    "pytorch_log/stas00_ml-engineering_debug_pytorch_md_lines2976-3070_desync_and_flight_recorder.md": [
        (16, "torchrun", (), 2, 2, 1, None),  # --standalone
        (49, "torchrun", (), 2, 2, 1, None),
    ],
}


@pytest.mark.parametrize("rel", sorted(IN_OTHER_FOLDERS))
def test_launch_lines_inside_other_formats(rel: str) -> None:
    path = DATA / rel
    assert launch.sniff(path.read_text()[:65536]) >= 40
    assert _rows(path) == IN_OTHER_FOLDERS[rel]


def _own_files() -> list[Path]:
    return sorted(p for p in OWN.iterdir() if p.is_file() and p.name != "README.md")


def _other_files() -> list[Path]:
    return sorted(
        f
        for d in DATA.iterdir()
        if d.is_dir() and d.name != "launch"
        for f in d.iterdir()
        if f.is_file() and f.name != "README.md" and str(f.relative_to(DATA)) not in IN_OTHER_FOLDERS
    )


@pytest.mark.parametrize("path", _own_files(), ids=lambda p: p.name)
def test_sniff_claims_own_samples(path: Path) -> None:
    score = launch.sniff(path.read_text().replace("\r\n", "\n")[:65536])
    if path.name == "var_bare_hostfile.txt":
        assert score < 40
    else:
        assert score >= 60


@pytest.mark.parametrize("path", _other_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_rejects_other_formats(path: Path) -> None:
    assert launch.sniff(path.read_text(errors="replace")[:65536]) < 40


def _claims(path: Path) -> set[str]:
    head = path.read_text().replace("\r\n", "\n")[:65536]
    return {
        mod.FORMAT
        for mod in registry()
        if not getattr(mod, "BINARY", False) and mod is not launch and mod.sniff(head) >= 40
    }


@pytest.mark.parametrize("path", _own_files(), ids=lambda p: p.name)
def test_other_parsers_do_not_claim_launch_samples(path: Path) -> None:
    assert _claims(path) == set()


# Real captures that interleave a launch line with another tool's output (tests/data/launch/mixed, outside the
# per-folder cross-format checks on purpose): launch and the other (mixable) parsers all claim them.
MIXED: dict[str, tuple[set[str], list[Row]]] = {
    "github_nccl-tests_issue309_mpirun_np_H_job_stdout.log": (
        {"nccl_tests"},
        [(1, "mpirun", ("spt01", "spt02", "pt01", "pt02"), 8, 32, 4, None)],
    ),
    # mpirun ... -H 10.6.131.5:8,10.6.131.6:8 -n 4 -N 2 ... alltoall_perf -b 1G -e 1G -i 1G -g 1 -n 30:
    # the program's "-n 30" is not mpirun's
    "github_nccl_issue1189_mpirun_H_ip_n_N_alltoall.md": (
        {"nccl_tests", "nccl_log"},
        [(2, "mpirun", ("10.6.131.5", "10.6.131.6"), 2, 4, 2, None)],
    ),
    "github_soperator_pr428_srun_nodes_ntasks_per_node_job_stdout.md": (
        {"nccl_tests"},
        [(1, "srun", (), 8, 16, 2, None)],  # `OMPI_MCA_btl_tcp_if_include=eth0 srun --nodes=2 --ntasks-per-node=8`
    ),
    "var_job_stdout_crlf_prompt_mpirun_nccl_info.log": (
        {"nccl_log"},
        [(1, "mpirun", ("gpu-a01", "gpu-a02"), 8, 16, 2, None)],
    ),
}


@pytest.mark.parametrize("name", sorted(MIXED))
def test_mixed_captures(name: str) -> None:
    path = OWN / "mixed" / name
    others, rows = MIXED[name]
    assert launch.sniff(path.read_text().replace("\r\n", "\n")) >= 60
    assert _claims(path) == others
    assert all(getattr(by_format(f), "MIXABLE", False) for f in others)
    assert _rows(path) == rows


def test_mixed_folder_is_complete() -> None:
    assert {p.name for p in (OWN / "mixed").iterdir()} == set(MIXED)


def test_not_a_launch_line() -> None:
    text = (
        "srun: error: r10i0n8: task 3: Exited with exit code 255\n"
        "You can run: ```mpirun -np 2 --hostfile hfile ./hello```.\n"
        "# mpirun -np 8 ./commented_out\n"
        "0: adev3\n"
        "gpu-a01:1234:5678 [0] NCCL INFO comm 0x1 rank 0 nranks 16 - Init COMPLETE\n"
        "srun is the Slurm launcher\n"
        "mpirun will abort without launching anything.\n"
        "Note: srun -N 2 needs an allocation\n"
        "torchrun\n"
    )
    assert launch.sniff(text) < 40
    assert launch.parse(text, "x").records == []


# ------------------------------------------------------------------------------------------------ robustness


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    res = launch.parse(text, "fuzz")
    assert res.format == "launch" and all(r.line >= 1 for r in res.records)
    score = launch.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "mpirun",
                "srun",
                "torchrun",
                "python -m torch.distributed.run",
                "#SBATCH",
                "-np",
                "-n",
                "-N",
                "-H",
                "--host",
                "gpu-a01:8,gpu-a02:x",
                "-w",
                "gpu[1-",
                "gpu[3-1]",
                "--nnodes=2:4",
                "--nproc_per_node",
                "8",
                "$X",
                "X=8",
                '"',
                "'",
                "$(",
                "`",
                "\\",
                "\n",
                ":",
                ";",
                "&&",
                "bash -c",
                "slots=8",
                "gpu-a01 slots=",
                "cat hosts\n",
            ]
        ),
        max_size=40,
    )
)
def test_never_raises_on_shuffled_fragments(parts: list[str]) -> None:
    text = " ".join(parts)
    res = launch.parse(text, "fuzz")
    assert all(isinstance(r, LaunchSpec) for r in res.records)
    assert 0 <= launch.sniff(text) <= 100


def test_the_sniffer_skips_only_lines_that_name_no_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sniffer looks for a launch command only on lines that name a launcher (a cheap search first: an 80 KB
    head of another format took 90 ms): every sample of every format scores as it does with the search off."""
    import re

    heads = [p.read_text(encoding="utf-8", errors="replace")[:64 * 1024] for p in sorted(DATA.rglob("*"))
             if p.is_file() and p.suffix != ".md"]
    assert len(heads) > 100
    fast = [launch.sniff(h) for h in heads]
    monkeypatch.setattr(launch, "_LAUNCHER", re.compile(""))  # matches every line
    assert [launch.sniff(h) for h in heads] == fast
    assert sum(1 for s in fast if s) >= 5  # launch lines were found


def test_a_root_prompt_before_a_launcher_is_a_prompt_in_a_paste_and_a_comment_in_a_script() -> None:
    from diagnose.parsers import env as env_parser

    # verbatim from NVIDIA/nccl-tests#200 (fixtures/field/033-*): a root shell's '#' prompt
    paste = ("# mpirun --allow-run-as-root -np 2 -H host1,host2 -x LD_LIBRARY_PATH -x NCCL_DEBUG=INFO"
             " -x NCCL_CUMEM_ENABLE=1 -x NCCL_IB_HCA=mlx5 /nccl-tests/build/all_reduce_perf -b 8 -e 128M -f 2 -g 8\n"
             "(hang here)\n")
    assert launch.sniff(paste) > 0
    envs = {r.name: r.value for r in env_parser.parse(paste, "cmd.txt").records}
    assert envs.get("NCCL_CUMEM_ENABLE") == "1"
    script = "#!/bin/bash\n# mpirun -np 4 -x NCCL_DEBUG=INFO ./old_way\nmpirun -np 8 ./all_reduce_perf -g 1\n"
    specs = [r for r in launch.parse(script, "job.sh").records]
    assert len(specs) == 1
