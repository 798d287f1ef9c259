"""Write a bundle in the real tools' output formats.

Layout (InfiniBand fabric; a RoCE fabric has no ``fabric/`` folder: no subnet manager, no ``perfquery``)::

    <out>/truth.yaml                  the injected faults and their exact places (not tool output)
    <out>/job.log                     NCCL 2.21.5 INFO/WARN log of a job over ``job_hosts`` (8 ranks per host),
                                      with the PyTorch errors of the incident
    <out>/nccl-tests.txt              all_reduce_perf (nccl-tests, mid-2024 layout), when asked for and when the job's
                                      hosts can run it
    <out>/fabric/ibnetdiscover.topo   ibnetdiscover topology file (rdma-core ``dump_topology``)
    <out>/fabric/perfquery_1.txt      ``date`` + ``perfquery -x -G <guid> <port>`` for every reachable port
    <out>/fabric/perfquery_2.txt      the same, 10-15 minutes later
    <out>/<host>/ibstat.txt           ibstat of each job host (and of each host a fault sits on)
    <out>/<host>/dmesg.txt            ``dmesg -T`` of the same hosts
    <out>/<host>/<tool>.txt           what the responder ran on a host for the faults injected (lsmod, ulimit -a,
                                      df -h, lspci -vvv, nvidia-smi ..., ibv_devinfo, ethtool -S, rdma statistic)
    <out>/<sm>/opensm.conf            the master SM's configuration (``<sm>``: the node the SM runs on), and its
    <out>/<sm>/partitions.conf        partition file, when a cause's variant lives there (or every host tool)
    <out>/fabric/iblinkinfo.txt       iblinkinfo from the SM's node (a degraded switch link; every host tool)
    <out>/fabric/smpquery_*.txt       ``smpquery sl2vl``/``vlarb`` of the job's egress ports, ``smpquery pkeys``
    <out>/nccl-tests/*_<n>n.txt       the same all_reduce_perf at other node counts (the scaling curve)
    <out>/modulefiles/...             the site's NCCL Lmod modulefile, when it sets what the cause is

Formats follow the sources: rdma-core ``infiniband-diags/ibnetdiscover.c`` (``out_switch``/``out_ca``/
``out_*_port``, nodes printed in reverse discovery order as libibnetdisc prepends them), ``perfquery.c`` +
libibmad ``dump.c`` (dotted fields, value at column 34), ``ibstat.c``, the NVIDIA driver's Xid lines
(https://docs.nvidia.com/deploy/xid-errors/), and the modules cited in :mod:`diagnose.simulate.joblog` and
:mod:`diagnose.simulate.hostfiles`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import structlog
import yaml

from diagnose.simulate import joblog, signatures
from diagnose.simulate.faults import DEGRADED_MODES, Fault, Injected, link_layer_for, resolve
from diagnose.simulate.scenario import (
    CUDA_DRIVER,
    CUDA_VERSION,
    DRIVER,
    GPU_NAME,
    HCA_CA_TYPE,
    HCA_CAPMASK,
    LINK_BPS,
    NCCL_VERSION,
    OOB_IF,
    ROCE_CAPMASK,
    HostState,
    LinkState,
    Scenario,
    choose_job,
    ctime,
    gpu_bus,
    gpu_pci,
    hca_bdf,
    hca_bus,
)
from diagnose.simulate.topology import RADIX, End, FatTree, Node, rng_for

if not structlog.is_configured():  # library use: quiet by default; the CLI configures its own
    from diagnose.logging_setup import configure

    configure("console", "warning")
log = structlog.get_logger("diagnose.simulate")

__all__ = [
    "CUDA_DRIVER", "CUDA_VERSION", "DRIVER", "GPU_NAME", "NCCL_VERSION", "OOB_IF", "PQ_FIELDS", "ERROR_FIELDS",
    "LinkState", "Scenario", "build_scenario", "compute_counters", "ctime", "gpu_bus", "hca_bus", "render_dmesg",
    "render_ibnetdiscover", "render_ibstat", "render_perfquery", "truth", "write_bundle",
]

PQ_FIELDS = (
    "PortSelect", "CounterSelect", "PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts",
    "PortUnicastXmitPkts", "PortUnicastRcvPkts", "PortMulticastXmitPkts", "PortMulticastRcvPkts", "CounterSelect2",
    "SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
    "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards", "PortXmitConstraintErrors",
    "PortRcvConstraintErrors", "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors", "VL15Dropped",
    "PortXmitWait", "QP1Dropped",
)
ERROR_FIELDS = (
    "SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
    "PortRcvRemotePhysicalErrors", "PortXmitDiscards", "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors",
)
TICKS_PER_S = 6.25e9  # PortXmitWait ticks per second at NDR: one tick is the time to send 8 bytes


# ------------------------------------------------------------------------------------------------- scenario


def build_scenario(tree: FatTree, faults: list[Fault | str], seed: int,
                   job_hosts: list[str] | int | None = None, window_s: int | None = None,
                   link_layer: str = "auto") -> Scenario:
    """Place the faults, pick the job, set the clocks, and let each fault's signature change the scenario."""
    injected = resolve(tree, list(faults), seed, link_layer)
    ll = link_layer_for(injected, link_layer)
    job = choose_job(tree, injected, job_hosts)
    rt = rng_for(seed, "time")
    t_job = datetime(2024, 6, 3, 6, 0, 0, tzinfo=timezone.utc) + timedelta(days=rt.randint(0, 120),
                                                                            seconds=rt.randint(0, 8 * 3600))
    t_fail = t_job + timedelta(seconds=rt.randint(2 * 3600, 30 * 3600))
    t_disc = t_fail + timedelta(seconds=rt.randint(20 * 60, 60 * 60))
    s1 = t_disc + timedelta(seconds=rt.randint(60, 300))
    win = window_s if window_s is not None else rt.randint(600, 900)
    if win <= 0:
        raise ValueError("window_s must be > 0")
    s2 = s1 + timedelta(seconds=win)
    states: dict = {}
    for inj in injected:
        if inj.link is None:
            continue
        if inj.kind == "link.port_down":
            states[inj.link] = LinkState(up=False)
        elif inj.kind == "link.degraded":
            w, s, _ = DEGRADED_MODES[inj.mode or "2x"]
            states[inj.link] = LinkState(width=w, speed=s)
    sc = Scenario(tree=tree, seed=seed, injected=injected, job_hosts=job, t_job=t_job, t_fail=t_fail, t_disc=t_disc,
                  t_snap=(s1, s2), link_state=states)
    sc.job.link_layer = ll
    for h in tree.hosts:
        u, j = divmod(tree.host_index(h), tree.su_hosts)
        sc.host_ip[h] = f"10.{64 + u // 256}.{u % 256}.{j + 11}"
    for h in list(job) + [i.host for i in injected if i.host]:
        sc.hosts.setdefault(h, HostState())
    signatures.prepare(sc)  # host settings that change which devices NCCL lists (before the ranks exist)
    sc.ranks = joblog.job_ranks(sc)
    signatures.apply_all(sc)
    return sc


