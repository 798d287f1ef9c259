"""diagnose.service.grouping: alert storms keyed by the switch their hosts sit behind.

Topologies: the 64-host rail-optimized fat tree of fixtures/healthy/fattree64-clean (ibnetdiscover, made by
diagnose.simulate: 16 leaves ``leaf-<su>-r<rail>`` each cabled to all 8 spines; HCA ``mlx5_k`` of every host of
SU ``a`` on ``leaf-a-r<k>``), the real iblinkinfo samples of tests/data/iblinkinfo, and a small tapered fabric
written below in ibnetdiscover's topology-file format, where two leaves reach only one spine.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from diagnose.service.grouping import Grouper
from diagnose.service.models import IncidentDraft, PortRef
from diagnose.service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
FATTREE = ROOT / "fixtures" / "healthy" / "fattree64-clean" / "fabric" / "ibnetdiscover.topo"
IBLINKINFO = ROOT / "tests" / "data" / "iblinkinfo"


def draft(**kw: object) -> IncidentDraft:
    base: dict[str, object] = {"source": "alertmanager", "external_id": "fp", "title": "IB port errors"}
    base.update(kw)
    return IncidentDraft.model_validate(base)


def grouper(path: Path | None) -> Grouper:
    return Grouper(Settings(topology=path))


@pytest.fixture(scope="module")
def fattree() -> Grouper:
    return grouper(FATTREE)


# ------------------------------------------------------------------------------------ a tapered fabric

SW_HDR = "vendid=0x2c9\ndevid=0xd2f0\nsysimgguid={g}\nswitchguid={g}({h})\n"
CA_HDR = "vendid=0x2c9\ndevid=0x1021\nsysimgguid={g}\ncaguid={g}\n"


def tapered_topology(moved: bool = False) -> str:
    """ibnetdiscover topology file (infiniband-diags ibnetdiscover(8) "Topology file format"):
    leaf-1 and leaf-2 uplink to spine-01 only, leaf-3 and leaf-4 to both spines. gpu-c00N mlx5_0 hangs off
    leaf-N port 1; with ``moved`` gpu-c001 is recabled to leaf-3 port 2."""
    sw = {name: f"0xfc6a1c03000000{i:02x}" for i, name in enumerate(["spine-01", "spine-02", "leaf-1", "leaf-2",
                                                                   "leaf-3", "leaf-4"], 1)}
    lid = {name: i for i, name in enumerate(sw, 1)}
    ca = {f"gpu-c00{n}": f"0x946dae03000000{n:02x}" for n in range(1, 5)}
    ca_lid = {h: 100 + n for n, h in enumerate(ca)}
    cables: list[tuple[str, int, str, int]] = []  # switch, port, far node, far port
    ups = {"leaf-1": ["spine-01", "spine-01"], "leaf-2": ["spine-01", "spine-01"],
           "leaf-3": ["spine-01", "spine-02"], "leaf-4": ["spine-01", "spine-02"]}
    spine_port = {"spine-01": 0, "spine-02": 0}
    for leaf, spines in ups.items():
        for k, sp in enumerate(spines):
            spine_port[sp] += 1
            cables.append((leaf, 33 + k, sp, spine_port[sp]))
    attach = {f"gpu-c00{n}": (f"leaf-{n}", 1) for n in range(1, 5)}
    if moved:
        attach["gpu-c001"] = ("leaf-3", 2)
    for host, (leaf, port) in attach.items():
        cables.append((leaf, port, host, 1))

    def desc(node: str) -> str:
        return f"{node} mlx5_0" if node in ca else f"MF0;{node}:MQM9700/U1"

    def ref(node: str) -> str:
        return f'"H-{ca[node][2:]}"' if node in ca else f'"S-{sw[node][2:]}"'

    out = ["#", "# Topology file: generated on Tue Mar 26 13:57:26 2024", "#",
           f"# Initiated from node {ca['gpu-c001'][2:]} port {ca['gpu-c001'][2:]}", ""]
    for name, g in sw.items():
        out.append(SW_HDR.format(g=g, h=g[2:]) + f'Switch\t65 "S-{g[2:]}"\t\t# "{desc(name)}" enhanced port 0 '
                   f"lid {lid[name]} lmc 0")
        links = [(p, far, fp) for s, p, far, fp in cables if s == name]
        links += [(fp, s, p) for s, p, far, fp in cables if far == name]
        for p, far, fp in sorted(links):
            far_lid = ca_lid[far] if far in ca else lid[far]
            guid = f"({ca[far][2:]})" if far in ca else ""
            out.append(f'[{p}]\t{ref(far)}[{fp}]{guid} \t\t# "{desc(far)}" lid {far_lid} 4xNDR')
        out.append("")
    for host, g in ca.items():
        leaf, port = attach[host]
        out.append(CA_HDR.format(g=g) + f'Ca\t1 "H-{g[2:]}"\t\t# "{desc(host)}"')
        out.append(f'[1]({g[2:]}) \t"S-{sw[leaf][2:]}"[{port}]\t\t# lid {ca_lid[host]} lmc 0 "{desc(leaf)}" '
                   f"lid {lid[leaf]} 4xNDR")
        out.append("")
    return "\n".join(out)


@pytest.fixture
def tapered(tmp_path: Path) -> Path:
    p = tmp_path / "fabric.topo"
    p.write_text(tapered_topology())
    return p


# ---------------------------------------------------------------------------------------------- storms


def test_storm_behind_one_leaf_gets_one_key(fattree: Grouper) -> None:
    # what Alertmanager sends for node_exporter series: host in instance, device and port as labels
    keys = {fattree.key(draft(external_id=f"fp{n}", labels={"instance": f"gpu-a{n:03d}:9100", "device": "mlx5_3",
                                                              "port": "1", "alertname": "InfinibandSymbolErrors"}))
            for n in range(1, 33)}
    assert keys == {"leaf-a-r3"}
    # the same rail on the other scalable unit is another leaf
    assert fattree.key(draft(hosts=["gpu-b005"], devices=["mlx5_3"])) == "leaf-b-r3"
    # port refs, host names with a domain
    assert fattree.key(draft(ports=[PortRef(host="gpu-a017.cluster.local", device="mlx5_0", port=1)])) == "leaf-a-r0"


def test_switch_port_alert_keys_to_that_switch(fattree: Grouper) -> None:
    assert fattree.key(draft(ports=[PortRef(host="leaf-a-r3", port=40)])) == "leaf-a-r3"
    assert fattree.key(draft(labels={"switch": "spine-02", "port": "7"})) == "spine-02"
    # a GUID names the switch as well (ibnetdiscover "S-fc6a1c0300110a22" is leaf-b-r7)
    assert fattree.key(draft(hosts=["0xfc6a1c0300110a22"])) == "leaf-b-r7"


def test_host_without_device_keys_to_its_rail_leaves(fattree: Grouper) -> None:
    a_leaves = "+".join(f"leaf-a-r{k}" for k in range(8))
    assert fattree.key(draft(hosts=["gpu-a001"])) == a_leaves
    assert fattree.key(draft(hosts=["gpu-a002"])) == a_leaves  # same scalable unit, same key
    assert fattree.key(draft(hosts=["gpu-b001"])) == a_leaves.replace("leaf-a", "leaf-b")


def test_full_fat_tree_has_no_single_spine(fattree: Grouper) -> None:
    # leaf-a-r3 and leaf-b-r3 both reach all 8 spines: no one element to blame, the key names both leaves
    assert fattree.key(draft(hosts=["gpu-a003", "gpu-b003"], devices=["mlx5_3"])) == "leaf-a-r3+leaf-b-r3"
    assert fattree.shared_uplink(["leaf-a-r3", "leaf-b-r3"]) is None


def test_unknown_hosts_and_no_topology(fattree: Grouper, tmp_path: Path) -> None:
    assert fattree.key(draft(hosts=["login01"])) is None
    assert fattree.key(draft(title="no hosts at all")) is None
    assert fattree.key(draft(hosts=["gpu-a003"], devices=["mlx5_9"])) is None  # no such HCA
    assert grouper(None).key(draft(hosts=["gpu-a003"])) is None
    assert grouper(tmp_path / "missing.topo").key(draft(hosts=["gpu-a003"])) is None
    (tmp_path / "notes.txt").write_text("the fabric was recabled on Tuesday\n")
    assert grouper(tmp_path / "notes.txt").key(draft(hosts=["gpu-a003"])) is None


# ------------------------------------------------------------------------------------------------ spines


def test_leaves_sharing_one_spine_key_to_the_spine(tapered: Path) -> None:
    g = grouper(tapered)
    assert g.key(draft(hosts=["gpu-c001"])) == "leaf-1"
    assert g.key(draft(hosts=["gpu-c001", "gpu-c002"])) == "spine-01"  # both leaves uplink to spine-01 only
    assert g.key(draft(hosts=["gpu-c001", "gpu-c003"])) == "spine-01"  # spine-01 is their only common uplink
    assert g.key(draft(hosts=["gpu-c003", "gpu-c004"])) == "leaf-3+leaf-4"  # two spines above both
    assert g.shared_uplink(["leaf-1", "leaf-2"]) == "spine-01"
    assert g.shared_uplink(["leaf-1+leaf-2", "leaf-3"]) == "spine-01"
    assert g.shared_uplink(["leaf-3", "leaf-4"]) is None
    assert g.shared_uplink(["leaf-1", "no-such-switch"]) is None


# ------------------------------------------------------------------------------------------ other formats


def test_iblinkinfo_topology(tmp_path: Path) -> None:
    # a real capture: CAs "n02 HCA-1" and "mgt mlx5_0" cabled to the EDR switch "MF0;SB7700:MSB7700/U1";
    # given as a folder of topology output, not a single file
    folder = tmp_path / "fabric"
    folder.mkdir()
    shutil.copy(IBLINKINFO / "824380210_Linpack_edr76_linpack_WI_md_lines31-54_edr_sb7700.txt", folder / "ibl.txt")
    g = grouper(folder)
    assert g.key(draft(ports=[PortRef(host="n02", device="HCA-1", port=1)])) == "SB7700"
    assert g.key(draft(hosts=["n02", "mgt"])) == "SB7700"
    # the LegoOS snippet shows CAs but not the switch block: no cable is known, so nothing can be keyed
    assert grouper(IBLINKINFO / "legoos_README_iblinkinfo_snippet.txt").key(draft(hosts=["wuklab01"])) is None


# ---------------------------------------------------------------------------------------- lazy and cached


def test_loaded_lazily_once_and_again_after_a_change(tapered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[Path] = []
    real = Grouper._load

    def counting(path: Path):  # type: ignore[no-untyped-def]
        loads.append(path)
        return real(path)

    monkeypatch.setattr(Grouper, "_load", staticmethod(counting))
    later = tapered.parent / "later.topo"
    g = grouper(later)
    assert loads == []  # nothing is read at construction
    assert g.key(draft(hosts=["gpu-c001"])) is None  # not there yet
    later.write_text(tapered.read_text())
    for _ in range(50):
        assert g.key(draft(hosts=["gpu-c001"])) == "leaf-1"
    assert loads == [later]
    later.write_text(tapered_topology(moved=True))
    st = later.stat()
    os.utime(later, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert g.key(draft(hosts=["gpu-c001"])) == "leaf-3"
    assert loads == [later, later]

