"""The fabric simulator: topology shape, fault rendering, every written file read back by the project's own
sniffer and parsers, and every cause id injected at a known place and diagnosed there by the pipeline."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml

from diagnose.bench import exact_location
from diagnose.bundle import sniff_file
from diagnose.catalog.loader import load_catalog
from diagnose.catalog.taxonomy import TAXONOMY
from diagnose.models.counters import ERROR_COUNTERS
from diagnose.parsers import by_format
from diagnose.pipeline import triage
from diagnose.simulate import CAUSES, Fault, Location, build_fat_tree, compatible, link_layer_for, simulate
from diagnose.simulate.topology import HALF, RADIX

EXPECTED_FORMAT = {
    "ibnetdiscover.topo": "ibnetdiscover",
    "perfquery_1.txt": "perfquery",
    "perfquery_2.txt": "perfquery",
    "ibstat.txt": "ibstat",
    "dmesg.txt": "dmesg",
    "job.log": "nccl_log",
    "nccl-tests.txt": "nccl_tests",
    "lsmod.txt": "lsmod",
    "ulimit-a.txt": "ulimit",
    "df-h.txt": "df",
    "lspci-vvv.txt": "lspci",
    "nvidia-smi.txt": "nvidia_smi",
    "nvidia-smi-q.txt": "nvidia_smi_q",
    "nvidia-smi-topo-m.txt": "nvidia_smi_topo",
    "nvidia-smi-nvlink-s.txt": "nvidia_smi_nvlink",
    "nvidia-smi-nvlink-e.txt": "nvidia_smi_nvlink",
    "dcgmi-health.txt": "dcgmi",
    "fabricmanager.log": "fabric_manager_log",
    "ibv_devinfo.txt": "ibv_devinfo",
    "env.txt": "env",
    "ethtool-S.txt": "ethtool_stats",
    "rdma-statistic.txt": "rdma_statistic",
    "ibdev2netdev.txt": "ibdev2netdev",
    "opensm.log": "opensm_log",
    "sminfo.txt": "sminfo",
    "dgxa100-topo.xml": "nccl_topo_xml",
    "opensm.conf": "opensm_conf",
    "dump_lfts.txt": "ibroute",
    "partitions.conf": "opensm_partitions",
    "smpquery_pkeys.txt": "smpquery_pkeys",
    "iblinkinfo.txt": "iblinkinfo",
    "2.21.5.lua": "modulefile",
    "all_reduce_perf_2n.txt": "nccl_tests",
    "all_reduce_perf_4n.txt": "nccl_tests",
    "all_reduce_perf_16n.txt": "nccl_tests",
}
# a capture holding several tools' output, as one terminal session: every format the sniffer must find in it
SESSION_FORMATS = {"smpquery_qos.txt": ("smpquery_sl2vl", "smpquery_vlarb")}
SMALL = {"hosts": 8, "hosts_per_leaf": 4}  # 2 SUs x 8 rail leaves, one spine: fast to write and parse
CATALOG = load_catalog()


def _parse(root: Path, rel: str):
    text = (root / rel).read_text()
    sniffed = sniff_file(rel, text)
    fmt = EXPECTED_FORMAT[rel.rsplit("/", 1)[-1]]
    assert sniffed.formats and sniffed.formats[0] == fmt, (rel, sniffed)
    res = by_format(fmt).parse(text, rel, None)
    assert res.problems == [], (rel, res.problems[:5])
    assert res.records, rel
    if fmt == "nccl_log":  # the NCCL log parser returns column batches; the checks below read one record per line
        from diagnose.parsers.nccl_log import as_records

        return as_records(res)
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
    for text in ("gpu-a003/mlx5_2", "leaf-a-r2/33", "uplink:leaf-a-r2", "gpu-a003/gpu5", "gpu-a003"):
        assert str(Location.parse(text)) == text  # what error messages print reads back the same
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
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "simulate", "--out", str(tmp_path / "b"),
                        "--hosts", "16", "--fault", "link.bad_cable@gpu-a002/mlx5_1", "--seed", "2"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "b" / "truth.yaml").is_file()
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "simulate", "--out", str(tmp_path / "c"),
                        "--fault", "link.melted"], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and "cannot inject" in r.stderr


# ------------------------------------------------------------------------------------------------ every cause id

# Each cause injected at a place the test chooses on the 8-host fabric (gpu-a001..a004, gpu-b001..b004; leaf
# uplinks on ports 33-36), and where the diagnosis must put it. DGX H100 layout: HCA mlx5_k at PCI bus
# 19/2b/3b/5e/9b/ac/bb/dc, GPU k at 18/2a/3a/5d/9a/ab/ba/db; RoCE netdevs are named after the HCA's bus.
PLACED: dict[str, tuple[str, dict]] = {
    "link.bad_cable": ("gpu-a002/mlx5_3", {"host": "gpu-a002", "device": {"mlx5_3"}}),
    "link.port_down": ("gpu-b003/mlx5_6", {"host": "gpu-b003", "device": {"mlx5_6"}}),
    "link.degraded": ("gpu-a004/mlx5_1", {"host": "gpu-a004", "device": {"mlx5_1"}}),
    "link.flapping": ("gpu-b001/mlx5_0", {"host": "gpu-b001", "device": {"mlx5_0"}}),
    "fabric.congestion": ("leaf-a-r2/34", {"device": {"leaf-a-r2"}, "port": {34}}),
    "fabric.adaptive_routing_off": ("leaf-b-r5/34", {"device": {"leaf-b-r5"}, "port": {34, 35}}),
    "fabric.route_imbalance": ("leaf-a-r6/35", {"device": {"leaf-a-r6"}, "port": {35}}),
    "fabric.sm_problem": ("gpu-b002", {"host": {None, "gpu-b002"}}),
    "fabric.pkey_mismatch": ("gpu-a003", {"host": "gpu-a003"}),
    "fabric.qos_misconfig": ("", {"job": True}),
    "fabric.rail_isolation": ("gpu-b004", {"host": "gpu-b004"}),
    "roce.gid_index": ("", {"job": True}),
    "roce.pfc_ecn": ("gpu-a001/mlx5_5", {"host": "gpu-a001", "device": {"mlx5_5", "0000:ac:00.0", "enp172s0np0"}}),
    "mtu.mismatch": ("gpu-b002", {"host": "gpu-b002"}),
    "host.gdr_unavailable": ("gpu-a004", {"host": "gpu-a004"}),
    "host.pcie_acs_iommu": ("gpu-b001", {"host": "gpu-b001"}),
    "host.pcie_degraded": ("gpu-a002/mlx5_7", {"host": "gpu-a002", "device": {"mlx5_7", "0000:dc:00.0"}}),
    "host.nic_driver_firmware": ("gpu-b003/mlx5_2", {"host": "gpu-b003", "device": {"mlx5_2", "0000:3b:00.0"}}),
    "host.numa_affinity": ("gpu-a001", {"host": "gpu-a001"}),
    "host.topology_misdetect": ("gpu-b004", {"host": "gpu-b004"}),
    "host.container_rdma_access": ("", {"job": True}),
    "host.memlock_limit": ("gpu-a003", {"host": "gpu-a003"}),
    "host.shm_too_small": ("gpu-b002", {"host": "gpu-b002"}),
    "nccl.socket_fallback": ("", {"job": True}),
    "nccl.interface_selection": ("", {"job": True}),
    "nccl.version_mismatch": ("gpu-a002", {"host": "gpu-a002"}),
    "nccl.p2p_or_nvls_config": ("gpu-b001", {"host": "gpu-b001"}),
    "gpu.xid_error": ("gpu-a003/gpu6", {"host": "gpu-a003", "gpu": "0000:ba:00"}),
    "gpu.nvlink_degraded": ("gpu-b004/gpu2", {"host": "gpu-b004", "gpu": "0000:3a:00"}),
    "gpu.fabric_manager": ("gpu-a004", {"host": "gpu-a004"}),
    "gpu.throttling": ("gpu-b003/gpu1", {"host": "gpu-b003", "gpu": "0000:2a:00"}),
    "app.straggler_or_desync": ("gpu-a002/gpu4", {"rank": 12}),  # gpu-a002 is the job's 2nd host: 8 + 4
}
JOB = {"gpu-a001", "gpu-a002", "gpu-a003", "gpu-a004", "gpu-b001", "gpu-b002", "gpu-b003", "gpu-b004"}


def test_the_simulator_has_every_cause_and_the_placements_name_only_causes():
    assert list(CAUSES) == list(TAXONOMY) and set(PLACED) <= set(TAXONOMY)  # the taxonomy is the one list


def _at(loc, want: dict) -> bool:
    if want.get("job"):
        return loc.host is None or loc.host in JOB
    if "rank" in want:
        return loc.rank == want["rank"]
    ok = True
    if "host" in want:
        ok &= loc.host in (want["host"] if isinstance(want["host"], set) else {want["host"]})
    if "device" in want:
        ok &= loc.device in want["device"] or (loc.peer or "").split("/P")[0] in {
            f"{want.get('host')}/{d}" for d in want["device"]}
    if "port" in want:
        ok &= loc.port in want["port"]
    if "gpu" in want:
        ok &= loc.gpu == want["gpu"]
    return bool(ok)


@pytest.mark.parametrize("cause", sorted(TAXONOMY))
def test_each_cause_is_ranked_first_where_it_was_injected(cause, tmp_path):
    """At the place PLACED names (judged as it says), or, for a cause it does not list, at the simulator's own
    choice of place, judged by the fault's scope as the sweep bench judges it (a new cause needs no line here)."""
    where, want = PLACED.get(cause, ("", None))
    spec = f"{cause}@{where}" if where else cause
    root = simulate(tmp_path / "b", **SMALL, faults=[spec], seed=31)
    d = triage([root], catalog=CATALOG)
    assert d.causes, f"{cause}: nothing diagnosed"
    top = d.causes[0]
    assert (top.id, top.verdict) == (cause, "confirmed"), [(c.id, c.verdict, c.score) for c in d.causes[:3]]
    fault = _truth(root)["faults"][0]
    assert exact_location(fault, top), (cause, top.location, fault.get("location"))
    if want is not None:
        assert _at(top.location, want), (cause, top.location)
    assert (fault["cause"], fault["scope"]) == (cause, CAUSES[cause].scope)


