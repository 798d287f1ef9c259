"""What each cause looks like in the files a responder collects: the true signature of every cause id, written
into a :class:`~diagnose.simulate.scenario.Scenario` before the renderers run.

Each signature is modelled on the positive fixture bundle of its cause (``fixtures/<domain>/<name>/positive-*``,
whose README cites the public incident it follows) and scaled to the simulated fabric: the same tools, the same
messages at the same NCCL 2.21.5 source lines, on the host/HCA/GPU/port the fault was placed on. A signature
only changes state (what a host's NCCL sees, a port's load, a GPU's clocks), asks for tool output from hosts
(``sc.collect``), and adds the lines the software prints when the fault is present; the renderers then draw
everything else, healthy, from the same seeded streams.

What is collected where follows what an on-call engineer runs for the symptom at hand: the job log and
nccl-tests, ibstat and dmesg of the job's hosts, the fabric counters (InfiniBand), and the host tools the
symptom points at, on the host the errors name and, where a comparison is the point, on its peers too.

Public references for the behaviour modelled (besides each fixture's README): NCCL environment variables and
troubleshooting (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html,
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html), the NVIDIA Xid catalog
(https://docs.nvidia.com/deploy/xid-errors/), the mlx5 ethtool counters
(https://docs.kernel.org/networking/device_drivers/ethernet/mellanox/mlx5/counters.html), the Fabric Manager
user guide (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/), DCGM health checks
(https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html), OpenSM traps and SMInfo
(linux-rdma/opensm ``osm_trap_rcv.c``, ``osm_sminfo_rcv.c``), and the InfiniBand Architecture Specification
vol. 1 (PortXmitWait, LinkDownedCounter, P_Key enforcement).
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from diagnose.simulate import fabricfiles as ff
from diagnose.simulate import hostfiles as hf
from diagnose.simulate import joblog
from diagnose.simulate.faults import Injected
from diagnose.simulate.joblog import env_line, info, torch_backend_error, torch_watchdog, trace, warn
from diagnose.simulate.scenario import (
    DRIVER,
    DRIVER_CUDA,
    HCA_FW,
    Rank,
    Scenario,
    gpu_bus,
    hca_bdf,
    hca_bus,
    netdev,
)
from diagnose.simulate.topology import End, rng_for

Apply = Callable[[Scenario, Injected], None]
APPLY: dict[str, Apply] = {}
PREPARE: dict[str, Apply] = {}

# busbw of all_reduce_perf on the job's hosts relative to healthy, per cable fault and where it sits (a switch link
# at 2X: the ring steps statically routed over it run at half its rate, and every channel carries an equal share,
# so the collective runs near the pace of its slowest ring, as with an HCA at 2X; 62 of 88 GB/s in
# fixtures/link/degraded/positive-spine-leaf-uplink-2x, where two of four rings cross it)
CABLE_BW = {
    ("link.port_down", "hca-leaf"): 0.62, ("link.degraded", "hca-leaf"): None, ("link.bad_cable", "hca-leaf"): 0.82,
    ("link.flapping", "hca-leaf"): 0.70, ("link.port_down", "switch"): 0.97, ("link.degraded", "switch"): 0.55,
    ("link.bad_cable", "switch"): 0.93, ("link.flapping", "switch"): 0.90,
}


def signature(kind: str, when: str = "apply") -> Callable[[Apply], Apply]:
    def deco(fn: Apply) -> Apply:
        (PREPARE if when == "prepare" else APPLY)[kind] = fn
        return fn
    return deco


def _rng(sc: Scenario, inj: Injected, tag: str = ""):
    """The fault's own seeded stream (by its position in the fault list, so two faults never share one)."""
    pos = next(i for i, x in enumerate(sc.injected) if x is inj)
    return rng_for(sc.seed, "signature", pos, inj.kind, tag)


def _at(sc: Scenario, seconds: float) -> datetime:
    return sc.t_fail + timedelta(seconds=seconds)


def _torch_ts(t: datetime) -> str:
    """glog's ``MMDD HH:MM:SS.uuuuuu <tid>`` as PyTorch prints it after ``[E``."""
    return f"{t:%m%d %H:%M:%S}.{t.microsecond:06d}"


def hca_aliases(sc: Scenario, host: str, k: int) -> dict:
    """Every name of HCA ``k`` of ``host``: device, PCI function, netdev."""
    return {"hca": k, "device": f"mlx5_{k}", "pci": hca_bdf(k), "netdev": netdev(k, sc.job.link_layer)}


def prepare(sc: Scenario) -> None:
    for inj in sc.injected:
        fn = PREPARE.get(inj.kind)
        if fn is not None:
            fn(sc, inj)


def apply_all(sc: Scenario) -> None:
    if sc.roce:
        # the site's RoCE settings (the sbatch template): the RoCE v2 GID and DSCP 26 -> priority 3, the one
        # priority with PFC (NVIDIA's RoCE profile: trust dscp, PFC on priority 3)
        sc.job.env.setdefault("NCCL_IB_GID_INDEX", "3")
        sc.job.env.setdefault("NCCL_IB_TC", "106")
    for inj in sc.injected:
        fn = APPLY.get(inj.kind)
        if fn is not None:
            fn(sc, inj)


def busbw_factor(sc: Scenario) -> float:
    f = sc.job.busbw
    for inj in sc.injected:
        if inj.link is None or not sc.affects_job(inj):
            continue
        where = "hca-leaf" if inj.link.kind == "hca-leaf" else "switch"
        factor = CABLE_BW[(inj.kind, where)]
        if factor is None:  # a slow HCA link throttles every ring to its rate
            factor = sc.state(inj.link).gbps / 400 * 0.98
        f *= factor
    return f


def nccl_tests_hosts(sc: Scenario) -> list[str]:
    """Hosts the all_reduce_perf run covers: the job hosts, less a host whose GPU fell off the bus."""
    gone = {i.host for i in sc.injected if i.kind == "gpu.xid_error"}
    return [h for h in sc.job_hosts if h not in gone]


# ------------------------------------------------------------------------------------------------- shared lines


def _completion(sc: Scenario, r: Rank, peer: str, kind: str, rng, status: int = 12, vendor: int = 129,
                gids: tuple[str, str] | None = None) -> list[str]:
    """net_ib.cc:1909 (2.21.5): a failed work completion, with the RoCE GIDs when the port is Ethernet, and the
    error's propagation through net.cc and the proxy thread."""
    # inet_ntop's text of the GIDs (2.21.5 prints 'remoteGids', sic)
    gid = f" localGid {_ntop(gids[0])} remoteGids {_ntop(gids[1])}" if gids else ""
    net_line = 1302 if kind == "Recv" else 1137
    return [
        *warn(r, "transport/net_ib.cc:1909", f"NET/IB : Got completion from peer {sc.host_ip[peer]}<{rng.randint(32768, 60999)}>"
              f" with status={status} opcode={0 if kind == 'Recv' else 1} len=0 vendor err {vendor} ({kind}){gid}",
              r.ptid),
        *trace(r, [f"transport/net.cc:{net_line}", "proxy.cc:698"], 6, r.ptid),
        info(r, "proxy.cc:878 -> 6 [Progress Thread]", r.ptid),
    ]


def _ntop(gid: str) -> str:
    return ipaddress.IPv6Address(gid).compressed


def _ring_peers(sc: Scenario, host: str) -> tuple[str, str]:
    hosts = sc.job_hosts
    i = hosts.index(host)
    return hosts[(i - 1) % len(hosts)], hosts[(i + 1) % len(hosts)]


def _torch_errors(sc: Scenario, ranks: list[Rank], reason: str, last: str) -> None:
    for r in ranks:
        sc.job.incident += torch_backend_error(r.rank, reason, last)


def _roce_retry_completions(sc: Scenario, hosts: list[str], rng: random.Random, gid_index: int) -> None:
    """A retry-exceeded receive completion on one random HCA of each of ``hosts``, towards its ring peer, naming
    both ends' GIDs at ``gid_index``."""
    for h in hosts:
        k = rng.randrange(sc.tree.hcas_per_host)
        r = sc.rank_of(h, k)
        peer = _ring_peers(sc, h)[0]
        if r is not None:
            sc.job.incident += _completion(sc, r, peer, "Recv", rng,
                                           gids=(_roce_gid(sc, h, k, gid_index), _roce_gid(sc, peer, k, gid_index)))


def _roce_gid(sc: Scenario, host: str, k: int, index: int) -> str:
    mac = _mac(sc, host, k)
    return next(g for i, g, _t in hf.roce_gids(k, sc.tree.host_index(host), mac) if i == index)


def _mac(sc: Scenario, host: str, k: int) -> int:
    g = int(sc.hca_node(host, k).guid, 16)
    return ((g >> 16) & 0xFFFFFF000000) | (g & 0xFFFFFF)


# ------------------------------------------------------------------------------------------------- link.*