# ------------------------------------------------------------------------------------------------- counters


def _counter_names() -> tuple[str, ...]:
    return tuple(n for n in PQ_FIELDS if n not in ("PortSelect", "CounterSelect", "CounterSelect2"))


@dataclass
class PortCounters:
    base: dict[str, int]
    delta: dict[str, int]

    def snapshot(self, i: int) -> dict[str, int]:
        return dict(self.base) if i == 0 else {k: self.base[k] + self.delta[k] for k in self.base}


def compute_counters(sc: Scenario) -> dict[End, PortCounters]:
    """Counters of every port that perfquery can reach: both ends of each cable, except the HCA end of a
    cable that is down (the HCA is unreachable). Traffic in the window follows each cable's rate and load,
    and what one end transmits the other end receives. Ports a fault loads (``sc.port_util``) or starves of
    credits (``sc.port_wait``: share of the window spent waiting) get those values."""
    tree = sc.tree
    rng = rng_for(sc.seed, "counters")
    T = sc.window_s
    names = _counter_names()
    jobset = set(sc.job_hosts)
    uptime: dict[str, int] = {}
    for n in sorted(tree.nodes.values(), key=lambda n: n.lid):
        days = rng.uniform(30, 200) if n.kind == "SW" else rng.uniform(1, 60)
        uptime[n.name] = int(days * 86400)
    out: dict[End, PortCounters] = {}
    lrng = rng_for(sc.seed, "switch-load")
    loads = {n.name: lrng.uniform(0.03, 0.25) for n in tree.switches()}

    def load(node: str) -> float:
        return loads[node]

    for link in tree.links:
        st = sc.state(link)
        full = LINK_BPS[("4X", "NDR")]
        rate = LINK_BPS[(st.width, st.speed)] if st.up else 0.0
        lower = tree.nodes[link.lower.node]
        if link.kind == "hca-leaf":
            if lower.host in jobset:
                u = [rng.uniform(0.30, 0.55)] * 2
                u[1] *= rng.uniform(0.97, 1.03)
            elif rng.random() < 0.35:
                u = [rng.uniform(0.0005, 0.01), rng.uniform(0.0005, 0.01)]
            else:
                u = [rng.uniform(0.05, 0.5), rng.uniform(0.05, 0.5)]
        else:
            # routing spreads a switch's traffic evenly over its uplinks (ECMP / the SM's balanced static routes):
            # each direction follows the sending switch's load, within +-25%
            u = [load(link.lower.node) * rng.uniform(0.8, 1.25), load(link.upper.node) * rng.uniform(0.8, 1.25)]
        sizes = [rng.uniform(2600, 4000), rng.uniform(2600, 4000)]
        mcast = [rng.uniform(0.01, 0.08), rng.uniform(0.01, 0.08)]
        for inj in sc.injected:
            if inj.link == link and inj.kind in ("link.bad_cable", "link.flapping"):
                u = [x * (0.7 if inj.kind == "link.bad_cable" else 0.6) for x in u]
        for d, end in enumerate(link.ends):  # d=0: lower->upper
            if end in sc.port_util:
                u[d] = sc.port_util[end]
        win_bytes = [int(u[d] * rate * T) for d in (0, 1)]
        win_pkts = [int(win_bytes[d] / sizes[d]) for d in (0, 1)]
        win_mc = [int(mcast[d] * T) if st.up else 0 for d in (0, 1)]
        for d, end in enumerate(link.ends):
            node = tree.nodes[end.node]
            if not st.up and node.kind == "CA":
                continue
            xd, rd = d, 1 - d  # this end transmits direction d and receives the other
            up_s = uptime[end.node]
            avg = [rng.uniform(0.01, 0.15), rng.uniform(0.01, 0.15)]
            bsz = [rng.uniform(1500, 4000), rng.uniform(1500, 4000)]
            base_x = int(avg[0] * full * up_s)
            base_r = int(avg[1] * full * up_s)
            base_xp, base_rp = int(base_x / bsz[0]), int(base_r / bsz[1])
            base_xm, base_rm = int(up_s * rng.uniform(0.01, 0.05)), int(up_s * rng.uniform(0.01, 0.08))
            wait_rate = rng.uniform(2e3, 2e4)
            base = dict.fromkeys(names, 0)
            delta = dict.fromkeys(names, 0)
            base.update({
                "PortXmitData": base_x // 4, "PortRcvData": base_r // 4,
                "PortXmitPkts": base_xp + base_xm, "PortRcvPkts": base_rp + base_rm,
                "PortUnicastXmitPkts": base_xp, "PortUnicastRcvPkts": base_rp,
                "PortMulticastXmitPkts": base_xm, "PortMulticastRcvPkts": base_rm,
                "PortXmitWait": int(up_s * avg[0] * wait_rate),
            })
            delta.update({
                "PortXmitData": win_bytes[xd] // 4, "PortRcvData": win_bytes[rd] // 4,
                "PortXmitPkts": win_pkts[xd] + win_mc[xd], "PortRcvPkts": win_pkts[rd] + win_mc[rd],
                "PortUnicastXmitPkts": win_pkts[xd], "PortUnicastRcvPkts": win_pkts[rd],
                "PortMulticastXmitPkts": win_mc[xd], "PortMulticastRcvPkts": win_mc[rd],
                "PortXmitWait": int(T * u[xd] * wait_rate) if st.up else 0,
            })
            if end in sc.port_wait:
                # a port starved of credits: PortXmitWait counts one tick per 8 bytes it could have sent (the
                # model the congestion extractor uses), 6.25e9 ticks/s at NDR
                delta["PortXmitWait"] = int(T * sc.port_wait[end] * TICKS_PER_S)
                base["PortXmitWait"] += int(up_s * rng.uniform(2e4, 2e5))
            out[end] = PortCounters(base, delta)
    _add_errors(sc, out, rng)
    return out


