"""The fabric simulator: topology shape, fault rendering, and every written file read back by the project's
own sniffer and parsers."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml

from diagnose.bundle import sniff_file
from diagnose.models.counters import ERROR_COUNTERS
from diagnose.parsers import by_format
from diagnose.simulate import Fault, Location, build_fat_tree, simulate
from diagnose.simulate.topology import HALF, RADIX

EXPECTED_FORMAT = {
    "ibnetdiscover.topo": "ibnetdiscover",
    "perfquery_1.txt": "perfquery",
    "perfquery_2.txt": "perfquery",
    "ibstat.txt": "ibstat",
    "dmesg.txt": "dmesg",
    "job.log": "nccl_log",
    "nccl-tests.txt": "nccl_tests",
}
SMALL = {"hosts": 8, "hosts_per_leaf": 4}  # 2 SUs x 8 rail leaves, one spine: fast to write and parse


def _parse(root: Path, rel: str):
    text = (root / rel).read_text()
    sniffed = sniff_file(rel, text)
    fmt = EXPECTED_FORMAT[rel.rsplit("/", 1)[-1]]
    assert sniffed.formats and sniffed.formats[0] == fmt, (rel, sniffed)
    res = by_format(fmt).parse(text, rel, None)
    assert res.problems == [], (rel, res.problems[:5])
    assert res.records, rel
    return res.records


def _deltas(root: Path) -> dict[tuple[str, int, str], int]:
    """(guid, port, counter) -> snapshot 2 minus snapshot 1, from the parsed perfquery files."""
    vals: dict[tuple[str, int, str], list[int]] = defaultdict(list)
    for rel in ("fabric/perfquery_1.txt", "fabric/perfquery_2.txt"):
        for r in _parse(root, rel):
            vals[(r.guid, r.port, r.counter)].append(r.value)
    assert all(len(v) == 2 for v in vals.values())
    return {k: v[1] - v[0] for k, v in vals.items()}


def _truth(root: Path) -> dict:
    return yaml.safe_load((root / "truth.yaml").read_text())


# ------------------------------------------------------------------------------------------------ topology


def test_fat_tree_64_hosts_two_tiers():
    t = build_fat_tree(64, seed=3)
    c = t.counts()
    assert (c["hosts"], c["hcas"], c["leaves"], c["spines"], c["cores"], c["tiers"]) == (64, 512, 16, 8, 0, 2)
    assert c["links_hca_leaf"] == 512 and c["links_leaf_spine"] == 512
    assert t.hosts[0] == "gpu-a001" and t.hosts[-1] == "gpu-b032"
    # rail-optimized: HCA k of every host of an SU on that SU's rail-k leaf, port = host index in the SU
    for (host, dev), end in t.attachments().items():
        k = int(dev.split("_")[1])
        assert end.node == f"leaf-{t.unit_of(host)}-r{k}"
        assert end.port == int(host[-3:])
    for leaf in t.leaves:
        ups = t.leaf_uplinks(leaf.name)
        assert len(ups) == HALF and [lk.lower.port for lk in ups] == list(range(HALF + 1, RADIX + 1))
        per_spine = Counter(lk.upper.node for lk in ups)
        assert len(per_spine) == 8 and set(per_spine.values()) == {4}  # spread evenly
        assert leaf.description == f"MF0;{leaf.name}:MQM9790/U1"
    for spine in t.spines:
        assert t.ports_of(spine.name) == list(range(1, RADIX + 1))
    guids = [n.guid for n in t.nodes.values()]
    assert len(set(guids)) == len(guids)
    assert all(g.startswith("0xfc6a1c0300") and len(g) == 18 for g in (n.guid for n in t.switches()))
    assert all(g.startswith("0x946dae0300") and len(g) == 18 for g in (n.guid for n in t.hcas()))
    assert sorted(n.lid for n in t.nodes.values()) == list(range(1, len(t.nodes) + 1))
    assert t.hca("gpu-a007", 3).description == "gpu-a007 mlx5_3"
    assert t.host_hca_guids()["gpu-a007"][3] == t.hca("gpu-a007", "mlx5_3").guid
    assert t.hca_attachment("gpu-b002", 5).node == "leaf-b-r5"
    assert build_fat_tree(64, seed=3).host_hca_guids() == t.host_hca_guids()
    assert build_fat_tree(64, seed=4).host_hca_guids() != t.host_hca_guids()


def test_fat_tree_1024_hosts_three_tiers():
    t = build_fat_tree(1024)
    c = t.counts()
    assert (c["hcas"], c["leaves"], c["spines"], c["cores"], c["tiers"]) == (8192, 256, 256, 128, 3)
    assert c["links_hca_leaf"] == c["links_leaf_spine"] == c["links_spine_core"] == 8192
    pods = Counter(s.pod for s in t.spines)
    assert len(pods) == 8 and set(pods.values()) == {32}
    for leaf in t.leaves[:16]:
        spines = [lk.upper.node for lk in t.leaf_uplinks(leaf.name)]
        assert len(set(spines)) == 32 and {t.nodes[s].pod for s in spines} == {leaf.pod}
    for spine in t.spines[:8]:
        ports = t.ports_of(spine.name)
        assert ports == list(range(1, RADIX + 1))  # 32 leaves down, 32 cores up
        assert all(t.nodes[t.peer(spine.name, p).node].tier == (1 if p <= HALF else 3) for p in ports)
    assert all(len(t.ports_of(core.name)) == RADIX for core in t.cores)
    assert t.hosts[-1] == "gpu-af032"


def test_fat_tree_512_hosts_splits_rails_into_planes():
    t = build_fat_tree(512)
    assert (t.tiers, t.planes, len(t.spines)) == (2, 2, 64)
    for leaf in t.leaves[:10]:
        assert {t.nodes[lk.upper.node].plane for lk in t.leaf_uplinks(leaf.name)} == {leaf.rail // 4}


def test_location_shorthands():
    assert Location.parse("gpu-a003/mlx5_2") == Location(host="gpu-a003", hca="mlx5_2")
    assert Location.parse("leaf-a-r2/33") == Location(switch="leaf-a-r2", port=33)
    assert Location.parse("uplink:leaf-a-r2") == Location(uplink=True, switch="leaf-a-r2")
    assert Location.parse("gpu-a003/gpu5") == Location(host="gpu-a003", gpu=5)
    assert Location.parse("spine-01") == Location(switch="spine-01")
    with pytest.raises(ValueError):
        Fault("melted")


# ------------------------------------------------------------------------------------------------ bundles


@pytest.fixture(scope="module")
def all_faults(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sim") / "all"
    return simulate(out, **SMALL, seed=11, faults=[
        Fault("bad_cable", "gpu-a002/mlx5_1", end="both"),
        Fault("port_down", "gpu-b001/mlx5_4"),
        Fault("degraded", "gpu-a003/mlx5_6", mode="2x"),
        Fault("flapping", "gpu-b003/mlx5_2"),
        Fault("congestion", "leaf-b-r0"),
        Fault("gpu_xid", "gpu-a004/gpu3"),
    ])


def test_every_file_parses_with_the_projects_parsers(all_faults):
    root = all_faults
    truth = _truth(root)
    tree = build_fat_tree(**SMALL, seed=11)
    rels = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert rels == sorted(truth["files"] + ["truth.yaml"])
    assert not sniff_file("truth.yaml", (root / "truth.yaml").read_text()).formats  # never read as evidence
    records = {rel: _parse(root, rel) for rel in rels if rel != "truth.yaml"}

    topo = Counter(type(r).__name__ for r in records["fabric/ibnetdiscover.topo"])
    n_links = len(tree.links) - 1  # the port_down cable is not in the dump, nor its HCA
    assert topo == {"FabricNode": len(tree.nodes) - 1, "FabricLink": 2 * n_links}
    links = [r for r in records["fabric/ibnetdiscover.topo"] if type(r).__name__ == "FabricLink"]
    assert {(r.width, r.speed) for r in links} == {("4X", "NDR"), ("2X", "NDR")}
    leaf_lids = {r.lid for r in records["fabric/ibnetdiscover.topo"] if type(r).__name__ == "FabricNode"
                 and r.description.startswith("MF0;leaf-")}
    assert leaf_lids == {n.lid for n in tree.leaves}

    reachable = 2 * len(tree.links) - 1  # every cabled port but the down HCA
    for rel in ("fabric/perfquery_1.txt", "fabric/perfquery_2.txt"):
        recs = records[rel]
        assert len({(r.guid, r.port) for r in recs}) == reachable
        assert all(r.extended and r.timestamp and r.guid for r in recs)
        assert len({r.counter for r in recs}) == 22  # every -x field but the selects

    job = truth["job"]["hosts"]
    assert {"gpu-a002", "gpu-b001", "gpu-a003", "gpu-b003", "gpu-a004"} <= set(job)
    for h in job:
        ports = records[f"{h}/ibstat.txt"]
        assert [p.device for p in ports] == [f"mlx5_{k}" for k in range(8)]
        assert {p.port_guid for p in ports} == {n.guid for n in tree.hcas(h)}
    nccl = records["job.log"]
    kinds = Counter(type(r).__name__ for r in nccl)
    assert kinds["NcclInitRank"] == 2 * 8 * len(job)
    assert {r.rank for r in nccl if type(r).__name__ == "NcclInitRank"} == set(range(8 * len(job)))
    assert all(r.gdr for r in nccl if type(r).__name__ == "NcclChannel" and r.transport == "NET")
    rows = [r for r in records["nccl-tests.txt"] if type(r).__name__ == "NcclTestsRow"]
    assert len(rows) == 31 and rows[-1].size_bytes == 8 * 2**30
    xids = [r for r in records["gpu-a004/dmesg.txt"] if type(r).__name__ == "XidEvent"]
    assert [(x.xid, x.pci) for x in xids] == [(79, "0000:5d:00")]


def test_fault_rendering(all_faults):
    root = all_faults
    truth = _truth(root)
    tree = build_fat_tree(**SMALL, seed=11)
    faults = {f["kind"]: f for f in truth["faults"]}
    deltas = _deltas(root)
    rising = {(g, p, c) for (g, p, c), d in deltas.items() if c in ERROR_COUNTERS and d > 0}
    bad, flap = faults["bad_cable"], faults["flapping"]
    ends = {(e["guid"], e["port"]) for f in (bad, flap) for e in (f["location"], f["peer"])}
    assert {(g, p) for g, p, _ in rising} == ends
    assert {c for g, p, c in rising if (g, p) == (bad["location"]["guid"], 1)} == {
        "symbol_error", "link_error_recovery", "port_rcv_errors"}
    assert {c for g, p, c in rising if (g, p) == (flap["peer"]["guid"], flap["peer"]["port"])} == {"link_downed"}
    # port_down: Down/Polling in ibstat, absent from NCCL's device list on that host
    ports = {p.device: p for p in _parse(root, "gpu-b001/ibstat.txt")}
    assert (ports["mlx5_4"].state, ports["mlx5_4"].phys_state, ports["mlx5_4"].rate_gbps) == ("Down", "Polling", 10)
    using = {r.host: r.devices for r in _parse(root, "job.log") if type(r).__name__ == "NcclNetInit" and r.net == "IB"}
    assert "mlx5_4" not in using["gpu-b001"] and len(using["gpu-a001"]) == 8
    # degraded: trained at 200 Gb/s
    assert {p.device: p.rate_gbps for p in _parse(root, "gpu-a003/ibstat.txt")}["mlx5_6"] == 200
    # congestion: PortXmitWait orders of magnitude above every other port's
    hot = {(p["guid"], p["port"]) for p in faults["congestion"]["ports"]}
    waits = {(g, p): d for (g, p, c), d in deltas.items() if c == "port_xmit_wait"}
    assert min(waits[k] for k in hot) > 50 * max(v for k, v in waits.items() if k not in hot)
    # the ranks behind the bad cable and the flapping link log the 2.21.5 completion error
    warns = [r for r in _parse(root, "job.log") if type(r).__name__ == "NcclWarn"]
    completion = {(r.host, r.dev) for r in warns if "status=12" in r.message}
    assert {("gpu-a002", 1), ("gpu-b003", 2)} <= completion
    assert all(r.src == "transport/net_ib.cc:1909" for r in warns if "status=12" in r.message)
    # traffic: what one end sends in the window, the other end receives, within the link's rate
    window = truth["times"]["window_s"]
    for lk in tree.links[:40]:
        a, b = (tree.nodes[e.node] for e in lk.ends)
        xa = deltas.get((a.guid, lk.lower.port, "port_xmit_data"))
        rb = deltas.get((b.guid, lk.upper.port, "port_rcv_data"))
        if xa is not None:
            assert xa == rb and 0 <= xa * 4 <= 50e9 * window


def test_bad_cable_rises_and_nothing_else(tmp_path):
    root = simulate(tmp_path / "b", **SMALL, seed=5, faults=[Fault("bad_cable", "gpu-a003/mlx5_2", end="hca")])
    truth = _truth(root)
    tree = build_fat_tree(**SMALL, seed=5)
    hca = tree.hca("gpu-a003", 2)
    f = truth["faults"][0]
    assert f["location"] == {"host": "gpu-a003", "device": "mlx5_2", "port": 1, "guid": hca.guid, "lid": hca.lid}
    leaf = tree.hca_attachment("gpu-a003", 2)
    assert (f["peer"]["switch"], f["peer"]["port"]) == (leaf.node, leaf.port) == ("leaf-a-r2", 3)
    deltas = _deltas(root)
    rising = {k for k, d in deltas.items() if k[2] in ERROR_COUNTERS and d > 0}
    assert rising == {(hca.guid, 1, c) for c in ("symbol_error", "link_error_recovery", "port_rcv_errors")}
    # background noise exists but is stable
    firsts = [r for r in _parse(root, "fabric/perfquery_1.txt") if r.counter == "symbol_error" and r.value]
    assert len(firsts) >= 3 and any(r.guid != hca.guid for r in firsts)
    assert all(deltas[(r.guid, r.port, "symbol_error")] == 0 for r in firsts if r.guid != hca.guid)


def test_port_down_hca_shows_down_in_ibstat(tmp_path):
    root = simulate(tmp_path / "p", **SMALL, seed=2, faults=["port_down"], nccl_tests=True)
    f = _truth(root)["faults"][0]
    host, dev = f["location"]["host"], f["location"]["device"]
    ports = {p.device: p for p in _parse(root, f"{host}/ibstat.txt")}
    assert (ports[dev].state, ports[dev].phys_state) == ("Down", "Polling")
    assert all(p.state == "Active" for d, p in ports.items() if d != dev)
    topo = _parse(root, "fabric/ibnetdiscover.topo")
    assert f["location"]["guid"] not in {r.guid for r in topo} | {r.peer_guid for r in topo if hasattr(r, "peer_guid")}
    busbw = [r.oop_busbw for r in _parse(root, "nccl-tests.txt") if type(r).__name__ == "NcclTestsRow"][-1]
    assert 200 < busbw < 250  # ~0.62 of the healthy 372-388 GB/s


def test_healthy_busbw_at_8gb(tmp_path):
    root = simulate(tmp_path / "h", **SMALL, seed=9)
    assert _truth(root)["faults"] == []
    rows = [r for r in _parse(root, "nccl-tests.txt") if type(r).__name__ == "NcclTestsRow"]
    assert 360 <= rows[-1].oop_busbw <= 390 and 360 <= rows[-1].ip_busbw <= 390
    assert rows[0].oop_busbw < 1


def test_same_arguments_same_bytes(tmp_path):
    kw = dict(**SMALL, seed=21, faults=["bad_cable", "congestion", "gpu_xid"], job_hosts=4)
    a, b = simulate(tmp_path / "a", **kw), simulate(tmp_path / "b", **kw)
    files = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    c = simulate(tmp_path / "c", **{**kw, "seed": 22})
    assert (a / "fabric/perfquery_1.txt").read_bytes() != (c / "fabric/perfquery_1.txt").read_bytes()


def test_simulate_command_and_unknown_cause(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "simulate", "--out", str(tmp_path / "b"),
                        "--hosts", "16", "--fault", "link.bad_cable@gpu-a002/mlx5_1", "--seed", "2"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "b" / "truth.yaml").is_file()
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "simulate", "--out", str(tmp_path / "c"),
                        "--fault", "fabric.qos_misconfig"], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and "cannot inject" in r.stderr
