"""ibdev2netdev parser against tests/data/ibdev2netdev (see its README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.parsers import ibdev2netdev
from diagnose.parsers._host import DevNetMap

DATA = Path(__file__).resolve().parents[1] / "data" / "ibdev2netdev"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_slurmv4_h100_roce_node() -> None:
    res = ibdev2netdev.parse(read("slurmv4_3-12.sh_lines959-971_ibdev2netdev.txt"), "i.txt", host="ignored")
    assert res.format == "ibdev2netdev" and res.problems == []
    maps = [r for r in res.records if isinstance(r, DevNetMap)]
    assert len(maps) == 12
    assert maps[0] == DevNetMap(
        source="i.txt",
        line=2,
        text="mlx5_0 port 1 ==> enp25s0np0 (Up)",
        host="tpgds-aihub0007",  # from the conda-prefixed prompt `((sglang-0.5.9) ) [dcbsr_dev@tpgds-aihub0007 ~]$`
        device="mlx5_0",
        port=1,
        netdev="enp25s0np0",
        up=True,
    )
    assert [(m.device, m.netdev) for m in maps if m.up is False] == [
        ("mlx5_10", "enp210s0f1np1"),
        ("mlx5_4", "enp83s0f1np1"),
    ]
    assert sorted(m.device for m in maps if m.netdev == "bond0") == ["mlx5_3", "mlx5_9"]


def test_verbose_and_old_style() -> None:
    res = ibdev2netdev.parse(read("var_verbose_and_oldstyle.txt"), "i")
    assert res.problems == []
    assert [(m.line, m.host, m.device, m.port, m.netdev, m.up) for m in res.records] == [
        (2, "gpu-node-07", "mlx5_0", 1, "ibp26s0", True),
        (3, "gpu-node-07", "mlx5_1", 1, "ibp64s0", False),
        (4, "gpu-node-07", "mlx5_bond_0", 1, "bond0", None),
        (6, "old-node", "mlx4_0", 1, "ib0", None),
        (7, "old-node", "mlx4_0", 2, "ib1", None),
    ]


def test_truncated_and_crlf() -> None:
    res = ibdev2netdev.parse(read("var_truncated_last_line.txt"), "i")
    assert [m.netdev for m in res.records] == ["ens1np0", "ens2np0", "ens3n"]
    assert res.problems == ["truncated: last line cut short (line 3: 'mlx5_2 port 1 ==> ens3n')"]
    crlf = ibdev2netdev.parse(read("slurmv4_3-12.sh_lines959-971_ibdev2netdev.txt").replace("\n", "\r\n"), "i")
    assert crlf.problems == [] and len(crlf.records) == 12 and crlf.records[-1].netdev == "bond0"
