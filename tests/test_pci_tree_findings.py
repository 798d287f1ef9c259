"""Findings from lspci -t trees (extractors/pci_tree.py) on the samples in tests/data/lspci_tree."""

from __future__ import annotations

import shutil
from pathlib import Path

from diagnose.models.diagnosis import Finding
from diagnose.pipeline import gather

DATA = Path(__file__).resolve().parent / "data" / "lspci_tree"
KINDS = ("pci_tree_flat_vm", "gpu_nic_share_switch", "gpu_nic_cross_cpu")


def findings(name: str, tmp_path: Path) -> dict[str, Finding]:
    f = tmp_path / "capture.txt"
    shutil.copy(DATA / name, f)
    out = [x for x in gather([f]).findings if x.kind in KINDS]
    assert len(out) == len({x.kind for x in out})  # one finding per tree and kind
    return {x.kind: x for x in out}


def test_field_vm_tree_gpus_and_nvswitches_on_one_bus_is_a_flat_vm(tmp_path: Path) -> None:
    got = findings("nccl-949_a100_vm_nvswitch.txt", tmp_path)
    assert set(got) == {"pci_tree_flat_vm"}  # no NIC in the paste: nothing to say about GPU-NIC pairs
    a = got["pci_tree_flat_vm"].attrs
    assert a["gpus"] == 4 and a["nvswitches"] == 6 and a["nics"] == 0 and a["hypervisor_devices"] == 0
    assert a["shared_bus"] == 10 and a["complete"] is False and a["vm"] is True


def test_q35_vm_with_gpus_and_nics_on_root_ports(tmp_path: Path) -> None:
    got = findings("nccl-tests-256_h200_vm_flat.txt", tmp_path)
    assert set(got) == {"pci_tree_flat_vm", "gpu_nic_cross_cpu"}
    flat = got["pci_tree_flat_vm"].attrs
    assert flat["gpus"] == 8 and flat["nics"] == 8 and flat["shared_bus"] == 0 and flat["hypervisor_devices"] >= 5
    cross = got["gpu_nic_cross_cpu"].attrs
    assert cross["gpus_cross"] == 8 and cross["all"] is True and cross["level"] == "root_complex"
    assert cross["vm"] is True and cross["complete"] is True


def test_vm_nics_on_a_pci_bridge_share_a_bus(tmp_path: Path) -> None:
    got = findings("kata-vra_pci_bridge.txt", tmp_path)
    assert got["pci_tree_flat_vm"].attrs["shared_bus"] == 2  # 0a:00.0 and 0a:01.0
    assert got["gpu_nic_cross_cpu"].attrs["gpus_cross"] == 2


def test_vm_that_replicates_switches_is_not_flat(tmp_path: Path) -> None:
    got = findings("kata-vra_switch_ports.txt", tmp_path)
    assert set(got) == {"gpu_nic_share_switch"}
    a = got["gpu_nic_share_switch"].attrs
    assert a["gpus_sharing"] == 2 and a["all"] is True and a["vm"] is True and a["complete"] is True
    got = findings("nccl-tests-256_h200_vm_emulated_switches.txt", tmp_path)
    assert set(got) == {"gpu_nic_share_switch"}
    a = got["gpu_nic_share_switch"].attrs
    assert a["gpus_sharing"] == 8 and a["vm"] is True and a["complete"] is False  # the paste ends with `...`


def test_bare_metal_gpus_behind_the_nics_switch(tmp_path: Path) -> None:
    got = findings("rccl-547_mi100_switchtec_cx6.txt", tmp_path)
    assert set(got) == {"gpu_nic_share_switch"}
    a = got["gpu_nic_share_switch"].attrs
    assert a["gpus_sharing"] == 2 and a["nics"] == 1 and a["vm"] is False


def test_bare_metal_gpu_and_nic_on_different_root_buses(tmp_path: Path) -> None:
    got = findings("var_two_root_buses_no_shared_switch.txt", tmp_path)
    assert set(got) == {"gpu_nic_cross_cpu"}
    a = got["gpu_nic_cross_cpu"].attrs
    assert a["level"] == "cross_root" and a["vm"] is False and a["complete"] is True and a["gpus_cross"] == 1
    assert "0000:4a:00.0->0000:c1:00.0" in got["gpu_nic_cross_cpu"].summary


def test_mixed_placement_in_a_truncated_tree(tmp_path: Path) -> None:
    got = findings("var_truncated_cut_token.txt", tmp_path)
    assert got["gpu_nic_share_switch"].attrs["gpus_sharing"] == 1 and got["gpu_nic_share_switch"].attrs["all"] is False
    assert got["gpu_nic_cross_cpu"].attrs["complete"] is False


def test_rules_weigh_the_tree(tmp_path: Path) -> None:
    from diagnose.pipeline import triage

    f = tmp_path / "capture.txt"
    shutil.copy(DATA / "nccl-tests-256_h200_vm_flat.txt", f)
    ranked = [c.id for c in triage([f]).causes]
    assert "host.topology_misdetect" in ranked[:2] and "host.gdr_unavailable" in ranked[:3]
