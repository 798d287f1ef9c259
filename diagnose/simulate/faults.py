"""The fault model: every cause id of the taxonomy, where it can sit, and the concrete place it lands once
resolved on a tree.

A fault is named by its cause id (``link.bad_cable``, ``host.memlock_limit``...; the ids of
:mod:`diagnose.catalog.taxonomy`) or by one of the six short kinds the simulator first knew (``bad_cable``,
``port_down``, ``degraded``, ``flapping``, ``congestion``, ``gpu_xid``). Each cause has a *scope*, the kind of
place it sits at, which is also what "exact location" means when a diagnosis is scored:

``cable``    one cable (both ends named): ``gpu-a003/mlx5_2``, ``leaf-a-r2/33``, ``uplink:leaf-a-r2``;
``ports``    a few switch ports (congestion): ``leaf-b-r0`` (its uplinks), ``leaf-b-r0/35``;
``uplink``   one leaf's spine uplinks (routing): ``leaf-a-r3`` (the leaf), ``leaf-a-r3/35`` (the hot port);
``host``     one host: ``gpu-a004``;
``hca``      one HCA of a host: ``gpu-a004/mlx5_3``;
``gpu``      one GPU of a host (and the rank on it): ``gpu-a004/gpu3``;
``job``      the whole job (a setting every rank got): no location, or any job host;
``subnet``   the subnet manager (a stray SM runs on a host): ``gpu-a004`` names that host.

Variants (``VARIANTS``): a few causes show in more than one form, each a signature of its own (QoS on RoCE
priorities or in InfiniBand SL2VL/VLArb tables; adaptive routing off in NCCL's setting or in the SM's routing
engine and the scaling curve; a P_Key mismatch in the SM's traps or in partitions.conf; a degraded or flapping
cable at a host or on a spine uplink). ``Fault.variant`` picks one; left open, the seed does.

Options of a few causes: ``end`` (``link.bad_cable``: which receiver counts the errors: ``hca``/``switch``/
``both``), ``mode`` (``link.degraded``: ``2x`` or ``hdr``), ``ports`` (``fabric.congestion``: how many hot ports).

Some causes only exist on one kind of fabric: the port-counter and subnet-manager causes on InfiniBand, the
RoCE lossless/GID/QoS causes on RoCE (Ethernet link layer). :func:`link_layer_for` picks the fabric flavour a
set of faults needs and refuses a set that mixes both; :func:`compatible` says whether two causes can be in one
bundle at once (a job that never gets past NCCL init cannot also show a slow running collective).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.simulate.topology import End, FatTree, Link, rng_for


@dataclass(frozen=True)
class CauseSpec:
    """What the simulator knows about one cause id: where it sits and what it needs from the bundle.

    ``fabric``: ``ib``, ``roce`` or ``any``. ``breaks``/``needs``: parts of the job's life the fault takes away
    or that its evidence lives in: ``ib`` (NCCL runs over NET/IB or RoCE verbs), ``run`` (every communicator
    gets past init and the job runs collectives)."""

    id: str
    scope: str
    fabric: str = "any"
    breaks: frozenset[str] = frozenset()
    needs: frozenset[str] = frozenset()


def _c(cid: str, scope: str, fabric: str = "any", breaks: str = "", needs: str = "") -> CauseSpec:
    return CauseSpec(cid, scope, fabric, frozenset(breaks.split()), frozenset(needs.split()))


_SPECS: dict[str, CauseSpec] = {c.id: c for c in (
    _c("link.bad_cable", "cable", "ib"),
    _c("link.port_down", "cable", "ib"),
    _c("link.degraded", "cable", "ib"),
    _c("link.flapping", "cable", "ib"),
    _c("fabric.congestion", "ports", "ib"),
    _c("fabric.adaptive_routing_off", "uplink", "ib"),
    _c("fabric.route_imbalance", "uplink", "ib"),
    _c("fabric.sm_problem", "subnet", "ib"),
    _c("fabric.pkey_mismatch", "host", "ib", needs="ib run"),
    _c("fabric.qos_misconfig", "job", "roce", needs="ib"),
    _c("fabric.rail_isolation", "host", "roce", needs="ib run"),
    _c("roce.gid_index", "job", "roce", needs="ib run"),
    _c("roce.pfc_ecn", "hca", "roce"),
    _c("mtu.mismatch", "host", "any", needs="ib run"),
    _c("host.gdr_unavailable", "host", "any", needs="ib run"),
    _c("host.pcie_acs_iommu", "host"),
    _c("host.pcie_degraded", "hca"),
    _c("host.nic_driver_firmware", "hca"),
    _c("host.numa_affinity", "host", "any", needs="ib run"),
    _c("host.topology_misdetect", "host"),
    _c("host.container_rdma_access", "job", breaks="ib"),
    _c("host.memlock_limit", "host", breaks="run", needs="ib"),
    _c("host.shm_too_small", "host", breaks="run"),
    _c("nccl.socket_fallback", "job", breaks="ib"),
    _c("nccl.interface_selection", "job", breaks="ib run"),
    _c("nccl.version_mismatch", "host", breaks="run"),
    _c("nccl.p2p_or_nvls_config", "host", needs="run"),
    _c("gpu.xid_error", "gpu"),
    _c("gpu.nvlink_degraded", "gpu"),
    _c("gpu.fabric_manager", "host", breaks="run"),
    _c("gpu.throttling", "gpu"),
    _c("app.straggler_or_desync", "gpu", needs="run"),
)}


def _every_cause() -> dict[str, CauseSpec]:
    """The specs in the taxonomy's order, one for each of its ids (the taxonomy is the one list of causes: an id
    it gains without a spec here, or a spec of an id it does not know, stops the simulator at import)."""
    from diagnose.catalog.taxonomy import TAXONOMY

    unknown = sorted(set(_SPECS) - set(TAXONOMY))
    missing = [cid for cid in TAXONOMY if cid not in _SPECS]
    if unknown or missing:
        raise RuntimeError(f"simulator cause specs out of step with the taxonomy: missing {missing}, unknown {unknown}")
    return {cid: _SPECS[cid] for cid in TAXONOMY}


CAUSES = _every_cause()

# causes that cannot be told apart when both are present, so no incident holds both: a straggler is by definition
# a rank that is late while the hardware is healthy (a GPU that fell off the bus, a port that is down or a GPU
# whose NVLinks failed is the explanation instead); PFC/ECN health is moot for traffic that is not in the
# lossless class at all; a GID index pointing at a link-local GID explains the same failed connections as
# isolated rails.
EXCLUSIVE = {
    frozenset(p) for p in (
        ("app.straggler_or_desync", "gpu.xid_error"), ("app.straggler_or_desync", "link.port_down"),
        ("app.straggler_or_desync", "gpu.nvlink_degraded"), ("roce.pfc_ecn", "fabric.qos_misconfig"),
        ("roce.gid_index", "fabric.rail_isolation"),
    )
}

# the short kinds of the first simulator, kept as aliases
ALIASES = {
    "bad_cable": "link.bad_cable",
    "port_down": "link.port_down",
    "degraded": "link.degraded",
    "flapping": "link.flapping",
    "congestion": "fabric.congestion",
    "gpu_xid": "gpu.xid_error",
}
KINDS = tuple(CAUSES) + tuple(ALIASES)
LINK_CAUSES = ("link.bad_cable", "link.port_down", "link.degraded", "link.flapping")
ENDS = ("hca", "switch", "both")
DEGRADED_MODES = {"2x": ("2X", "NDR", 200), "hdr": ("4X", "HDR", 200)}
# the forms a cause takes in a bundle (its signatures): the first is the original one; a fault whose variant is left
# open gets ``VARIANTS[cause][seed % n]`` (so consecutive seeds exercise each form), unless its location or the
# fabric the other faults need decides
VARIANTS: dict[str, tuple[str, ...]] = {
    # RoCE: NCCL_IB_TC off the lossless priority | InfiniBand: NCCL_IB_SL (modulefile) on a VL without VLArb weight
    "fabric.qos_misconfig": ("roce_tc", "ib_sl_vlarb"),
    # NCCL_IB_ADAPTIVE_ROUTING=0 with hot uplinks | a static routing engine in opensm.conf seen in the scaling curve
    "fabric.adaptive_routing_off": ("nccl_env", "sm_static_scaling"),
    # Bad P_Key traps in the SM log | a host missing from partitions.conf and its P_Key tables
    "fabric.pkey_mismatch": ("bad_pkey_traps", "partitions_conf"),
    # hot uplink counters (XmitWait on one uplink, siblings idle) | the leaf's LFT in dump_lfts.sh, no counters
    "fabric.route_imbalance": ("counters", "lft"),
    # an HCA cable trained at 2X/HDR | a leaf-spine uplink at 2X with iblinkinfo's 'Could be 4X'
    "link.degraded": ("hca", "uplink"),
    # LinkDowned rising alone | a spine uplink that retrains: LinkDowned with symbol errors and link error recovery
    "link.flapping": ("downed", "uplink_retrain"),
}
VARIANT_FABRIC = {("fabric.qos_misconfig", "roce_tc"): "roce", ("fabric.qos_misconfig", "ib_sl_vlarb"): "ib"}
LINK_LAYERS = ("auto", "ib", "roce")

_HCA_RE = re.compile(r"^(?P<host>[A-Za-z0-9][\w.\-]*?)[/:](?P<dev>mlx5_\d+|\d+)$")
_GPU_RE = re.compile(r"^(?P<host>[A-Za-z0-9][\w.\-]*?)[/:]gpu(?P<gpu>\d+)$", re.I)
_SWPORT_RE = re.compile(r"^(?P<sw>(?:leaf|spine|core)-[\w\-]+?)[/:](?P<port>\d+)$")
_SW_RE = re.compile(r"^(?P<sw>(?:leaf|spine|core)-[\w\-]+)$")


def cause_id(kind: str) -> str:
    """A cause id or an alias -> the cause id; ValueError for anything else."""
    cid = ALIASES.get(kind, kind)
    if cid not in CAUSES:
        raise ValueError(f"unknown fault kind {kind!r}; one of {', '.join(CAUSES)} (or {', '.join(ALIASES)})")
    return cid


def compatible(a: str, b: str) -> bool:
    """Can causes ``a`` and ``b`` be injected into one bundle? Not when they need different fabrics, when one
    takes away what the other's evidence lives in (a job that dies in init shows no running collective, a job
    on NET/Socket no verbs), when both are the same cause, when both change the job's transport at once, or when
    one is by definition the absence of the other (``EXCLUSIVE``)."""
    ca, cb = CAUSES[cause_id(a)], CAUSES[cause_id(b)]
    if ca.id == cb.id or frozenset((ca.id, cb.id)) in EXCLUSIVE:
        return False
    if {ca.fabric, cb.fabric} == {"ib", "roce"}:
        return False
    if ca.breaks & cb.needs or cb.breaks & ca.needs:
        return False
    return not (ca.breaks and cb.breaks)


def _fabric(c: str | Injected) -> str:
    return c.fabric if isinstance(c, Injected) else CAUSES[cause_id(c)].fabric


def link_layer_for(causes: list[str] | list[Injected], requested: str = "auto") -> str:
    """``ib`` or ``roce``: the fabric flavour the causes (ids, or injections with their variants) need
    (``requested`` unless it is ``auto``)."""
    if requested not in LINK_LAYERS:
        raise ValueError(f"link layer must be one of {', '.join(LINK_LAYERS)}")
    items: list[str | Injected] = list(causes)
    need = {_fabric(c) for c in items} - {"any"}
    name = [c.kind if isinstance(c, Injected) else c for c in items]
    if len(need) > 1:
        ib = [n for c, n in zip(items, name, strict=True) if _fabric(c) == "ib"]
        ro = [n for c, n in zip(items, name, strict=True) if _fabric(c) == "roce"]
        raise ValueError(f"{', '.join(ib)} need an InfiniBand fabric and {', '.join(ro)} a RoCE one")
    if requested != "auto":
        if need and need != {requested}:
            bad = [n for c, n in zip(items, name, strict=True) if _fabric(c) not in ("any", requested)]
            raise ValueError(f"{', '.join(bad)} cannot be injected on a {requested} fabric")
        return requested
    return need.pop() if need else "ib"


@dataclass(frozen=True)
class Location:
    host: str | None = None
    hca: int | str | None = None
    switch: str | None = None
    port: int | None = None
    uplink: bool = False
    gpu: int | None = None

    def __str__(self) -> str:
        """The location in the shorthand :meth:`parse` reads."""
        if self.uplink:
            return f"uplink:{self.switch}" if self.switch else "uplink"
        if self.switch:
            return f"{self.switch}/{self.port}" if self.port is not None else self.switch
        if self.gpu is not None:
            return f"{self.host}/gpu{self.gpu}"
        if self.hca is not None:
            return f"{self.host}/{self.hca if isinstance(self.hca, str) else f'mlx5_{self.hca}'}"
        return self.host or "-"

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
    """A fault to inject: a cause id (or alias), an optional location, and the options of a few causes.
    ``kind`` is normalised to the cause id."""

    kind: str
    location: Location | str | None = None
    end: str = "both"  # link.bad_cable: which receiver counts the errors
    mode: str = "2x"  # link.degraded: '2x' (2X NDR) | 'hdr' (4X HDR)
    ports: int = 4  # fabric.congestion: number of switch ports
    variant: str | None = None  # one of VARIANTS[kind] (None: chosen by the seed)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", cause_id(self.kind))
        if self.variant is not None and self.variant not in VARIANTS.get(self.kind, ()):
            raise ValueError(f"{self.kind} has no variant {self.variant!r}; one of {VARIANTS.get(self.kind, ())}")
        if self.end not in ENDS + ("lower", "upper"):
            raise ValueError(f"end must be one of {ENDS}")
        if self.mode not in DEGRADED_MODES:
            raise ValueError(f"mode must be one of {tuple(DEGRADED_MODES)}")
        if isinstance(self.location, str):
            object.__setattr__(self, "location", Location.parse(self.location))

    @property
    def spec(self) -> CauseSpec:
        return CAUSES[self.kind]


@dataclass
class Injected:
    """A fault resolved to concrete places on the tree. ``kind`` is the cause id."""

    kind: str
    link: Link | None = None
    error_ends: tuple[End, ...] = ()  # ports whose error counters move (bad cable, flapping)
    switch_ports: tuple[End, ...] = ()  # congestion, routing: the hot switch ports
    host: str | None = None  # host, hca and gpu scopes; the host an HCA-leaf cable belongs to
    hca: int | None = None
    gpu: int | None = None
    switch: str | None = None  # uplink scope: the leaf
    end: str = "both"
    mode: str | None = None
    params: dict = field(default_factory=dict)
    variant: str | None = None  # which of the cause's signatures (VARIANTS)

    @property
    def spec(self) -> CauseSpec:
        return CAUSES[self.kind]

    @property
    def fabric(self) -> str:
        """The fabric this injection needs (its variant's, else its cause's)."""
        return VARIANT_FABRIC.get((self.kind, self.variant or ""), self.spec.fabric)

    @property
    def short(self) -> str:
        """The cause id without its domain (``bad_cable``)."""
        return self.kind.split(".", 1)[1]


def as_fault(f: Fault | str) -> Fault:
    if isinstance(f, Fault):
        return f
    cause, _, where = f.partition("@")
    return Fault(cause, where or None)


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
        _check_host(tree, loc.host)
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


def _check_host(tree: FatTree, host: str) -> None:
    if host not in tree.host_hca_guids():
        raise ValueError(f"unknown host {host}")


def _pick_host(tree: FatTree, loc: Location | None, rng, used_hosts: set[str], kind: str) -> str:
    if loc is not None and (loc.switch or loc.uplink):
        raise ValueError(f"a {kind} fault sits on a host, not on {loc}")
    if loc is not None and loc.host:
        _check_host(tree, loc.host)
        return loc.host
    free = [h for h in tree.hosts if h not in used_hosts] or list(tree.hosts)
    return rng.choice(free)


def _index(tree: FatTree, value: int | str | None, what: str, host: str, rng) -> int:
    if value is None:
        return rng.randrange(tree.hcas_per_host)
    k = int(str(value).rsplit("_", 1)[-1]) if isinstance(value, str) else int(value)
    if not 0 <= k < tree.hcas_per_host:
        raise ValueError(f"{host} has no {what} {value}")
    return k


def _pick_leaf(tree: FatTree, loc: Location | None, rng, kind: str) -> tuple[str, int | None]:
    """The leaf of an ``uplink``-scope fault and, when given, its hot port."""
    if loc is not None and loc.host:
        leaf = tree.hca_attachment(loc.host, loc.hca if loc.hca is not None else 0).node
        return leaf, None
    if loc is not None and loc.switch:
        node = tree.nodes.get(loc.switch)
        if node is None or node.tier != 1:
            raise ValueError(f"a {kind} fault sits on a leaf switch's uplinks; {loc.switch} is not a leaf")
        if loc.port is not None and loc.port not in [lk.lower.port for lk in tree.leaf_uplinks(loc.switch)]:
            raise ValueError(f"{loc.switch} port {loc.port} is not a spine uplink")
        return loc.switch, loc.port
    if not tree.leaf_uplinks(tree.leaves[0].name):
        raise ValueError(f"a {kind} fault needs leaf-to-spine uplinks")
    return rng.choice(tree.leaves).name, None


def _variant(f: Fault, loc: Location | None, seed: int, others: set[str], link_layer: str) -> str | None:
    """The fault's variant: as given; else the one its location, the requested fabric or the other faults' fabric
    decides; else ``VARIANTS[kind][seed % n]``."""
    forms = VARIANTS.get(f.kind)
    if not forms:
        return None
    if f.variant is not None:
        return f.variant
    fab = {link_layer} if link_layer in ("ib", "roce") else others - {"any"}
    fits = [v for v in forms if VARIANT_FABRIC.get((f.kind, v), f.spec.fabric) in fab | {"any"}] if fab else []
    if f.kind == "fabric.adaptive_routing_off" and loc is not None:
        return forms[0]  # placed on a leaf's uplinks: the hot-uplink form
    if f.kind in ("link.degraded", "link.flapping") and loc is not None:
        return forms[1] if loc.uplink or (loc.switch or "").startswith(("leaf", "spine", "core")) else forms[0]
    pool = fits or list(forms)
    return pool[seed % len(pool)]


def resolve(tree: FatTree, faults: list[Fault | str], seed: int, link_layer: str = "auto") -> list[Injected]:
    """Place every fault on the tree (the RNG fills what the location leaves open). Host-scope faults land on
    distinct hosts when the location leaves the choice open."""
    out: list[Injected] = []
    used: set[Link] = set()
    used_hosts: set[str] = set()
    parsed = [as_fault(raw) for raw in faults]
    for i, f in enumerate(parsed):
        rng = rng_for(seed, "fault", i, f.kind)
        loc = f.location if isinstance(f.location, Location) else None
        others = {g.spec.fabric for j, g in enumerate(parsed) if j != i}
        variant = _variant(f, loc, seed, others, link_layer)
        scope = f.spec.scope
        if f.kind in LINK_CAUSES and loc is None and variant in ("uplink", "uplink_retrain"):
            loc = Location(uplink=True)  # a leaf's spine uplink, chosen by the RNG
        if f.kind in LINK_CAUSES:
            link = _pick_link(tree, loc, rng, used, f.kind)
            if link in used:
                raise ValueError(f"two faults on the same cable {link}")
            used.add(link)
            inj = Injected(kind=f.kind, link=link, end=f.end)
            if link.kind == "hca-leaf":
                inj.host = tree.nodes[link.lower.node].host
                inj.hca = tree.nodes[link.lower.node].index
            if f.kind == "link.bad_cable":
                which = {"hca": "lower", "switch": "upper"}.get(f.end, f.end)
                inj.error_ends = {"lower": (link.lower,), "upper": (link.upper,), "both": link.ends}[which]
            elif f.kind == "link.flapping":
                inj.error_ends = link.ends
                inj.params["flaps"] = rng.randint(3, 7)
            elif f.kind == "link.degraded":
                inj.mode = f.mode
            inj.variant = variant
            out.append(inj)
        elif scope == "ports":
            out.append(_congestion(tree, loc, rng, f.ports))
        elif scope == "uplink":
            leaf, port = _pick_leaf(tree, loc, rng, f.kind)
            ups = [lk.lower.port for lk in tree.leaf_uplinks(leaf)]
            if f.kind == "fabric.route_imbalance":
                hot = [port if port is not None else rng.choice(ups)]
            else:  # adaptive routing off: static routes pile flows on a pair of uplinks of the leaf
                first = port if port is not None else rng.choice(ups[:-1])
                nxt = ups[ups.index(first) + 1] if ups.index(first) + 1 < len(ups) else ups[ups.index(first) - 1]
                hot = sorted({first, nxt})
            out.append(Injected(kind=f.kind, switch=leaf, switch_ports=tuple(End(leaf, p) for p in hot),
                                variant=variant))
        elif scope in ("host", "hca", "gpu", "subnet"):
            host = _pick_host(tree, loc, rng, used_hosts, f.kind)
            used_hosts.add(host)
            inj = Injected(kind=f.kind, host=host, variant=variant)
            if loc is not None and ((scope == "hca" and loc.gpu is not None) or (scope == "gpu" and loc.hca is not None)):
                raise ValueError(f"a {f.kind} fault sits on {'an HCA' if scope == 'hca' else 'a GPU'}: give "
                                 f"{'host/mlx5_N' if scope == 'hca' else 'host/gpuN'}, not {loc}")
            if scope == "hca":
                inj.hca = _index(tree, loc.hca if loc else None, "HCA", host, rng)
            elif scope == "gpu":
                inj.gpu = _index(tree, loc.gpu if loc else None, "GPU", host, rng)
            elif loc is not None and (loc.hca is not None or loc.gpu is not None):
                raise ValueError(f"a {f.kind} fault sits on a whole host; give the host alone, not {loc}")
            out.append(inj)
        else:  # job: a setting every rank of the job got; a given host only says which job
            if loc is not None and (loc.switch or loc.uplink or loc.hca is not None or loc.gpu is not None):
                raise ValueError(f"a {f.kind} fault is job-wide; a location may only name one of its hosts")
            if loc is not None and loc.host:
                _check_host(tree, loc.host)
            out.append(Injected(kind=f.kind, host=loc.host if loc else None, params={"job": True}, variant=variant))
    return out


def _congestion(tree: FatTree, loc: Location | None, rng, n_ports: int) -> Injected:
    kind = "fabric.congestion"
    if loc is not None and loc.host is not None:
        hca = loc.hca if loc.hca is not None else 0
        end = tree.hca_attachment(loc.host, hca)
        return Injected(kind=kind, switch_ports=(end,))
    if loc is not None and loc.switch is not None and loc.port is not None:
        if tree.link_at(loc.switch, loc.port) is None:
            raise ValueError(f"nothing is cabled to {loc.switch} port {loc.port}")
        return Injected(kind=kind, switch_ports=(End(loc.switch, loc.port),))
    switch = loc.switch if loc is not None and loc.switch else rng.choice(tree.leaves).name
    node = tree.nodes.get(switch)
    if node is None or node.kind != "SW":
        raise ValueError(f"unknown switch {switch}")
    if node.tier == 1 and tree.leaf_uplinks(switch):
        ports = [lk.lower.port for lk in tree.leaf_uplinks(switch)]
    else:
        ports = tree.ports_of(switch)
    chosen = sorted(rng.sample(ports, min(n_ports, len(ports))))
    return Injected(kind=kind, switch_ports=tuple(End(switch, p) for p in chosen))