def _add_errors(sc: Scenario, out: dict[End, PortCounters], rng) -> None:
    tree = sc.tree
    touched: set[End] = set()
    for inj in sc.injected:
        if inj.link is not None:
            touched.update(inj.link.ends)
        if inj.kind == "link.bad_cable":
            for end in inj.error_ends:
                pc = out[end]
                pc.base["SymbolErrorCounter"] = rng.randint(15000, 40000)
                pc.delta["SymbolErrorCounter"] = rng.randint(2500, 9000)
                pc.base["LinkErrorRecoveryCounter"] = rng.randint(40, 120)
                pc.delta["LinkErrorRecoveryCounter"] = rng.randint(8, 30)
                pc.base["PortRcvErrors"] = rng.randint(800, 3000)
                pc.delta["PortRcvErrors"] = rng.randint(150, 700)
        elif inj.kind == "link.flapping":
            flaps = int(inj.params.get("flaps", 4))
            for end in inj.error_ends:
                out[end].base["LinkDownedCounter"] = rng.randint(1, 3)
                out[end].delta["LinkDownedCounter"] = flaps
                if inj.variant == "uplink_retrain":  # each retrain also counts symbol errors and a recovery
                    out[end].base["SymbolErrorCounter"] = rng.randint(150, 250)
                    out[end].delta["SymbolErrorCounter"] = flaps * rng.randint(10, 14)
                    out[end].base["LinkErrorRecoveryCounter"] = rng.randint(5, 10)
                    out[end].delta["LinkErrorRecoveryCounter"] = flaps
        elif inj.kind == "link.port_down" and inj.link is not None:
            for end in inj.link.ends:
                if end in out:  # the switch end stays queryable: it counted the link going down, before the window
                    out[end].base["LinkDownedCounter"] = rng.randint(1, 2)
    # background: hosts rebooted (leaf ports facing HCAs counted the link going down), and a few ports with
    # small, old (not rising) symbol error counts
    healthy = sorted(e for e in out if e not in touched)
    for end in healthy:
        node = tree.nodes[end.node]
        if node.tier == 1 and end.port <= RADIX // 2 and rng.random() < 0.3:
            out[end].base["LinkDownedCounter"] = rng.randint(1, 4)
    n_noise = min(24, max(2, round(0.01 * len(healthy))))
    for end in rng.sample(healthy, min(n_noise, len(healthy))):
        pc = out[end]
        pc.base["SymbolErrorCounter"] = rng.randint(1, 40)
        if rng.random() < 0.3:
            pc.base["LinkErrorRecoveryCounter"] = rng.randint(1, 3)
        if rng.random() < 0.2:
            pc.base["PortRcvErrors"] = rng.randint(1, 5)


