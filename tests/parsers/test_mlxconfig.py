"""Tests for diagnose.parsers.mlxconfig (samples: tests/data/mlxconfig/README.md)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import by_format, mlxconfig
from diagnose.parsers._nic import NicConfigOption

DATA = Path(__file__).resolve().parent.parent / "data"
OWN = DATA / "mlxconfig"


def _opts(name: str) -> dict[str, NicConfigOption]:
    res = mlxconfig.parse((OWN / name).read_text(), name)
    assert res.problems == []
    return {r.key: r for r in res.records}


def test_registered():
    assert by_format("mlxconfig") is mlxconfig


def test_query_without_column_names():
    o = _opts("terrencemiao_blog_connectx4_query.txt")
    assert list(o) == ["LINK_TYPE_P1", "SRIOV_EN", "NUM_OF_VFS"]
    assert (o["LINK_TYPE_P1"].value, o["LINK_TYPE_P1"].number) == ("ETH(2)", 2)
    assert o["NUM_OF_VFS"].number == 8 and o["SRIOV_EN"].number == 1
    assert o["SRIOV_EN"].host == "pve" and o["SRIOV_EN"].device == "/dev/mst/mt4115_pciconf0"
    assert o["SRIOV_EN"].device_type == "ConnectX4"


def test_set_output_next_boot_and_new():
    o = _opts("maas_commissioning_pr2_connectx6_set.txt")
    assert set(o) == {"BOOT_VLAN", "BOOT_LACP_DIS", "BOOT_VLAN_EN", "BOOT_UNDI_NETWORK_WAIT"}
    w = o["BOOT_UNDI_NETWORK_WAIT"]
    assert (w.value, w.next_boot, w.number, w.device) == ("0", "0", 0, "c2:00.0")  # not the "New" 30


def test_pci_settings_variant():
    o = _opts("var_cx7_pci_settings_prompt.txt")
    assert o["MAX_ACC_OUT_READ"].number == 8 and o["ADVANCED_PCI_SETTINGS"].number == 1
    assert o["MODULE_SPLIT_M0"].number is None and o["PCI_WR_ORDERING"].number == 0
    assert o["ROCE_CC_PRIO_MASK_P1"].number == 255
    assert {r.host for r in o.values()} == {"gpu-b07"}


def test_default_current_columns_and_pending():
    text = ("Device #1:\n----------\n\nDevice type:    ConnectX7\nDevice:         03:00.0\n\n"
            "Configurations:                              Default         Current         Next Boot\n"
            "*       MAX_ACC_OUT_READ                    0               0               44\n"
            "        ROCE_CC_PRIO_MASK_P1                0xff            0xff            0xff\n")
    r = {x.key: x for x in mlxconfig.parse(text, "x").records}
    m = r["MAX_ACC_OUT_READ"]
    assert (m.default, m.value, m.next_boot, m.pending, m.number) == ("0", "0", "44", True, 0)
    assert r["ROCE_CC_PRIO_MASK_P1"].number == 255 and not r["ROCE_CC_PRIO_MASK_P1"].pending


def test_cut_table_keeps_rows_before_the_cut():
    text = (OWN / "var_cx7_pci_settings_prompt.txt").read_text()
    cut = text[: text.index("LINK_TYPE_P1") + 5]
    keys = [r.key for r in mlxconfig.parse(cut, "x").records]
    assert "MAX_ACC_OUT_READ" in keys and "ATS_ENABLED" not in keys


def test_sniff_zero_on_other_formats():
    for d in sorted(DATA.iterdir()):
        if d.is_dir() and d.name != "mlxconfig":
            for f in sorted(d.iterdir())[:3]:
                if f.is_file() and f.suffix != ".md":
                    assert mlxconfig.sniff(f.read_text(errors="replace")[:65536]) == 0, f


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=400))
def test_never_raises(text):
    mlxconfig.sniff(text)
    assert mlxconfig.parse("Configurations:\n" + text, "x").format == "mlxconfig"
