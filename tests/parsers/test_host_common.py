"""Shared checks for the host-side parsers: record schemas, helpers, sniff separation, robustness."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.models.counters import canonical_counter
from diagnose.models.records import ParseResult
from diagnose.parsers import ethtool, ibdev2netdev, lspci, mlxlink, node_exporter, rdma_statistic, registry, sysfs_ib
from diagnose.parsers._host import (
    DevNetMap,
    MlxlinkInfo,
    NicStat,
    PcieLink,
    RdmaHwCounter,
    norm_bdf,
    shell_prompt,
    timestamp_line,
)

DATA = Path(__file__).resolve().parents[1] / "data"
MODULES = (sysfs_ib, node_exporter, ethtool, mlxlink, ibdev2netdev, rdma_statistic, lspci)


def sample_files(fmt: str) -> list[Path]:
    return sorted(p for p in (DATA / fmt).iterdir() if p.is_file() and p.suffix != ".md")


def test_record_schemas_are_exact() -> None:
    def names(cls: type) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    assert names(RdmaHwCounter)[:4] == ["source", "line", "text", "host"]
    assert names(RdmaHwCounter)[4:] == ["device", "port", "counter", "value"]
    assert names(NicStat)[4:] == ["netdev", "counter", "value"]
    assert names(DevNetMap)[4:] == ["device", "port", "netdev", "up"]
    assert names(MlxlinkInfo)[4:] == [
        "device",
        "state",
        "physical_state",
        "speed",
        "width",
        "fec",
        "effective_ber",
        "raw_ber",
        "effective_errors",
        "symbol_errors",
        "link_down_counter",
        "link_error_recovery_counter",
        "status_opcode",
        "recommendation",
        "temperature_c",
        "rx_power",
        "tx_power",
        "eye_grades",
    ]
    assert names(PcieLink)[4:] == [
        "bdf",
        "device_class",
        "name",
        "cap_speed_gts",
        "cap_width",
        "sta_speed_gts",
        "sta_width",
        "downgraded",
        "acs_enabled",
        "max_read_req",
    ]
    for cls in (RdmaHwCounter, NicStat, DevNetMap, MlxlinkInfo, PcieLink):
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen and hasattr(cls, "__slots__")
        assert all(f.kw_only for f in dataclasses.fields(cls))


def test_helpers() -> None:
    assert norm_bdf("1a:00.0") == "0000:1a:00.0"
    assert norm_bdf("0000:1A:00.1") == "0000:1a:00.1"
    assert norm_bdf("c941:00:02.0") == "c941:00:02.0"
    assert norm_bdf("/dev/mst/mt4129_pciconf0") is None
    assert timestamp_line("2024-03-26T13:57:26+00:00") == "2024-03-26T13:57:26+00:00"
    assert timestamp_line("Tue Mar 26 13:57:26 UTC 2024") == "Tue Mar 26 13:57:26 UTC 2024"
    assert timestamp_line("rx_packets: 1") is None
    assert shell_prompt("((sglang-0.5.9) ) [dcbsr_dev@tpgds-aihub0007 ~]$ ibdev2netdev ") == (
        "tpgds-aihub0007",
        "ibdev2netdev",
    )
    assert shell_prompt("(base) root@gpu01:~# rdma stat show") == ("gpu01", "rdma stat show")
    assert shell_prompt("(mlx5_0) port 1") is None


def test_counter_aliases_for_host_sources() -> None:
    assert canonical_counter("port_xmit_data_64") == "port_xmit_data"
    assert canonical_counter("port_unicast_rcv_packets") == "unicast_rcv_packets"
    assert canonical_counter("node_infiniband_port_constraint_errors_received_total") == "port_rcv_constraint_errors"
    assert canonical_counter("node_infiniband_port_errors_received_total") == "port_rcv_errors"
    assert canonical_counter("node_infiniband_port_discards_transmitted_total") == "port_xmit_discards"
    assert canonical_counter("node_infiniband_port_receive_remote_physical_errors_total") == (
        "port_rcv_remote_physical_errors"
    )
    assert canonical_counter("VL15_dropped") == "vl15_dropped"


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_sniff_claims_own_samples(mod) -> None:  # type: ignore[no-untyped-def]
    files = sample_files(mod.FORMAT)
    assert files
    for path in files:
        assert mod.sniff(path.read_text(encoding="utf-8")[:65536]) >= 40, path.name


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_sniff_rejects_every_other_sample_folder(mod) -> None:  # type: ignore[no-untyped-def]
    others = [d for d in sorted(DATA.iterdir()) if d.is_dir() and d.name != mod.FORMAT]
    assert others
    for folder in others:
        for path in sample_files(folder.name):
            head = path.read_text(encoding="utf-8", errors="replace")[:65536]
            assert mod.sniff(head) < 40, f"{mod.FORMAT} claims {folder.name}/{path.name}"


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_no_other_parser_claims_our_samples(mod) -> None:  # type: ignore[no-untyped-def]
    for path in sample_files(mod.FORMAT):
        head = path.read_text(encoding="utf-8", errors="replace")[:65536]
        for other in registry():
            if other.FORMAT == mod.FORMAT or getattr(other, "BINARY", False):
                continue
            assert other.sniff(head) < 40, f"{other.FORMAT} claims {mod.FORMAT}/{path.name}"


_SAMPLE_LINES = sorted(
    {line for mod in MODULES for p in sample_files(mod.FORMAT) for line in p.read_text(encoding="utf-8").split("\n")}
)
_mixed_text = st.lists(st.one_of(st.sampled_from(_SAMPLE_LINES), st.text(max_size=40)), max_size=40).map("\n".join)


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(), _mixed_text))
def test_parse_never_raises_and_sniff_is_bounded(mod, text: str) -> None:  # type: ignore[no-untyped-def]
    score = mod.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100
    res = mod.parse(text, "f.txt", host="h")
    assert isinstance(res, ParseResult) and res.format == mod.FORMAT
    assert not any(p.startswith("parser error") for p in res.problems), res.problems
    nlines = text.count("\n") + 1
    assert all(r.source == "f.txt" and 1 <= r.line <= nlines for r in res.records)


@pytest.mark.parametrize("mod", (mlxlink, rdma_statistic), ids=lambda m: m.FORMAT)
@settings(max_examples=40, deadline=None)
@given(text=st.text(alphabet='{}[]":,0123456789 abcOperational Infoifname\n', max_size=200))
def test_json_paths_never_raise(mod, text: str) -> None:  # type: ignore[no-untyped-def]
    res = mod.parse("{" + text, "f.json")
    assert not any(p.startswith("parser error") for p in res.problems), res.problems