def test_old_short_kinds_are_aliases():
    assert Fault("gpu_xid").kind == "gpu.xid_error" and Fault("bad_cable", "gpu-a001/mlx5_0").kind == "link.bad_cable"
    with pytest.raises(ValueError, match="unknown fault kind"):
        Fault("link.melted")


def test_locations_that_do_not_fit_the_cause_are_refused(tmp_path):
    with pytest.raises(ValueError, match="sits on a host"):
        simulate(tmp_path / "a", **SMALL, faults=["host.memlock_limit@leaf-a-r1"])
    with pytest.raises(ValueError, match="job-wide"):
        simulate(tmp_path / "b", **SMALL, faults=["nccl.socket_fallback@gpu-a001/mlx5_1"])
    with pytest.raises(ValueError, match="unknown host"):
        simulate(tmp_path / "c", **SMALL, faults=["host.shm_too_small@gpu-z009"])
    with pytest.raises(ValueError, match="not a leaf"):
        simulate(tmp_path / "d", **SMALL, faults=["fabric.route_imbalance@spine-01"])


def test_fabric_flavour_follows_the_causes_and_refuses_a_mix(tmp_path):
    assert link_layer_for(["roce.pfc_ecn", "host.gdr_unavailable"]) == "roce"
    assert link_layer_for(["host.gdr_unavailable"]) == "ib"
    with pytest.raises(ValueError, match="InfiniBand fabric"):
        link_layer_for(["link.bad_cable", "roce.gid_index"])
    with pytest.raises(ValueError, match="cannot be injected on a roce fabric"):
        simulate(tmp_path / "x", **SMALL, faults=["fabric.sm_problem"], link_layer="roce")
    root = simulate(tmp_path / "r", **SMALL, faults=["mtu.mismatch@gpu-a002"], link_layer="roce", seed=4)
    assert not (root / "fabric").exists()  # no subnet manager, no perfquery on an Ethernet fabric
    ports = _parse(root, "gpu-a002/ibstat.txt")
    assert {p.link_layer for p in ports} == {"Ethernet"}
    devinfo = _parse(root, "gpu-a002/ibv_devinfo.txt")
    assert {r.active_mtu for r in devinfo if type(r).__name__ == "IbPort"} == {1024}  # netdev MTU 1500


