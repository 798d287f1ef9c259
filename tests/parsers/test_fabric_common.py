"""Fabric records contract, shared helpers, sniff separation and robustness for all fabric-tool parsers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.models.records import ParseResult
from diagnose.parsers import (
    ibdiagnet,
    ibdiagnet_log,
    iblinkinfo,
    ibnetdiscover,
    ibqueryerrors,
    ibswinfo,
    opensm_log,
    registry,
    sminfo,
    smpquery,
)
from diagnose.parsers._fabric import (
    CableInfo,
    FabricLink,
    FabricNode,
    FabricPortState,
    SmEvent,
    SmInfo,
    SwitchInfo,
    ToolMessage,
    norm_node_type,
    norm_sm_state,
    norm_width,
    parse_link_text,
    parse_remote_text,
    speed_name,
)

DATA = Path(__file__).resolve().parents[1] / "data"
MODULES = (ibdiagnet, ibdiagnet_log, iblinkinfo, ibnetdiscover, ibqueryerrors, ibswinfo, opensm_log, sminfo, smpquery)
MY_FORMATS = {m.FORMAT for m in MODULES}


def sample_files(fmt: str) -> list[Path]:
    return sorted(p for p in (DATA / fmt).iterdir() if p.is_file() and p.suffix != ".md")


def head_of(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace").replace("\r\n", "\n")[:65536]


# ----------------------------------------------------------------------------------------------- contract


def test_record_fields_are_the_contract() -> None:
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)][4:]

    assert names(FabricNode) == ["guid", "node_type", "description", "ports", "lid"]
    assert names(FabricLink) == [
        "guid",
        "port",
        "peer_guid",
        "peer_port",
        "width",
        "speed",
        "state",
        "phys_state",
        "lid",
        "peer_lid",
        "description",
        "peer_description",
    ]
    assert names(FabricPortState) == [
        "guid",
        "port",
        "state",
        "phys_state",
        "width",
        "speed",
        "lid",
        "description",
        "could_be",
    ]
    assert names(SmInfo) == ["sm_lid", "sm_guid", "activity", "priority", "state"]
    assert names(SmEvent) == ["level", "category", "code", "message", "timestamp"]
    assert names(ToolMessage) == ["tool", "level", "message", "stage"]
    assert names(SwitchInfo) == ["guid", "key", "value"]
    assert names(CableInfo) == ["guid", "port", "vendor", "pn", "sn", "length", "temperature", "identifier"]
    for cls in (FabricNode, FabricLink, FabricPortState, SmInfo, SmEvent, ToolMessage, SwitchInfo, CableInfo):
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen and hasattr(cls, "__slots__")
        assert all(f.kw_only for f in dataclasses.fields(cls))


def test_helpers() -> None:
    assert [speed_name(s) for s in ("25.78125 Gbps", "53.125 Gbps", "106.25 Gbps", "14.0625 Gbps")] == [
        "EDR",
        "HDR",
        "NDR",
        "FDR",
    ]
    assert [speed_name(s) for s in ("10.3125 Gbps", "10.0 Gbps", "10.0 Gbps (FDR10)", "2.5 Gbps", "212.5 Gbps")] == [
        "FDR10",
        "QDR",
        "FDR10",
        "SDR",
        "XDR",
    ]
    assert [speed_name(s) for s in ("4xHDR", "NDR", "???", "No Extended Speed", "", None)] == [
        "HDR",
        "NDR",
        None,
        None,
        None,
        None,
    ]
    assert [norm_width(w) for w in ("4x", " 4X", "12x", "3x", None)] == ["4X", "4X", "12X", None, None]
    assert [norm_node_type(t) for t in ("Switch", "Channel Adapter", "2", "Rt", "x")] == ["SW", "CA", "SW", "RT", None]
    assert [norm_sm_state(s) for s in ("SMINFO_MASTER", "SMINFO_DISCOVER", "2", "SMINFO_NOTACT", None)] == [
        "MASTER",
        "DISCOVERING",
        "STANDBY",
        "NOTACTIVE",
        None,
    ]
    lk = parse_link_text("( 4X  10.0 Gbps (FDR10) Active/  LinkUp) (HOQ:16 VL_Stall:7)")
    assert lk is not None and (lk.width, lk.speed, lk.state, lk.phys_state) == ("4X", "FDR10", "Active", "LinkUp")
    lk = parse_link_text("( 4X           2.5 Gbps Initialize/  LinkUp)")
    assert lk is not None and lk.state == "Init"
    rem = parse_remote_text('     1    1[  ] "x (y)" (Could be FDR10 (Found link at QDR but expected speed is FDR10))')
    assert rem is not None and rem.description == "x (y)"
    assert rem.could_be == "Could be FDR10 (Found link at QDR but expected speed is FDR10)"
    assert parse_remote_text('"Port not available"') is not None


# ----------------------------------------------------------------------------------------------- sniffing


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_sniff_claims_own_samples(mod) -> None:
    files = sample_files(mod.FORMAT)
    assert files
    for path in files:
        assert mod.sniff(head_of(path)) >= 40, path.name


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_sniff_rejects_every_other_sample_folder(mod) -> None:
    others = [d for d in sorted(DATA.iterdir()) if d.is_dir() and d.name != mod.FORMAT]
    assert others
    for folder in others:
        for path in sample_files(folder.name):
            assert mod.sniff(head_of(path)) < 40, f"{mod.FORMAT} claims {folder.name}/{path.name}"


def test_other_parsers_do_not_claim_fabric_samples() -> None:
    for fmt in sorted(MY_FORMATS):
        for path in sample_files(fmt):
            head = head_of(path)
            for mod in registry():
                if getattr(mod, "BINARY", False) or mod.FORMAT == fmt:
                    continue
                assert mod.sniff(head) < 40, f"{mod.FORMAT} claims {fmt}/{path.name}"


def test_look_alike_link_formats_stay_apart() -> None:
    """ibnetdiscover -p, ibqueryerrors -r and iblinkinfo all print port/LID/GUID link lines."""
    links = DATA / "iblinkinfo" / "824380210_Linpack_edr76_linpack_WI_md_lines31-54_edr_sb7700.txt"
    report = DATA / "ibqueryerrors" / "var_report_port_and_data_counters.txt"
    ports = DATA / "ibnetdiscover" / "ibnetdiscover_ports_test.out"
    line_mode = DATA / "iblinkinfo" / "var_line_mode_could_be_hdr.txt"
    for path, owner in ((links, iblinkinfo), (report, ibqueryerrors), (ports, ibnetdiscover), (line_mode, iblinkinfo)):
        head = head_of(path)
        scores = {m.FORMAT: m.sniff(head) for m in (iblinkinfo, ibqueryerrors, ibnetdiscover)}
        assert scores[owner.FORMAT] >= 90, (path.name, scores)
        assert all(v < 40 for k, v in scores.items() if k != owner.FORMAT), (path.name, scores)
    # a bare "Link info:" line alone is not iblinkinfo output
    only_link_info = "       Link info:      2   5[  ] ==( 4X 14.0625 Gbps Active/  LinkUp)==>  0xe41d2d0300e0bae1 6 1[  ] \"x\" ( )\n"
    assert iblinkinfo.sniff(only_link_info) < 40


# ----------------------------------------------------------------------------------------------- robustness

_SAMPLE_LINES = sorted(
    {line for fmt in sorted(MY_FORMATS) for p in sample_files(fmt) for line in head_of(p).split("\n")}
)
_mixed_text = st.lists(st.one_of(st.sampled_from(_SAMPLE_LINES), st.text(max_size=40)), max_size=40).map("\n".join)


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
    for r in res.records:
        for attr in ("guid", "peer_guid", "sm_guid"):
            g = getattr(r, attr, None)
            assert g is None or (len(g) == 18 and g.startswith("0x") and g == g.lower()), (attr, g)
