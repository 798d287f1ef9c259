"""Tests for diagnose.parsers.mlnx_qos (samples: tests/data/mlnx_qos/README.md)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import by_format, mlnx_qos
from diagnose.parsers._nic import DscpPrio, RoceQosConfig

DATA = Path(__file__).resolve().parent.parent / "data"
OWN = DATA / "mlnx_qos"


def _parse(name: str):
    res = mlnx_qos.parse((OWN / name).read_text(), name, "hint")
    assert res.problems == []
    cfg = [r for r in res.records if isinstance(r, RoceQosConfig)]
    maps = [r for r in res.records if isinstance(r, DscpPrio)]
    return cfg, maps


def test_registered():
    assert by_format("mlnx_qos") is mlnx_qos


def test_netarbiter_trace():
    cfg, maps = _parse("netarbiter_setup_nic_lossless_layer3.txt")
    assert [(c.interface, c.trust, c.pfc_prios, c.dcbx, c.line) for c in cfg] == [
        ("eth4", "dscp", "3", "OS controlled", 6)]
    m = {x.dscp: x.prio for x in maps}
    assert len(m) == 64 and m[26] == 3 and m[0] == 0 and m[46] == 5 and m[63] == 7


def test_pcp_without_pfc():
    cfg, maps = _parse("var_pcp_trust_no_pfc.txt")
    assert [(c.host, c.interface, c.trust, c.pfc_prios) for c in cfg] == [("gpu-r12", "ens1f0np0", "pcp", "")]
    assert maps == []


def test_colon_rows_and_two_reports():
    text = ("$ mlnx_qos -i eth1\nPriority trust state: dscp\nPFC configuration:\n"
            "        priority:  0   1   2   3   4   5   6   7\n        enabled:   0   0   0   0   0   1   0   0\n"
            "$ mlnx_qos -i eth2\nPriority trust state: pcp\n")
    cfg = [r for r in mlnx_qos.parse(text, "x").records if isinstance(r, RoceQosConfig)]
    assert [(c.interface, c.trust, c.pfc_prios) for c in cfg] == [("eth1", "dscp", "5"), ("eth2", "pcp", None)]


def test_sniff_zero_on_other_formats():
    for d in sorted(DATA.iterdir()):
        if d.is_dir() and d.name != "mlnx_qos":
            for f in sorted(d.iterdir())[:3]:
                if f.is_file() and f.suffix != ".md":
                    assert mlnx_qos.sniff(f.read_text(errors="replace")[:65536]) == 0, f


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=400))
def test_never_raises(text):
    mlnx_qos.sniff(text)
    assert mlnx_qos.parse("Priority trust state: dscp\n" + text, "x").format == "mlnx_qos"


def test_a_paste_that_glued_rows_to_their_headers_is_read() -> None:
    # verbatim from NVIDIA/nccl#2237 (fixtures/field/106-*): the reporter condensed the report onto one line a section
    text = ("$ mlnx_qos -i eth1\n"
            "Priority trust state: dscp\n"
            "dscp2prio mapping:  prio:0 dscp:07,...,00   prio:5 dscp:59\n"
            "PFC configuration:  enabled 0 0 0 0 0 1 0 0\n")
    res = mlnx_qos.parse(text, "commands.txt")
    cfg = [r for r in res.records if isinstance(r, RoceQosConfig)]
    assert [(c.interface, c.trust, c.pfc_prios) for c in cfg] == [("eth1", "dscp", "5")]
    maps = sorted((r.dscp, r.prio) for r in res.records if isinstance(r, DscpPrio))
    assert maps == [(0, 0), (7, 0), (59, 5)]
