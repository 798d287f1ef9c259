"""ibstat / ibstatus / ibv_devinfo parsers against the real samples in tests/data (see each folder's README)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.models.records import ParseResult
from diagnose.parsers import ibstat, ibstatus, ibv_devinfo
from diagnose.parsers._ib import (
    GidEntry,
    IbPort,
    ToolError,
    guid_from_gid,
    norm_guid,
    norm_phys_state,
    norm_state,
    to_int,
)

DATA = Path(__file__).resolve().parents[1] / "data"
MODULES = (ibstat, ibstatus, ibv_devinfo)


def read(fmt: str, name: str) -> str:
    return (DATA / fmt / name).read_text(encoding="utf-8")


def ports(result: ParseResult) -> list[IbPort]:
    return [r for r in result.records if isinstance(r, IbPort)]


def by_dev(result: ParseResult) -> dict[tuple[str, int], IbPort]:
    return {(p.device, p.port): p for p in ports(result)}


def sample_files(fmt: str) -> list[Path]:
    return sorted(p for p in (DATA / fmt).iterdir() if p.is_file() and p.suffix != ".md")


# ----------------------------------------------------------------------------------------------- schema


def test_record_schemas_are_exact() -> None:
    names = [f.name for f in dataclasses.fields(IbPort)]
    assert names == [
        "source",
        "line",
        "text",
        "host",
        "device",
        "port",
        "state",
        "phys_state",
        "rate_gbps",
        "width",
        "speed",
        "link_layer",
        "lid",
        "sm_lid",
        "port_guid",
        "node_guid",
        "ca_type",
        "firmware",
        "active_mtu",
        "max_mtu",
    ]
    assert [f.name for f in dataclasses.fields(GidEntry)][4:] == [
        "device",
        "port",
        "index",
        "gid",
        "gid_type",
    ]
    assert [f.name for f in dataclasses.fields(ToolError)][4:] == ["tool", "message"]
    for cls in (IbPort, GidEntry, ToolError):
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen and hasattr(cls, "__slots__")


# ----------------------------------------------------------------------------------------------- helpers


def test_normalisers() -> None:
    assert norm_guid("7cfe:9003:00a5:95c0") == "0x7cfe900300a595c0"
    assert norm_guid("0x58A2E10300A7820E") == "0x58a2e10300a7820e"
    assert norm_guid("0x5a") == "0x000000000000005a"
    assert norm_guid("not a guid") is None
    assert guid_from_gid("fe80:0000:0000:0000:0015:5dff:fd34:11eb") == "0x00155dfffd3411eb"
    assert guid_from_gid("0000:0000:0000:0000:0000:ffff:0a00:0001") is None
    assert [
        norm_state(s)
        for s in (
            "Active",
            "4: ACTIVE",
            "PORT_ACTIVE (4)",
            "Initializing",
            "PORT_INIT (2)",
            "5: ACTIVE_DEFER",
            "1: DOWN",
            "???",
        )
    ] == ["Active", "Active", "Active", "Init", "Init", "ActiveDefer", "Down", "???"]
    assert [
        norm_phys_state(s)
        for s in (
            "LinkUp",
            "5: LinkUp",
            "LINK_UP (5)",
            "POLLING (2)",
            "3: Disabled",
            "PORT_CONFIGURATION TRAINNING (4)",
            "7: Phy Test",
            "No state change",
        )
    ] == [
        "LinkUp",
        "LinkUp",
        "LinkUp",
        "Polling",
        "Disabled",
        "PortConfigurationTraining",
        "PhyTest",
        "No state change",
    ]


# ----------------------------------------------------------------------------------------------- ibstat


def test_ibstat_some_down_h100() -> None:
    res = ibstat.parse(read("ibstat", "gpud_ibstat.47.0.h100.some.down.0.txt"), "ibstat.txt", host="node-a")
    assert res.format == "ibstat" and res.problems == []
    assert len(ports(res)) == 12
    down = [p for p in ports(res) if p.state != "Active"]
    assert [(p.device, p.state, p.phys_state, p.rate_gbps, p.link_layer, p.line) for p in down] == [
        ("mlx5_2", "Down", "Disabled", 40.0, "Ethernet", 77),
        ("mlx5_7", "Down", "Disabled", 40.0, "Ethernet", 162),
        ("mlx5_8", "Down", "Disabled", 40.0, "Ethernet", 179),
    ]
    assert down[0].text == "\t\tState: Down"
    mlx5_0 = by_dev(res)[("mlx5_0", 1)]
    assert mlx5_0 == IbPort(
        source="ibstat.txt",
        line=9,
        text="\t\tState: Active",
        host="node-a",
        device="mlx5_0",
        port=1,
        state="Active",
        phys_state="LinkUp",
        rate_gbps=400.0,
        width=None,
        speed=None,
        link_layer="InfiniBand",
        lid=75,
        sm_lid=334,
        port_guid="0x946dae0300cde72c",
        node_guid="0x946dae0300cde72c",
        ca_type="MT4129",
        firmware="28.39.1002",
    )


def test_ibstat_roce_polling() -> None:
    res = ibstat.parse(read("ibstat", "gpud_ibstat.47.0.h100.roce.some.down.with.polling.1.txt"), "s")
    assert res.problems == []
    d = by_dev(res)
    assert (d[("mlx5_11", 1)].state, d[("mlx5_11", 1)].phys_state, d[("mlx5_11", 1)].line) == (
        "Down",
        "Polling",
        60,
    )
    assert (d[("mlx5_5", 1)].state, d[("mlx5_5", 1)].phys_state, d[("mlx5_5", 1)].line) == (
        "Down",
        "Disabled",
        128,
    )
    assert {p.link_layer for p in ports(res)} == {"Ethernet"}
    assert all(p.lid == 0 and p.sm_lid == 0 for p in ports(res))


def test_ibstat_all_active_8_space_indent() -> None:
    res = ibstat.parse(read("ibstat", "gpud_ibstat.47.0.h100.all.active.2.txt"), "s")
    assert res.problems == []
    ib = [p for p in ports(res) if p.link_layer == "InfiniBand"]
    assert len(ib) == 8 and {p.rate_gbps for p in ib} == {400.0} and {p.state for p in ib} == {"Active"}
    bond = by_dev(res)[("mlx5_bond_0", 1)]
    assert (bond.link_layer, bond.rate_gbps, bond.line) == ("Ethernet", 200.0, 145)


def test_ibstat_ibpanic_becomes_tool_error() -> None:
    res = ibstat.parse(read("ibstat", "gpud_ibstat.39.0.a100.failed.ibpanic.exit-255.0.txt"), "s")
    assert res.problems == []
    assert [p.device for p in ports(res)] == [f"mlx5_{i}" for i in range(8)]
    errs = [r for r in res.records if isinstance(r, ToolError)]
    assert len(errs) == 1
    assert errs[0].line == 137 and errs[0].tool == "ibstat"
    assert (
        errs[0].message
        == "ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"
    )
    mlx5_0 = by_dev(res)[("mlx5_0", 1)]
    assert (mlx5_0.lid, mlx5_0.ca_type, mlx5_0.firmware, mlx5_0.rate_gbps) == (
        13247,
        "MT4124",
        "20.41.1000",
        200.0,
    )


def test_ibstat_mlx4_two_ports_fdr() -> None:
    res = ibstat.parse(read("ibstat", "heioy_ibstat_mlx4_fdr.txt"), "s")
    assert res.problems == []
    assert [(p.device, p.port, p.lid, p.sm_lid, p.rate_gbps) for p in ports(res)] == [
        ("mlx4_0", 1, 10, 9, 56.0),
        ("mlx4_0", 2, 12, 9, 56.0),
        ("mlx4_1", 1, 1, 7, 56.0),
        ("mlx4_1", 2, 4, 7, 56.0),
    ]
    assert by_dev(res)[("mlx4_1", 2)].port_guid == "0xf45214030033b852"
    assert {p.ca_type for p in ports(res)} == {"MT4099"}


def test_ibstat_single_port_form_and_lists() -> None:
    res = ibstat.parse(read("ibstat", "heioy_ibstat_single_port_and_list.txt"), "s")
    assert res.problems == []
    assert len(res.records) == 1  # the `ibstat -l` / `-p` lists are not ports
    p = ports(res)[0]
    assert (p.device, p.port, p.state, p.lid, p.line, p.port_guid) == (
        "mlx4_0",
        2,
        "Active",
        12,
        4,
        "0xec0d9a03000c8982",
    )
    assert p.ca_type is None and p.firmware is None


def test_ibstat_prompt_names_host() -> None:
    res = ibstat.parse(
        read("ibstat", "kaust_ksl-docs_ibex_interconnect_rst@0583fab_lines53-70_ibstat_mlx5_cx6.txt"),
        "s",
        host="ignored",
    )
    (p,) = ports(res)
    assert (p.host, p.device, p.rate_gbps, p.lid, p.sm_lid, p.ca_type, p.firmware) == (
        "login509-02-r",
        "mlx5_0",
        100.0,
        762,
        8,
        "MT4123",
        "20.35.1012",
    )


def test_ibstat_truncated_keeps_what_was_parsed() -> None:
    res = ibstat.parse(read("ibstat", "var_truncated_in_mlx5_3.txt"), "s")
    assert [p.device for p in ports(res)] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    last = ports(res)[-1]
    assert (last.state, last.rate_gbps, last.lid, last.link_layer) == ("Active", 200.0, None, None)
    assert len(res.problems) == 1 and res.problems[0].startswith("truncated: block for mlx5_3 ends early")


def test_ibstat_mixed_indent_prompt_and_list() -> None:
    res = ibstat.parse(read("ibstat", "var_prompt_mixed_indent_and_list.txt"), "s")
    assert res.problems == []
    assert [(p.device, p.host, p.link_layer, p.rate_gbps, p.ca_type) for p in ports(res)] == [
        ("mlx5_0", "gpu-node-07", "InfiniBand", 400.0, "MT4129"),
        ("mlx5_1", "gpu-node-07", "Ethernet", 100.0, "MT4125"),
    ]


def test_ibstat_crlf_and_ansi_give_the_same_records() -> None:
    text = read("ibstat", "gpud_ibstat.47.0.h100.some.down.0.txt")
    plain = ibstat.parse(text, "s")
    crlf = ibstat.parse(text.replace("\n", "\r\n"), "s")
    ansi = ibstat.parse(text.replace("State: Down", "State: \x1b[31mDown\x1b[0m"), "s")
    key = [(p.device, p.line, p.state, p.rate_gbps, p.port_guid) for p in ports(plain)]
    assert key == [(p.device, p.line, p.state, p.rate_gbps, p.port_guid) for p in ports(crlf)]
    assert key == [(p.device, p.line, p.state, p.rate_gbps, p.port_guid) for p in ports(ansi)]
    assert crlf.problems == [] and ansi.problems == []


# ----------------------------------------------------------------------------------------------- ibstatus


def test_ibstatus_a100() -> None:
    res = ibstatus.parse(read("ibstatus", "gpud_ibstatus.39.0.a100.all.active.0.txt"), "ibstatus.txt")
    assert res.format == "ibstatus" and res.problems == []
    assert len(ports(res)) == 9
    p = by_dev(res)[("mlx5_0", 1)]
    assert p == IbPort(
        source="ibstatus.txt",
        line=5,
        text="        state:           4: ACTIVE",
        host=None,
        device="mlx5_0",
        port=1,
        state="Active",
        phys_state="LinkUp",
        rate_gbps=200.0,
        width="4X",
        speed="HDR",
        link_layer="InfiniBand",
        lid=13247,
        sm_lid=1,
        port_guid="0x00155dfffd3411eb",
        node_guid=None,
        ca_type=None,
        firmware=None,
    )
    eth = by_dev(res)[("mlx5_8", 1)]
    assert (eth.link_layer, eth.rate_gbps, eth.width, eth.speed, eth.lid, eth.port_guid) == (
        "Ethernet",
        40.0,
        "4X",
        "QDR",
        0,
        None,
    )
    gids = [r for r in res.records if isinstance(r, GidEntry)]
    assert len(gids) == 8  # mlx5_8 prints `default gid: unknown`
    assert (gids[0].device, gids[0].index, gids[0].gid, gids[0].gid_type, gids[0].line) == (
        "mlx5_0",
        0,
        "fe80:0000:0000:0000:0015:5dff:fd34:11eb",
        "IB",
        2,
    )


def test_ibstatus_agrees_with_ibstat_on_the_same_a100_node() -> None:
    st_ = by_dev(ibstat.parse(read("ibstat", "gpud_ibstat.39.0.a100.failed.ibpanic.exit-255.0.txt"), "a"))
    su = by_dev(ibstatus.parse(read("ibstatus", "gpud_ibstatus.39.0.a100.all.active.0.txt"), "b"))
    for key, p in st_.items():
        assert (su[key].lid, su[key].sm_lid, su[key].port_guid, su[key].rate_gbps) == (
            p.lid,
            p.sm_lid,
            p.port_guid,
            p.rate_gbps,
        )


def test_ibstatus_truncated() -> None:
    res = ibstatus.parse(read("ibstatus", "var_truncated_in_mlx5_1.txt"), "s")
    assert [(p.device, p.lid, p.state) for p in ports(res)] == [
        ("mlx5_0", 13247, "Active"),
        ("mlx5_1", 13246, None),
    ]
    assert len(res.problems) == 1 and res.problems[0].startswith(
        "truncated: block for mlx5_1 port 1 ends early"
    )


# ----------------------------------------------------------------------------------------------- ibv_devinfo


def test_ibv_devinfo_two_mlx4() -> None:
    res = ibv_devinfo.parse(read("ibv_devinfo", "heioy_ibv_devinfo_mlx4.txt"), "devinfo.txt")
    assert res.format == "ibv_devinfo" and res.problems == []
    assert [(p.device, p.port, p.state, p.lid, p.sm_lid, p.line) for p in ports(res)] == [
        ("mlx4_1", 1, "Active", 22, 1, 14),
        ("mlx4_1", 2, "Down", 0, 0, 23),
        ("mlx4_0", 1, "Active", 32, 18, 43),
        ("mlx4_0", 2, "Down", 0, 0, 52),
    ]
    p = by_dev(res)[("mlx4_1", 1)]
    assert (p.node_guid, p.ca_type, p.firmware, p.active_mtu, p.max_mtu, p.link_layer) == (
        "0x7cfe900300a595c0",
        "MT4099",
        "2.42.5000",
        4096,
        4096,
        "InfiniBand",
    )
    assert p.phys_state is None and p.rate_gbps is None and p.port_guid is None


def test_ibv_devinfo_verbose() -> None:
    res = ibv_devinfo.parse(read("ibv_devinfo", "heioy_ibv_devinfo_v_mlx4.txt"), "s")
    assert res.problems == []
    (p,) = ports(res)
    assert (p.device, p.port, p.state, p.phys_state, p.width, p.speed, p.rate_gbps, p.line) == (
        "mlx4_1",
        2,
        "Down",
        "Polling",
        "4X",
        "SDR",
        10.0,
        105,
    )
    assert p.port_guid == "0x7cfe900300a595c2"  # interface id of GID[0] on an IB port
    (g,) = [r for r in res.records if isinstance(r, GidEntry)]
    assert (g.index, g.gid, g.gid_type, g.line) == (0, "fe80:0000:0000:0000:7cfe:9003:00a5:95c2", "IB", 125)


def test_ibv_devinfo_matches_ibstat_on_the_kaust_login_node() -> None:
    dv = ports(
        ibv_devinfo.parse(
            read(
                "ibv_devinfo",
                "kaust_ksl-docs_ibex_interconnect_rst@0583fab_lines31-49_ibv_devinfo_mlx5_cx6.txt",
            ),
            "a",
        )
    )[0]
    st_ = ports(
        ibstat.parse(
            read("ibstat", "kaust_ksl-docs_ibex_interconnect_rst@0583fab_lines53-70_ibstat_mlx5_cx6.txt"), "b"
        )
    )[0]
    assert (dv.host, dv.device, dv.lid, dv.sm_lid, dv.node_guid, dv.ca_type, dv.firmware, dv.state) == (
        st_.host,
        st_.device,
        st_.lid,
        st_.sm_lid,
        st_.node_guid,
        st_.ca_type,
        st_.firmware,
        st_.state,
    )


def test_ibv_devinfo_roce_gid_types() -> None:
    res = ibv_devinfo.parse(read("ibv_devinfo", "var_roce_verbose_gids.txt"), "s")
    assert res.problems == []
    (p,) = ports(res)
    assert (p.link_layer, p.phys_state, p.width, p.speed, p.rate_gbps, p.lid, p.port_guid) == (
        "Ethernet",
        "LinkUp",
        "4X",
        "EDR",
        100.0,
        0,
        None,
    )
    gids = [(g.index, g.gid, g.gid_type) for g in res.records if isinstance(g, GidEntry)]
    assert gids == [
        (0, "fe80:0000:0000:0000:ba59:9fff:fe22:626e", "RoCE v1"),
        (1, "fe80::ba59:9fff:fe22:626e", "RoCE v2"),
        (2, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v1"),
        (3, "::ffff:10.0.0.1", "RoCE v2"),
    ]


def test_ibv_devinfo_truncated_and_errors() -> None:
    res = ibv_devinfo.parse(read("ibv_devinfo", "var_truncated_in_mlx4_0_port2.txt"), "s")
    assert len(ports(res)) == 4 and ports(res)[-1].link_layer is None
    assert res.problems == ["truncated: block for mlx4_0 ends early (port 2 incomplete)"]
    err = ibv_devinfo.parse("Failed to get IB devices list: Function not implemented\n", "s")
    assert [(r.tool, r.message) for r in err.records if isinstance(r, ToolError)] == [
        ("ibv_devinfo", "Failed to get IB devices list: Function not implemented")
    ]


# ----------------------------------------------------------------------------------------------- sniffing


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_sniff_claims_own_samples(mod) -> None:
    for path in sample_files(mod.FORMAT):
        assert mod.sniff(path.read_text(encoding="utf-8")[:65536]) >= 40, path.name


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_sniff_rejects_every_other_sample_folder(mod) -> None:
    others = [d for d in sorted(DATA.iterdir()) if d.is_dir() and d.name != mod.FORMAT]
    assert others
    for folder in others:
        for path in sample_files(folder.name):
            head = path.read_text(encoding="utf-8", errors="replace")[:65536]
            assert mod.sniff(head) < 40, f"{mod.FORMAT} claims {folder.name}/{path.name}"


def test_sniff_keeps_ib_formats_apart() -> None:
    assert ibstat.sniff(read("ibstatus", "gpud_ibstatus.39.0.a100.all.active.0.txt")) == 0
    assert ibstat.sniff(read("ibv_devinfo", "heioy_ibv_devinfo_mlx4.txt")) == 0
    assert ibstatus.sniff(read("ibstat", "gpud_ibstat.47.0.h100.some.down.0.txt")) == 0
    assert ibv_devinfo.sniff(read("ibstat", "gpud_ibstat.47.0.h100.some.down.0.txt")) == 0
    smpquery = "# Port info: Lid 2 port 1\nLinkState:.......................Active\nPhysLinkState:...................LinkUp\n"
    assert all(m.sniff(smpquery) == 0 for m in MODULES)


# ----------------------------------------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(st.text(max_size=12), st.text("0123456789abcdefABCDEFx: \t\u0661\u00b2+_-", max_size=20)))
def test_number_and_guid_quick_forms_keep_the_general_rules(value: str) -> None:
    """``to_int`` reads plain decimals and ``norm_guid`` passes canonical GUIDs through without their general
    rewriting: both must give what the rules below give for any text."""
    v = value.strip()
    try:
        want_int = int(v, 16) if v.lower().startswith("0x") else int(v, 10)
    except ValueError:
        want_int = None
    assert to_int(value) == want_int
    digits = v[2:] if v.lower().startswith("0x") else v
    canonical = "0x" + digits.lower().rjust(16, "0") if value and re.fullmatch(r"[0-9a-fA-F]{1,16}", digits) else None
    if ":" not in v or v.lower().startswith("0x"):
        assert norm_guid(value) == canonical
    for guid in ("0x946dae030046f8e6", "0x946DAE030046F8E6", " 0x946dae030046f8e6", "946dae030046f8e6"):
        assert norm_guid(guid) == "0x946dae030046f8e6"


_SAMPLE_LINES = sorted(
    {
        line
        for fmt in ("ibstat", "ibstatus", "ibv_devinfo")
        for p in sample_files(fmt)
        for line in p.read_text(encoding="utf-8").split("\n")
    }
)
_mixed_text = st.lists(st.one_of(st.sampled_from(_SAMPLE_LINES), st.text(max_size=40)), max_size=40).map(
    "\n".join
)


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(), _mixed_text))
def test_parse_never_raises_and_sniff_is_bounded(mod, text: str) -> None:
    score = mod.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100
    res = mod.parse(text, "f.txt", host="h")
    assert isinstance(res, ParseResult) and res.format == mod.FORMAT
    assert not any(p.startswith("parser error") for p in res.problems), res.problems
    nlines = text.count("\n") + 1
    assert all(r.source == "f.txt" and 1 <= r.line <= nlines for r in res.records)
