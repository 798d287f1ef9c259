"""Tests for diagnose.parsers.nccl_conf (samples: tests/data/nccl_conf/README.md)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.bundle import sniff_file
from diagnose.parsers import by_format, nccl_conf
from diagnose.parsers._common import EnvSetting, effective_order

DATA = Path(__file__).resolve().parent.parent / "data"
OWN = DATA / "nccl_conf"


def _parse(name: str):
    res = nccl_conf.parse((OWN / name).read_text(), name, "h1")
    assert all(isinstance(r, EnvSetting) and r.origin == "nccl_conf" and r.host == "h1" for r in res.records)
    return res


def test_registered():
    assert by_format("nccl_conf") is nccl_conf


def test_azure_ncv4_image_conf():
    res = _parse("azhpc_ncv4_etc_nccl.conf")
    assert res.problems == []
    assert [(r.line, r.name, r.value) for r in res.records] == [
        (1, "NCCL_TOPO_FILE", "/opt/microsoft/ncv4/topo.xml"),
        (2, "NCCL_GRAPH_FILE", "/opt/microsoft/ncv4/graph.xml"),
        (3, "NCCL_IGNORE_CPU_AFFINITY", "1"),
    ]


def test_comments_exact_match_value_blanks_and_repeats():
    res = _parse("var_commented_site_conf.conf")
    got = {r.name: (r.line, r.value) for r in res.records}
    assert got == {
        "NCCL_DEBUG": (3, "WARN"),  # the first setting: NCCL sets without overwrite, so a repeat does not win
        "NCCL_SOCKET_IFNAME": (4, "=ens1f0"),  # the docs' own example: value after the first '=' as it is
        "NCCL_IB_HCA": (5, "mlx5_0,mlx5_1,mlx5_2,mlx5_3"),
        "NCCL_IB_SL": (8, "0"),
    }
    assert any("line 7" in p and "NCCL_IB_GID_INDEX" in p for p in res.problems)
    assert any("line 9" in p and "keeps the first" in p for p in res.problems)


def test_only_comm_variables_and_crlf():
    res = nccl_conf.parse("NCCL_DEBUG=INFO\r\nFOO_BAR=1\r\nCUDA_DEVICE_ORDER=PCI_BUS_ID\r\n", "c", None)
    assert [(r.name, r.value) for r in res.records] == [("NCCL_DEBUG", "INFO"), ("CUDA_DEVICE_ORDER", "PCI_BUS_ID")]


def test_cut_file_keeps_whole_lines():
    text = (OWN / "azhpc_ndv5_etc_nccl.conf").read_text()
    res = nccl_conf.parse(text[: text.index("NCCL_IGNORE") + 8], "cut", None)
    assert [r.name for r in res.records] == ["NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_TOPO_FILE"]  # "NCCL_IGN": no '='


def test_sniff_claims_conf_but_not_env_dumps_scripts_or_launch_lines():
    for f in OWN.iterdir():
        if f.name != "README.md":
            assert nccl_conf.sniff(f.read_text()) >= 90, f.name
    assert nccl_conf.sniff("NCCL_DEBUG=INFO\nPATH=/usr/bin:/bin\nHOME=/root\n") == 0  # an env dump
    assert nccl_conf.sniff("#!/bin/bash\nNCCL_DEBUG=INFO\n") == 0
    assert nccl_conf.sniff("export NCCL_DEBUG=INFO\n") == 0
    assert nccl_conf.sniff("NCCL_DEBUG=INFO NCCL_IB_HCA=mlx5_0 torchrun --nnodes 2 train.py\n") == 0
    assert nccl_conf.sniff("CUDA_VISIBLE_DEVICES=0\nCUDA_DEVICE_ORDER=PCI_BUS_ID\n") == 0  # no NCCL_ majority
    assert nccl_conf.sniff("NCCL_RINGS=0 1 2 3|3 2 1 0\n") > 0  # a value with blanks, as in the 2.3 docs


def test_sniff_zero_on_other_formats_samples():
    for d in sorted(p for p in DATA.iterdir() if p.is_dir() and p.name != "nccl_conf"):
        for f in sorted(d.rglob("*")):
            if f.is_file() and f.name != "README.md":
                assert nccl_conf.sniff(f.read_text(errors="replace")) == 0, f


def test_file_name_hint_breaks_the_tie_with_a_grepped_env():
    text = (OWN / "azhpc_ncv4_etc_nccl.conf").read_text()
    assert sniff_file("nccl.conf", text).formats == ("nccl_conf",)
    assert sniff_file("env.txt", text).formats == ("env",)  # `env | grep NCCL_` looks the same: the name decides
    text2 = (OWN / "var_commented_site_conf.conf").read_text()
    assert sniff_file("output.txt", text2).formats == ("nccl_conf",)  # comments: no env dump has them


def test_conf_ranks_below_every_other_origin():
    conf = nccl_conf.parse("NCCL_IB_HCA=mlx5_2\n", "nccl.conf", None).records[0]
    dump = EnvSetting(source="env.txt", line=1, text="NCCL_IB_HCA=mlx5_0", host=None, name="NCCL_IB_HCA",
                      value="mlx5_0", origin="env_dump")
    df = pd.DataFrame([{"name": r.name, "value": r.value, "origin": r.origin} for r in (dump, conf)])
    assert effective_order(df).iloc[-1]["value"] == "mlx5_0"


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=2000))
def test_never_raises(text: str):
    res = nccl_conf.parse(text, "x", None)
    assert all(r.line >= 1 for r in res.records)
    assert 0 <= nccl_conf.sniff(text) <= 100
