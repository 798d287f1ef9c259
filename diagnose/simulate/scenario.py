"""The state of one simulated incident: the fabric, the faults placed on it, the job, and per host the settings
every renderer reads (NCCL version, transport, GPUDirect RDMA, environment, MTU...).

Renderers (:mod:`diagnose.simulate.writers`, :mod:`diagnose.simulate.joblog`, :mod:`diagnose.simulate.hostfiles`)
never decide anything: a healthy scenario renders a healthy bundle, and each cause's signature
(:mod:`diagnose.simulate.signatures`) only changes this state, adds files and adds log lines.

Hardware model (DGX H100 / HGX H100 8-GPU, NVIDIA DGX H100 User Guide, "Network ports" and the
``nvidia-smi topo -m`` of the system): GPU ``k`` and HCA ``mlx5_k`` (ConnectX-7, 400 Gb/s NDR) sit under the same
PCIe switch; GPUs 0-3 and HCAs 0-3 on CPU socket 0, 4-7 on socket 1; every GPU pair is joined by 18 NVLinks
through the NVSwitches (``NV18``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from diagnose.simulate.topology import FatTree, Link, Node

if TYPE_CHECKING:
    from diagnose.simulate.faults import Injected

NCCL_VERSION = "2.21.5"
CUDA_VERSION = "12.4"
CUDA_DRIVER = 12040
HCA_FW = "28.39.1002"
HCA_CA_TYPE = "MT4129"  # ConnectX-7
HCA_PART_ID = 4129
HCA_CAPMASK = "0xa751e848"
ROCE_CAPMASK = "0x00010000"
GPU_NAME = "NVIDIA H100 80GB HBM3"
DRIVER = "535.161.08"
DRIVER_CUDA = "12.2"
OOB_IF = "bond0"
# DGX H100-like PCI layout: GPU k and HCA mlx5_k share a PCIe switch (the switch's downstream ports sit on the
# bus just below the GPU's)
GPU_BUS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
HCA_BUS = (0x19, 0x2B, 0x3B, 0x5E, 0x9B, 0xAC, 0xBB, 0xDC)
LINK_BPS = {("4X", "NDR"): 50e9, ("2X", "NDR"): 25e9, ("4X", "HDR"): 25e9}  # data rate, bytes/s
MTU_ENUM = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
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


def gpu_pci(k: int) -> str:
    """GPU ``k``'s PCI address as the engine names GPUs (``0000:5d:00``)."""
    return f"0000:{gpu_bus(k):02x}:00"


def hca_bdf(k: int) -> str:
    """HCA ``mlx5_k``'s PCI function (``0000:5e:00.0``), as dmesg and lspci name it."""
    return f"0000:{hca_bus(k):02x}:00.0"


def netdev(k: int, link_layer: str) -> str:
    """The kernel's netdev name of HCA ``k`` (systemd predictable names: ``ibp94s0`` / ``enp94s0np0``)."""
    bus = hca_bus(k)
    return f"ibp{bus}s0" if link_layer == "ib" else f"enp{bus}s0np0"


