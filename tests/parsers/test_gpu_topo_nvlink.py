"""nvidia-smi topo -m and nvidia-smi nvlink -s/-e parsers against the samples in tests/data (see the READMEs)."""

from __future__ import annotations

from pathlib import Path

from diagnose.models.records import ParseResult
from diagnose.parsers import nvidia_smi_nvlink, nvidia_smi_topo
from diagnose.parsers._gpu import NvlinkErrorCounter, NvlinkStatus, TopoDevice, TopoEntry

DATA = Path(__file__).resolve().parents[1] / "data"


def read(fmt: str, name: str) -> str:
    return (DATA / fmt / name).read_text(encoding="utf-8")


def cells(res: ParseResult) -> dict[tuple[str, str], str]:
    return {(r.row, r.col): r.relation for r in res.records if isinstance(r, TopoEntry)}


def devices(res: ParseResult) -> list[TopoDevice]:
    return [r for r in res.records if isinstance(r, TopoDevice)]


# ----------------------------------------------------------------------------------------------- topo -m


def test_topo_h100_12_nics_tab_layout() -> None:
    res = nvidia_smi_topo.parse(read("nvidia_smi_topo", "slurmv4_3-12.sh_lines972-1019_topo-m_h100_12nic.txt"), "t")
    assert res.format == "nvidia_smi_topo" and res.problems == []
    c = cells(res)
    assert len(c) == 20 * 20
    assert c[("GPU0", "GPU0")] == "X" and c[("GPU0", "GPU7")] == "NV18"
    # each GPU's PIX NIC, read off the matrix
    pix = {row: col for (row, col), rel in c.items() if rel == "PIX" and row.startswith("GPU")}
    assert pix == {
        "GPU0": "NIC0", "GPU1": "NIC1", "GPU2": "NIC2", "GPU3": "NIC5",
        "GPU4": "NIC6", "GPU5": "NIC7", "GPU6": "NIC8", "GPU7": "NIC11",
    }
    assert c[("NIC3", "NIC4")] == "PIX" and c[("NIC9", "NIC10")] == "PIX"
    devs = {d.name: d for d in devices(res)}
    assert (devs["GPU0"].cpu_affinity, devs["GPU0"].numa_affinity, devs["GPU0"].device, devs["GPU0"].line) == (
        "0-191",
        "0",
        None,
        3,
    )
    assert (devs["NIC11"].device, devs["NIC11"].cpu_affinity, devs["NIC11"].line) == ("mlx5_11", None, 22)
    assert {d.host for d in devices(res)} == {"tpgds-aihub0007"}


def test_topo_space_separated_markdown_two_matrices() -> None:
    res = nvidia_smi_topo.parse(
        read("nvidia_smi_topo", "stas00_ml-engineering_network_README_lines366-393_a100_h100.txt"), "t"
    )
    assert res.problems == []
    entries = [r for r in res.records if isinstance(r, TopoEntry)]
    assert len(entries) == 2 * 64
    a100 = [e for e in entries if e.line < 15]
    h100 = [e for e in entries if e.line > 15]
    assert {e.relation for e in a100} == {"X", "NV12"} and {e.relation for e in h100} == {"X", "NV18"}
    devs = devices(res)
    assert [(d.name, d.cpu_affinity, d.numa_affinity) for d in devs if d.line in (6, 10, 25)] == [
        ("GPU0", "0-23", "0"),
        ("GPU4", "24-47", "1"),
        ("GPU4", "52-103", "1"),
    ]


def test_topo_old_driver_device_columns() -> None:
    res = nvidia_smi_topo.parse(read("nvidia_smi_topo", "var_old_driver_mlx5_columns_soc.txt"), "t")
    assert res.problems == []
    c = cells(res)
    assert c[("GPU0", "GPU1")] == "SOC" and c[("GPU0", "mlx5_0")] == "PHB" and c[("mlx5_0", "mlx5_0")] == "X"
    nic = [d for d in devices(res) if d.name == "mlx5_0"][0]
    assert (nic.device, nic.cpu_affinity) == ("mlx5_0", None)


def test_topo_truncated() -> None:
    res = nvidia_smi_topo.parse(read("nvidia_smi_topo", "var_truncated_after_gpu4.txt"), "t")
    assert [d.name for d in devices(res)] == ["GPU0", "GPU1", "GPU2", "GPU3", "GPU4"]
    assert res.problems == ["truncated: matrix shows 5 of 20 rows"]


