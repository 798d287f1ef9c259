"""Write a bundle in the real tools' output formats.

Layout::

    <out>/truth.yaml                  the injected faults and their exact places (not tool output)
    <out>/job.log                     NCCL 2.21.5 INFO/WARN log of a job over ``job_hosts`` (8 ranks per host)
    <out>/nccl-tests.txt              all_reduce_perf (nccl-tests, mid-2024 layout), when asked for
    <out>/fabric/ibnetdiscover.topo   ibnetdiscover topology file (rdma-core ``dump_topology``)
    <out>/fabric/perfquery_1.txt      ``date`` + ``perfquery -x -G <guid> <port>`` for every reachable port
    <out>/fabric/perfquery_2.txt      the same, 10-15 minutes later
    <out>/<host>/ibstat.txt           ibstat of each job host (and of each host a fault sits on)
    <out>/<host>/dmesg.txt            ``dmesg -T`` of the same hosts (driver/HCA boot lines, Xid 79 when injected)

Formats follow the sources: rdma-core ``infiniband-diags/ibnetdiscover.c`` (``out_switch``/``out_ca``/
``out_*_port``, nodes printed in reverse discovery order as libibnetdisc prepends them), ``perfquery.c`` +
libibmad ``dump.c`` (dotted fields, value at column 34), ``ibstat.c``, NVIDIA/nccl v2.21.5 (``debug.cc``:
WARN lines start with a newline; ``net_ib.cc:1909`` completion WARN without the ``hca`` suffix that 2.22
added; ``net.cc``/``proxy.cc`` error traces), NVIDIA/nccl-tests ``src/common.cu`` (2024-07), and the
NVIDIA driver's Xid 79 lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

from diagnose.simulate.faults import DEGRADED_MODES, Fault, Injected, resolve
from diagnose.simulate.topology import RADIX, End, FatTree, Link, Node, rng_for

NCCL_VERSION = "2.21.5"
CUDA_VERSION = "12.4"
CUDA_DRIVER = 12040
HCA_FW = "28.39.1002"
HCA_CA_TYPE = "MT4129"  # ConnectX-7
HCA_CAPMASK = "0xa751e848"
GPU_NAME = "NVIDIA H100 80GB HBM3"
DRIVER = "535.161.08"
OOB_IF = "bond0"
# DGX H100-like PCI layout: GPU k and HCA mlx5_k share a PCIe switch
GPU_BUS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
HCA_BUS = (0x19, 0x2B, 0x3B, 0x5E, 0x9B, 0xAC, 0xBB, 0xDC)
LINK_BPS = {("4X", "NDR"): 50e9, ("2X", "NDR"): 25e9, ("4X", "HDR"): 25e9}  # data rate, bytes/s
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
_DOW = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MON = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def ctime(t: datetime, tz: str | None = None) -> str:
    """C-locale ``ctime``/``date`` text: ``Tue Jun  4 14:02:31 2024`` (``tz`` inserted before the year)."""
    head = f"{_DOW[t.weekday()]} {_MON[t.month - 1]} {t.day:2d} {t:%H:%M:%S}"
    return f"{head} {tz} {t.year}" if tz else f"{head} {t.year}"


def gpu_bus(k: int) -> int:
    return GPU_BUS[k] if k < len(GPU_BUS) else 0x10 + 0x08 * k


def hca_bus(k: int) -> int:
    return HCA_BUS[k] if k < len(HCA_BUS) else 0x11 + 0x08 * k


# ------------------------------------------------------------------------------------------------- scenario


@dataclass
class LinkState:
    up: bool = True
    width: str = "4X"
    speed: str = "NDR"

    @property
    def gbps(self) -> int:
        return int(LINK_BPS[(self.width, self.speed)] * 8 / 1e9) if self.up else 0

    @property
    def topo_ws(self) -> str:  # ibnetdiscover's dump_linkwidth_compat + speed: '4xNDR'
        return f"{self.width.lower()}{self.speed}"


@dataclass
class Scenario:
    tree: FatTree
    seed: int
    injected: list[Injected]
    job_hosts: list[str]
    t_job: datetime
    t_fail: datetime
    t_disc: datetime
    t_snap: tuple[datetime, datetime]
    link_state: dict[Link, LinkState]
    host_ip: dict[str, str] = field(default_factory=dict)

    @property
    def window_s(self) -> int:
        return int((self.t_snap[1] - self.t_snap[0]).total_seconds())

    @property
    def job_units(self) -> list[str]:
        return sorted({self.tree.unit_of(h) for h in self.job_hosts})

    def state(self, link: Link) -> LinkState:
        return self.link_state.get(link) or LinkState()

    def affects_job(self, inj: Injected) -> bool:
        tree = self.tree
        jobset = set(self.job_hosts)
        if inj.kind == "gpu_xid" or (inj.link is not None and inj.link.kind == "hca-leaf"):
            return inj.host in jobset
        crosses = len(self.job_units) > 1
        if inj.link is not None:
            lower = tree.nodes[inj.link.lower.node]
            if inj.link.kind == "leaf-spine":
                return crosses and lower.unit in self.job_units
            return crosses and len({tree.hcas(h)[0].pod for h in self.job_hosts}) > 1
        if inj.kind == "congestion":
            sw = tree.nodes[inj.switch_ports[0].node]
            if sw.tier == 1:
                if sw.unit not in self.job_units:
                    return False
                facing = {tree.peer(e.node, e.port) for e in inj.switch_ports}
                return crosses or any(f is not None and tree.nodes[f.node].host in jobset for f in facing)
            return crosses
        return False


def choose_job(tree: FatTree, injected: list[Injected], job_hosts: list[str] | int | None) -> list[str]:
    """The job's hosts: as given, or ``job_hosts`` of them (default 8) around the hosts the faults sit on."""
    if isinstance(job_hosts, list | tuple):
        unknown = [h for h in job_hosts if h not in tree.host_hca_guids()]
        if unknown:
            raise ValueError(f"unknown job hosts: {', '.join(unknown)}")
        pos = {h: i for i, h in enumerate(tree.hosts)}
        return sorted(dict.fromkeys(job_hosts), key=pos.__getitem__)
    count = min(8 if job_hosts is None else int(job_hosts), len(tree.hosts))
    if count < 1:
        raise ValueError("job_hosts must be >= 1")
    required: list[str] = []
    for inj in injected:
        if inj.host and inj.host not in required:
            required.append(inj.host)
    by_unit: dict[str, list[str]] = {}
    for h in tree.hosts:
        by_unit.setdefault(tree.unit_of(h), []).append(h)
    units = tree.units
    anchor = tree.unit_of(required[0]) if required else units[0]
    # a fault above the leaves only touches a job whose traffic leaves its SU (or pod): spread the job
    above: Node | None = None
    for inj in injected:
        if inj.link is not None and inj.link.kind != "hca-leaf":
            above = tree.nodes[inj.link.lower.node]
        elif inj.kind == "congestion" and not inj.host:
            sw = tree.nodes[inj.switch_ports[0].node]
            facing = [tree.peer(e.node, e.port) for e in inj.switch_ports]
            if sw.tier > 1 or any(f is not None and tree.nodes[f.node].tier > 1 for f in facing):
                above = sw
        if above is not None:
            break
    picked: list[str] = list(required[:count])
    order: list[str] = []
    if above is not None and len(units) > 1:
        lower = above
        u0 = lower.unit if lower.unit else anchor
        if lower.tier == 2:  # spine-core cable: the job must reach across pods
            pod_of = {u: tree.hcas(by_unit[u][0])[0].pod for u in units}
            u0 = next((u for u in units if pod_of[u] == lower.pod), units[0])
            other = next((u for u in units if pod_of[u] != pod_of[u0]), units[-1])
        else:
            other = units[(units.index(u0) + 1) % len(units)]
        half = max(1, count // 2)
        order = by_unit[u0][:half] + by_unit[other]
        order += [h for h in by_unit[u0][half:]]
    else:
        start = units.index(anchor)
        for u in units[start:] + units[:start]:
            order += by_unit[u]
    for h in order:
        if len(picked) >= count:
            break
        if h not in picked:
            picked.append(h)
    pos = {h: i for i, h in enumerate(tree.hosts)}
    return sorted(picked, key=pos.__getitem__)


def build_scenario(tree: FatTree, faults: list[Fault | str], seed: int,
                   job_hosts: list[str] | int | None = None, window_s: int | None = None) -> Scenario:
    injected = resolve(tree, list(faults), seed)
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
    states: dict[Link, LinkState] = {}
    for inj in injected:
        if inj.link is None:
            continue
        if inj.kind == "port_down":
            states[inj.link] = LinkState(up=False)
        elif inj.kind == "degraded":
            w, s, _ = DEGRADED_MODES[inj.mode or "2x"]
            states[inj.link] = LinkState(width=w, speed=s)
    sc = Scenario(tree=tree, seed=seed, injected=injected, job_hosts=job, t_job=t_job, t_fail=t_fail, t_disc=t_disc,
                  t_snap=(s1, s2), link_state=states)
    for h in tree.hosts:
        u, j = divmod(tree.host_index(h), tree.su_hosts)
        sc.host_ip[h] = f"10.{64 + u // 256}.{u % 256}.{j + 11}"
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
    and what one end transmits the other end receives."""
    tree = sc.tree
    rng = rng_for(sc.seed, "counters")
    T = sc.window_s
    names = _counter_names()
    jobset = set(sc.job_hosts)
    uptime: dict[str, int] = {}
    for n in sorted(tree.nodes.values(), key=lambda n: n.lid):
        days = rng.uniform(30, 200) if n.kind == "SW" else rng.uniform(1, 60)
        uptime[n.name] = int(days * 86400)
    by_kind: dict[str, list[Injected]] = {}
    for inj in sc.injected:
        by_kind.setdefault(inj.kind, []).append(inj)
    congested = {e for inj in by_kind.get("congestion", []) for e in inj.switch_ports}
    out: dict[End, PortCounters] = {}
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
            u = [rng.uniform(0.02, 0.3), rng.uniform(0.02, 0.3)]
        sizes = [rng.uniform(2600, 4000), rng.uniform(2600, 4000)]
        mcast = [rng.uniform(0.01, 0.08), rng.uniform(0.01, 0.08)]
        for inj in sc.injected:
            if inj.link == link and inj.kind in ("bad_cable", "flapping"):
                u = [x * (0.7 if inj.kind == "bad_cable" else 0.6) for x in u]
        for d, end in enumerate(link.ends):  # d=0: lower->upper
            if end in congested:
                u[d] = rng.uniform(0.85, 0.97)
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
            if end in congested:
                # a congested port waits for credits 25-60% of the time; a PortXmitWait tick is the time
                # to send 8 bytes (the model the congestion extractor uses), 6.25e9 ticks/s at NDR
                delta["PortXmitWait"] = int(T * rng.uniform(0.25, 0.6) * 6.25e9)
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
        if inj.kind == "bad_cable":
            for end in inj.error_ends:
                pc = out[end]
                pc.base["SymbolErrorCounter"] = rng.randint(15000, 40000)
                pc.delta["SymbolErrorCounter"] = rng.randint(2500, 9000)
                pc.base["LinkErrorRecoveryCounter"] = rng.randint(40, 120)
                pc.delta["LinkErrorRecoveryCounter"] = rng.randint(8, 30)
                pc.base["PortRcvErrors"] = rng.randint(800, 3000)
                pc.delta["PortRcvErrors"] = rng.randint(150, 700)
        elif inj.kind == "flapping":
            flaps = int(inj.params.get("flaps", 4))
            for end in inj.error_ends:
                out[end].base["LinkDownedCounter"] = rng.randint(1, 3)
                out[end].delta["LinkDownedCounter"] = flaps
        elif inj.kind == "port_down" and inj.link is not None:
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


# ------------------------------------------------------------------------------------------------- writers


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


def render_ibstat(sc: Scenario, host: str) -> str:
    tree = sc.tree
    out: list[str] = []
    for n in sorted(tree.hcas(host), key=lambda n: n.device or ""):
        st = sc.state(tree.link_at(n.name, 1))  # type: ignore[arg-type]
        if st.up:
            state, phys, rate, lid, sm = "Active", "LinkUp", st.gbps, n.lid, tree.sm_lid
        else:
            state, phys, rate, lid, sm = "Down", "Polling", 10, 65535, 0
        out += [
            f"CA '{n.device}'", f"\tCA type: {HCA_CA_TYPE}", "\tNumber of ports: 1", f"\tFirmware version: {HCA_FW}",
            "\tHardware version: 0", f"\tNode GUID: {n.guid}", f"\tSystem image GUID: {n.guid}", "\tPort 1:",
            f"\t\tState: {state}", f"\t\tPhysical state: {phys}", f"\t\tRate: {rate}", f"\t\tBase lid: {lid}",
            "\t\tLMC: 0", f"\t\tSM lid: {sm}", f"\t\tCapability mask: {HCA_CAPMASK}", f"\t\tPort GUID: {n.guid}",
            "\t\tLink layer: InfiniBand",
        ]
    return "\n".join(out) + "\n"


def render_dmesg(sc: Scenario, host: str) -> str:
    tree = sc.tree
    rng = rng_for(sc.seed, "dmesg", host)
    boot = sc.t_job - timedelta(days=rng.randint(1, 20), seconds=rng.randint(0, 86400))
    lines: list[tuple[datetime, str]] = []
    t = boot + timedelta(seconds=9)
    lines.append((t, f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {DRIVER}  Thu Feb 29 19:41:33 UTC 2024"))
    for n in tree.hcas(host):
        bdf = f"0000:{hca_bus(n.index or 0):02x}:00.0"
        t += timedelta(milliseconds=rng.randint(40, 400))
        lines.append((t, f"mlx5_core {bdf}: firmware version: {HCA_FW}"))
        t += timedelta(milliseconds=rng.randint(100, 900))
        lines.append((t, f"mlx5_core {bdf}: Port module event: module 0, Cable plugged"))
    for inj in sc.injected:
        if inj.kind != "gpu_xid" or inj.host != host or inj.gpu is None:
            continue
        bus = gpu_bus(inj.gpu)
        x = sc.t_fail
        uuid = _uuid(rng)
        lines += [
            (x, f"NVRM: GPU at PCI:0000:{bus:02x}:00: GPU-{uuid}"),
            (x, f"NVRM: GPU Board Serial Number: {rng.randint(1650000000000, 1659999999999)}"),
            (x, f"NVRM: Xid (PCI:0000:{bus:02x}:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
            (x, f"NVRM: GPU 0000:{bus:02x}:00.0: GPU has fallen off the bus."),
            (x, "NVRM: A GPU crash dump has been created. If possible, please run"),
            (x, "NVRM: nvidia-bug-report.sh as root to collect this data before"),
            (x, "NVRM: the NVIDIA kernel module is unloaded."),
        ]
    lines.sort(key=lambda p: p[0])
    return "".join(f"[{ctime(ts)}] {msg}\n" for ts, msg in lines)


def _uuid(rng) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# ------------------------------------------------------------------------------------------------- NCCL log


@dataclass
class _Rank:
    rank: int
    host: str
    local: int
    pid: int
    ptid: int
    comm: str
    ibdevs: list[int]  # HCA indices NCCL lists on this host (Active ports), in order


def _job_ranks(sc: Scenario) -> list[_Rank]:
    tree = sc.tree
    rng = rng_for(sc.seed, "nccl-ranks")
    g = tree.hcas_per_host
    out: list[_Rank] = []
    for hi, h in enumerate(sc.job_hosts):
        devs = [n.index or 0 for n in tree.hcas(h) if sc.state(tree.link_at(n.name, 1)).up]  # type: ignore[arg-type]
        base = rng.randint(150000, 3900000)
        for k in range(g):
            out.append(_Rank(rank=hi * g + k, host=h, local=k, pid=base + k, ptid=base + k + rng.randint(90, 900),
                             comm=f"0x{rng.choice((0x55, 0x56))}{rng.getrandbits(40):010x}", ibdevs=devs))
    return out


def _nic_for(r: _Rank) -> tuple[int, int | None]:
    """(netdev index, proxy local GPU or None) GPU r.local sends through: its own NIC, or via PXN the NIC of
    the nearest GPU whose port is up."""
    if r.local in r.ibdevs:
        return r.ibdevs.index(r.local), None
    cands = sorted(r.ibdevs, key=lambda k: (abs(k - r.local), k))
    k = cands[0]
    return r.ibdevs.index(k), k


def render_nccl_log(sc: Scenario) -> str:
    tree = sc.tree
    rng = rng_for(sc.seed, "nccl-log")
    ranks = _job_ranks(sc)
    g = tree.hcas_per_host
    nranks = len(ranks)
    nhosts = len(sc.job_hosts)
    comm_id = f"0x{rng.getrandbits(64):016x}"

    def pfx(r: _Rank, tid: int | None = None) -> str:
        return f"{r.host}:{r.pid}:{tid if tid is not None else r.pid} [{r.local}]"

    def info(r: _Rank, msg: str, tid: int | None = None) -> str:
        return f"{pfx(r, tid)} NCCL INFO {msg}"

    phases: list[dict[int, list[str]]] = [{}, {}, {}]
    for r in ranks:
        ip = sc.host_ip[r.host]
        p0 = [
            info(r, f"NCCL_SOCKET_IFNAME set by environment to {OOB_IF}"),
            info(r, f"Bootstrap : Using {OOB_IF}:{ip}<0>"),
        ]
        if r.rank == 0:
            p0.append(f"NCCL version {NCCL_VERSION}+cuda{CUDA_VERSION}")
        p0 += [
            info(r, f"cudaDriverVersion {CUDA_DRIVER}"),
            info(r, "NET/Plugin: No plugin found (libnccl-net.so)"),
            info(r, "NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such "
                    "file or directory : when loading libnccl-net.so"),
            info(r, "NET/Plugin: Using internal network plugin."),
        ]
        phases[0][r.rank] = p0
        devs = " ".join(f"[{i}]mlx5_{k}:1/IB" for i, k in enumerate(r.ibdevs))
        bus = f"{gpu_bus(r.local):x}000"
        phases[1][r.rank] = [
            info(r, f"NET/IB : Using {devs} [RO]; OOB {OOB_IF}:{ip}<0>"),
            info(r, "Using non-device net plugin version 0"),
            info(r, "Using network IB"),
            info(r, f"DMA-BUF is available on GPU device {r.local}"),
            info(r, f"ncclCommInitRank comm {r.comm} rank {r.rank} nranks {nranks} cudaDev {r.local} nvmlDev "
                    f"{r.local} busId {bus} commId {comm_id} - Init START"),
        ]
        p2 = [info(r, f"comm {r.comm} rank {r.rank} nRanks {nranks} nNodes {nhosts} localRanks {g} localRank "
                      f"{r.local} MNNVL 0")]
        if r.local + 1 < g:
            p2.append(info(r, f"Channel 00/0 : {r.rank}[{r.local}] -> {r.rank + 1}[{r.local + 1}] via P2P/CUMEM/read"))
        if nhosts > 1:
            hi = r.rank // g
            nxt = ((hi + 1) % nhosts) * g + r.local
            prv = ((hi - 1) % nhosts) * g + r.local
            netdev, proxy = _nic_for(r)
            via_send = f"NET/IB/{netdev}" + (f"({hi * g + proxy})" if proxy is not None else "") + "/GDRDMA"
            via_recv = f"NET/IB/{netdev}/GDRDMA"
            for ch in (r.local, r.local + g):
                p2.append(info(r, f"Channel {ch:02d}/0 : {prv}[{r.local}] -> {r.rank}[{r.local}] [receive] via {via_recv}"))
                p2.append(info(r, f"Channel {ch:02d}/0 : {r.rank}[{r.local}] -> {nxt}[{r.local}] [send] via {via_send}"))
        p2 += [
            info(r, "Connected all rings"),
            info(r, "Connected all trees"),
            info(r, f"ncclCommInitRank comm {r.comm} rank {r.rank} nranks {nranks} cudaDev {r.local} nvmlDev "
                    f"{r.local} busId {bus} commId {comm_id} - Init COMPLETE"),
        ]
        phases[2][r.rank] = p2
    out: list[str] = []
    for ph in phases:
        queues = {k: list(v) for k, v in ph.items()}
        keys = sorted(queues)
        while keys:
            k = rng.choice(keys)
            out.append(queues[k].pop(0))
            if not queues[k]:
                keys.remove(k)
    out += _incident_lines(sc, ranks, rng)
    return "\n".join(out) + "\n"


def _warn_completion(r: _Rank, peer_ip: str, port: int, kind: str) -> list[str]:
    p = f"{r.host}:{r.pid}:{r.ptid} [{r.local}]"
    net_line = 1302 if kind == "Recv" else 1137
    return [
        "",
        f"{p} transport/net_ib.cc:1909 NCCL WARN NET/IB : Got completion from peer {peer_ip}<{port}> with status=12 "
        f"opcode=0 len=0 vendor err 129 ({kind})",
        f"{p} NCCL INFO transport/net.cc:{net_line} -> 6",
        f"{p} NCCL INFO proxy.cc:698 -> 6",
        f"{p} NCCL INFO proxy.cc:878 -> 6 [Progress Thread]",
    ]


def incident_ranks(sc: Scenario) -> list[dict]:
    """Which ranks log what at the incident: [{fault, rank, host, gpu, what, peer_host}]."""
    tree = sc.tree
    g = tree.hcas_per_host
    hosts = sc.job_hosts
    nh = len(hosts)
    out: list[dict] = []
    taken: set[tuple[int, str]] = set()
    for fi, inj in enumerate(sc.injected):
        if not sc.affects_job(inj) or nh < 2:
            continue
        if inj.kind in ("bad_cable", "flapping") and inj.link is not None:
            if inj.link.kind == "hca-leaf":
                hca = tree.nodes[inj.link.lower.node]
                hi = hosts.index(hca.host)  # type: ignore[arg-type]
                k = hca.index or 0
                prev_h = hosts[(hi - 1) % nh]
                out.append({"fault": fi, "rank": hi * g + k, "host": hca.host, "gpu": k, "what": "Recv",
                            "peer_host": prev_h})
                out.append({"fault": fi, "rank": ((hi - 1) % nh) * g + k, "host": prev_h, "gpu": k, "what": "Send",
                            "peer_host": hca.host})
            elif inj.link.kind == "leaf-spine":
                # the ring step that leaves (or enters) the leaf's SU on its rail crosses the uplinks; a
                # second uplink fault on the same rail takes the next such step
                leaf = tree.nodes[inj.link.lower.node]
                k = leaf.rail if leaf.rail is not None else 0
                steps = [hi for hi, h in enumerate(hosts)
                         if (tree.unit_of(h) == leaf.unit) != (tree.unit_of(hosts[(hi + 1) % nh]) == leaf.unit)]
                if not steps:
                    continue
                free = [hi for hi in steps if (hi * g + k, "Send") not in taken]
                hi = (free or steps)[0]
                nxt = hosts[(hi + 1) % nh]
                taken.add((hi * g + k, "Send"))
                out.append({"fault": fi, "rank": hi * g + k, "host": hosts[hi], "gpu": k, "what": "Send",
                            "peer_host": nxt})
                out.append({"fault": fi, "rank": ((hi + 1) % nh) * g + k, "host": nxt, "gpu": k,
                            "what": "Recv", "peer_host": hosts[hi]})
        elif inj.kind == "gpu_xid" and inj.host in hosts and inj.gpu is not None:
            hi = hosts.index(inj.host)
            k = inj.gpu
            out.append({"fault": fi, "rank": hi * g + k, "host": inj.host, "gpu": k, "what": "cuda",
                        "peer_host": None})
            nxt, prv = hosts[(hi + 1) % nh], hosts[(hi - 1) % nh]
            out.append({"fault": fi, "rank": ((hi + 1) % nh) * g + k, "host": nxt, "gpu": k, "what": "Recv",
                        "peer_host": inj.host})
            if prv != nxt:
                out.append({"fault": fi, "rank": ((hi - 1) % nh) * g + k, "host": prv, "gpu": k, "what": "Send",
                            "peer_host": inj.host})
    return out


def _incident_lines(sc: Scenario, ranks: list[_Rank], rng) -> list[str]:
    out: list[str] = []
    for ev in incident_ranks(sc):
        r = ranks[ev["rank"]]
        if ev["what"] == "cuda":
            out += ["", f"{r.host}:{r.pid}:{r.pid} [{r.local}] enqueue.cc:1402 NCCL WARN Cuda failure "
                        "'unspecified launch failure'"]
        else:
            out += _warn_completion(r, sc.host_ip[ev["peer_host"]], rng.randint(32768, 60999), ev["what"])
    return out


# ------------------------------------------------------------------------------------------------- nccl-tests

FAULT_BW_FACTOR = {
    ("port_down", "hca-leaf"): 0.62, ("degraded", "hca-leaf"): None, ("bad_cable", "hca-leaf"): 0.82,
    ("flapping", "hca-leaf"): 0.70, ("port_down", "switch"): 0.97, ("degraded", "switch"): 0.95,
    ("bad_cable", "switch"): 0.93, ("flapping", "switch"): 0.90, ("congestion", None): 0.72,
}


def nccl_tests_hosts(sc: Scenario) -> list[str]:
    """Hosts the all_reduce_perf run covers: the job hosts, less a host whose GPU fell off the bus."""
    gone = {i.host for i in sc.injected if i.kind == "gpu_xid"}
    return [h for h in sc.job_hosts if h not in gone]


def busbw_factor(sc: Scenario) -> float:
    f = 1.0
    for inj in sc.injected:
        if inj.kind == "gpu_xid" or not sc.affects_job(inj):
            continue
        if inj.kind == "congestion":
            f *= FAULT_BW_FACTOR[("congestion", None)]  # type: ignore[operator]
            continue
        where = "hca-leaf" if inj.link is not None and inj.link.kind == "hca-leaf" else "switch"
        factor = FAULT_BW_FACTOR[(inj.kind, where)]
        if factor is None:  # a slow HCA link throttles every ring to its rate
            factor = sc.state(inj.link).gbps / 400 * 0.98  # type: ignore[arg-type]
        f *= factor
    return f


def render_nccl_tests(sc: Scenario) -> str | None:
    hosts = nccl_tests_hosts(sc)
    if not hosts:
        return None
    tree = sc.tree
    rng = rng_for(sc.seed, "nccl-tests")
    g = tree.hcas_per_host
    n = len(hosts) * g
    peak = rng.uniform(470, 485) if len(hosts) == 1 else rng.uniform(372, 388)
    bw = peak * busbw_factor(sc)
    lat = 20.0 + 6.0 * math.log2(max(n, 2))
    lines = [
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
        "validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for hi, h in enumerate(hosts):
        base = rng.randint(150000, 3900000)
        for k in range(g):
            lines.append(f"#  Rank {hi * g + k:2d} Group {0:2d} Pid {base + k:6d} on {h:>10} device {k:2d} "
                         f"[0x{gpu_bus(k):02x}] {GPU_NAME}")
    lines += [
        "#",
        f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place                       in-place"
        "          ",
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  "
        f"{'busbw':>6} {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6} {'#wrong':>6}",
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  "
        f"{'':>5}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>5}",
    ]
    factor = 2 * (n - 1) / n if n > 1 else 1.0
    total, count = 0.0, 0
    size = 8
    while size <= 8589934592:
        row = f"{size:12d}  {size // 4:12d}  {'float':>8}  {'sum':>6}  {-1:6d}"
        for _ in range(2):
            t = (lat + size * factor / (bw * 1e3) * (1 + 24 * 2**20 / size)) * rng.uniform(0.985, 1.015)
            algbw = size / 1e3 / t
            busbw = algbw * factor
            total += busbw
            count += 1
            ts = f"{t:7.0f}" if t >= 10000.0 else f"{t:7.1f}" if t >= 100.0 else f"{t:7.2f}"
            row += f"  {ts:>7}  {algbw:6.2f}  {busbw:6.2f}  {0.0:5g}"
        lines.append(row)
        size *= 2
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {total / count:g} ",
        "#",
        "",
    ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------- truth


def _end_info(tree: FatTree, end: End) -> dict:
    n = tree.nodes[end.node]
    if n.kind == "CA":
        return {"host": n.host, "device": n.device, "port": end.port, "guid": n.guid, "lid": n.lid}
    return {"switch": n.name, "port": end.port, "guid": n.guid, "lid": n.lid}


def truth(sc: Scenario, counters: dict[End, PortCounters], files: list[str]) -> dict:
    tree = sc.tree
    inc = incident_ranks(sc)
    faults = []
    for fi, inj in enumerate(sc.injected):
        item: dict = {"kind": inj.kind}
        if inj.link is not None:
            lower, upper = _end_info(tree, inj.link.lower), _end_info(tree, inj.link.upper)
            item["cable"] = inj.link.kind
            item["location"] = lower
            item["peer"] = upper
            if inj.kind == "bad_cable":
                item["end"] = inj.end
            if inj.kind in ("bad_cable", "flapping"):
                item["rising"] = [
                    {**_end_info(tree, e), "counters": {
                        c: [counters[e].base[c], counters[e].base[c] + counters[e].delta[c]]
                        for c in ERROR_FIELDS if counters[e].delta[c]}}
                    for e in inj.error_ends
                ]
            if inj.kind == "degraded":
                st = sc.state(inj.link)
                item["trained"] = {"width": st.width, "speed": st.speed, "gbps": st.gbps}
        elif inj.kind == "congestion":
            item["location"] = {"switch": inj.switch_ports[0].node}
            item["ports"] = [
                {**_end_info(tree, e), "xmit_wait_delta": counters[e].delta["PortXmitWait"]} for e in inj.switch_ports
            ]
        elif inj.kind == "gpu_xid":
            item["location"] = {"host": inj.host, "gpu": inj.gpu, "pci": f"0000:{gpu_bus(inj.gpu or 0):02x}:00.0",
                                "xid": 79}
        item["affects_job"] = sc.affects_job(inj)
        ev = [{k: v for k, v in e.items() if k != "fault"} for e in inc if e["fault"] == fi]
        if ev:
            item["nccl_warn_ranks"] = ev
        faults.append(item)
    nt_hosts = nccl_tests_hosts(sc)
    return {
        "generator": "diagnose.simulate",
        "seed": sc.seed,
        "fabric": tree.counts() | {"hosts_per_leaf": tree.hosts_per_leaf, "hcas_per_host": tree.hcas_per_host,
                                   "rail_optimized": tree.rail_optimized, "sm_lid": tree.sm_lid},
        "job": {"hosts": list(sc.job_hosts), "ranks": len(sc.job_hosts) * tree.hcas_per_host,
                "nccl_version": NCCL_VERSION},
        "times": {"job_start": sc.t_job.isoformat(), "incident": sc.t_fail.isoformat(),
                  "ibnetdiscover": sc.t_disc.isoformat(), "perfquery_1": sc.t_snap[0].isoformat(),
                  "perfquery_2": sc.t_snap[1].isoformat(), "window_s": sc.window_s},
        "nccl_tests": {"hosts": nt_hosts, "busbw_factor": round(busbw_factor(sc), 4)} if "nccl-tests.txt" in files
        else None,
        "faults": faults,
        "files": files,
    }


# ------------------------------------------------------------------------------------------------- bundle


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
) -> Path:
    """Write the bundle; ``host_files`` = ``job`` (ibstat/dmesg for the job hosts and the hosts a fault sits
    on) or ``all`` (every host of the fabric)."""
    if host_files not in ("job", "all"):
        raise ValueError("host_files must be 'job' or 'all'")
    out = Path(out_dir)
    sc = build_scenario(tree, list(faults), seed, job_hosts, window_s)
    counters = compute_counters(sc)
    files: dict[str, str] = {}
    files["fabric/ibnetdiscover.topo"] = render_ibnetdiscover(sc)
    files["fabric/perfquery_1.txt"] = render_perfquery(sc, counters, 0)
    files["fabric/perfquery_2.txt"] = render_perfquery(sc, counters, 1)
    files["job.log"] = render_nccl_log(sc)
    if nccl_tests and (text := render_nccl_tests(sc)) is not None:
        files["nccl-tests.txt"] = text
    if host_files == "all":
        hosts = list(tree.hosts)
    else:
        hosts = list(sc.job_hosts)
        for inj in sc.injected:
            if inj.host and inj.host not in hosts:
                hosts.append(inj.host)
    for h in hosts:
        files[f"{h}/ibstat.txt"] = render_ibstat(sc, h)
        files[f"{h}/dmesg.txt"] = render_dmesg(sc, h)
    names = sorted(files)
    files["truth.yaml"] = yaml.safe_dump(truth(sc, counters, names), sort_keys=False, default_flow_style=False)
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
    return out
