"""Tests for diagnose.parsers.modulefile (samples: tests/data/modulefile/README.md)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import by_format, env, modulefile
from diagnose.parsers._common import EnvSetting, effective_order

DATA = Path(__file__).resolve().parent.parent / "data"
OWN = DATA / "modulefile"


def _got(name: str) -> list[tuple[int, str, str]]:
    res = modulefile.parse((OWN / name).read_text(), name, "h1")
    assert res.problems == []
    assert all(isinstance(r, EnvSetting) and r.origin == "modulefile" and r.host == "h1" for r in res.records)
    return [(r.line, r.name, r.value) for r in res.records]


def test_registered():
    assert by_format("modulefile") is modulefile


def test_lmod_lua_real_sample():
    assert _got("smu_hpc_docs_nvidia_23.5.lua") == [
        (9, "OMPI_MCA_pml", "ucx"),
        (10, "OMPI_MCA_btl_openib_if_include", "mlx5_0:1"),
        (11, "OMPI_MCA_hwloc_base_binding_policy", "core"),
        (12, "UCX_NET_DEVICES", "mlx5_0:1"),
    ]  # SLURM_MPI_TYPE is not a comm variable; append_path/whatis/help ignored


def test_tcl_set_variables_and_help_proc():
    got = _got("var_tcl_nccl_site.tcl")
    d = {n: v for _l, n, v in got}
    assert d["NCCL_HOME"] == "/apps/nccl/nccl_2.18.3-1+cuda12.1_x86_64"
    assert d["NCCL_VERSION"] == "2.18.3"
    assert d["NCCL_IB_SL"] == "1" and d["NCCL_SOCKET_IFNAME"] == "ib0"
    assert d["NCCL_TOPO_FILE"].endswith("_x86_64/topo.xml")
    assert "NCCL_IGNORED_IN_HELP" not in d and "NCCL_DEBUG" not in d


def test_module_show_tcl():
    assert _got("var_module_show_tcl.txt") == [(5, "NCCL_IB_HCA", "mlx5_0,mlx5_1"), (6, "NCCL_IB_TC", "106")]
    assert modulefile.sniff((OWN / "var_module_show_tcl.txt").read_text()) > env.sniff(
        (OWN / "var_module_show_tcl.txt").read_text())


def test_lua_spellings():
    text = 'pushenv("NCCL_IB_SL", "1")\nsetenv("NCCL_NET", os.getenv("X"))\nprepend_path("PATH","/x")\n'
    res = modulefile.parse(text, "m.lua")
    assert [(r.name, r.value) for r in res.records] == [("NCCL_IB_SL", "1")]
    assert modulefile.sniff(text) >= 60


def test_env_parser_leaves_tcl_modulefiles():
    assert env.sniff((OWN / "var_tcl_nccl_site.tcl").read_text()) == 0


def test_sniff_zero_on_other_formats():
    for d in sorted(DATA.iterdir()):
        if d.is_dir() and d.name != "modulefile":
            for f in sorted(d.iterdir())[:3]:
                if f.is_file() and f.suffix != ".md":
                    assert modulefile.sniff(f.read_text(errors="replace")[:65536]) == 0, f


def test_truncated_help_block():
    res = modulefile.parse('setenv("NCCL_IB_SL","2")\nhelp([[cut here setenv("NCCL_X","1")\n', "m")
    assert [(r.name, r.value) for r in res.records] == [("NCCL_IB_SL", "2")]


def test_effective_order_prefers_launch_over_modulefile():
    df = pd.DataFrame({"name": ["NCCL_IB_HCA"] * 4, "value": ["a", "b", "c", "d"],
                       "origin": ["launch_arg", "modulefile", "sbatch", "nccl_conf"]})
    out = effective_order(df)
    assert out["origin"].tolist() == ["nccl_conf", "modulefile", "sbatch", "launch_arg"]
    assert out.iloc[-1]["value"] == "a"


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=400))
def test_never_raises(text):
    modulefile.sniff(text)
    assert modulefile.parse(text, "x").format == "modulefile"
