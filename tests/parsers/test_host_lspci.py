"""lspci parser against tests/data/lspci (see its README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.parsers import lspci
from diagnose.parsers._host import PcieLink

DATA = Path(__file__).resolve().parents[1] / "data" / "lspci"
H100 = "gpud_lspci-vvv_h100_pex890xx_gpu_cx7_excerpt_lines1252-1654.txt"
SIERRA = "gpud_lspci-vvv_pmc-sierra_switch_acs_excerpt_lines8570-8975.txt"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def links(res) -> dict[str, PcieLink]:  # type: ignore[no-untyped-def]
    return {r.bdf: r for r in res.records if isinstance(r, PcieLink)}


def test_h100_switch_gpu_and_cx7() -> None:
    res = lspci.parse(read(H100), "lspci.txt", host="node-a")
    assert res.format == "lspci" and res.problems == []
    d = links(res)
    assert sorted(d) == ["0000:17:03.0", "0000:17:1f.0", "0000:18:00.0", "0000:19:00.0", "0000:1a:00.0"]
    assert d["0000:17:03.0"] == PcieLink(
        source="lspci.txt",
        line=1,
        text="17:03.0 PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0) (prog-if 00 [Normal decode])",
        host="node-a",
        bdf="0000:17:03.0",
        device_class="PCI bridge",
        name="Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0) (prog-if 00 [Normal decode])",
        cap_speed_gts=32.0,
        cap_width=16,
        sta_speed_gts=16.0,
        sta_width=16,
        downgraded=True,  # `LnkSta: Speed 16GT/s (downgraded), Width x16 (ok)`
        acs_enabled=(),
        max_read_req=128,
    )
    gpu, nic = d["0000:19:00.0"], d["0000:1a:00.0"]
    assert (gpu.device_class, gpu.line, gpu.sta_speed_gts, gpu.downgraded, gpu.max_read_req) == (
        "3D controller",
        226,
        32.0,
        False,
        4096,
    )
    assert (nic.device_class, nic.name, nic.line, nic.cap_width, nic.sta_width) == (
        "Ethernet controller",
        "Mellanox Technologies MT2910 Family [ConnectX-7]",
        317,
        16,
        16,
    )
    assert (d["0000:18:00.0"].cap_width, d["0000:18:00.0"].sta_speed_gts) == (4, 16.0)
    assert d["0000:17:1f.0"].downgraded is False


def test_switch_ports_with_acs_redirect_and_width_downgrade() -> None:
    res = lspci.parse(read("gpud_lspci-vvv_pmc-sierra_switch_acs_excerpt_lines8570-8975.txt"), "l")
    assert res.problems == []
    d = links(res)
    mem = d["0000:81:00.1"]
    assert (mem.cap_width, mem.sta_width, mem.downgraded, mem.acs_enabled) == (16, 2, True, ())
    for bdf in ("0000:82:00.0", "0000:82:01.0", "0000:82:02.0", "0000:82:03.0"):
        assert d[bdf].acs_enabled == ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd")
        assert d[bdf].max_read_req == 128
    assert d["0000:82:00.0"].line == 55


def test_lspci_nn_with_domains() -> None:
    res = lspci.parse(read("gpud_lspci.nn.a100_domains.txt"), "l")
    assert res.problems == []
    d = links(res)
    ib = d["0101:00:00.0"]
    assert (ib.device_class, ib.name, ib.cap_speed_gts, ib.downgraded) == (
        "Infiniband controller",
        "Mellanox Technologies MT28908 Family [ConnectX-6 Virtual Function] [15b3:101c]",
        None,
        False,
    )
    assert d["0001:00:00.0"].device_class == "3D controller"
    assert sum(1 for x in d.values() if x.device_class == "3D controller") == 8


def test_access_denied_old_lnksta_and_truncated() -> None:
    res = lspci.parse(read("var_no_root_access_denied_and_old_lspci_lnksta.txt"), "l")
    d = links(res)
    assert d["0000:3b:00.0"].cap_speed_gts is None
    assert res.problems == ["capabilities not readable for 1 device(s) (lspci run without root), e.g. 0000:3b:00.0"]
    cx5 = d["0000:5e:00.0"]
    assert (cx5.cap_speed_gts, cx5.cap_width, cx5.sta_speed_gts, cx5.sta_width, cx5.downgraded, cx5.max_read_req) == (
        8.0,
        16,
        8.0,
        8,
        True,  # no `(downgraded)` in old lspci: x8 < x16
        512,
    )
    cut = lspci.parse(read("var_truncated_in_cx7_block.txt"), "l")
    assert cut.problems == ["truncated: block for 0000:1a:00.0 ends early (LnkCap without LnkSta)"]
    assert links(cut)["0000:1a:00.0"].cap_speed_gts == 32.0 and links(cut)["0000:1a:00.0"].sta_speed_gts is None


def test_crlf_and_not_dmesg() -> None:
    text = read(H100)
    crlf = lspci.parse(text.replace("\n", "\r\n"), "l")
    assert crlf.problems == [] and crlf.records == lspci.parse(text, "l").records
    dmesg = (
        "[    5.101] pci 0000:1a:00.0: [15b3:1021] type 00 class 0x020000\n"
        "[ 1234.5] pcieport 0000:00:01.1: AER: Corrected error received: 0000:1a:00.0\n"
        "[ 1234.5] mlx5_core 0000:1a:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer\n"
    )
    assert lspci.sniff(dmesg) == 0


def test_grep_acsctl_output_is_read_without_its_devices() -> None:
    # `lspci -vvv | grep ACSCtl` over the real PMC-Sierra capture: the flags survive, the devices do not
    from diagnose.parsers._host import AcsControl

    grepped = "\n".join(ln for ln in read(SIERRA).split("\n") if "ACSCtl" in ln) + "\n"
    assert lspci.sniff(grepped) >= 80
    res = lspci.parse(grepped, "acs.txt")
    assert all(isinstance(r, AcsControl) for r in res.records) and len(res.records) == 5
    assert sum(1 for r in res.records if "SrcValid" in r.enabled) == 4
    assert res.records[0].line == 1


def test_a_cut_acsctl_line_under_its_prompt_is_read() -> None:
    # NVIDIA/nccl-tests#152, verbatim: the prompt and one flag, the rest cut by the reporter
    res = lspci.parse("# lspci -vvv | grep ACSCtl \nACSCtl: SrcValid- ... \n", "acs.txt")
    assert [(type(r).__name__, r.line, r.enabled) for r in res.records] == [("AcsControl", 2, ())]


def test_an_acsctl_field_inside_a_device_block_stays_the_devices() -> None:
    res = lspci.parse(read(SIERRA), "lspci.txt")
    assert not [r for r in res.records if not isinstance(r, PcieLink)]
