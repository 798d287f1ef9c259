"""lspci -t[v][v] tree parser against tests/data/lspci_tree (see its README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.parsers import lspci, lspci_tree
from diagnose.parsers.lspci_tree import PciTree, PciTreeDevice

DATA = Path(__file__).resolve().parents[1] / "data" / "lspci_tree"
LSPCI_DATA = Path(__file__).resolve().parents[1] / "data" / "lspci"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def devices(name: str) -> tuple[dict[str, PciTreeDevice], list[PciTree], list[str]]:
    res = lspci_tree.parse(read(name), "t.txt", host="hint")
    assert res.format == "lspci_tree"
    devs = {r.bdf: r for r in res.records if isinstance(r, PciTreeDevice)}
    trees = [r for r in res.records if isinstance(r, PciTree)]
    return devs, trees, res.problems


def test_vm_tree_with_nvswitches_on_one_synthetic_bus_is_read_and_flagged_truncated() -> None:
    devs, trees, problems = devices("nccl-949_a100_vm_nvswitch.txt")
    assert len(trees) == 1 and trees[0].root_buses == 2 and trees[0].truncated and trees[0].named
    # `-+-[0000:d0]---00.0-[d1]--+-01.0`: root bus d0, its only device a bridge to bus d1 holding the GPUs
    assert devs["0000:d0:00.0"].role == "root_port" and devs["0000:d0:00.0"].secondary == 0xD1
    gpu = devs["0000:d1:01.0"]
    assert gpu.kind == "gpu" and gpu.parent == "0000:d0:00.0" and gpu.chain == ("0000:d0:00.0",)
    assert gpu.root_bus == "0000:d0" and gpu.description == "NVIDIA Corporation GA100 [A100 SXM4 80GB]"
    assert sorted(b for b, d in devs.items() if d.kind == "nvswitch") == [
        f"0000:d1:0{i}.0" for i in range(4, 10)]
    assert sorted(b for b, d in devs.items() if d.kind == "gpu") == [
        "0000:c1:01.0", "0000:c1:02.0", "0000:d1:01.0", "0000:d1:02.0"]
    # the root-bus list still ends with `+-[0000:c0]`: more buses followed in the real output
    assert len(problems) == 1 and problems[0].startswith("truncated:")


def test_bare_metal_switchtec_tree_snippet_reconstructs_nested_switches() -> None:
    devs, trees, problems = devices("rccl-547_mi100_switchtec_cx6.txt")
    assert trees[0].root_buses == 1 and trees[0].truncated  # a snippet: the lists above it are not closed
    nic = devs["0000:45:00.0"]
    assert nic.kind == "nic" and nic.rdma and nic.chain == ("0000:44:00.0", "0000:43:00.0", "0000:40:01.1")
    gpu = devs["0000:4a:00.0"]
    assert gpu.kind == "gpu" and gpu.description.endswith("[AMD/ATI] Device 738c")
    assert gpu.chain[-2:] == ("0000:43:00.0", "0000:40:01.1") and len(gpu.chain) == 7
    assert devs["0000:40:01.1"].role == "root_port"
    assert devs["0000:43:00.0"].role == "switch_upstream" and devs["0000:43:00.0"].kind == "pcie_switch"
    assert devs["0000:44:01.0"].role == "switch_downstream"  # a downstream port with a further switch below
    assert devs["0000:46:00.0"].role == "switch_upstream"
    assert devs["0000:43:00.1"].kind == "pcie_switch" and not devs["0000:43:00.1"].is_bridge  # PMC-Sierra function
    assert devs["0000:52:00.0"].kind == "other"  # SK hynix NVMe
    assert devs["0000:40:00.0"].kind == "other"  # AMD root complex


def test_q35_vm_every_gpu_and_nic_on_its_own_root_port() -> None:
    devs, trees, problems = devices("nccl-tests-256_h200_vm_flat.txt")
    assert problems == [] and not trees[0].truncated and trees[0].devices == 48
    gpus = [d for d in devs.values() if d.kind == "gpu"]
    nics = [d for d in devs.values() if d.kind == "nic" and d.rdma]
    assert len(gpus) == 8 and len(nics) == 8
    assert {d.chain for d in gpus + nics} == {(d.parent,) for d in gpus + nics}  # one root port each
    assert all(devs[d.parent].role == "root_port" for d in gpus + nics if d.parent)
    assert devs["0000:05:00.0"].parent == "0000:00:01.4"
    virtio_nic = devs["0000:01:00.0"]
    assert virtio_nic.kind == "nic" and not virtio_nic.rdma
    assert not any(d.role in ("switch_upstream", "switch_downstream") for d in devs.values())


def test_prompt_names_the_host() -> None:
    res = lspci_tree.parse(read("var_prompt_h200_vm_flat.txt"), "t.txt")
    trees = [r for r in res.records if isinstance(r, PciTree)]
    assert res.problems == [] and len(trees) == 1 and trees[0].host == "207-vm" and trees[0].line == 2
    assert {r.host for r in res.records} == {"207-vm"}


def test_emulated_switch_ports_in_a_vm() -> None:
    devs, _, _ = devices("kata-vra_switch_ports.txt")
    gpu, nic = devs["0000:03:00.0"], devs["0000:04:00.0"]
    assert gpu.chain == ("0000:02:00.0", "0000:01:00.0", "0000:00:04.0")
    assert nic.chain == ("0000:02:01.0", "0000:01:00.0", "0000:00:04.0") and nic.rdma
    assert devs["0000:01:00.0"].role == "switch_upstream" and devs["0000:02:01.0"].role == "switch_downstream"
    # the doc's `\-1f.3` line printed twice is one device
    assert sum(1 for d in devs.values() if d.devfn == "1f.3") == 1


def test_off_by_one_columns_and_pci_bridge_bus() -> None:
    # first line ` -[0000:00]-+-` one column right of its continuation lines
    devs, _, problems = devices("kata-vra_root_ports.txt")
    assert problems == [] and len(devs) == 21 and devs["0000:03:00.0"].kind == "gpu"
    # `\-01.0` one column right of the `+-00.0` it continues; two NICs on one conventional PCI bus
    devs, _, problems = devices("kata-vra_pci_bridge.txt")
    assert problems == []
    assert devs["0000:0a:01.0"].kind == "nic" and devs["0000:0a:01.0"].parent == "0000:09:00.0"
    assert devs["0000:09:00.0"].role == "bridge" and devs["0000:00:0c.0"].role == "root_port"


def test_tvv_bases_lines_and_plain_t() -> None:
    res = lspci_tree.parse(read("var_tvv_bases_plain_t.txt"), "t.txt")
    trees = [r for r in res.records if isinstance(r, PciTree)]
    assert res.problems == [] and [(t.line, t.named, t.devices) for t in trees] == [(2, True, 8), (11, False, 8)]
    second = [r for r in res.records if isinstance(r, PciTreeDevice) and r.line >= 11]
    assert {r.bdf for r in second} == {"0000:00:00.0", "0000:00:04.0", "0000:01:00.0", "0000:02:00.0",
                                        "0000:02:01.0", "0000:03:00.0", "0000:04:00.0", "0000:00:1f.3"}
    assert all(r.kind in ("other", "bridge", "pcie_switch") for r in second)  # no names: no class guess


def test_truncated_inside_a_token() -> None:
    devs, trees, problems = devices("var_truncated_cut_token.txt")
    assert trees[0].truncated and "0000:cf:00.0" in devs and "0000:ce:01.0" not in devs
    assert "truncated: tree line 4 stops inside a token" in problems


def test_never_raises_and_sniff_is_zero_elsewhere() -> None:
    for junk in ("", "-", "-[", " +-[0000:4", "\\-", "-+-[zz:qq]-+-", "+-00.0-[01-" * 50, "\x00|+-\\-" * 99):
        res = lspci_tree.parse(junk, "j")
        assert res.format == "lspci_tree"
    for f in LSPCI_DATA.iterdir():
        if f.name != "README.md":
            assert lspci_tree.sniff(f.read_text(encoding="utf-8", errors="replace")) == 0, f.name
    for f in DATA.iterdir():
        if f.name != "README.md":
            assert lspci.sniff(read(f.name)) == 0, f.name
            assert lspci_tree.sniff(read(f.name)) >= 60, f.name