def test_compatibility_of_pairs():
    assert compatible("host.gdr_unavailable", "fabric.congestion")
    assert not compatible("link.bad_cable", "roce.pfc_ecn")  # InfiniBand counters vs a RoCE fabric
    assert not compatible("nccl.socket_fallback", "host.gdr_unavailable")  # no NET/IB channels to lose GDR on
    assert not compatible("nccl.version_mismatch", "app.straggler_or_desync")  # the job never runs
    assert not compatible("app.straggler_or_desync", "gpu.xid_error")  # a straggler means healthy hardware
    assert not compatible("host.memlock_limit", "host.memlock_limit")


@pytest.mark.parametrize(("pair", "seed"), [
    (("host.gdr_unavailable", "fabric.congestion"), 3),
    (("roce.pfc_ecn", "mtu.mismatch"), 8),
    (("gpu.throttling", "link.bad_cable"), 5),
])
def test_a_pair_of_faults_both_in_the_top_three(pair, seed, tmp_path):
    root = simulate(tmp_path / "p", **SMALL, faults=list(pair), seed=seed)
    d = triage([root], catalog=CATALOG)
    top3 = [c.id for c in d.causes[:3]]
    assert set(pair) <= set(top3), top3
    assert [f["cause"] for f in _truth(root)["faults"]] == list(pair)


