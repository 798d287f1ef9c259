"""Tests for diagnose.parsers.dmesg against real kernel-log samples (see tests/data/dmesg/README.md)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import by_format, dmesg
from diagnose.parsers.dmesg import GpuIdentity, KernelEvent, Mlx5Event, PeermemEvent, XidEvent

DATA = Path(__file__).resolve().parent.parent / "data"
OWN = DATA / "dmesg"


def _parse(name: str, host: str | None = None):
    text = (OWN / name).read_text()
    return dmesg.parse(text, f"dmesg/{name}", host)


def _of(result, cls):
    return [r for r in result.records if isinstance(r, cls)]


# ---------------------------------------------------------------------------------------------------------------
# contract


def test_registered_and_not_mixable():
    assert by_format("dmesg") is dmesg
    assert not getattr(dmesg, "MIXABLE", False)


def test_record_schemas():
    def names(cls):
        return [f.name for f in dataclasses.fields(cls)]

    base = ["source", "line", "text", "host"]
    assert names(XidEvent) == base + ["pci", "xid", "pid", "process", "detail", "timestamp"]
    assert names(Mlx5Event) == base + ["bdf", "netdev", "category", "message", "timestamp"]
    assert names(PeermemEvent) == base + ["category", "message", "timestamp"]
    assert names(GpuIdentity) == base + ["pci", "uuid", "serial"]
    assert names(KernelEvent) == base + ["category", "device", "message", "timestamp"]


# ---------------------------------------------------------------------------------------------------------------
# real samples


def test_xid_119_dmesg_T():
    res = _parse("gpud_dmesg-with-xid-119.log", host="gpu-node-4")
    assert res.problems == []
    xids = _of(res, XidEvent)
    assert [x.xid for x in xids] == [119] * 5
    assert {x.pci for x in xids} == {"0000:9b:00"}
    first = xids[0]
    assert first.line == 3
    assert first.pid == 2024380 and first.process == "nvidia-smi"
    assert first.timestamp == "Sun Feb 23 16:24:18 2025"
    assert first.detail.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert first.host == "gpu-node-4"  # dmesg -T names no host: the bundle hint is used
    assert [x.process for x in xids] == ["nvidia-smi", "nvidia-smi", "nvidia-smi", "cache_mgr_main", "gpud"]
    assert [x.pid for x in xids][-2:] == [1263500, 1240590]
    ids = _of(res, GpuIdentity)
    # "Rate limiting GSP RPC error prints for GPU at PCI:0000:9b:00" is not an identity line
    assert len(ids) == 1
    assert ids[0].pci == "0000:9b:00"
    assert ids[0].uuid == "GPU-509665ad-b600-ac93-3616-d754b23d636d"
    assert ids[0].serial == "1650124014249"
    assert ids[0].line == 1


def test_xid_48_63_94_and_peermem_iso():
    res = _parse("gpud_dmesg.0_xid48_63_94_peermem.log")
    assert res.problems == []
    xids = _of(res, XidEvent)
    assert Counter(x.xid for x in xids) == {48: 1, 63: 1, 94: 9}
    assert {x.pci for x in xids} == {"0000:19:00"}
    dbe = xids[0]
    assert dbe.xid == 48 and dbe.pid is None and dbe.process is None
    assert dbe.timestamp == "2024-11-15T12:02:03,470068+00:00"
    assert "double bit error (DBE)" in dbe.detail
    contained = [x for x in xids if x.xid == 94 and x.pid is not None]
    assert len(contained) == 8
    assert {x.process for x in contained} == {"python3.10"}
    assert contained[0].pid == 1248209 and contained[0].detail == "Ch 00000008"
    peer = _of(res, PeermemEvent)
    assert len(peer) == 30  # the file has no trailing newline: the last line still counts
    assert {p.category for p in peer} == {"error"}
    assert peer[0].timestamp == "2024-11-15T05:39:15,491363+00:00"
    assert peer[0].message.startswith("nv_get_p2p_free_callback:127 ERROR detected invalid context")
    assert peer[-1].line == 41


def test_xid_13_43_decode_prefix():
    res = _parse("gpud_dmesg.decode.iso.log.0_lines1-30_xid13_43.log")
    assert res.problems == []
    xids = _of(res, XidEvent)
    assert len(xids) == 30
    assert Counter(x.xid for x in xids) == {13: 28, 43: 2}
    assert {x.pci for x in xids} == {"0000:38:00"}
    x43 = [x for x in xids if x.xid == 43]
    assert [(x.pid, x.process, x.detail) for x in x43] == [
        (2815167, "pt_main_thread", "Ch 00000008"),
        (2823801, "pt_main_thread", "Ch 00000008"),
    ]
    assert xids[0].timestamp == "2025-01-21T02:21:33,498559+00:00"
    assert xids[0].detail == "Graphics SM Warp Exception on (GPC 8, TPC 5, SM 0): Out Of Range Address"


def test_mlx5_boot_grep():
    res = _parse("gpud_dmesg.decode.iso.log.1_grep_mlx5.log")
    assert res.problems == []
    ev = _of(res, Mlx5Event)
    assert len(ev) == 93 and len(res.records) == 93
    cats = Counter(e.category for e in ev)
    assert cats["pcie_bandwidth"] == 12
    assert cats["module_event"] == 12
    assert cats["pcie_power"] == 12
    assert cats["link_down"] == 3 and cats["link_up"] == 1
    assert len({e.bdf for e in ev}) == 12
    power = next(e for e in ev if e.category == "pcie_power")
    assert power.bdf == "0000:1a:00.0"
    assert power.message == "Detected insufficient power on the PCIe slot (27W)."  # func:line:(pid) stripped
    assert power.timestamp == "2025-01-17T15:36:26,478631+00:00"
    downs = [(e.bdf, e.netdev) for e in ev if e.category == "link_down"]
    assert downs == [
        ("0000:9d:00.1", "enp157s0f1np1"),
        ("0000:9d:00.0", "enp157s0f0np0"),
        ("0000:1b:00.1", "enp27s0f1np1"),
    ]
    up = next(e for e in ev if e.category == "link_up")
    assert (up.bdf, up.netdev, up.message) == ("0000:1b:00.0", "bootnet", "Link up")
    unplugged = sorted(e.bdf for e in ev if "Cable unplugged" in e.message)
    assert unplugged == ["0000:1b:00.1", "0000:9d:00.1"]
    bw = next(e for e in ev if e.category == "pcie_bandwidth" and e.bdf == "0000:1b:00.0")
    assert "252.048 Gb/s available PCIe bandwidth (16.0 GT/s PCIe x16 link)" == bw.message
    fw = next(e for e in ev if e.message.startswith("firmware version"))
    assert fw.category == "other" and fw.netdev is None


# ---------------------------------------------------------------------------------------------------------------
# variations


def test_syslog_prefixed_xid_links_aer():
    res = _parse("var_syslog_messages_xid79_ib_link_aer.log", host="bundle-hint")
    assert res.problems == []
    assert {r.host for r in res.records} == {"node017"}  # the syslog host wins over the hint
    xids = _of(res, XidEvent)
    assert [(x.xid, x.pci, x.pid, x.process) for x in xids] == [
        (79, "0000:38:00", 2815167, "pt_main_thread"),
        (79, "0000:44:00", None, None),
    ]
    assert xids[0].timestamp == "Mar  3 12:05:41"
    assert xids[1].detail == "GPU has fallen off the bus"
    ident = _of(res, GpuIdentity)
    assert [(i.pci, i.uuid, i.serial) for i in ident] == [
        ("0000:38:00", "GPU-6e2a1f3c-9b0d-4c1e-8f2a-3d4c5b6a7e81", "1652322008890")
    ]
    mlx = _of(res, Mlx5Event)
    port = [(m.netdev, m.category, m.message) for m in mlx if m.netdev == "mlx5_0"]
    assert port == [
        ("mlx5_0", "link_down", "Port: 1 Link DOWN"),
        ("mlx5_0", "other", "Port: 1 Link INIT"),
        ("mlx5_0", "link_up", "Port: 1 Link ACTIVE"),
    ]
    kev = _of(res, KernelEvent)
    by_cat = Counter(k.category for k in kev)
    assert by_cat == {"pcie_aer": 4, "ib_link": 1, "netdev_link": 1, "other": 1}
    ib = next(k for k in kev if k.category == "ib_link")
    assert (ib.device, ib.message, ib.line) == ("ib0", "lost carrier", 8)
    aer = [k for k in kev if k.category == "pcie_aer"]
    assert {k.device for k in aer} == {"0000:1a:00.0"}  # the erroring device, not the root port
    fallen = next(k for k in kev if k.category == "other")
    assert fallen.device == "0000:38:00" and "fallen off the bus" in fallen.message
    bond = next(k for k in kev if k.category == "netdev_link")
    assert bond.device == "bond0"
    # the systemd line is not a kernel line
    assert all(r.line != 3 for r in res.records)


def test_journalctl_iso_multiline_fallen_off_bus_oom():
    res = _parse("var_journalctl_iso_nvsentinel_multiline.log")
    xid = _of(res, XidEvent)[0]
    assert (xid.pci, xid.xid, xid.pid, xid.process, xid.host) == (
        "0000:44:00.0",
        94,
        40112,
        "python3",
        "node017",
    )
    assert xid.timestamp == "2025-03-03T12:10:01+0000"
    kev = _of(res, KernelEvent)
    assert [(k.category, k.device, k.line) for k in kev] == [
        ("other", "0000:44:00.0", 4),
        ("ib_link", "mlx5_2", 5),
        ("oom", None, 6),
    ]


def test_pdsh_prefixed_mlx5_cmd_timeout_health_peermem():
    res = _parse("var_pdsh_dmesg_mlx5_cmd_timeout_peermem.log")
    assert res.problems == []
    mlx = _of(res, Mlx5Event)
    assert [(m.host, m.bdf, m.category) for m in mlx] == [
        ("node018", "0000:61:00.0", "cmd_timeout"),
        ("node018", "0000:61:00.0", "cmd_timeout"),
        ("node018", "0000:61:00.0", "health"),
        ("node018", "0000:61:00.0", "health"),
    ]
    assert mlx[1].message == "CREATE_DCT(0x710) timeout. Will cause a leak of a command resource"
    assert mlx[0].timestamp == "20113.502117"
    peer = _of(res, PeermemEvent)
    assert [(p.host, p.category) for p in peer] == [("node017", "loaded"), ("node017", "error")]
    assert "ib_register_peer_memory_client" in peer[1].message
    seg = _of(res, KernelEvent)[0]
    assert (seg.category, seg.device) == ("other", "python3")


def test_truncated_xid_line_is_a_problem():
    res = _parse("var_truncated_xid.log")
    assert [x.pid for x in _of(res, XidEvent)] == [2024380, 1263500]
    assert len(res.problems) == 1 and "line 3" in res.problems[0]


def test_xid_line_cut_after_xid_number_keeps_event_and_reports():
    res = dmesg.parse("[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79", "x")
    assert [(x.xid, x.pci, x.timestamp) for x in _of(res, XidEvent)] == [(79, "0000:3b:00", "1234.567890")]
    assert res.problems


# ---------------------------------------------------------------------------------------------------------------
# sniff


@pytest.mark.parametrize(
    "path", sorted(p for p in OWN.iterdir() if p.name != "README.md"), ids=lambda p: p.name
)
def test_sniff_claims_own_samples(path: Path):
    assert dmesg.sniff(path.read_text()[:65536]) >= 80


def _other_files():
    for d in sorted(p for p in DATA.iterdir() if p.is_dir() and p.name != "dmesg"):
        for f in sorted(d.iterdir()):
            if f.is_file() and f.name != "README.md":
                yield f


@pytest.mark.parametrize("path", list(_other_files()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_rejects_other_formats(path: Path):
    assert dmesg.sniff(path.read_text(errors="replace")[:65536]) < 40


def test_sniff_rejects_nccl_log():
    # two lines from devopsrustem/slurmv4@e95c7d7cc07303628822f12a30d607d38da1f54d:3/13.sh (NCCL 2.27.5 RoCE init)
    head = (
        "tpgds-aihub0008:207008:207008 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [2]mlx5_2:1/RoCE "
        "[3]mlx5_5:1/RoCE [4]mlx5_6:1/RoCE [5]mlx5_7:1/RoCE [6]mlx5_8:1/RoCE [7]mlx5_11:1/RoCE [RO]; OOB "
        "enp25s0np0:10.99.91.63<0>\n"
        "tpgds-aihub0008:207014:207014 [7] NCCL INFO NCCL_SOCKET_IFNAME set by environment to enp25s0np0\n"
    )
    assert dmesg.sniff(head) < 40


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str):
    res = dmesg.parse(text, "fuzz")
    assert res.format == "dmesg"
    assert all(r.line >= 1 for r in res.records)
    score = dmesg.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "NVRM: Xid (PCI:0000:38:00): ",
                "13, pid=",
                "'<unknown>'",
                ", name=",
                "mlx5_core 0000:1a:00.0",
                " ens1np0: ",
                "[ 12.500000] ",
                "Mar  3 12:00:00 n1 kernel: ",
                "kern  :warn  : ",
                "NVRM: GPU at PCI:0000:38:00: GPU-1234abcd-1",
                "NVRM: GPU Board Serial Number: 1",
                "nvidia-peermem ",
                "AER: ",
                "\n",
                " ",
                "9" * 40,
                ": lost carrier",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_never_raises_on_kernel_like_fragments(text: str):
    res = dmesg.parse(text, "fuzz")
    assert not any(p.startswith("parser error") for p in res.problems)
