"""Slurm hostlist expressions (diagnose.hostlist), checked against the examples in Slurm's own documentation.

Sources of the documented examples: SchedMD/slurm@284c3b95f08a2dc2478499837b03355e1b9c5c75
``doc/man/man5/slurm.conf.5`` (NodeName: "linux[0-64,128]", "lx[15,18,32-33]", "rack[0-63]_blade[0-41]",
"linux[0000-1023]", "alpha,beta,gamma"), ``doc/man/man1/scontrol.1`` (``show hostnames tux[1-3]`` -> tux1 tux2 tux3;
``hostlist``: "tux2,tux1,tux2 = tux[2,1-2]"), ``doc/man/man5/topology.conf.5`` ("tux[0-3,12,18-20]") and
``src/common/hostlist.c`` (``_hostlist_create_bracketed``: suffix after ``]``, width from leading zeros, errors).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.hostlist import MAX_HOSTS, HostlistError, expand_hostlist, is_hostlist


def test_brief_example() -> None:
    assert expand_hostlist("gpu-a[001-004,010],gpu-b7") == [
        "gpu-a001",
        "gpu-a002",
        "gpu-a003",
        "gpu-a004",
        "gpu-a010",
        "gpu-b7",
    ]


def test_scontrol_show_hostnames_example() -> None:
    assert expand_hostlist("tux[1-3]") == ["tux1", "tux2", "tux3"]


def test_slurm_conf_examples() -> None:
    linux = expand_hostlist("linux[0-64,128]")
    assert len(linux) == 66 and linux[:2] == ["linux0", "linux1"] and linux[-2:] == ["linux64", "linux128"]
    assert expand_hostlist("lx[15,18,32-33]") == ["lx15", "lx18", "lx32", "lx33"]
    assert expand_hostlist("alpha,beta,gamma") == ["alpha", "beta", "gamma"]
    padded = expand_hostlist("linux[0000-1023]")
    assert len(padded) == 1024 and padded[0] == "linux0000" and padded[-1] == "linux1023"


def test_multiple_bracket_groups_last_varies_fastest() -> None:
    hosts = expand_hostlist("rack[0-63]_blade[0-41]")
    assert len(hosts) == 64 * 42
    assert hosts[:3] == ["rack0_blade0", "rack0_blade1", "rack0_blade2"]
    assert hosts[41:43] == ["rack0_blade41", "rack1_blade0"]
    assert hosts[-1] == "rack63_blade41"


def test_topology_conf_example() -> None:
    assert expand_hostlist("tux[0-3,12,18-20]") == [
        "tux0",
        "tux1",
        "tux2",
        "tux3",
        "tux12",
        "tux18",
        "tux19",
        "tux20",
    ]


def test_order_and_duplicates_are_kept() -> None:
    # scontrol(1) hostlist: "tux2,tux1,tux2 = tux[2,1-2]" (not sorted, not unique)
    assert expand_hostlist("tux[2,1-2]") == ["tux2", "tux1", "tux2"]


def test_zero_padding_width_comes_from_each_range_start() -> None:
    assert expand_hostlist("gpu[08-11]") == ["gpu08", "gpu09", "gpu10", "gpu11"]
    assert expand_hostlist("n[8-10]") == ["n8", "n9", "n10"]
    assert expand_hostlist("n[001-002,10]") == ["n001", "n002", "n10"]


def test_suffix_and_separators() -> None:
    assert expand_hostlist("node[1-2]-ib") == ["node1-ib", "node2-ib"]
    assert expand_hostlist("a[1-2] b3\tc4\nd5") == ["a1", "a2", "b3", "c4", "d5"]
    assert expand_hostlist("node-[63-65]") == ["node-63", "node-64", "node-65"]
    assert expand_hostlist("") == []
    assert expand_hostlist(" , ,") == []


@pytest.mark.parametrize("bad", ["n[5-3]", "n[a-b]", "n[1-3", "n[]", "n[1,,2]", "n[1-2[3]]", "n[-1]"])
def test_malformed_expressions_raise(bad: str) -> None:
    with pytest.raises(HostlistError):
        expand_hostlist(bad)
    assert is_hostlist(bad) is False


def test_expansion_is_capped() -> None:
    with pytest.raises(HostlistError):
        expand_hostlist("a[0-999999999].b[0-9]")
    with pytest.raises(HostlistError):
        expand_hostlist("n[0-9]", limit=5)
    assert len(expand_hostlist("n[1-65536]")) == MAX_HOSTS


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab-_.[],0123456789 \n", max_size=40))
def test_never_raises_anything_but_hostlist_error(expr: str) -> None:
    try:
        hosts = expand_hostlist(expr, limit=2000)
    except HostlistError:
        return
    assert all(h and not any(c in h for c in " ,\n") for h in hosts)


@settings(max_examples=200, deadline=None)
@given(
    st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True),
    st.integers(min_value=0, max_value=300),
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=1, max_value=4),
)
def test_range_round_trip(prefix: str, lo: int, span: int, width: int) -> None:
    hi = lo + span
    expr = f"{prefix}[{lo:0{width}d}-{hi}]"
    assert expand_hostlist(expr) == [f"{prefix}{n:0{width}d}" for n in range(lo, hi + 1)]