def test_topo_crlf() -> None:
    text = read("nvidia_smi_topo", "slurmv4_3-12.sh_lines972-1019_topo-m_h100_12nic.txt")
    assert cells(nvidia_smi_topo.parse(text.replace("\n", "\r\n"), "t")) == cells(nvidia_smi_topo.parse(text, "t"))


def test_topo_p2p_matrix_is_not_a_connection_matrix() -> None:
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\tX\tOK\t0-7\nGPU1\tOK\tX\t0-7\n"
    res = nvidia_smi_topo.parse(text, "t")
    assert not [r for r in res.records if isinstance(r, TopoEntry)]
    assert len(res.problems) == 3  # two rejected rows + 0 of 2 rows shown


# ----------------------------------------------------------------------------------------------- nvlink


def test_nvlink_status_a100() -> None:
    res = nvidia_smi_nvlink.parse(read("nvidia_smi_nvlink", "gpud_nvidia-smi_nvlink_status_a100.txt"), "n")
    assert res.format == "nvidia_smi_nvlink" and res.problems == []
    st = [r for r in res.records if isinstance(r, NvlinkStatus)]
    assert len(st) == 8 * 12
    assert {(s.speed_gbs, s.active) for s in st} == {(25.0, True)}
    assert st[0] == NvlinkStatus(
        source="n",
        line=2,
        text="         Link 0: 25 GB/s",
        host=None,
        gpu=0,
        gpu_uuid="GPU-5269b708-678a-b1a8-60f0-c90406537486",
        link=0,
        speed_gbs=25.0,
        active=True,
    )
    last = st[-1]
    assert (last.gpu, last.link, last.gpu_uuid) == (7, 11, "GPU-754035b4-4708-efcd-b261-623aea38bcad")


def test_nvlink_error_counters_h100() -> None:
    res = nvidia_smi_nvlink.parse(
        read("nvidia_smi_nvlink", "stas00_ml-engineering_debug_md_lines286-300_nvlink_e_h100.txt"), "n"
    )
    assert res.problems == []
    ctr = [r for r in res.records if isinstance(r, NvlinkErrorCounter)]
    assert [(c.gpu, c.link, c.counter, c.value, c.line) for c in ctr] == [
        (0, 0, "Replay Errors", 0, 3),
        (0, 0, "Recovery Errors", 0, 4),
        (0, 0, "CRC Errors", 0, 5),
        (0, 1, "Replay Errors", 0, 7),
        (0, 1, "Recovery Errors", 0, 8),
        (0, 1, "CRC Errors", 0, 9),
        (0, 17, "Replay Errors", 0, 13),
        (0, 17, "Recovery Errors", 0, 14),
        (0, 17, "CRC Errors", 0, 15),
    ]


def test_nvlink_inactive_link_and_nonzero_counters() -> None:
    res = nvidia_smi_nvlink.parse(read("nvidia_smi_nvlink", "var_inactive_link_and_error_counters.txt"), "n")
    assert res.problems == []
    st = [r for r in res.records if isinstance(r, NvlinkStatus)]
    assert [(s.link, s.active, s.speed_gbs) for s in st] == [(0, True, 25.0), (1, True, 25.0), (2, True, 25.0),
                                                             (3, False, None)]
    bad = [(c.link, c.counter, c.value) for c in res.records if isinstance(c, NvlinkErrorCounter) and c.value]
    assert bad == [(3, "Replay Errors", 142), (3, "Recovery Errors", 3), (3, "CRC Errors", 891)]
    assert {r.host for r in res.records} == {"gpu-node-07"}


def test_nvlink_ignores_remote_device_and_list_lines() -> None:
    text = (
        "GPU 6: NVIDIA H100 80GB HBM3 (UUID: GPU-ad536355-482f-a87c-b081-8523fb3971c4)\n"
        "         Link 0: Remote Device 00000000:06:00.0: Link 57\n"
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-ad536355-482f-a87c-b081-8523fb3971c4)\n"
    )
    res = nvidia_smi_nvlink.parse(text, "n")
    assert res.records == [] and res.problems == []
    assert nvidia_smi_nvlink.sniff(text) == 0