# ------------------------------------------------------------------------------------------------- fabric files


def _discovery_order(tree: FatTree, sc: Scenario, start: str) -> list[str]:
    """BFS from the initiating HCA over the cables that are up, by port order."""
    seen = [start]
    known = {start}
    i = 0
    while i < len(seen):
        name = seen[i]
        i += 1
        for p in tree.ports_of(name):
            link = tree.link_at(name, p)
            if link is None or not sc.state(link).up:
                continue
            nxt = link.other(End(name, p)).node
            if nxt not in known:
                known.add(nxt)
                seen.append(nxt)
    return seen


def render_ibnetdiscover(sc: Scenario) -> str:
    tree = sc.tree
    start = tree.hcas(sc.job_hosts[0])[0]
    if not sc.state(tree.link_at(start.name, 1)).up:  # type: ignore[arg-type]
        start = next(n for n in tree.hcas() if sc.state(tree.link_at(n.name, 1)).up)  # type: ignore[arg-type]
    order = _discovery_order(tree, sc, start.name)
    lines = [
        "#", f"# Topology file: generated on {ctime(sc.t_disc)}", "#",
        f"# Initiated from node {start.guid_hex} port {start.guid_hex}",
    ]
    for name in reversed([n for n in order if tree.nodes[n].kind == "SW"]):
        n = tree.nodes[name]
        lines += ["", "vendid=0x2c9", "devid=0xd2f0", f"sysimgguid={n.guid}",
                  f"switchguid={n.guid}({n.guid_hex})",
                  f'Switch\t{n.nports} "S-{n.guid_hex}"\t\t# "{n.description}" enhanced port 0 lid {n.lid} lmc 0']
        for p in tree.ports_of(name):
            link = tree.link_at(name, p)
            assert link is not None
            st = sc.state(link)
            if not st.up:
                continue
            r = link.other(End(name, p))
            rn = tree.nodes[r.node]
            if rn.kind == "CA":
                lines.append(f'[{p}]\t"H-{rn.guid_hex}"[{r.port}]({rn.guid_hex}) \t\t# "{rn.description}" '
                             f"lid {rn.lid} {st.topo_ws}")
            else:
                lines.append(f'[{p}]\t"S-{rn.guid_hex}"[{r.port}]\t\t# "{rn.description}" lid {rn.lid} {st.topo_ws}')
    for name in reversed([n for n in order if tree.nodes[n].kind == "CA"]):
        n = tree.nodes[name]
        lines += ["", "vendid=0x2c9", "devid=0x1021", f"sysimgguid={n.guid}", f"caguid={n.guid}",
                  f'Ca\t{n.nports} "H-{n.guid_hex}"\t\t# "{n.description}"']
        link = tree.link_at(name, 1)
        assert link is not None
        st = sc.state(link)
        r = link.upper
        rn = tree.nodes[r.node]
        lines.append(f'[1]({n.guid_hex}) \t"S-{rn.guid_hex}"[{r.port}]\t\t# lid {n.lid} lmc 0 "{rn.description}" '
                     f"lid {rn.lid} {st.topo_ws}")
    return "\n".join(lines) + "\n"


