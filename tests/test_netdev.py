"""ibdev2netdev's (Down) netdevs as ports that carry no traffic (real captures: fixtures/field/103-*, tests/data)."""

from __future__ import annotations

from pathlib import Path

from diagnose.pipeline import gather

ROOT = Path(__file__).resolve().parent.parent
POD = ROOT / "fixtures" / "field" / "103-sriov-ib-vf-linkstate-down-in-pod" / "commands.txt"
NODE = ROOT / "tests" / "data" / "ibdev2netdev" / "slurmv4_3-12.sh_lines959-971_ibdev2netdev.txt"


def _down(paths: list[Path], symptom: str | None = None) -> list[dict[str, object]]:
    ev = gather(paths, symptom)
    return [dict(f.attrs, device=f.location.device) for f in ev.findings if f.kind == "rdma_netdev_down"]


def test_the_only_rdma_device_of_a_pod_down_is_a_port_the_job_needs() -> None:
    got = _down([POD])
    assert got == [{"relevant": True, "all_down": True, "device": "mlx5_3"}]


def test_down_ports_beside_up_ones_matter_only_when_the_job_names_them() -> None:
    got = _down([NODE])
    assert got and all(not g["relevant"] and not g["all_down"] for g in got)
    dev = str(got[0]["device"])
    named = _down([NODE], f"NCCL over {dev} fails at init")
    assert [g["relevant"] for g in named if g["device"] == dev] == [True]


def test_a_port_the_bundle_shows_active_is_not_down(tmp_path: Path) -> None:
    (tmp_path / "ibdev2netdev.txt").write_text(POD.read_text())
    # ibstat of the same HCA port Active: only the IPoIB interface is down
    (tmp_path / "ibstat.txt").write_text(
        "CA 'mlx5_3'\n\tCA type: MT4124\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n"
        "\t\tPhysical state: LinkUp\n\t\tRate: 200\n\t\tLink layer: InfiniBand\n")
    assert _down([tmp_path]) == []