def _cable_incident(sc: Scenario, inj: Injected) -> None:
    """The ranks whose ring steps cross a failing cable log the 2.21.5 completion error (retry exceeded)."""
    if not sc.affects_job(inj) or len(sc.job_hosts) < 2 or inj.link is None:
        return
    tree = sc.tree
    g = tree.hcas_per_host
    hosts = sc.job_hosts
    nh = len(hosts)
    rng = _rng(sc, inj, "incident")
    events: list[dict] = []
    if inj.link.kind == "hca-leaf":
        hca = tree.nodes[inj.link.lower.node]
        hi = hosts.index(hca.host)  # type: ignore[arg-type]
        k = hca.index or 0
        prev_h = hosts[(hi - 1) % nh]
        events = [{"rank": hi * g + k, "host": hca.host, "gpu": k, "what": "Recv", "peer_host": prev_h},
                  {"rank": ((hi - 1) % nh) * g + k, "host": prev_h, "gpu": k, "what": "Send", "peer_host": hca.host}]
    elif inj.link.kind == "leaf-spine":
        # the ring step that leaves (or enters) the leaf's SU on its rail crosses the uplinks; a second uplink
        # fault on the same rail takes the next such step
        leaf = tree.nodes[inj.link.lower.node]
        k = leaf.rail if leaf.rail is not None else 0
        steps = [hi for hi, h in enumerate(hosts)
                 if (tree.unit_of(h) == leaf.unit) != (tree.unit_of(hosts[(hi + 1) % nh]) == leaf.unit)]
        if not steps:
            return
        taken = {(e["rank"], e["what"]) for i2 in sc.injected for e in i2.params.get("nccl_warn_ranks", [])}
        free = [hi for hi in steps if (hi * g + k, "Send") not in taken]
        hi = (free or steps)[0]
        nxt = hosts[(hi + 1) % nh]
        events = [{"rank": hi * g + k, "host": hosts[hi], "gpu": k, "what": "Send", "peer_host": nxt},
                  {"rank": ((hi + 1) % nh) * g + k, "host": nxt, "gpu": k, "what": "Recv", "peer_host": hosts[hi]}]
    inj.params["nccl_warn_ranks"] = events
    for ev in events:
        sc.job.incident += _completion(sc, sc.ranks[ev["rank"]], ev["peer_host"], ev["what"], rng)


# a cable that does not train (port down) or trains slow (degraded) fails nothing: NCCL skips the port or runs
# slower, without a WARN; only errors on a live link (bad cable, flapping) show as failed completions
for _k in ("link.bad_cable", "link.flapping"):
    APPLY[_k] = _cable_incident


@signature("link.degraded")
def _degraded(sc: Scenario, inj: Injected) -> None:
    """A switch-to-switch cable trained at 2X (fixtures/link/degraded/positive-spine-leaf-uplink-2x): no host tool
    shows it; iblinkinfo from the SM's node prints both ends at 2X with its own verdict ``(Could be 4X )``."""
    if inj.variant == "uplink" and inj.link is not None and inj.link.kind != "hca-leaf":
        sc.job.files["fabric/iblinkinfo.txt"] = ff.iblinkinfo(sc, _prompt(sm_node(sc)))


# ------------------------------------------------------------------------------------------------- fabric.*


@signature("fabric.congestion")
def _congestion(sc: Scenario, inj: Injected) -> None:
    """Credit starvation on a few switch ports (fixtures/fabric/congestion): they transmit near line rate and
    wait 25-60% of the window for credits."""
    rng = _rng(sc, inj)
    for e in inj.switch_ports:
        sc.port_util[e] = rng.uniform(0.85, 0.97)
        sc.port_wait[e] = rng.uniform(0.25, 0.6)
    if sc.affects_job(inj):
        sc.job.busbw *= 0.72


def _uplink_siblings(sc: Scenario, inj: Injected) -> list[End]:
    return [lk.lower for lk in sc.tree.leaf_uplinks(inj.switch or "") if lk.lower not in inj.switch_ports]


def sm_node(sc: Scenario) -> str:
    """The node the master SM runs on (the switch whose LID every port reports as its SM lid): where its
    opensm.conf and partitions.conf are read."""
    return next((n.name for n in sc.tree.switches() if n.lid == sc.tree.sm_lid), sc.tree.switches()[0].name)


def _prompt(node: str) -> str:
    return f"[root@{node} ~]#"


# busbw of the same all_reduce_perf at 2/4/8/16 nodes relative to the healthy peak, with static routes: flows of a
# few nodes stay under their leaves; from 8 nodes on they hash onto shared uplinks and collide (NVIDIA/nccl-tests#169)
STATIC_SCALING = {2: 1.0, 4: 0.97, 8: 0.63, 16: 0.45}


def _ar_off_scaling(sc: Scenario, inj: Injected) -> None:
    """A static routing engine (``routing_engine updn``) in the SM's opensm.conf, seen only in the scaling curve:
    the same all_reduce_perf at 2, 4, 8 and 16 nodes holds at 2-4 and falls at 8-16; no NCCL setting, no port
    error, no credit-wait hot spot (fixtures/fabric/adaptive_routing_off/positive-ar-off-scaling-curve-opensm-conf)."""
    sm = sm_node(sc)
    sc.job.files[f"{sm}/opensm.conf"] = ff.opensm_conf("updn")
    job = list(sc.job_hosts)
    spare = [h for h in sc.tree.hosts if h not in job]
    sc.job.busbw *= STATIC_SCALING[8] if len(job) >= 8 else 1.0
    for n, f in STATIC_SCALING.items():
        hosts = (job + spare)[:n]
        if len(hosts) < n or n == len(job):
            continue
        text = joblog.render_nccl_tests(sc, hosts, f)
        if text is not None:
            sc.job.files[f"nccl-tests/all_reduce_perf_{n}n.txt"] = text
    inj.params["detail"] = f"routing_engine updn in {sm}/opensm.conf; busbw by node count " + ", ".join(
        f"{n}n x{f}" for n, f in STATIC_SCALING.items())
    inj.params["sm_node"] = sm


@signature("fabric.adaptive_routing_off")
def _ar_off(sc: Scenario, inj: Injected) -> None:
    """NCCL_IB_ADAPTIVE_ROUTING=0 left in the job script (fixtures/fabric/adaptive_routing_off): every flow keeps
    its static route, two uplinks of a leaf carry the job and wait for credits half the time while their
    siblings idle."""
    if inj.variant == "sm_static_scaling":
        return _ar_off_scaling(sc, inj)
    rng = _rng(sc, inj)
    sc.job.env["NCCL_IB_ADAPTIVE_ROUTING"] = "0"
    for e in inj.switch_ports:
        sc.port_util[e] = rng.uniform(0.85, 0.95)
        sc.port_wait[e] = rng.uniform(0.45, 0.7)
    for e in _uplink_siblings(sc, inj):
        sc.port_util[e] = rng.uniform(0.02, 0.08)
    sc.job.busbw *= 0.5
    inj.params["detail"] = "NCCL_IB_ADAPTIVE_ROUTING=0; static routes on " + ", ".join(
        f"{e.node}/{e.port}" for e in inj.switch_ports)