@pytest.mark.parametrize(("link_layer", "seed"), [("ib", 1), ("ib", 2), ("roce", 1), ("roce", 2)])
def test_healthy_bundles_stay_silent_with_every_host_tool(link_layer, seed, tmp_path):
    root = simulate(tmp_path / "h", **SMALL, seed=seed, link_layer=link_layer, host_tools="all")
    names = {p.name for p in root.rglob("*") if p.is_file()}
    assert {"lsmod.txt", "ulimit-a.txt", "df-h.txt", "lspci-vvv.txt", "nvidia-smi-q.txt", "ibv_devinfo.txt"} <= names
    if link_layer == "roce":
        assert {"ethtool-S.txt", "rdma-statistic.txt"} <= names
    d = triage([root], catalog=CATALOG)
    assert [c.id for c in d.causes if c.verdict == "confirmed"] == []
    assert all(c.score < 0.5 for c in d.causes), [(c.id, c.score) for c in d.causes]


@pytest.mark.parametrize(("faults", "link_layer"), [
    (["host.nic_driver_firmware", "gpu.nvlink_degraded", "fabric.sm_problem", "fabric.pkey_mismatch"], "ib"),
    (["roce.pfc_ecn", "fabric.rail_isolation"], "roce"),
    (["gpu.fabric_manager"], "ib"),
    (["host.topology_misdetect", "gpu.throttling"], "ib"),
])
def test_every_host_tool_file_parses_with_the_projects_parsers(faults, link_layer, tmp_path):
    root = simulate(tmp_path / "t", **SMALL, faults=faults, seed=6, link_layer=link_layer, host_tools="all")
    rels = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != "truth.yaml")
    unknown = [r for r in rels if r.rsplit("/", 1)[-1] not in EXPECTED_FORMAT]
    assert unknown == []
    for rel in rels:
        _parse(root, rel)


def test_same_arguments_same_bytes_for_host_side_and_roce_causes(tmp_path):
    kw = dict(**SMALL, seed=13, faults=["roce.pfc_ecn", "host.memlock_limit", "app.straggler_or_desync"],
              host_tools="all")
    a, b = simulate(tmp_path / "a", **kw), simulate(tmp_path / "b", **kw)
    files = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    c = simulate(tmp_path / "c", **{**kw, "seed": 14})
    assert (a / "job.log").read_bytes() != (c / "job.log").read_bytes()