def _pq_block(lines: list[str], node: Node, port: int, values: dict[str, int]) -> None:
    caps = "CapMask: 0x5A00 CapMask2: 0x0000000" if node.kind == "CA" else "CapMask: 0x5300 CapMask2: 0x0000002"
    lines.append(f"$ perfquery -x -G {node.guid} {port}")
    lines.append(f"# Port extended counters: Lid {node.lid} port {port} ({caps})")
    for name in PQ_FIELDS:
        if name == "PortSelect":
            v = str(port)
        elif name == "CounterSelect":
            v = "0x0000"
        elif name == "CounterSelect2":
            v = "0x00000000"
        else:
            v = str(values[name])
        lines.append(f"{name}:".ljust(33, ".") + v)


def render_perfquery(sc: Scenario, counters: dict[End, PortCounters], snap: int) -> str:
    tree = sc.tree
    lines = ["$ date", ctime(sc.t_snap[snap], "UTC")]
    for node in sorted(tree.nodes.values(), key=lambda n: n.lid):
        for p in tree.ports_of(node.name):
            pc = counters.get(End(node.name, p))
            if pc is not None:
                _pq_block(lines, node, p, pc.snapshot(snap))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------- host files


def render_ibstat(sc: Scenario, host: str) -> str:
    """``ibstat`` of a host: InfiniBand ports (LID, SM lid) or, on RoCE, Ethernet ports (no LID, no SM)."""
    tree = sc.tree
    hs = sc.host(host)
    out: list[str] = []
    for n in sorted(tree.hcas(host), key=lambda n: n.device or ""):
        st = sc.state(tree.link_at(n.name, 1))  # type: ignore[arg-type]
        if sc.roce:
            state, phys, rate, lid, sm, cap, ll = "Active", "LinkUp", 400, 0, 0, ROCE_CAPMASK, "Ethernet"
            port_guid = _roce_port_guid(n.guid)
        elif st.up:
            state, phys, rate, lid, cap, ll = "Active", "LinkUp", st.gbps, n.lid, HCA_CAPMASK, "InfiniBand"
            sm = hs.sm_lid if hs.sm_lid is not None else tree.sm_lid
            port_guid = n.guid
        else:
            state, phys, rate, lid, sm, cap, ll = "Down", "Polling", 10, 65535, 0, HCA_CAPMASK, "InfiniBand"
            port_guid = n.guid
        out += [
            f"CA '{n.device}'", f"\tCA type: {HCA_CA_TYPE}", "\tNumber of ports: 1", f"\tFirmware version: {hs.hca_fw}",
            "\tHardware version: 0", f"\tNode GUID: {n.guid}", f"\tSystem image GUID: {n.guid}", "\tPort 1:",
            f"\t\tState: {state}", f"\t\tPhysical state: {phys}", f"\t\tRate: {rate}", f"\t\tBase lid: {lid}",
            "\t\tLMC: 0", f"\t\tSM lid: {sm}", f"\t\tCapability mask: {cap}", f"\t\tPort GUID: {port_guid}",
            f"\t\tLink layer: {ll}",
        ]
    return "\n".join(out) + "\n"