def _route_imbalance_lft(sc: Scenario, inj: Injected) -> None:
    """The leaf's forwarding table in ``dump_lfts.sh`` from the SM node: the SM sent half of the leaf's remote host
    LIDs through the hot uplink and spread the rest over its siblings
    (fixtures/fabric/route_imbalance/positive-lft-one-uplink-carries-half-the-remote-hosts). The counters agree, as
    they would: the hot uplink carries the leaf's cross-leaf traffic and its siblings little, but nothing waits long
    on credits (the load is half the leaf's, not all of it), so only the table says why."""
    tree = sc.tree
    hot = inj.switch_ports[0]
    leaf = tree.nodes[hot.node]
    ups = [lk.lower.port for lk in tree.leaf_uplinks(leaf.name)]
    rest = [p for p in ups if p != hot.port] or [hot.port]
    rows: list[tuple[int, int, object]] = [(leaf.lid, 0, leaf)]
    spine_port = {lk.upper.node: lk.lower.port for lk in reversed(tree.leaf_uplinks(leaf.name))}
    others = [n for n in tree.switches() if n.name != leaf.name]
    for i, sw in enumerate(others):
        rows.append((sw.lid, spine_port.get(sw.name, ups[i % len(ups)]), sw))
    local = {lk.lower.node: lk.upper.port for lk in tree.links if lk.kind == "hca-leaf" and lk.upper.node == leaf.name}
    remote = [n for n in tree.nodes.values() if n.kind == "CA" and n.name not in local]
    remote.sort(key=lambda n: n.lid)
    for i, hca in enumerate(remote):
        port = hot.port if i % 2 == 0 else rest[(i // 2) % len(rest)]
        rows.append((hca.lid, port, hca))
    for name, port in local.items():
        rows.append((tree.nodes[name].lid, port, tree.nodes[name]))
    sm = sm_node(sc)
    sc.job.files[f"{sm}/dump_lfts.txt"] = ff.dump_lfts(_prompt(sm), leaf, rows)  # type: ignore[arg-type]
    rng = _rng(sc, inj)
    sc.port_util[hot] = rng.uniform(0.6, 0.75)
    for e in _uplink_siblings(sc, inj):
        sc.port_util[e] = rng.uniform(0.05, 0.15)
    sc.job.busbw *= 0.45
    inj.params["detail"] = (f"{leaf.name}'s LFT routes {len(remote[::2])} of {len(remote)} remote host LIDs via port"
                            f" {hot.port} ({sm}/dump_lfts.txt)")


@signature("fabric.route_imbalance")
def _route_imbalance(sc: Scenario, inj: Injected) -> None:
    """Static routes that pile the leaf's remote LIDs onto one uplink after a partial re-route
    (fixtures/fabric/route_imbalance): the hot uplink transmits near line rate and waits ~10% of the time,
    its siblings send little, and no error counter moves."""
    if inj.variant == "lft":
        return _route_imbalance_lft(sc, inj)
    rng = _rng(sc, inj)
    hot = inj.switch_ports[0]
    u = rng.uniform(0.9, 0.97)
    ratio = rng.uniform(0.08, 0.15)
    sc.port_util[hot] = u
    sc.port_wait[hot] = ratio * u / (1 - ratio)  # lost / (lost + sent) = ratio
    for e in _uplink_siblings(sc, inj):
        sc.port_util[e] = rng.uniform(0.02, 0.08)
    sc.job.busbw *= 0.45


def _sm_guid(sc: Scenario) -> tuple[int, str]:
    spine = sc.tree.spines[0] if sc.tree.spines else sc.tree.leaves[0]
    return spine.lid, spine.guid


@signature("fabric.sm_problem")
def _sm_problem(sc: Scenario, inj: Injected) -> None:
    """A re-imaged host came back with ``opensm`` enabled: a second SM on the fabric fights the designated one
    (fixtures/fabric/sm_problem). sminfo from the job hosts shows two masters, half of the HCA ports point at
    the stray SM's LID, the designated SM logs the foreign sm_key and re-sweeps every few minutes, NCCL gets SM
    change / client reregistration / LID change events on many hosts, then retry-exceeded completions."""
    rng = _rng(sc, inj)
    host = inj.host or sc.job_hosts[-1]
    stray = sc.hca_node(host, 0)
    sm_lid, sm_guid = _sm_guid(sc)
    hosts = sc.job_hosts
    half = set(hosts[len(hosts) // 2:])
    for h in half:
        sc.host(h).sm_lid = stray.lid
    readings = []
    act0, act1 = rng.randint(800000, 990000), rng.randint(1500, 4000)
    for h in hosts:
        if h in half:
            readings.append((h, stray.lid, stray.guid, act1 + rng.randint(0, 20), 0))
        else:
            readings.append((h, sm_lid, sm_guid, act0 + rng.randint(0, 20), 14))
    sc.job.files["fabric/sminfo.txt"] = hf.sminfo_lines(readings)
    t = sc.t_fail - timedelta(minutes=30)
    for i in range(12):
        t += timedelta(seconds=rng.randint(160, 210))
        tid = "8AAEF700"
        if i % 3 == 0:
            sc.job.sm_log += [
                (t, hf.osm_line(t, "8B2F6700", "0x01", f"smi_rcv_process_get_response: ERR 2F18: Got SM (LID {stray.lid}) "
                                f"with sm_key 0x0000000000000000 that doesn't match our local sm_key. Ignoring SMInfo")),
                (t, hf.osm_line(t, "8B2F6700", "0x80", f"Found remote SM (LID {stray.lid}) with non-matching sm_key")),
            ]
        sc.job.sm_log += [
            (t, hf.osm_line(t, tid, "0x02", "do_sweep: Entering heavy sweep with flags: force_heavy_sweep 0, coming out "
                            "of standby 0, subnet initialization error 0, sm port change 0")),
            (t + timedelta(seconds=4), hf.osm_line(t + timedelta(seconds=4), tid, "0x02", "SUBNET UP")),
        ]
    for h in hosts:
        r = sc.rank_of(h, 0)
        if r is None:
            continue
        for what in ("SM change", "client reregistration", "LID change"):
            for k in (0, 1):
                sc.job.incident += warn(r, "transport/net_ib.cc:101", f"NET/IB : mlx5_{k}:1 Got async event : {what}",
                                        r.ptid)
    for h in sorted(half)[:2]:
        r = sc.rank_of(h, rng.randrange(sc.tree.hcas_per_host))
        if r is not None:
            sc.job.incident += _completion(sc, r, _ring_peers(sc, h)[0], "Recv", rng)
    inj.params["detail"] = f"stray OpenSM on {host} (LID {stray.lid}, {stray.guid}) next to the SM on LID {sm_lid}"


@signature("fabric.pkey_mismatch")
def _pkey(sc: Scenario, inj: Injected) -> None:
    """A host moved from tenant A to tenant B while the SM's partition file still lists it in A
    (fixtures/fabric/pkey_mismatch): its HCAs send with A's key, the receivers raise Bad P_Key traps (257)
    naming its LIDs, and the pairs that involve it die with retry-exceeded completions."""
    rng = _rng(sc, inj)
    host = inj.host or sc.job_hosts[0]
    prev_h, next_h = _ring_peers(sc, host)
    t = sc.t_fail - timedelta(seconds=40)
    n = 0
    if inj.variant == "partitions_conf":
        _pkey_partitions(sc, inj, host)
    for k in ([] if inj.variant == "partitions_conf" else sorted(rng.sample(range(sc.tree.hcas_per_host), min(4, sc.tree.hcas_per_host)))):
        src = sc.hca_node(host, k)
        for peer in dict.fromkeys((next_h, prev_h)):
            if peer == host:
                continue
            dst = sc.hca_node(peer, k)
            t += timedelta(seconds=rng.randint(1, 4), microseconds=rng.randint(0, 999999))
            n += 1
            sc.job.sm_log += [
                (t, hf.osm_line(t, "7A3FE700", "0x01", f"log_trap_info: Received Generic Notice type:2 num:257 (Bad P_Key)"
                                f" Producer:1 (CA) from LID:{dst.lid} TID:0x{0x20 + n:016x}")),
                (t, hf.osm_line(t, "7A3FE700", "0x01", f"log_trap_info: Bad P_Key:0x8001 on SL:0 from LID1:{src.lid} "
                                f"QP1:0x{rng.randint(0x100, 0x3ff):x} to LID2:{dst.lid} QP2:0x{rng.randint(0x100, 0x3ff):x}")),
            ]
    for peer in dict.fromkeys((next_h, prev_h)):
        if peer == host:
            continue
        k = rng.randrange(sc.tree.hcas_per_host)
        r = sc.rank_of(peer, k)
        if r is not None:
            sc.job.incident += _completion(sc, r, host, "Recv", rng)
    r = sc.rank_of(host, rng.randrange(sc.tree.hcas_per_host))
    if r is not None:
        sc.job.incident += _completion(sc, r, next_h, "Send", rng)
    sc.job.nccl_tests = False
    if inj.variant != "partitions_conf":
        inj.params["detail"] = f"{host} sends with P_Key 0x8001 (its old tenant's) at index 0"


TENANT_KEY = 0x8003


def _pkey_partitions(sc: Scenario, inj: Injected, host: str) -> None:
    """A host added to the tenant's rack without a partitions.conf update
    (fixtures/fabric/pkey_mismatch/positive-partitions-conf-host-missing-from-tenant): the job puts its queue pairs
    in the tenant partition (NCCL_IB_PKEY=1), the SM's partitions.conf lists every job host's port GUIDs but this
    host's, and the P_Key tables agree: index 1 holds the tenant key everywhere but on this host's ports."""
    sm = sm_node(sc)
    sc.job.env["NCCL_IB_PKEY"] = "1"
    guids = [n.guid for h in sc.job_hosts if h != host for n in sc.tree.hcas(h)]
    sc.job.files[f"{sm}/partitions.conf"] = ff.partitions_conf(
        sm, "tenant-a", TENANT_KEY, guids, "tenant-a: the job's hosts, port GUIDs of every HCA")
    tables = []
    for h in sc.job_hosts:
        for n in sc.tree.hcas(h):
            tables.append((n.lid, [0x7FFF, 0 if h == host else TENANT_KEY]))
    sc.job.files["fabric/smpquery_pkeys.txt"] = ff.smpquery_pkeys(_prompt(sm), tables)
    inj.params["detail"] = (f"{host} missing from partition tenant-a (0x{TENANT_KEY:04x}) in {sm}/partitions.conf; "
                            "index 1 of its P_Key tables is empty")


def _prio_counters(rng, traffic_prio: int, gbytes: float, pfc_prio: int = 3, pause_rx: int = 0, pause_tx: int = 0,
                   storm: tuple[int, int] | None = None, discards: int = 0) -> dict[str, int]:
    c: dict[str, int] = {"rx_discards_phy": discards, "tx_discards_phy": 0}
    for p in range(8):
        b = int(gbytes * 1e9 * rng.uniform(0.98, 1.02)) if p == traffic_prio else 0
        c[f"rx_prio{p}_bytes"] = b
        c[f"tx_prio{p}_bytes"] = int(b * rng.uniform(0.98, 1.02))
    c[f"rx_prio{pfc_prio}_pause"] = pause_rx
    c[f"rx_prio{pfc_prio}_pause_duration"] = pause_rx * 35
    c[f"tx_prio{pfc_prio}_pause"] = pause_tx
    c[f"tx_prio{pfc_prio}_pause_duration"] = pause_tx * 32
    c[f"rx_prio{pfc_prio}_pause_transition"] = pause_rx // 2
    warn_ev, err_ev = storm or (0, 0)
    c["tx_pause_storm_warning_events"] = warn_ev
    c["tx_pause_storm_error_events"] = err_ev
    return c


def _roce_snapshots(sc: Scenario, host: str, rng, traffic_prio: int, loss_per_30s: int, cnp: bool,
                    storm_dev: int | None = None) -> None:
    """Two ``ethtool -S`` and ``rdma statistic`` snapshots 30 s apart of every RoCE port of ``host``."""
    g = sc.tree.hcas_per_host
    t0 = sc.t_disc
    t1 = t0 + timedelta(seconds=30)
    eth: list[tuple[datetime, dict]] = [(t0, {}), (t1, {})]
    rdma: list[tuple[datetime, dict]] = [(t0, {}), (t1, {})]
    for k in range(g):
        nd = netdev(k, "roce")
        total = rng.uniform(3e5, 6e5)  # GB since the counters were cleared
        win = rng.uniform(600, 900)  # GB in 30 s (~20 GB/s per direction)
        prx, ptx = rng.randint(20000, 40000), rng.randint(5_000_000, 11_000_000)
        storm = None
        if storm_dev == k:
            storm = ((3, 0), (5, 1))
        a = _prio_counters(rng, traffic_prio, total, pause_rx=prx, pause_tx=ptx, storm=storm[0] if storm else None)
        b = dict(a)
        for key in a:
            if key.endswith("_bytes") and a[key]:
                b[key] = a[key] + int(win * 1e9 * rng.uniform(0.97, 1.03))
        b["rx_prio3_pause"] += rng.randint(500, 3000)
        b["tx_prio3_pause"] += rng.randint(1000, 8000) if storm_dev != k else rng.randint(250000, 400000)
        if storm:
            b["tx_pause_storm_warning_events"], b["tx_pause_storm_error_events"] = storm[1]
        if storm_dev is not None and storm_dev != k:
            b["rx_prio3_pause"] += rng.randint(400000, 700000) // g
        eth[0][1][nd], eth[1][1][nd] = a, b
        base = {n: 0 for n in hf.RDMA_COUNTERS}
        base["rx_write_requests"] = rng.randint(2_000_000_000, 2_600_000_000)
        base["out_of_sequence"] = rng.randint(50000, 180000)
        base["local_ack_timeout_err"] = rng.randint(100, 500)
        base["resp_cqe_error"] = rng.randint(1000, 9000)
        base["resp_cqe_flush_error"] = rng.randint(1000, 9000)
        if cnp:
            base["rp_cnp_handled"] = rng.randint(30_000_000, 56_000_000)
            base["np_ecn_marked_roce_packets"] = rng.randint(700_000_000, 1_100_000_000)
            base["np_cnp_sent"] = rng.randint(30_000_000, 56_000_000)
        nxt = dict(base)
        nxt["rx_write_requests"] += rng.randint(20_000_000, 40_000_000)
        if loss_per_30s:
            nxt["out_of_sequence"] += rng.randint(loss_per_30s // 2, loss_per_30s)
            nxt["packet_seq_err"] += rng.randint(loss_per_30s // 20, loss_per_30s // 10)
            nxt["local_ack_timeout_err"] += rng.randint(5, 20)
            nxt["roce_adp_retrans"] += rng.randint(loss_per_30s // 20, loss_per_30s // 10)
        if cnp:
            nxt["rp_cnp_handled"] += rng.randint(30000, 60000)
            nxt["np_ecn_marked_roce_packets"] += rng.randint(700000, 1200000)
            nxt["np_cnp_sent"] += rng.randint(30000, 60000)
        rdma[0][1][f"mlx5_{k}"], rdma[1][1][f"mlx5_{k}"] = base, nxt
    sc.job.files[f"{host}/ethtool-S.txt"] = hf.ethtool_s(host, eth)
    sc.job.files[f"{host}/rdma-statistic.txt"] = hf.rdma_statistic(host, rdma)


@signature("fabric.qos_misconfig")
def _qos(sc: Scenario, inj: Injected) -> None:
    """NCCL_IB_TC=128 in the job (DSCP 32, priority 4) on a fabric lossless on priority 3 only
    (fixtures/fabric/qos_misconfig): every port carries its RoCE bytes on priority 4, which has no PFC; the lossy
    queue drops, so sequence errors and retransmissions rise with no ECN marks, and the job dies with
    retry-exceeded completions."""
    if inj.variant == "ib_sl_vlarb":
        return _qos_ib(sc, inj)
    rng = _rng(sc, inj)
    sc.job.env["NCCL_IB_TC"] = "128"
    for h in sc.job_hosts:
        _roce_snapshots(sc, h, rng, traffic_prio=4, loss_per_30s=40000, cnp=False)
    _roce_retry_completions(sc, sc.job_hosts[:2], rng, gid_index=3)
    sc.job.busbw *= 0.3


@signature("fabric.rail_isolation")
def _rail(sc: Scenario, inj: Injected) -> None:
    """NCCL_CROSS_NIC=1 from the site image on a rail-only RoCE fabric, one subnet per rail and no routes
    between rails (fixtures/fabric/rail_isolation): the rail-aligned rings work, but the checkpoint gather's
    point-to-point connections leave one host on NIC i and arrive on NIC j of the next, and their queue pairs
    time out moving to RTR (errno 110)."""
    rng = _rng(sc, inj)
    host = inj.host or sc.job_hosts[0]
    _, peer = _ring_peers(sc, host)
    sc.job.env["NCCL_CROSS_NIC"] = "1"
    g = sc.tree.hcas_per_host
    mine, theirs = sc.nccl_devs(host), sc.nccl_devs(peer)
    src = rng.sample(mine, min(2, len(mine)))
    for a in src:
        other = [d for d in theirs if d != a]
        if not other:
            continue
        b = rng.choice(other)
        r, q = sc.rank_of(host, a), sc.rank_of(peer, b)
        if r is None or q is None:
            continue
        ch = rng.randrange(2 * g)
        ra, qa = r.ibdevs.index(a), q.ibdevs.index(b)
        sc.job.setup.setdefault(r.rank, []).append(
            info(r, f"Channel {ch:02d}/1 : {r.rank}[{a}] -> {q.rank}[{b}] [send] via NET/IB/{ra}/GDRDMA"))
        sc.job.setup.setdefault(q.rank, []).append(
            info(q, f"Channel {ch:02d}/1 : {r.rank}[{a}] -> {q.rank}[{b}] [receive] via NET/IB/{qa}/GDRDMA"))
        sc.job.incident += [
            *warn(r, "misc/ibvwrap.cc:206", "Call to ibv_modify_qp failed with error Connection timed out errno 110",
                  r.ptid),
            *trace(r, ["transport/net_ib.cc:937", "transport/net_ib.cc:1144", "transport/net.cc:683", "proxy.cc:1473"],
                   2, r.ptid),
        ]
    sc.collect("ibv_devinfo", [host, peer])
    _torch_errors(sc, [r for r in (sc.rank_of(host, a) for a in src) if r is not None], "system",
                  "Call to ibv_modify_qp failed with error Connection timed out errno 110")
    inj.params["detail"] = f"cross-rail connections {host} -> {peer}"


# ------------------------------------------------------------------------------------------------- roce.*


@signature("roce.gid_index")
def _gid(sc: Scenario, inj: Injected) -> None:
    """NCCL_IB_GID_INDEX=0 in the job template, copied from an InfiniBand cluster (fixtures/roce/gid_index): on
    these RoCE ports index 0 is the link-local RoCE v1 GID, which does not route between the per-rail subnets;
    queue pairs come up, the first collective dies with retry-exceeded completions naming fe80:: GIDs."""
    rng = _rng(sc, inj)
    sc.job.env["NCCL_IB_GID_INDEX"] = "0"
    _roce_retry_completions(sc, sc.job_hosts[:4], rng, gid_index=0)
    sc.collect("ibv_devinfo", sc.job_hosts[:2])
    sc.collect("env", sc.job_hosts[:1])
    sc.job.nccl_tests = False


@signature("roce.pfc_ecn")
def _pfc(sc: Scenario, inj: Injected) -> None:
    """One NIC stuck pausing the fabric (fixtures/roce/pfc_ecn): its pause-storm watchdog fires
    (tx_pause_storm_error_events rises), it stops honouring PFC and drops; peers count its pause frames, and the
    loss counters rise on every host while ECN/CNP keeps working."""
    rng = _rng(sc, inj)
    for h in sc.job_hosts:
        _roce_snapshots(sc, h, rng, traffic_prio=3, loss_per_30s=4000, cnp=True,
                        storm_dev=inj.hca if h == inj.host else None)
    sc.collect("ibdev2netdev", [inj.host or sc.job_hosts[0]])
    sc.job.busbw *= 0.55


# ------------------------------------------------------------------------------------------------- mtu


@signature("mtu.mismatch")
def _mtu(sc: Scenario, inj: Injected) -> None:
    """One host's ports run a smaller MTU than the fabric (fixtures/mtu/mismatch): on InfiniBand its leaf ports
    sit in a partition defined with mtu=4 (2048); on RoCE its netdevs came back at MTU 1500 (active_mtu 1024).
    ibv_devinfo of the job hosts and NCCL's queue pair lines (NCCL_DEBUG_SUBSYS=INIT,ENV,NET) show it."""
    host = inj.host or sc.job_hosts[0]
    sc.host(host).active_mtu = 1024 if sc.roce else 2048
    sc.job.net_subsys = True
    sc.job.env["NCCL_DEBUG_SUBSYS"] = "INIT,ENV,NET"
    sc.collect("ibv_devinfo", sc.job_hosts)
    sc.job.busbw *= 0.8


# ------------------------------------------------------------------------------------------------- host.*


@signature("host.gdr_unavailable")
def _gdr(sc: Scenario, inj: Injected) -> None:
    """After a driver upgrade nvidia-peermem was not reloaded on one host (fixtures/host/gdr_unavailable): its
    lsmod lacks the module, no rank there prints ``DMA-BUF is available``, and its NET channels lose
    ``/GDRDMA``; the ring runs at the speed of the host that stages through host memory."""
    host = inj.host or sc.job_hosts[0]
    hs = sc.host(host)
    hs.gdr = False
    hs.knobs["peermem"] = False
    sc.collect("lsmod", sc.job_hosts)
    sc.job.busbw *= 0.3


@signature("host.pcie_acs_iommu")
def _acs(sc: Scenario, inj: Injected) -> None:
    """A BIOS update turned VT-d and ACS back on (fixtures/host/pcie_acs_iommu): the PCIe switch ports above the
    GPUs and NICs show ``ACSCtl: SrcValid+ ReqRedir+ CmpltRedir+``, the IOMMU blocks the NICs' peer-to-peer
    writes (DMAR faults) and NCCL's completions fail with local protection errors (status 4)."""
    rng = _rng(sc, inj)
    host = inj.host or sc.job_hosts[0]
    sc.host(host).knobs["acs"] = True
    peer = _ring_peers(sc, host)[0]
    sc.collect("lspci", [host, peer] if peer != host else [host])
    boot = sc.t_job - timedelta(hours=2)
    lines = [(boot, "DMAR: IOMMU enabled"), (boot, "DMAR: Intel(R) Virtualization Technology for Directed I/O"),
             (boot, "iommu: Default domain type: Translated ")]
    t = _at(sc, -2)
    for k in sorted(rng.sample(range(sc.tree.hcas_per_host), min(3, sc.tree.hcas_per_host))):
        lines += [(t, "DMAR: DRHD: handling fault status reg 2"),
                  (t, f"DMAR: [DMA Write NO_PASID] Request device [{hca_bus(k):02x}:00.0] fault addr "
                      f"0x{rng.getrandbits(34) << 12:x} [fault reason 0x05] PTE Write access is not set")]
    sc.job.dmesg.setdefault(host, []).extend(lines)
    for r in sc.ranks_on(host)[:4]:
        sc.job.incident += _completion(sc, r, peer, "Recv", rng, status=4, vendor=81)
    sc.job.nccl_tests = False


@signature("host.pcie_degraded")
def _pcie_degraded(sc: Scenario, inj: Injected) -> None:
    """A riser swap left one ConnectX-7 trained at PCIe x8 (fixtures/host/pcie_degraded): lspci shows
    ``Width x8 (downgraded)`` against ``LnkCap ... x16`` and the kernel said so at probe time; that NIC moves
    at most 252 Gb/s, and every ring through it with it."""
    host = inj.host or sc.job_hosts[0]
    k = inj.hca or 0
    sc.host(host).knobs.setdefault("nic_width", {})[k] = 8
    peer = _ring_peers(sc, host)[0]
    sc.collect("lspci", [host, peer] if peer != host else [host])
    sw = f"0000:{gpu_bus(k) - 1:02x}:02.0"
    boot = sc.t_job - timedelta(days=1)
    sc.job.dmesg.setdefault(host, []).append(
        (boot, f"mlx5_core {hca_bdf(k)}: 252.056 Gb/s available PCIe bandwidth, limited by 32.0 GT/s PCIe x8 link at "
               f"{sw} (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)"))
    sc.job.busbw *= 0.6


@signature("host.nic_driver_firmware")
def _nic_fw(sc: Scenario, inj: Injected) -> None:
    """The ConnectX firmware of one NIC stops answering (fixtures/host/nic_driver_firmware): command timeouts,
    then the health poller's miss count and syndrome, a software reset and the link going down; NCCL on that
    NIC gets a catastrophic async event."""
    rng = _rng(sc, inj)
    host = inj.host or sc.job_hosts[0]
    k = inj.hca or 0
    bdf = hca_bdf(k)
    t = _at(sc, -70)
    pid = rng.randint(400000, 600000)
    lines = [
        (t, f"mlx5_core {bdf}: wait_func_handle_exec_timeout:1104:(pid {pid}): cmd[12]: CREATE_QP(0x500) No done completion"),
        (t, f"mlx5_core {bdf}: wait_func:1132:(pid {pid}): CREATE_QP(0x500) timeout. Will cause a leak of a command resource"),
        (t + timedelta(seconds=61), f"mlx5_core {bdf}: wait_func:1132:(pid {pid + 4}): RST2INIT_QP(0x502) timeout. Will "
                                    "cause a leak of a command resource"),
        (t + timedelta(seconds=74), f"mlx5_core {bdf}: poll_health:955:(pid 0): device's health compromised - reached miss count"),
        (t + timedelta(seconds=74), f"mlx5_core {bdf}: print_health_info:441:(pid 0): fw_ver {HCA_FW}"),
        (t + timedelta(seconds=74), f"mlx5_core {bdf}: print_health_info:444:(pid 0): synd 0x1: firmware internal error"),
        (t + timedelta(seconds=75), f"mlx5_core {bdf}: mlx5_health_try_recover:331:(pid 0): handling bad device here"),
        (t + timedelta(seconds=75), f"mlx5_core {bdf}: mlx5_error_sw_reset:232:(pid 0): start"),
        (t + timedelta(seconds=76), f"mlx5_core {bdf} {netdev(k, sc.job.link_layer)}: Link down"),
    ]
    sc.job.dmesg.setdefault(host, []).extend(lines)
    r = sc.rank_of(host, k)
    if r is not None:
        for what in ("local catastrophic error", "port error"):
            sc.job.incident += warn(r, "transport/net_ib.cc:101", f"NET/IB : mlx5_{k}:1 Got async event : {what}", r.ptid)
    sc.job.nccl_tests = False


@signature("host.numa_affinity", "prepare")
def _numa_prepare(sc: Scenario, inj: Injected) -> None:
    """The container runtime of one host exposes only the HCAs of socket 0 (MELLANOX_VISIBLE_DEVICES copied from
    a smaller node profile, fixtures/host/numa_affinity): GPUs of socket 1 send through NICs across the CPU
    interconnect, without GPUDirect RDMA, while their own NICs idle."""
    host = inj.host or sc.job_hosts[0]
    g = sc.tree.hcas_per_host
    half = max(1, g // 2)
    hs = sc.host(host)
    hs.ib_devs = list(range(half))
    hs.nic_of_gpu = {k: k - half for k in range(half, g)}


@signature("host.numa_affinity")
def _numa(sc: Scenario, inj: Injected) -> None:
    host = inj.host or sc.job_hosts[0]
    sc.collect("topo", [host])
    sc.job.busbw *= 0.55


@signature("host.topology_misdetect")
def _topo(sc: Scenario, inj: Injected) -> None:
    """A node-local /etc/nccl.conf left from an A100 image points NCCL_TOPO_FILE at a DGX A100 topology
    (fixtures/host/topology_misdetect): its ranks echo the setting, and the file (copied from the host) lists
    GPUs at bus ids the H100 host does not have."""
    host = inj.host or sc.job_hosts[0]
    sc.host(host).env["NCCL_TOPO_FILE"] = "/etc/nccl/dgxa100-topo.xml"
    sc.job.files[f"{host}/dgxa100-topo.xml"] = hf.nccl_topo_xml()
    sc.job.busbw *= 0.55


@signature("host.container_rdma_access")
def _container(sc: Scenario, inj: Injected) -> None:
    """The job's container is started without ``--device=/dev/infiniband`` (fixtures/host/container_rdma_access):
    every rank fails to open the verbs devices, NCCL finds no IB device and falls back to NET/Socket while
    ibstat on the hosts shows every port Active."""
    for r in sc.ranks:
        hs = sc.host(r.host)
        hs.net = "Socket"
        lines = [info(r, env_line("NCCL_IB_DISABLE", "0"))]
        for k in range(sc.tree.hcas_per_host):
            lines += [*warn(r, "misc/ibvwrap.cc:113", "Call to ibv_open_device failed"),
                      *warn(r, "transport/net_ib.cc:426", f"NET/IB : Unable to open device mlx5_{k}")]
        lines.append(info(r, "NET/IB : No device found."))
        sc.job.netinit.setdefault(r.rank, []).extend(lines)
    sc.job.busbw *= 0.027


@signature("host.memlock_limit")
def _memlock(sc: Scenario, inj: Injected) -> None:
    """slurmd on one host was restarted without LimitMEMLOCK=infinity (fixtures/host/memlock_limit): job steps
    there inherit 64 KiB of locked memory, so verbs memory registration and CQ creation fail with ENOMEM while
    NCCL connects."""
    rng = _rng(sc, inj)
    host = inj.host or sc.job_hosts[0]
    sc.host(host).knobs["memlock_kib"] = 64
    sc.collect("ulimit", [host])
    failed = []
    for r in sc.ranks_on(host):
        if rng.random() < 0.25:
            lines = [*warn(r, "misc/ibvwrap.cc:190", "Call to ibv_create_cq failed with error Cannot allocate memory",
                           r.ptid), *trace(r, ["transport/net_ib.cc:871", "transport/net_ib.cc:1007"], 2, r.ptid)]
            last = "Call to ibv_create_cq failed with error Cannot allocate memory"
        else:
            lines = [*warn(r, "misc/ibvwrap.cc:153", "Call to ibv_reg_mr failed with error Cannot allocate memory",
                           r.ptid), *trace(r, ["transport/net_ib.cc:1041", "transport/net.cc:683"], 2, r.ptid)]
            last = "Call to ibv_reg_mr failed with error Cannot allocate memory"
        sc.job.setup.setdefault(r.rank, []).extend(lines)
        failed.append((r, last))
    for r, last in failed[:3]:
        sc.job.incident += torch_backend_error(r.rank, "system", last)
    sc.job.init_stage = "connect"
    sc.job.nccl_tests = False


@signature("host.shm_too_small")
def _shm(sc: Scenario, inj: Injected) -> None:
    """One host's job container was started without ``--shm-size``/``--ipc=host`` (fixtures/host/shm_too_small):
    /dev/shm is Docker's 64 MB, already full of stale ``nccl-*`` segments, so NCCL cannot create its shared
    memory segments there."""
    rng = _rng(sc, inj)
    host = inj.host or sc.job_hosts[0]
    sc.host(host).knobs["shm"] = ("64M", "64M", "0", 100)
    sc.collect("df", [host])
    ranks = sc.ranks_on(host)
    shm_last: dict[int, str] = {}
    for r in ranks:
        name = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") for _ in range(6))
        sc.job.setup.setdefault(r.rank, []).extend([
            *warn(r, "misc/shmutils.cc:72", f"Error: failed to extend /dev/shm/nccl-{name} to 9637892 bytes", r.ptid),
            *warn(r, "misc/shmutils.cc:113", f"Error while creating shared memory segment /dev/shm/nccl-{name} "
                  "(size 9637888)", r.ptid),
            *trace(r, ["transport/shm.cc:114", "transport.cc:33"], 2, r.ptid),
        ])
        shm_last[r.rank] = f"Error while creating shared memory segment /dev/shm/nccl-{name} (size 9637888)"
    for r in ranks[:2]:
        sc.job.incident += torch_backend_error(r.rank, "system", shm_last[r.rank])
    sc.job.init_stage = "connect"
    sc.job.nccl_tests = False


# ------------------------------------------------------------------------------------------------- nccl.*


@signature("nccl.socket_fallback")
def _socket(sc: Scenario, inj: Injected) -> None:
    """``export NCCL_IB_DISABLE=1`` left in the job script (fixtures/nccl/socket_fallback): NCCL runs the
    inter-node traffic over TCP, every channel ``via NET/Socket``, busbw at a few GB/s."""
    sc.job.env["NCCL_IB_DISABLE"] = "1"
    for h in sc.job_hosts:
        sc.host(h).net = "Socket"
    sc.job.busbw *= 0.012


@signature("nccl.interface_selection")
def _ifname(sc: Scenario, inj: Injected) -> None:
    """Containers in Docker's default bridge network with NCCL_SOCKET_IFNAME=eth0 (fixtures/nccl/
    interface_selection): every container's eth0 is 172.17.0.2 and its hostname the container id, so rank 0's
    bootstrap address sends the other hosts' ranks to their own container, where nothing listens; they give up
    after NCCL's connect retries."""
    rng = _rng(sc, inj)
    for h in sc.job_hosts:
        hs = sc.host(h)
        hs.oob = ("eth0", "172.17.0.2")
        hs.log_name = f"{rng.getrandbits(48):012x}"
    for r in sc.ranks:
        r.name = sc.host(r.host).log_name or r.host
    root = sc.job_hosts[0]
    failed = [r for r in sc.ranks if r.host != root]
    for r in failed:
        sc.job.setup.setdefault(r.rank, []).extend([
            info(r, "Call to connect returned Connection refused, retrying"),
            *warn(r, "misc/socket.cc:467", "socketStartConnect: exceeded retries (20000)"),
            *trace(r, ["misc/socket.cc:567", "bootstrap.cc:272", "init.cc:1402"], 6),
        ])
    for r in failed[::8][:2]:
        sc.job.incident += torch_backend_error(r.rank, "remote", "socketStartConnect: exceeded retries (20000)")
    sc.job.init_stage = "bootstrap"
    sc.job.nccl_tests = False


@signature("nccl.version_mismatch")
def _version(sc: Scenario, inj: Injected) -> None:
    """One host was re-imaged with an older GPU driver branch (470, CUDA 11.4) than the job's CUDA 12.4 stack
    (fixtures/nccl/version_mismatch): nvidia-smi on the job hosts shows two driver branches, and the host's
    ranks fail with 'CUDA driver version is insufficient for CUDA runtime version' before NCCL starts."""
    host = inj.host or sc.job_hosts[0]
    hs = sc.host(host)
    hs.driver = "470.239.06"
    hs.knobs["driver_cuda"] = "11.4"
    hs.nccl_silent = True
    sc.collect("nvidia_smi", sc.job_hosts)
    for r in sc.ranks_on(host):
        sc.job.incident += [
            f"[rank{r.rank}]: RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
        ]
    sc.job.files["nccl-tests.txt"] = (
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
        "validation: 1 graph: 0\n#\n# Using devices\n"
        f"{host}: Test CUDA failure common.cu:892 'CUDA driver version is insufficient for CUDA runtime version'\n"
        f" .. {host} pid {_rng(sc, inj).randint(100000, 900000)}: Test failure common.cu:1085\n")
    sc.job.init_stage = "bootstrap"
    sc.job.nccl_tests = False


@signature("nccl.p2p_or_nvls_config")
def _p2p(sc: Scenario, inj: Injected) -> None:
    """A node image meant for a PCIe inference pool ships /etc/nccl.conf with NCCL_P2P_LEVEL=LOC
    (fixtures/nccl/p2p_or_nvls_config): on that NVSwitch host every GPU pair talks through host shared memory
    (``via SHM/direct/direct``) although ``nvidia-smi topo -m`` shows NV18 between all of them."""
    host = inj.host or sc.job_hosts[0]
    hs = sc.host(host)
    hs.env["NCCL_P2P_LEVEL"] = "LOC"
    hs.intra = "SHM/direct/direct"
    sc.collect("topo", [host])
    sc.job.busbw *= 0.6


# ------------------------------------------------------------------------------------------------- gpu.*


@signature("gpu.xid_error")
def _xid(sc: Scenario, inj: Injected) -> None:
    """A GPU falls off the bus (Xid 79, fixtures/gpu/xid_error): its rank's CUDA calls fail and the ring
    neighbours' connections to it break."""
    rng = rng_for(sc.seed, "dmesg", inj.host, "xid")
    host, k = inj.host or sc.job_hosts[0], inj.gpu or 0
    bus = gpu_bus(k)
    x = sc.t_fail
    uuid = hf.gpu_uuid(rng)
    sc.job.dmesg.setdefault(host, []).extend([
        (x, f"NVRM: GPU at PCI:0000:{bus:02x}:00: {uuid}"),
        (x, f"NVRM: GPU Board Serial Number: {rng.randint(1650000000000, 1659999999999)}"),
        (x, f"NVRM: Xid (PCI:0000:{bus:02x}:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
        (x, f"NVRM: GPU 0000:{bus:02x}:00.0: GPU has fallen off the bus."),
        (x, "NVRM: A GPU crash dump has been created. If possible, please run"),
        (x, "NVRM: nvidia-bug-report.sh as root to collect this data before"),
        (x, "NVRM: the NVIDIA kernel module is unloaded."),
    ])
    if host not in sc.job_hosts or len(sc.job_hosts) < 2:
        return
    r = sc.rank_of(host, k)
    assert r is not None
    lrng = _rng(sc, inj, "incident")
    sc.job.incident += ["", f"{r.name}:{r.pid}:{r.pid} [{r.local}] enqueue.cc:1402 NCCL WARN Cuda failure "
                            "'unspecified launch failure'"]
    prv, nxt = _ring_peers(sc, host)
    events = [{"rank": r.rank, "host": host, "gpu": k, "what": "cuda", "peer_host": None}]
    for peer, what in ((nxt, "Recv"), (prv, "Send")):
        if peer == host or (what == "Send" and prv == nxt):
            continue
        q = sc.rank_of(peer, k)
        if q is not None:
            sc.job.incident += _completion(sc, q, host, what, lrng)
            events.append({"rank": q.rank, "host": peer, "gpu": k, "what": what, "peer_host": host})
    inj.params["nccl_warn_ranks"] = events


@signature("gpu.nvlink_degraded")
def _nvlink(sc: Scenario, inj: Injected) -> None:
    """Six of a GPU's 18 NVLinks went down after Xid 74 (fixtures/gpu/nvlink_degraded): ``nvlink -s`` shows them
    ``<inactive>``, ``nvlink -e`` their replay/recovery counts, ``topo -m`` NV12 on its row."""
    rng = _rng(sc, inj)
    host, k = inj.host or sc.job_hosts[0], inj.gpu or 0
    links = set(range(12, 18))
    hs = sc.host(host)
    hs.knobs["nvlink_down"] = {k: links}
    hs.knobs["nvlink_errors"] = {(k, i): (rng.randint(200, 900), rng.randint(3, 12), rng.randint(500, 4000))
                                 for i in sorted(links)}
    t = _at(sc, -rng.randint(600, 3600))
    bus = gpu_bus(k)
    sc.job.dmesg.setdefault(host, []).extend(
        (t + timedelta(seconds=i - 12), f"NVRM: Xid (PCI:0000:{bus:02x}:00): 74, pid='<unknown>', name=<unknown>, "
                                        f"NVLink: fatal error detected on link {i}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")
        for i in sorted(links))
    sc.collect("nvlink", [host])
    sc.collect("topo", [host])
    sc.collect("nvidia_smi", [host])
    sc.job.busbw *= 0.92


@signature("gpu.fabric_manager")
def _fm(sc: Scenario, inj: Injected) -> None:
    """An unattended upgrade moved one host's driver while nvidia-fabricmanager stayed behind
    (fixtures/gpu/fabric_manager): after the reboot Fabric Manager refuses to start, the GPUs never finish
    fabric registration, and every CUDA call on the host fails with error 802."""
    rng = _rng(sc, inj)
    host = inj.host or sc.job_hosts[0]
    hs = sc.host(host)
    hs.driver = "535.183.06"
    hs.knobs["fm_version"] = DRIVER
    hs.knobs["fabric_state"] = "In Progress"
    hs.nccl_silent = True
    sc.collect("fabricmanager", [host])
    sc.collect("nvidia_smi_q", [host])
    for r in sc.ranks_on(host):
        sc.job.incident += [
            "/opt/venvs/torch-2.5.1/lib/python3.11/site-packages/torch/cuda/__init__.py:129: UserWarning: CUDA "
            "initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling"
            " NumCudaDevices() that might have already set an error? Error 802: system not yet initialized (Triggered"
            " internally at ../c10/cuda/CUDAFunctions.cpp:108.)",
            f"[rank{r.rank}]: RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions"
            " before calling NumCudaDevices() that might have already set an error? Error 802: system not yet "
            "initialized",
        ]
    hs.knobs["fm_tid"] = rng.randint(1500, 5000)
    sc.job.init_stage = "bootstrap"
    sc.job.nccl_tests = False


@signature("gpu.throttling")
def _throttle(sc: Scenario, inj: Injected) -> None:
    """One GPU runs hot and thermally throttles (fixtures/gpu/throttling): HW Slowdown, HW Thermal Slowdown and
    SW Thermal Slowdown active at 88 C while its peers run at ~60 C; DCGM's health watch flags a thermal clock
    event. SW Power Cap on busy peers is normal and stays in the capture."""
    rng = _rng(sc, inj)
    host, k = inj.host or sc.job_hosts[0], inj.gpu or 0
    hs = sc.host(host)
    hs.knobs["hot_gpu"] = k
    hs.knobs["hot_temp"] = rng.randint(86, 91)
    sc.collect("nvidia_smi_q", [host, _ring_peers(sc, host)[1]])
    sc.collect("nvidia_smi", [host])
    sc.collect("dcgmi", [host])
    sc.job.busbw *= 0.97


@signature("app.straggler_or_desync")
def _straggler(sc: Scenario, inj: Injected) -> None:
    """One rank never joins the next collective: it is blocked writing its checkpoint shard to an NFS server that
    stopped answering (fixtures/app/straggler_or_desync). Every other rank's watchdog times out on that
    collective and ``TORCH_NCCL_DESYNC_DEBUG=1`` names the missing rank; the hardware is clean."""
    rng = _rng(sc, inj)
    host, k = inj.host or sc.job_hosts[0], inj.gpu or 0
    lag = sc.rank_of(host, k)
    assert lag is not None
    seq = rng.randint(800, 4000)
    t = _at(sc, 600)
    for r in sc.ranks:
        if r.rank == lag.rank or rng.random() > 0.5:
            continue
        ts = _torch_ts(t + timedelta(microseconds=rng.randint(0, 900000)))
        sc.job.incident += [
            torch_watchdog(r.rank, seq, f"{ts} {r.pid}", 600000 + rng.randint(100, 1500)),
            f" - [{r.rank}] Timeout at collective: ALLREDUCE, #{seq}",
            " - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
            f"     [{lag.rank}] finished collective #{seq - 1}, but didn't join collective #{seq} (count from 1)",
        ]
    hung = _at(sc, 240)
    sc.job.dmesg.setdefault(host, []).extend([
        (_at(sc, 20), "nfs: server 10.129.0.50 not responding, still trying"),
        (hung, f"INFO: task python:{lag.pid} blocked for more than 120 seconds."),
        (hung, "      Tainted: P           OE     5.15.0-119-generic #129-Ubuntu"),
        (hung, "\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message."),
    ])
    inj.params["detail"] = f"rank {lag.rank} ({host} GPU {k}) blocked in its checkpoint write"


# ------------------------------------------------------------------------------------------------- collected tools


def _temps(sc: Scenario, host: str) -> list[int]:
    rng = rng_for(sc.seed, "temps", host)
    hs = sc.host(host)
    temps = [rng.randint(57, 64) for _ in range(sc.tree.hcas_per_host)]
    if hs.knobs.get("hot_gpu") is not None:
        temps[hs.knobs["hot_gpu"]] = int(hs.knobs.get("hot_temp", 88))
    return temps


def _uuids(sc: Scenario, host: str) -> list[str]:
    rng = rng_for(sc.seed, "uuids", host)
    return [hf.gpu_uuid(rng) for _ in range(sc.tree.hcas_per_host)]


def _ports(sc: Scenario, host: str) -> list[dict]:
    hs = sc.host(host)
    out = []
    for n in sc.tree.hcas(host):
        k = n.index or 0
        up = sc.hca_up(host, k)
        eth = sc.roce
        p: dict[str, Any] = {
            "device": n.device, "guid": n.guid, "fw": hs.hca_fw,
            "state": "PORT_ACTIVE (4)" if up or eth else "PORT_DOWN (1)",
            "max_mtu": 4096, "active_mtu": hs.active_mtu, "sm_lid": hs.sm_lid or sc.tree.sm_lid, "lid": n.lid,
            "link_layer": "Ethernet" if eth else "InfiniBand",
            "width": sc.state(sc.tree.hca_link(host, k)).width,
        }
        if eth:
            p["gids"] = hf.roce_gids(k, sc.tree.host_index(host), _mac(sc, host, k))
        out.append(p)
    return out


def _render_tool(sc: Scenario, tool: str, host: str) -> tuple[str, str]:
    hs = sc.host(host)
    g = sc.tree.hcas_per_host
    t = sc.t_disc
    rng = rng_for(sc.seed, "tool", tool, host)
    if tool == "lsmod":
        return "lsmod.txt", hf.lsmod(hs.knobs.get("peermem", True))
    if tool == "ulimit":
        return "ulimit-a.txt", hf.ulimit_a(hs.knobs.get("memlock_kib"))
    if tool == "df":
        return "df-h.txt", hf.df_h(hs.knobs.get("shm", ("252G", "1.1M", "252G", 1)))
    if tool == "lspci":
        return "lspci-vvv.txt", hf.lspci_vvv(host, g, hs.knobs.get("nic_width"), bool(hs.knobs.get("acs")))
    if tool == "topo":
        down = hs.knobs.get("nvlink_down", {})
        return "nvidia-smi-topo-m.txt", hf.nvidia_smi_topo(host, g, {k: 18 - len(v) for k, v in down.items()})
    if tool == "nvlink":
        return "nvidia-smi-nvlink-s.txt", hf.nvlink_s(host, _uuids(sc, host), hs.knobs.get("nvlink_down"))
    if tool == "nvlink_e":
        return "nvidia-smi-nvlink-e.txt", hf.nvlink_e(host, _uuids(sc, host), hs.knobs.get("nvlink_errors"))
    if tool == "nvidia_smi":
        temps = _temps(sc, host)
        power = [rng.randint(660, 699) for _ in range(g)]
        if hs.knobs.get("hot_gpu") is not None:
            power[hs.knobs["hot_gpu"]] = rng.randint(380, 430)
        return "nvidia-smi.txt", hf.nvidia_smi(t, g, temps, power, hs.driver, hs.knobs.get("driver_cuda", DRIVER_CUDA))
    if tool == "nvidia_smi_q":
        temps = _temps(sc, host)
        hot = {hs.knobs["hot_gpu"]} if hs.knobs.get("hot_gpu") is not None else set()
        cap = set(rng.sample(range(g), min(3, g))) - hot
        return "nvidia-smi-q.txt", hf.nvidia_smi_q(host, t, g, temps, hot, cap, hs.driver,
                                                   hs.knobs.get("driver_cuda", DRIVER_CUDA),
                                                   hs.knobs.get("fabric_state", "Completed"))
    if tool == "dcgmi":
        return "dcgmi-health.txt", hf.dcgmi_health(host, hs.knobs.get("hot_gpu"))
    if tool == "fabricmanager":
        start = sc.t_job - timedelta(hours=1)
        return "fabricmanager.log", hf.fabricmanager_log(start, hs.knobs.get("fm_version", hs.driver), hs.driver,
                                                          int(hs.knobs.get("fm_tid", 1570)))
    if tool == "ibv_devinfo":
        return "ibv_devinfo.txt", hf.ibv_devinfo(host, _ports(sc, host))
    if tool == "ibdev2netdev":
        return "ibdev2netdev.txt", hf.ibdev2netdev(host, [(f"mlx5_{k}", netdev(k, sc.job.link_layer), True)
                                                          for k in range(g)])
    if tool == "env":
        env = sc.env_of(host)
        return "env.txt", hf.env_dump(env, {"NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": "1",
                                            "CUDA_VERSION": "12.4.1", "NCCL_VERSION": "2.21.5"})
    raise ValueError(f"no renderer for {tool}")


HOST_TOOLS = ("lsmod", "ulimit", "df", "lspci", "topo", "nvlink", "nvidia_smi", "nvidia_smi_q", "dcgmi",
              "fabricmanager", "ibv_devinfo", "env")


def collect_everything(sc: Scenario) -> None:
    """Every host tool from every job host (healthy where no fault changed it): what a thorough responder, or a
    node health check, collects; used to show that healthy output stays silent."""
    for tool in HOST_TOOLS:
        sc.collect(tool, sc.job_hosts)
    if not sc.roce:  # the fabric's configuration and link listing, from the SM's node
        sm = sm_node(sc)
        sc.job.files.setdefault(f"{sm}/opensm.conf", ff.opensm_conf("ar_updn"))
        sc.job.files.setdefault(f"{sm}/partitions.conf", "\n".join([
            f"# /etc/opensm/partitions.conf on {sm}", "Default=0x7fff, ipoib : ALL=full ;", ""]))
        sc.job.files.setdefault("fabric/iblinkinfo.txt", ff.iblinkinfo(sc, _prompt(sm)))
    if sc.roce:
        sc.collect("ibdev2netdev", sc.job_hosts)
        rng = rng_for(sc.seed, "healthy-roce")
        for h in sc.job_hosts:
            if f"{h}/ethtool-S.txt" not in sc.job.files:
                _roce_snapshots(sc, h, rng, traffic_prio=3, loss_per_30s=0, cnp=True)


def render_collected(sc: Scenario) -> dict[str, str]:
    """The host tools the signatures asked for, rendered from each host's state; plus the SM log."""
    files: dict[str, str] = {}
    tools = dict(sc.job.collect)
    if "nvlink" in tools:
        tools["nvlink_e"] = tools["nvlink"]
    order = {h: i for i, h in enumerate(sc.tree.hosts)}
    for tool in sorted(tools):
        for host in sorted(tools[tool], key=order.__getitem__):
            name, text = _render_tool(sc, tool, host)
            files[f"{host}/{name}"] = text
    if sc.job.sm_log:
        files["fabric/opensm.log"] = "\n".join(line for _t, line in sorted(sc.job.sm_log, key=lambda p: p[0])) + "\n"
    return files


__all__ = ["APPLY", "HOST_TOOLS", "PREPARE", "apply_all", "busbw_factor", "collect_everything", "hca_aliases",
           "nccl_tests_hosts", "prepare", "render_collected"]


# OpenSM QoS as the site set it: storage on VL 2, checkpoint traffic on VL 4 high priority, and no weight for VL 1
QOS_STARVED = {"qos": "TRUE", "qos_max_vls": "8", "qos_high_limit": "4", "qos_vlarb_high": "4:64",
               "qos_vlarb_low": "0:64,2:64,3:32", "qos_sl2vl": "0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7"}


def _qos_path_ports(sc: Scenario) -> list[tuple[int, int | None, int]]:
    """Egress ports of the job's rail-0 traffic: its HCAs, the leaf ports facing them, the leaves' uplinks and
    the spine ports facing the leaves (lid, port or None for an HCA, highest input port)."""
    tree = sc.tree
    out: list[tuple[int, int | None, int]] = []
    leaves: list[str] = []
    for h in sc.job_hosts:
        hca = sc.hca_node(h, 0)
        out.append((hca.lid, None, 0))
        att = tree.hca_attachment(h, 0)
        out.append((tree.nodes[att.node].lid, att.port, tree.nodes[att.node].nports))
        if att.node not in leaves:
            leaves.append(att.node)
    for leaf in leaves:
        for lk in tree.leaf_uplinks(leaf):
            n = tree.nodes[leaf]
            out.append((n.lid, lk.lower.port, n.nports))
            up = tree.nodes[lk.upper.node]
            out.append((up.lid, lk.upper.port, up.nports))
    return list(dict.fromkeys(out))


def _qos_ib(sc: Scenario, inj: Injected) -> None:
    """NCCL_IB_SL=1 from the site's NCCL modulefile on a fabric whose VLArb tables give VL 1 no weight
    (fixtures/fabric/qos_misconfig/positive-ib-sl-on-zero-weight-vl): SL 1 maps to VL 1 on every port
    (SL2VL SL mod 8) and the arbiter never serves it; the job's collectives crawl, nothing errors."""
    sm = sm_node(sc)
    sc.job.env["NCCL_IB_SL"] = "1"
    sc.job.files["modulefiles/nccl/2.21.5.lua"] = (
        'whatis("NCCL 2.21.5 for CUDA 12.4, site defaults")\n'
        'family("nccl")\n\n'
        'local root = "/opt/nccl/2.21.5-cuda12.4"\n'
        'prepend_path("LD_LIBRARY_PATH", pathJoin(root, "lib"))\n'
        'setenv("NCCL_HOME", root)\n'
        '-- tenant traffic class: SL 1 (change INFRA-2214)\n'
        'setenv("NCCL_IB_SL","1")\n'
        'setenv("NCCL_IB_HCA","=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7")\n')
    sc.job.files[f"{sm}/opensm.conf"] = ff.opensm_conf("ar_updn", QOS_STARVED)
    vls = [int(v) for v in QOS_STARVED["qos_sl2vl"].split(",")]
    sc.job.files["fabric/smpquery_qos.txt"] = ff.smpquery_qos(_prompt(sm), _qos_path_ports(sc), vls,
                                                             [(0, 0x40), (2, 0x40), (3, 0x20)], [(4, 0x40)])
    sc.job.busbw *= 0.05
    inj.params["detail"] = "NCCL_IB_SL=1 (modulefile): SL 1 -> VL 1, which has no VLArb weight on the job's ports"
