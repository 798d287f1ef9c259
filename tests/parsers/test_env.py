"""Tests for diagnose.parsers.env (see tests/data/env/README.md for the samples' sources)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import _common, by_format, env
from diagnose.parsers._common import EnvSetting

DATA = Path(__file__).resolve().parent.parent / "data"
OWN = DATA / "env"


def _settings(name: str, host: str | None = None) -> list[tuple[int, str, str, str]]:
    res = env.parse((OWN / name).read_text(), f"env/{name}", host)
    assert res.problems == []
    assert all(isinstance(r, EnvSetting) for r in res.records)
    return [(r.line, r.name, r.value, r.origin) for r in res.records]


def test_registered_mixable_and_shared_record():
    assert by_format("env") is env
    assert env.MIXABLE is True
    assert env.EnvSetting is _common.EnvSetting  # imported, not redefined


# ---------------------------------------------------------------------------------------------------------------
# real samples


def test_coreweave_h100_sbatch_exports():
    assert _settings("coreweave_nccl-test-distributed-h100-64.slurm") == [
        (23, "NCCL_SOCKET_IFNAME", "eth0", "export"),
        (24, "NCCL_IB_HCA", "ibp", "export"),
        (29, "UCX_TLS", "tcp", "export"),
        (30, "UCX_NET_DEVICES", "eth0", "export"),
        (31, "OMPI_MCA_coll_hcoll_enable", "0", "export"),  # lower-case MCA parameter name
        (33, "NCCL_NET_PLUGIN", "none", "export"),
        # PMIX_MCA_gds is not a communication-stack prefix
    ]


def test_coreweave_gb300_roce_sbatch_exports():
    got = _settings("coreweave_nccl-test-distributed-gb300-roce-nvl72-enroot.slurm")
    d = {name: value for _l, name, value, _o in got}
    assert len(got) == 15 and {o for *_x, o in got} == {"export"}
    assert d["NCCL_IB_ADDR_RANGE"] == "fd02::/16"
    assert d["NCCL_IB_ADDR_FAMILY"] == "AF_INET6"
    assert d["NCCL_IB_TC"] == "96"
    assert d["NCCL_NET_PLUGIN"] == "none"
    assert d["NCCL_IB_HCA"] == "ibp"
    assert "LD_LIBRARY_PATH" not in d and "PMIX_MCA_gds" not in d


def test_coreweave_mpijob_mpirun_x_lines():
    got = _settings("coreweave_nccl-test-distributed-h100-64-mpijob.yaml", host="launcher")
    assert got == [
        (31, "NCCL_SOCKET_IFNAME", "eth0", "launch_arg"),
        (32, "NCCL_IB_HCA", "ibp", "launch_arg"),
        (33, "UCX_NET_DEVICES", "ibp0:1,ibp1:1,ibp2:1,ibp3:1,ibp4:1,ibp5:1,ibp6:1,ibp7:1", "launch_arg"),
        (34, "SHARP_COLL_ENABLE_PCI_RELAXED_ORDERING", "1", "launch_arg"),
        (35, "NCCL_COLLNET_ENABLE", "0", "launch_arg"),
        (36, "NCCL_NET_PLUGIN", "none", "launch_arg"),
    ]  # the commented "# Can also try setting '-x NCCL_ALGO=NVLSTREE'" hint is ignored


# ---------------------------------------------------------------------------------------------------------------
# variations


def test_sbatch_with_exports_and_mpirun_x():
    assert _settings("var_sbatch_exports_mpirun_x.sbatch") == [
        (6, "NCCL_DEBUG", "WARN", "sbatch"),  # an #SBATCH --export directive
        (11, "NCCL_SOCKET_IFNAME", "bond0", "export"),
        (12, "NCCL_IB_HCA", "=mlx5_0,mlx5_3,mlx5_4,mlx5_5", "export"),
        (13, "NCCL_IB_GID_INDEX", "3", "export"),
        (13, "NCCL_IB_TC", "106", "export"),
        (14, "UCX_TLS", "tcp", "export"),
        (17, "CUDA_DEVICE_MAX_CONNECTIONS", "1", "export"),
        (21, "NCCL_DEBUG", "INFO", "launch_arg"),
        (22, "NCCL_NET_GDR_LEVEL", "PHB", "launch_arg"),
        (23, "NCCL_TOPO_FILE", "/opt/topo/ndv5-topo.xml", "launch_arg"),
        (27, "NCCL_IB_DISABLE", "1", "launch_arg"),
        (27, "NCCL_SOCKET_IFNAME", "eth0,eth1", "launch_arg"),
        (28, "NCCL_DEBUG", "INFO", "launch_arg"),
        (28, "NCCL_P2P_DISABLE", "1", "launch_arg"),
    ]


def test_printenv_dump():
    got = _settings("var_printenv_dump.txt", host="node017")
    assert got == [
        (3, "NCCL_DEBUG", "INFO", "env_dump"),
        (5, "CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7", "env_dump"),
        (6, "NCCL_IB_HCA", "mlx5_0,mlx5_3,mlx5_4,mlx5_5", "env_dump"),
        (8, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", "env_dump"),
        (9, "NCCL_SOCKET_IFNAME", "^docker0,lo", "env_dump"),
        (11, "OMPI_MCA_btl_tcp_if_include", "bond0", "env_dump"),
        (13, "FI_PROVIDER", "efa", "env_dump"),
    ]  # NCCL_FAKE=1 inside another variable's value is not a setting
    res = env.parse((OWN / "var_printenv_dump.txt").read_text(), "x", "node017")
    assert {r.host for r in res.records} == {"node017"}


def test_command_prefix_launch_line():
    assert _settings("var_launch_line.txt") == [
        (1, "NCCL_DEBUG", "INFO", "launch_arg"),
        (1, "NCCL_IB_HCA", "mlx5_0,mlx5_3", "launch_arg"),
        (1, "TORCH_NCCL_BLOCKING_WAIT", "1", "launch_arg"),
    ]


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "env NCCL_DEBUG=INFO CUDA_VISIBLE_DEVICES=0,1 python x.py",
            [("NCCL_DEBUG", "INFO", "launch_arg"), ("CUDA_VISIBLE_DEVICES", "0,1", "launch_arg")],
        ),
        ("cd /w && NCCL_IB_DISABLE=1 torchrun x.py", [("NCCL_IB_DISABLE", "1", "launch_arg")]),
        ("docker run --env=NCCL_P2P_LEVEL=NVL img", [("NCCL_P2P_LEVEL", "NVL", "launch_arg")]),
        ("mpiexec -genv NCCL_DEBUG INFO -n 2 ./a", [("NCCL_DEBUG", "INFO", "launch_arg")]),
        ('declare -x NCCL_DEBUG="INFO"', [("NCCL_DEBUG", "INFO", "env_dump")]),
        ("setenv NCCL_IB_HCA mlx5_0", [("NCCL_IB_HCA", "mlx5_0", "export")]),
        ("ENV NCCL_VERSION=2.21.5", [("NCCL_VERSION", "2.21.5", "export")]),
        ("mpirun -x NCCL_DEBUG -x LD_LIBRARY_PATH ./a", []),  # pass-through without value
        ("# export NCCL_DEBUG=INFO", []),
        ("export NCCL_IB_HCA='mlx5_0:1' # pin port 1", [("NCCL_IB_HCA", "mlx5_0:1", "export")]),
        (
            'export NCCL_DEBUG="INFO',
            [("NCCL_DEBUG", "INFO", "export")],
        ),  # broken quoting still yields a value
    ],
)
def test_launch_spellings(line: str, expected):
    res = env.parse(line + "\n", "x")
    assert [(r.name, r.value, r.origin) for r in res.records] == expected


def test_nccl_log_env_lines_are_not_env_format():
    # lines from devopsrustem/slurmv4@e95c7d7cc07303628822f12a30d607d38da1f54d:3/13.sh (NCCL 2.27.5 init log)
    head = (
        "tpgds-aihub0008:207014:207014 [7] NCCL INFO NCCL_SOCKET_IFNAME set by environment to enp25s0np0\n"
        "tpgds-aihub0008:207007:207007 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.\n"
        "tpgds-aihub0008:207007:207007 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0,mlx5_1,mlx5_2,mlx5_5,mlx5_6,mlx5_7,"
        "mlx5_8,mlx5_11\n"
    )
    assert env.sniff(head) < 40
    assert env.parse(head, "x").records == []


# ---------------------------------------------------------------------------------------------------------------
# sniff


@pytest.mark.parametrize(
    "path", sorted(p for p in OWN.iterdir() if p.name != "README.md"), ids=lambda p: p.name
)
def test_sniff_claims_own_samples(path: Path):
    assert env.sniff(path.read_text()[:65536]) >= 60


# an NCCL config file is NAME=value lines that NCCL itself reads as environment settings: the env reader may claim
# it too (its own parser outscores it, tests/parsers/test_nccl_conf.py), and either way the settings are the job's
_ENV_BY_DESIGN = {"env", "nccl_conf"}


def _other_files():
    for d in sorted(p for p in DATA.iterdir() if p.is_dir() and p.name not in _ENV_BY_DESIGN):
        for f in sorted(d.iterdir()):
            if f.is_file() and f.name != "README.md":
                yield f


@pytest.mark.parametrize("path", list(_other_files()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_rejects_other_formats(path: Path):
    assert env.sniff(path.read_text(errors="replace")[:65536]) < 40


def test_sniff_one_launch_line_in_a_long_job_log_is_not_env():
    head = "NCCL_DEBUG=INFO torchrun --nproc_per_node 8 train.py\n" + "\n".join(
        f"step {i} loss 2.{i:03d}" for i in range(200)
    )
    assert env.sniff(head) < 40


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str):
    res = env.parse(text, "fuzz")
    assert res.format == "env"
    assert all(_common.is_comm_env(r.name) for r in res.records)
    score = env.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "export ",
                "NCCL_DEBUG=",
                "INFO",
                "'",
                '"',
                "\\",
                " -x ",
                "--export=ALL,",
                "NCCL_IB_HCA=mlx5_0,mlx5_1",
                ",",
                "#SBATCH ",
                "# ",
                "declare -x ",
                "env ",
                "&& ",
                "; ",
                "-e ",
                "--env ",
                "-genv ",
                "setenv ",
                "ENV ",
                "\n",
                " ",
                "OMPI_MCA_btl=^openib",
                "$(",
                ")",
                "${X}",
                "|",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_never_raises_on_shell_fragments(text: str):
    res = env.parse(text, "fuzz")
    assert not any("stopped early" in p for p in res.problems)