def _roce_port_guid(node_guid: str) -> str:
    """A RoCE port's GUID is the EUI-64 of its MAC (``a288c2fffecd60e9``), not the node GUID."""
    g = int(node_guid, 16)
    mac = ((g >> 16) & 0xFFFFFF000000) | (g & 0xFFFFFF)
    eui = ((mac >> 24) << 40) | (0xFFFE << 24) | (mac & 0xFFFFFF)
    return f"0x{eui ^ (0x02 << 56):016x}"


def render_dmesg(sc: Scenario, host: str) -> str:
    tree = sc.tree
    rng = rng_for(sc.seed, "dmesg", host)
    boot = sc.t_job - timedelta(days=rng.randint(1, 20), seconds=rng.randint(0, 86400))
    lines: list[tuple[datetime, str]] = []
    t = boot + timedelta(seconds=9)
    lines.append((t, f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {sc.host(host).driver}  Thu Feb 29 19:41:33 UTC "
                     "2024"))
    for n in tree.hcas(host):
        bdf = hca_bdf(n.index or 0)
        t += timedelta(milliseconds=rng.randint(40, 400))
        lines.append((t, f"mlx5_core {bdf}: firmware version: {sc.host(host).hca_fw}"))
        t += timedelta(milliseconds=rng.randint(100, 900))
        lines.append((t, f"mlx5_core {bdf}: Port module event: module 0, Cable plugged"))
    lines += [(ts, msg) for ts, msg in sc.job.dmesg.get(host, [])]
    lines.sort(key=lambda p: p[0])
    return "".join(f"[{ctime(ts)}] {msg}\n" for ts, msg in lines)


# ------------------------------------------------------------------------------------------------- truth