def socket_of(k: int, n: int) -> int:
    """CPU socket of GPU/HCA ``k`` on an ``n``-GPU host (first half on socket 0)."""
    return 0 if k < max(1, n // 2) else 1


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
class HostState:
    """What one host's software and HCA ports look like to the tools."""

    nccl_version: str = NCCL_VERSION
    driver: str = DRIVER
    gdr: bool = True  # NCCL's NET channels carry /GDRDMA (nvidia-peermem or DMA-BUF usable)
    net: str = "IB"  # the NCCL network its ranks use: IB (verbs, InfiniBand or RoCE) or Socket
    ib_devs: list[int] | None = None  # HCA indices NCCL can open (None: every Active port)
    nic_of_gpu: dict[int, int] = field(default_factory=dict)  # GPU -> HCA index its NET channels use, when not its own
    intra: str = "P2P/CUMEM/read"  # how GPUs of this host reach each other
    env: dict[str, str] = field(default_factory=dict)  # NCCL_* settings only this host's ranks got
    oob: tuple[str, str] | None = None  # (interface, address) NCCL bootstraps over, when not bond0
    active_mtu: int = 4096  # every HCA port's active MTU
    sm_lid: int | None = None  # the SM lid its ports report (None: the fabric's SM)
    hca_fw: str = HCA_FW
    log_name: str | None = None  # the hostname its ranks print (a container's id in bridge networking)
    nccl_silent: bool = False  # its ranks die before NCCL prints anything
    knobs: dict = field(default_factory=dict)  # what one cause changed for one tool (read by its renderer)


@dataclass
class JobState:
    """The job: how far NCCL gets, what it was told, and what it printed at the incident."""

    link_layer: str = "ib"
    env: dict[str, str] = field(default_factory=dict)  # job-wide NCCL_* settings (the sbatch exports)
    net_subsys: bool = False  # NCCL_DEBUG_SUBSYS includes NET: queue pair lines are printed
    init_stage: str = "complete"  # 'complete' | 'connect' (dies while connecting) | 'bootstrap' (before transports)
    nccl_tests: bool = True
    busbw: float = 1.0  # extra busbw factor from host-side causes
    netinit: dict[int, list[str]] = field(default_factory=dict)  # rank -> lines before its network choice
    setup: dict[int, list[str]] = field(default_factory=dict)  # rank -> lines it logs while connecting
    sm_log: list[tuple[datetime, str]] = field(default_factory=list)  # the subnet manager's log lines
    incident: list[str] = field(default_factory=list)  # lines appended at the failure (WARNs, PyTorch errors)
    files: dict[str, str] = field(default_factory=dict)  # extra files: relative path -> text
    dmesg: dict[str, list[tuple[datetime, str]]] = field(default_factory=dict)  # host -> extra kernel lines
    collect: dict[str, set[str]] = field(default_factory=dict)  # tool -> hosts to collect it from


@dataclass
class Rank:
    rank: int
    host: str
    local: int
    pid: int
    ptid: int
    comm: str
    ibdevs: list[int]  # HCA indices NCCL lists on this host (Active ports it can open), in order
    name: str = ""  # the hostname it prints (the host, or its container's id)

    def __post_init__(self) -> None:
        self.name = self.name or self.host


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
    hosts: dict[str, HostState] = field(default_factory=dict)
    job: JobState = field(default_factory=JobState)
    ranks: list[Rank] = field(default_factory=list)
    port_util: dict = field(default_factory=dict)  # End -> transmit utilisation override in the window
    port_wait: dict = field(default_factory=dict)  # End -> share of the window spent waiting for credits

    @property
    def window_s(self) -> int:
        return int((self.t_snap[1] - self.t_snap[0]).total_seconds())

    @property
    def job_units(self) -> list[str]:
        return sorted({self.tree.unit_of(h) for h in self.job_hosts})

    @property
    def roce(self) -> bool:
        return self.job.link_layer == "roce"

    def state(self, link: Link) -> LinkState:
        return self.link_state.get(link) or LinkState()

    def host(self, name: str) -> HostState:
        return self.hosts.setdefault(name, HostState())

    def collect(self, tool: str, hosts: list[str] | str) -> None:
        """Ask for ``tool``'s output from ``hosts`` (what the responder ran where)."""
        self.job.collect.setdefault(tool, set()).update([hosts] if isinstance(hosts, str) else hosts)

    def hca_node(self, host: str, k: int) -> Node:
        return self.tree.hca(host, k)

    def hca_up(self, host: str, k: int) -> bool:
        return self.state(self.tree.hca_link(host, k)).up

    def ranks_on(self, host: str) -> list[Rank]:
        return [r for r in self.ranks if r.host == host]

    def rank_of(self, host: str, local: int) -> Rank | None:
        return next((r for r in self.ranks if r.host == host and r.local == local), None)

    def env_of(self, host: str) -> dict[str, str]:
        """Every NCCL_* setting the ranks of ``host`` see: the job's, then the host's own."""
        return {**self.job.env, **self.host(host).env}

    def nccl_devs(self, host: str) -> list[int]:
        """HCA indices NCCL lists on ``host``: Active ports it is allowed to open, in order."""
        hs = self.host(host)
        up = [n.index or 0 for n in self.tree.hcas(host) if self.hca_up(host, n.index or 0)]
        return [k for k in up if hs.ib_devs is None or k in hs.ib_devs]

    def affects_job(self, inj: Injected) -> bool:
        tree = self.tree
        jobset = set(self.job_hosts)
        if inj.link is not None and inj.link.kind == "hca-leaf":
            return inj.host in jobset
        if inj.spec.scope in ("host", "hca", "gpu", "subnet"):
            return inj.host in jobset
        if inj.spec.scope == "job":
            return True
        crosses = len(self.job_units) > 1
        if inj.link is not None:
            lower = tree.nodes[inj.link.lower.node]
            if inj.link.kind == "leaf-spine":
                return crosses and lower.unit in self.job_units
            return crosses and len({tree.hcas(h)[0].pod for h in self.job_hosts}) > 1
        if inj.switch_ports:
            sw = tree.nodes[inj.switch_ports[0].node]
            if sw.tier == 1:
                if sw.unit not in self.job_units:
                    return False
                facing = {tree.peer(e.node, e.port) for e in inj.switch_ports}
                return crosses or any(f is not None and tree.nodes[f.node].host in jobset for f in facing)
            return crosses
        return False


def choose_job(tree: FatTree, injected: list[Injected], job_hosts: list[str] | int | None) -> list[str]:
    """The job's hosts: as given, or ``job_hosts`` of them (default 8) around the hosts the faults sit on. A fault
    above the leaves (an uplink, a congested or mis-routed switch port) only touches a job whose traffic leaves
    its scalable unit (or pod), so such a job is spread over two."""
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
    above: Node | None = None
    for inj in injected:
        if inj.link is not None and inj.link.kind != "hca-leaf":
            above = tree.nodes[inj.link.lower.node]
        elif inj.switch_ports and not inj.host:
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