def test_truth_names_cause_scope_and_location(tmp_path):
    root = simulate(tmp_path / "t", **SMALL, seed=2, faults=["host.nic_driver_firmware@gpu-b002/mlx5_4",
                                                            "app.straggler_or_desync@gpu-a001/gpu3"])
    f1, f2 = _truth(root)["faults"]
    assert (f1["cause"], f1["kind"], f1["scope"]) == ("host.nic_driver_firmware", "nic_driver_firmware", "hca")
    assert f1["location"] == {"host": "gpu-b002", "hca": 4, "device": "mlx5_4", "pci": "0000:9b:00.0",
                              "netdev": "ibp155s0"}
    assert (f2["scope"], f2["location"]) == ("gpu", {"host": "gpu-a001", "gpu": 3, "pci": "0000:5d:00.0", "rank": 3})
    # the signature is in the host's own files: the firmware's command timeouts on that NIC's PCI function
    kernel = _parse(root, "gpu-b002/dmesg.txt")
    assert any("0000:9b:00.0" in r.text and "timeout" in r.text for r in kernel)
    assert not any("timeout" in r.text for r in _parse(root, "gpu-b001/dmesg.txt"))


def test_bad_cable_under_one_leaf_does_not_explain_congestion_on_another(tmp_path: Path) -> None:
    """Retransmissions explain credit waits only where they happen: physical errors rising on gpu-a003's cable
    (under leaf-a-r0) must not argue strongly against the hot spots on leaf-a-r5; both are reported."""
    out = simulate(tmp_path / "b", hosts=32, faults=["link.bad_cable@gpu-a003/mlx5_0", "fabric.congestion@leaf-a-r5"],
                   seed=5)
    d = triage([out])
    got = {c.id: c for c in d.causes}
    assert got["link.bad_cable"].verdict == "confirmed" and got["link.bad_cable"].location.host == "gpu-a003"
    assert got["fabric.congestion"].verdict == "confirmed" and got["fabric.congestion"].location.device == "leaf-a-r5"
    against = {e.finding for e in got["fabric.congestion"].against}
    assert "xmit_wait_profile" not in against  # the strong clause: errors at the waiting devices


# ------------------------------------------------------------------------------------------------ fabric configuration

# each variant of a cause seen in the fabric's configuration, with the files it must write (where the SM runs:
# the switch whose LID the ports report, spine-01 on the 8-host fabric)
VARIANT_FILES = {
    ("fabric.qos_misconfig", "ib_sl_vlarb"): {"fabric/smpquery_qos.txt", "spine-01/opensm.conf",
                                              "modulefiles/nccl/2.21.5.lua"},
    ("fabric.adaptive_routing_off", "sm_static_scaling"): {"spine-01/opensm.conf", "nccl-tests/all_reduce_perf_2n.txt",
                                                           "nccl-tests/all_reduce_perf_4n.txt"},
    ("fabric.pkey_mismatch", "partitions_conf"): {"spine-01/partitions.conf", "fabric/smpquery_pkeys.txt"},
    ("link.degraded", "uplink"): {"fabric/iblinkinfo.txt"},
    ("fabric.route_imbalance", "lft"): {"spine-01/dump_lfts.txt"},
}


def _parse_session(root: Path, rel: str) -> dict[str, list]:
    """Every format a file holds (its sniffed formats must be the expected ones), parsed without problems."""
    text = (root / rel).read_text()
    name = rel.rsplit("/", 1)[-1]
    want = SESSION_FORMATS.get(name) or (EXPECTED_FORMAT[name],)
    sniffed = sniff_file(rel, text)
    assert tuple(sniffed.formats) == tuple(want), (rel, sniffed)
    out = {}
    for fmt in want:
        res = by_format(fmt).parse(text, rel, None)
        assert res.problems == [], (rel, fmt, res.problems[:5])
        assert res.records, (rel, fmt)
        out[fmt] = res.records
    return out


@pytest.mark.parametrize(("cause", "variant"), sorted(VARIANT_FILES))
def test_fabric_configuration_files_are_read_as_their_tools(cause, variant, tmp_path):
    root = simulate(tmp_path / "v", **SMALL, faults=[Fault(cause, variant=variant)], seed=3)
    fault = _truth(root)["faults"][0]
    assert fault["variant"] == variant
    rels = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert VARIANT_FILES[(cause, variant)] <= rels
    for rel in sorted(VARIANT_FILES[(cause, variant)]):
        _parse_session(root, rel)