def _end_info(tree: FatTree, end: End) -> dict:
    n = tree.nodes[end.node]
    if n.kind == "CA":
        return {"host": n.host, "device": n.device, "port": end.port, "guid": n.guid, "lid": n.lid}
    return {"switch": n.name, "port": end.port, "guid": n.guid, "lid": n.lid}


def _location(sc: Scenario, inj: Injected) -> dict:
    """The exact place of a fault by its scope (what an exact-location score compares with)."""
    tree = sc.tree
    scope = inj.spec.scope
    if inj.link is not None:
        return _end_info(tree, inj.link.lower)
    if inj.variant == "sm_static_scaling":  # the setting sits in the SM node's opensm.conf
        return {"host": inj.params.get("sm_node")}
    if scope in ("ports", "uplink"):
        sw = tree.nodes[inj.switch_ports[0].node]
        return {"switch": sw.name, "guid": sw.guid}
    if scope == "job":
        return {"job": True, "hosts": list(sc.job_hosts)}
    loc: dict = {"host": inj.host}
    if scope == "hca" and inj.hca is not None:
        loc.update(signatures.hca_aliases(sc, inj.host or "", inj.hca))
    if scope == "gpu" and inj.gpu is not None:
        r = sc.rank_of(inj.host or "", inj.gpu)
        loc.update({"gpu": inj.gpu, "pci": f"{gpu_pci(inj.gpu)}.0", "rank": r.rank if r else None})
    return loc


def truth(sc: Scenario, counters: dict[End, PortCounters], files: list[str]) -> dict:
    tree = sc.tree
    faults = []
    for inj in sc.injected:
        item: dict = {"cause": inj.kind, "kind": inj.short, "scope": inj.spec.scope, "location": _location(sc, inj)}
        if inj.variant:
            item["variant"] = inj.variant
        if inj.link is not None:
            item["cable"] = inj.link.kind
            item["peer"] = _end_info(tree, inj.link.upper)
            if inj.kind == "link.bad_cable":
                item["end"] = inj.end
            if inj.kind in ("link.bad_cable", "link.flapping") and counters:
                item["rising"] = [
                    {**_end_info(tree, e), "counters": {
                        c: [counters[e].base[c], counters[e].base[c] + counters[e].delta[c]]
                        for c in ERROR_FIELDS if counters[e].delta[c]}}
                    for e in inj.error_ends
                ]
            if inj.kind == "link.degraded":
                st = sc.state(inj.link)
                item["trained"] = {"width": st.width, "speed": st.speed, "gbps": st.gbps}
        elif inj.switch_ports and inj.variant != "sm_static_scaling":
            item["ports"] = [
                {**_end_info(tree, e), **({"xmit_wait_delta": counters[e].delta["PortXmitWait"]} if counters else {})}
                for e in inj.switch_ports
            ]
        item["affects_job"] = sc.affects_job(inj)
        item.update({k: v for k, v in inj.params.items() if k in ("signature", "detail", "nccl_warn_ranks")})
        faults.append(item)
    nt_hosts = signatures.nccl_tests_hosts(sc)
    return {
        "generator": "diagnose.simulate",
        "seed": sc.seed,
        "link_layer": sc.job.link_layer,
        "fabric": tree.counts() | {"hosts_per_leaf": tree.hosts_per_leaf, "hcas_per_host": tree.hcas_per_host,
                                   "rail_optimized": tree.rail_optimized, "sm_lid": tree.sm_lid},
        "job": {"hosts": list(sc.job_hosts), "ranks": len(sc.job_hosts) * tree.hcas_per_host,
                "nccl_version": NCCL_VERSION},
        "times": {"job_start": sc.t_job.isoformat(), "incident": sc.t_fail.isoformat(),
                  "ibnetdiscover": sc.t_disc.isoformat(), "perfquery_1": sc.t_snap[0].isoformat(),
                  "perfquery_2": sc.t_snap[1].isoformat(), "window_s": sc.window_s},
        "nccl_tests": {"hosts": nt_hosts, "busbw_factor": round(signatures.busbw_factor(sc), 4)}
        if "nccl-tests.txt" in files else None,
        "faults": faults,
        "files": files,
    }


