"""The fault model: what can go wrong, where, and the concrete place it lands once resolved on a tree.

Kinds:

``bad_cable``  symbol errors and link error recovery rising on one cable (a marginal transceiver/cable);
               ``end`` = ``hca`` / ``switch`` / ``both`` says which receiver counts them (on a switch-to-switch
               cable ``hca`` means the lower-tier end, ``switch`` the upper-tier end).
``port_down``  the cable does not train: the HCA port is Down/Polling, the cable is absent from the topology.
``degraded``   the cable trained below 4X NDR: ``mode`` ``2x`` (2X NDR, 200 Gb/s) or ``hdr`` (4X HDR, 200 Gb/s).
``flapping``   the link went down and up several times in the window: LinkDownedCounter rises on both ends.
``congestion`` PortXmitWait high on a few switch ports (``ports`` of them, default 4).
``gpu_xid``    Xid 79 (GPU fallen off the bus) on one GPU of a host.

A location is explicit or left to the seeded RNG:

* ``Location(host="gpu-a003", hca=2)`` or ``"gpu-a003/mlx5_2"``: an HCA and its cable to the leaf;
* ``Location(switch="leaf-a-r2", port=33)`` or ``"leaf-a-r2/33"``: the cable on that switch port;
* ``Location(uplink=True, switch="leaf-a-r2")`` or ``"uplink:leaf-a-r2"`` (``"uplink"`` alone: any leaf):
  a leaf-to-spine cable chosen by the RNG;
* ``Location(host="gpu-a003", gpu=5)`` / ``"gpu-a003/gpu5"`` / ``"gpu-a003"``: a GPU (``gpu_xid``), a host;
* ``Location(switch="leaf-a-r2")`` / ``"leaf-a-r2"``: a switch (``congestion``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.simulate.topology import End, FatTree, Link, rng_for

KINDS = ("bad_cable", "port_down", "degraded", "flapping", "congestion", "gpu_xid")
LINK_KINDS = ("bad_cable", "port_down", "degraded", "flapping")
ENDS = ("hca", "switch", "both")
DEGRADED_MODES = {"2x": ("2X", "NDR", 200), "hdr": ("4X", "HDR", 200)}

_HCA_RE = re.compile(r"^(?P<host>[A-Za-z0-9][\w.\-]*?)[/:](?P<dev>mlx5_\d+|\d+)$")
_GPU_RE = re.compile(r"^(?P<host>[A-Za-z0-9][\w.\-]*?)[/:]gpu(?P<gpu>\d+)$", re.I)
_SWPORT_RE = re.compile(r"^(?P<sw>(?:leaf|spine|core)-[\w\-]+?)[/:](?P<port>\d+)$")
_SW_RE = re.compile(r"^(?P<sw>(?:leaf|spine|core)-[\w\-]+)$")


@dataclass(frozen=True)
class Location:
    host: str | None = None
    hca: int | str | None = None
    switch: str | None = None
    port: int | None = None
    uplink: bool = False
    gpu: int | None = None

    @classmethod
    def parse(cls, text: str) -> Location:
        t = text.strip()
        if t.lower() == "uplink":
            return cls(uplink=True)
        if t.lower().startswith("uplink:"):
            return cls(uplink=True, switch=t.split(":", 1)[1].strip())
        if m := _SWPORT_RE.match(t):
            return cls(switch=m["sw"], port=int(m["port"]))
        if m := _SW_RE.match(t):
            return cls(switch=m["sw"])
        if m := _GPU_RE.match(t):
            return cls(host=m["host"], gpu=int(m["gpu"]))
        if m := _HCA_RE.match(t):
            dev = m["dev"]
            return cls(host=m["host"], hca=int(dev) if dev.isdigit() else dev)
        if re.fullmatch(r"[A-Za-z0-9][\w.\-]*", t):
            return cls(host=t)
        raise ValueError(f"cannot read location {text!r}")


@dataclass(frozen=True)
class Fault:
    kind: str
    location: Location | str | None = None
    end: str = "both"  # bad_cable: which receiver counts the errors
    mode: str = "2x"  # degraded: '2x' (2X NDR) | 'hdr' (4X HDR)
    ports: int = 4  # congestion: number of switch ports

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; one of {', '.join(KINDS)}")
        if self.end not in ENDS + ("lower", "upper"):
            raise ValueError(f"end must be one of {ENDS}")
        if self.mode not in DEGRADED_MODES:
            raise ValueError(f"mode must be one of {tuple(DEGRADED_MODES)}")
        if isinstance(self.location, str):
            object.__setattr__(self, "location", Location.parse(self.location))


@dataclass
class Injected:
    """A fault resolved to concrete places on the tree."""

    kind: str
    link: Link | None = None
    error_ends: tuple[End, ...] = ()  # ports whose error counters move (bad_cable, flapping)
    switch_ports: tuple[End, ...] = ()  # congestion
    host: str | None = None  # gpu_xid
    gpu: int | None = None
    end: str = "both"
    mode: str | None = None
    params: dict = field(default_factory=dict)


def as_fault(f: Fault | str) -> Fault:
    return f if isinstance(f, Fault) else Fault(f)


def _pick_link(tree: FatTree, loc: Location | None, rng, used: set[Link], kind: str) -> Link:
    if loc is None:
        pool = [lk for lk in tree.links if lk.kind == "hca-leaf" and lk not in used]
        return rng.choice(pool)
    if loc.uplink:
        leaves = [loc.switch] if loc.switch else [n.name for n in tree.leaves]
        for leaf in leaves:
            if leaf not in tree.nodes or tree.nodes[leaf].tier != 1:
                raise ValueError(f"{leaf} is not a leaf switch")
        pool = [lk for leaf in leaves for lk in tree.leaf_uplinks(leaf) if lk not in used]
        if loc.port is not None:
            pool = [lk for lk in pool if lk.lower.port == loc.port]
        if not pool:
            raise ValueError(f"no free uplink at {loc}")
        return rng.choice(pool)
    if loc.host is not None:
        if loc.host not in tree.host_hca_guids():
            raise ValueError(f"unknown host {loc.host}")
        if loc.hca is None:
            return rng.choice([lk for lk in (tree.hca_link(loc.host, n.device or "") for n in tree.hcas(loc.host))
                               if lk not in used])
        return tree.hca_link(loc.host, loc.hca)
    if loc.switch is not None:
        if loc.switch not in tree.nodes:
            raise ValueError(f"unknown switch {loc.switch}")
        if loc.port is None:
            pool = [lk for p in tree.ports_of(loc.switch) if (lk := tree.link_at(loc.switch, p)) and lk not in used]
            return rng.choice(pool)
        link = tree.link_at(loc.switch, loc.port)
        if link is None:
            raise ValueError(f"nothing is cabled to {loc.switch} port {loc.port}")
        return link
    raise ValueError(f"a {kind} fault needs a cable location, got {loc}")


def resolve(tree: FatTree, faults: list[Fault | str], seed: int) -> list[Injected]:
    """Place every fault on the tree (the RNG fills what the location leaves open)."""
    out: list[Injected] = []
    used: set[Link] = set()
    for i, raw in enumerate(faults):
        f = as_fault(raw)
        rng = rng_for(seed, "fault", i, f.kind)
        loc = f.location if isinstance(f.location, Location) else None
        if f.kind in LINK_KINDS:
            link = _pick_link(tree, loc, rng, used, f.kind)
            if link in used:
                raise ValueError(f"two faults on the same cable {link}")
            used.add(link)
            inj = Injected(kind=f.kind, link=link, end=f.end)
            if link.kind == "hca-leaf":
                inj.host = tree.nodes[link.lower.node].host
            if f.kind == "bad_cable":
                which = {"hca": "lower", "switch": "upper"}.get(f.end, f.end)
                inj.error_ends = {"lower": (link.lower,), "upper": (link.upper,), "both": link.ends}[which]
            elif f.kind == "flapping":
                inj.error_ends = link.ends
                inj.params["flaps"] = rng.randint(3, 7)
            elif f.kind == "degraded":
                inj.mode = f.mode
            out.append(inj)
        elif f.kind == "congestion":
            out.append(_congestion(tree, loc, rng, f.ports))
        else:  # gpu_xid
            host = loc.host if loc and loc.host else rng.choice(tree.hosts)
            if host not in tree.host_hca_guids():
                raise ValueError(f"unknown host {host}")
            gpu = loc.gpu if loc and loc.gpu is not None else rng.randrange(tree.hcas_per_host)
            if not 0 <= gpu < tree.hcas_per_host:
                raise ValueError(f"{host} has no GPU {gpu}")
            out.append(Injected(kind="gpu_xid", host=host, gpu=gpu))
    return out


def _congestion(tree: FatTree, loc: Location | None, rng, n_ports: int) -> Injected:
    if loc is not None and loc.host is not None:
        hca = loc.hca if loc.hca is not None else 0
        end = tree.hca_attachment(loc.host, hca)
        return Injected(kind="congestion", switch_ports=(end,))
    if loc is not None and loc.switch is not None and loc.port is not None:
        return Injected(kind="congestion", switch_ports=(End(loc.switch, loc.port),))
    switch = loc.switch if loc is not None and loc.switch else rng.choice(tree.leaves).name
    node = tree.nodes.get(switch)
    if node is None or node.kind != "SW":
        raise ValueError(f"unknown switch {switch}")
    if node.tier == 1:
        ports = [lk.lower.port for lk in tree.leaf_uplinks(switch)]
    else:
        ports = tree.ports_of(switch)
    chosen = sorted(rng.sample(ports, min(n_ports, len(ports))))
    return Injected(kind="congestion", switch_ports=tuple(End(switch, p) for p in chosen))