def test_qos_variant_starves_the_jobs_sl_in_the_measured_tables(tmp_path):
    root = simulate(tmp_path / "q", **SMALL, faults=[Fault("fabric.qos_misconfig", variant="ib_sl_vlarb")], seed=3)
    assert _truth(root)["link_layer"] == "ib"
    recs = _parse_session(root, "fabric/smpquery_qos.txt")
    assert {tuple(r.vls)[1] for r in recs["smpquery_sl2vl"]} == {1}  # SL 1 -> VL 1 on every port read
    low_vls = {r.vl for r in recs["smpquery_vlarb"] if r.table == "low" and r.weight > 0}
    assert 1 not in low_vls and {0, 2, 3} <= low_vls
    mod = _parse_session(root, "modulefiles/nccl/2.21.5.lua")["modulefile"]
    assert ("NCCL_IB_SL", "1") in {(r.name, r.value) for r in mod}


def test_pkey_variant_leaves_the_host_out_of_the_partition(tmp_path):
    root = simulate(tmp_path / "p", **SMALL, faults=["fabric.pkey_mismatch@gpu-a003"], seed=3)
    assert _truth(root)["faults"][0]["variant"] == "partitions_conf"  # odd seed: the second form
    conf = _parse_session(root, "spine-01/partitions.conf")["opensm_partitions"]
    tree = build_fat_tree(8, hosts_per_leaf=4, seed=3)
    guids = {r.member.lower() for r in conf if r.partition == "tenant-a"}
    assert not {n.guid for n in tree.hcas("gpu-a003")} & guids
    assert {n.guid for n in tree.hcas("gpu-a002")} <= guids


def test_lft_variant_routes_half_the_remote_hosts_through_the_hot_uplink(tmp_path):
    root = simulate(tmp_path / "r", **SMALL, faults=[Fault("fabric.route_imbalance", variant="lft")], seed=3)
    hot_port = _truth(root)["faults"][0]["ports"][0]
    loc = {"device": hot_port["switch"], "port": hot_port["port"]}
    rows = [r for r in _parse_session(root, "spine-01/dump_lfts.txt")["ibroute"] if r.dest_kind == "CA"]
    tree = build_fat_tree(8, hosts_per_leaf=4, seed=3)
    local = {lk.lower.node for lk in tree.links if lk.kind == "hca-leaf" and lk.upper.node == loc["device"]}
    remote = [r for r in rows if r.out_port not in {lk.upper.port for lk in tree.links if lk.lower.node in local}]
    hot = [r for r in remote if r.out_port == loc["port"]]
    assert len(rows) == len(tree.hcas()) and 2 * len(hot) >= len(remote) > 0
    diag = triage([root], catalog=CATALOG)
    assert (diag.causes[0].id, diag.causes[0].verdict) == ("fabric.route_imbalance", "confirmed")
    assert (diag.causes[0].location.device, diag.causes[0].location.port) == (loc["device"], loc["port"])
    assert "lft_uplink_imbalance" in {e.finding for e in diag.causes[0].evidence}


def test_degraded_uplink_has_iblinkinfos_hint_on_both_ends(tmp_path):
    root = simulate(tmp_path / "d", **SMALL, faults=[Fault("link.degraded", variant="uplink")], seed=3)
    fault = _truth(root)["faults"][0]
    assert fault["cable"] == "leaf-spine" and fault["trained"]["width"] == "2X"
    text = (root / "fabric/iblinkinfo.txt").read_text()
    hinted = [ln for ln in text.splitlines() if "Could be 4X" in ln]
    assert len(hinted) == 2 and all("==( 2X" in ln for ln in hinted)
    assert f"{fault['location']['port']:4d}[  ]" in "".join(hinted)


def test_flapping_uplink_retrains_with_symbol_errors(tmp_path):
    root = simulate(tmp_path / "f", **SMALL, faults=[Fault("link.flapping", variant="uplink_retrain")], seed=3)
    fault = _truth(root)["faults"][0]
    assert fault["cable"] == "leaf-spine"
    for end in fault["rising"]:
        assert {"LinkDownedCounter", "SymbolErrorCounter", "LinkErrorRecoveryCounter"} <= set(end["counters"])


@pytest.mark.parametrize(("cause", "seeds"), [("fabric.qos_misconfig", (4, 5)), ("link.flapping", (4, 5))])
def test_consecutive_seeds_exercise_each_variant(cause, seeds, tmp_path):
    got = [_truth(simulate(tmp_path / str(s), **SMALL, faults=[cause], seed=s))["faults"][0]["variant"] for s in seeds]
    assert len(set(got)) == 2, got