# ------------------------------------------------------------------------------------------------- bundle


def render_files(sc: Scenario, nccl_tests: bool = True, host_files: str = "job",
                 host_tools: str = "auto") -> tuple[dict[str, str], dict]:
    """Every file of the bundle but ``truth.yaml`` (relative path -> text), and the port counters."""
    if host_files not in ("job", "all"):
        raise ValueError("host_files must be 'job' or 'all'")
    if host_tools not in ("auto", "all"):
        raise ValueError("host_tools must be 'auto' or 'all'")
    if host_tools == "all":
        signatures.collect_everything(sc)
    files: dict[str, str] = {}
    counters: dict = {}
    if not sc.roce:
        counters = compute_counters(sc)
        files["fabric/ibnetdiscover.topo"] = render_ibnetdiscover(sc)
        files["fabric/perfquery_1.txt"] = render_perfquery(sc, counters, 0)
        files["fabric/perfquery_2.txt"] = render_perfquery(sc, counters, 1)
    files["job.log"] = joblog.render_nccl_log(sc)
    if nccl_tests and sc.job.nccl_tests:
        text = joblog.render_nccl_tests(sc, signatures.nccl_tests_hosts(sc), signatures.busbw_factor(sc))
        if text is not None:
            files["nccl-tests.txt"] = text
    if host_files == "all":
        hosts = list(sc.tree.hosts)
    else:
        hosts = list(sc.job_hosts)
        for inj in sc.injected:
            if inj.host and inj.host not in hosts:
                hosts.append(inj.host)
    for h in hosts:
        files[f"{h}/ibstat.txt"] = render_ibstat(sc, h)
        files[f"{h}/dmesg.txt"] = render_dmesg(sc, h)
    files.update(signatures.render_collected(sc))
    files.update(sc.job.files)
    return files, counters


def write_bundle(
    out_dir: str | Path,
    tree: FatTree,
    faults: list[Fault | str] | tuple = (),
    seed: int = 0,
    job_hosts: list[str] | int | None = None,
    *,
    nccl_tests: bool = True,
    window_s: int | None = None,
    host_files: str = "job",
    link_layer: str = "auto",
    host_tools: str = "auto",
) -> Path:
    """Write the bundle; ``host_files`` = ``job`` (ibstat/dmesg for the job hosts and the hosts a fault sits
    on) or ``all`` (every host of the fabric); ``link_layer`` = ``auto`` (what the faults need, InfiniBand
    otherwise), ``ib`` or ``roce``; ``host_tools`` = ``auto`` (the host tools the faults call for, where they
    call for them) or ``all`` (every host tool from every job host)."""
    out = Path(out_dir)
    sc = build_scenario(tree, list(faults), seed, job_hosts, window_s, link_layer)
    files, counters = render_files(sc, nccl_tests, host_files, host_tools)
    names = sorted(files)
    files["truth.yaml"] = yaml.safe_dump(truth(sc, counters, names), sort_keys=False, default_flow_style=False)
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
    log.info("bundle_written", out=str(out), seed=seed, link_layer=sc.job.link_layer, files=len(files),
             faults=[f"{i.kind}@{_place(i)}" for i in sc.injected], job_hosts=len(sc.job_hosts))
    return out


def _place(inj: Injected) -> str:
    """A short name of where a fault sits, for logs."""
    if inj.link is not None:
        return str(inj.link.lower)
    if inj.switch_ports:
        return ",".join(str(e) for e in inj.switch_ports)
    parts = [p for p in (inj.host, f"mlx5_{inj.hca}" if inj.hca is not None else None,
                         f"gpu{inj.gpu}" if inj.gpu is not None else None) if p]
    return "/".join(parts) or "job"
