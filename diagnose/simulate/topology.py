"""A deterministic, rail-optimized InfiniBand NDR fat tree (leaf/spine, or leaf/spine/core).

Shape (what a DGX-H100-style SuperPOD compute fabric looks like, scaled):

* 64-port Quantum-2 switches (``NumPorts`` 65 as NodeInfo reports it: 64 ports + the internal SHARP port),
  non-blocking: a leaf has as many uplinks as downlinks (32 + 32 with the defaults), downlinks on ports
  1..32 and uplinks on 33..64.
* A scalable unit (SU) is ``hosts_per_leaf`` hosts (32 by default) and ``hcas_per_host`` leaves, one per
  rail: HCA ``mlx5_k`` of every host of the SU is cabled to the rail-k leaf ``leaf-<su>-r<k>``, on the port
  numbered after the host's index in the SU (``gpu-a007 mlx5_3`` -> ``leaf-a-r3`` port 7).
* Two tiers: each leaf spreads its uplinks round-robin over the spines of its plane, the same number of
  cables to each. One plane (every leaf reaches every spine) holds at most 64 leaves; beyond that (257..512
  hosts with the defaults) the rails are split into planes with their own spines (rails 0-3 / 4-7).
* Three tiers (``hosts > 512`` unless ``tiers`` says otherwise): pods of 32 leaves (4 SUs), each leaf cabled
  once to each of the pod's 32 spines, spine uplinks (33..64) spread over a group of core switches: spine
  position j of every pod reaches the cores of group j.

Names: hosts ``gpu-<su><nnn>`` (``gpu-a001``; SUs a..z, aa, ab...), switches ``leaf-<su>-r<rail>``,
``spine-<n>``, ``core-<n>``; switch node descriptions as Quantum-2 prints them
(``MF0;leaf-a-r3:MQM9790/U1``), HCA node descriptions ``<host> mlx5_<k>``. GUIDs are drawn from the seed:
switches ``0xfc6a1c0300xxxxxx``, HCAs ``0x946dae0300xxxxxx`` (node GUID = port GUID, as on ConnectX-7).
LIDs are 1..N: spines, cores, leaves, then HCAs in host order; the subnet manager runs on ``spine-01``
(LID 1). Every port number is 1-based.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

RADIX = 64  # ports of a Quantum-2 switch
HALF = RADIX // 2
SWITCH_NUMPORTS = 65  # NodeInfo NumPorts of a Quantum-2 (64 + the internal aggregation-node port)
LEAF_MODEL = "MQM9790"  # unmanaged Quantum-2
SPINE_MODEL = "MQM9700"  # managed Quantum-2 (the SM runs on spine-01)
SWITCH_GUID_PREFIX = 0xFC6A1C0300000000
HCA_GUID_PREFIX = 0x946DAE0300000000
TIER_NAMES = {0: "hca", 1: "leaf", 2: "spine", 3: "core"}


def unit_name(index: int) -> str:
    """0 -> 'a', 25 -> 'z', 26 -> 'aa', 27 -> 'ab' (bijective base 26)."""
    out = ""
    n = index + 1
    while n:
        n, rem = divmod(n - 1, 26)
        out = chr(ord("a") + rem) + out
    return out


def rng_for(seed: int, *tags: object) -> random.Random:
    """An independent, reproducible RNG stream per purpose (str seeds hash with sha512, stable across runs)."""
    return random.Random(":".join([str(seed), *map(str, tags)]))


@dataclass(frozen=True)
class Node:
    """A switch or an HCA."""

    name: str  # 'leaf-a-r3' | 'spine-01' | 'gpu-a001/mlx5_3'
    kind: str  # 'SW' | 'CA'
    tier: int  # 0 HCA, 1 leaf, 2 spine, 3 core
    guid: str  # '0x' + 16 lowercase hex
    lid: int
    description: str  # 'MF0;leaf-a-r3:MQM9790/U1' | 'gpu-a001 mlx5_3'
    nports: int
    host: str | None = None
    device: str | None = None  # 'mlx5_3'
    index: int | None = None  # HCA index k on its host (= rail when rail-optimized)
    unit: str | None = None  # scalable unit letter(s)
    rail: int | None = None  # leaves (rail-optimized) and HCAs
    plane: int | None = None
    pod: int | None = None
    model: str | None = None

    @property
    def guid_hex(self) -> str:
        """GUID without ``0x`` (as ibnetdiscover prints it inside names)."""
        return self.guid[2:]


@dataclass(frozen=True, order=True)
class End:
    """One end of a cable: a node (by name) and a 1-based port."""

    node: str
    port: int

    def __str__(self) -> str:
        return f"{self.node}/{self.port}"


@dataclass(frozen=True)
class Link:
    """A cable; ``lower`` is the HCA or the lower-tier switch."""

    lower: End
    upper: End
    kind: str  # 'hca-leaf' | 'leaf-spine' | 'spine-core'

    @property
    def ends(self) -> tuple[End, End]:
        return (self.lower, self.upper)

    def other(self, end: End) -> End:
        if end == self.lower:
            return self.upper
        if end == self.upper:
            return self.lower
        raise ValueError(f"{end} is not an end of {self}")

    def __str__(self) -> str:
        return f"{self.lower} <-> {self.upper}"


@dataclass
class FatTree:
    hosts: list[str]
    hcas_per_host: int
    hosts_per_leaf: int
    tiers: int
    rail_optimized: bool
    seed: int
    planes: int
    units: list[str]
    nodes: dict[str, Node]
    links: list[Link]
    sm_lid: int
    _by_end: dict[End, Link] = field(default_factory=dict, repr=False)
    _host_hcas: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _by_guid: dict[str, str] = field(default_factory=dict, repr=False)
    _host_pos: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._host_pos = {h: i for i, h in enumerate(self.hosts)}
        for link in self.links:
            for end in link.ends:
                if end in self._by_end:
                    raise ValueError(f"port {end} cabled twice")
                self._by_end[end] = link
        for node in self.nodes.values():
            self._by_guid[node.guid] = node.name
            if node.kind == "CA" and node.host is not None:
                self._host_hcas.setdefault(node.host, []).append(node.name)

    @property
    def su_hosts(self) -> int:
        """Hosts per scalable unit."""
        return self.hosts_per_leaf if self.rail_optimized else self.hosts_per_leaf * self.hcas_per_host

    def host_index(self, host: str) -> int:
        return self._host_pos[host]

    # ---- nodes ----------------------------------------------------------------------------------------
    def switches(self, tier: int | None = None) -> list[Node]:
        """Switches in LID order (optionally one tier: 1 leaf, 2 spine, 3 core)."""
        out = [n for n in self.nodes.values() if n.kind == "SW" and (tier is None or n.tier == tier)]
        return sorted(out, key=lambda n: n.lid)

    @property
    def leaves(self) -> list[Node]:
        return self.switches(1)

    @property
    def spines(self) -> list[Node]:
        return self.switches(2)

    @property
    def cores(self) -> list[Node]:
        return self.switches(3)

    def hcas(self, host: str | None = None) -> list[Node]:
        """HCAs in host order then index order (one host when given)."""
        names = self._host_hcas.get(host, []) if host is not None else [
            n for h in self.hosts for n in self._host_hcas[h]
        ]
        return [self.nodes[n] for n in names]

    def hca(self, host: str, hca: int | str) -> Node:
        """``hca`` is the index k or the device name ``mlx5_k``."""
        dev = hca if isinstance(hca, str) else f"mlx5_{hca}"
        try:
            return self.nodes[f"{host}/{dev}"]
        except KeyError:
            raise KeyError(f"no HCA {dev} on {host}") from None

    def host_hca_guids(self) -> dict[str, list[str]]:
        """host -> [HCA node GUID] (index order)."""
        return {h: [self.nodes[n].guid for n in self._host_hcas[h]] for h in self.hosts}

    def node_by_guid(self, guid: str) -> Node:
        return self.nodes[self._by_guid[guid.lower()]]

    def unit_of(self, host: str) -> str:
        return self.nodes[self._host_hcas[host][0]].unit or ""

    # ---- cables ---------------------------------------------------------------------------------------
    def link_at(self, node: str, port: int) -> Link | None:
        return self._by_end.get(End(node, port))

    def peer(self, node: str, port: int) -> End | None:
        link = self.link_at(node, port)
        return link.other(End(node, port)) if link else None

    def hca_link(self, host: str, hca: int | str) -> Link:
        node = self.hca(host, hca)
        link = self.link_at(node.name, 1)
        assert link is not None
        return link

    def hca_attachment(self, host: str, hca: int | str) -> End:
        """The leaf port HCA ``hca`` of ``host`` is cabled to."""
        return self.hca_link(host, hca).upper

    def attachments(self) -> dict[tuple[str, str], End]:
        """(host, 'mlx5_k') -> the leaf port that HCA is cabled to."""
        return {(lk.lower.node.split("/")[0], lk.lower.node.split("/")[1]): lk.upper
                for lk in self.links if lk.kind == "hca-leaf"}

    def leaf_uplinks(self, leaf: str) -> list[Link]:
        """Cables from ``leaf`` to spines, in leaf port order."""
        return [
            link for p in range(1, RADIX + 1)
            if (link := self.link_at(leaf, p)) is not None and link.kind == "leaf-spine" and link.lower.node == leaf
        ]

    def ports_of(self, node: str) -> list[int]:
        """Cabled ports of a node, ascending."""
        n = self.nodes[node]
        return [p for p in range(1, (RADIX if n.kind == "SW" else n.nports) + 1) if End(node, p) in self._by_end]

    def counts(self) -> dict[str, int]:
        kinds: dict[str, int] = {}
        for link in self.links:
            kinds[link.kind] = kinds.get(link.kind, 0) + 1
        return {
            "hosts": len(self.hosts),
            "hcas": sum(1 for n in self.nodes.values() if n.kind == "CA"),
            "leaves": len(self.leaves),
            "spines": len(self.spines),
            "cores": len(self.cores),
            "tiers": self.tiers,
            "planes": self.planes,
            "links": len(self.links),
            **{f"links_{k.replace('-', '_')}": v for k, v in sorted(kinds.items())},
        }


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def build_fat_tree(
    hosts: int,
    hcas_per_host: int = 8,
    hosts_per_leaf: int | None = None,
    spines: int | None = None,
    seed: int = 0,
    rail_optimized: bool = True,
    tiers: int | None = None,
) -> FatTree:
    """Build the fabric. ``hosts_per_leaf``: hosts per SU when rail-optimized (default 32), hosts per
    leaf otherwise (default 32 // hcas_per_host). ``spines``: total spines (2 tiers) or spines per pod
    (3 tiers), default the fewest that keep the tree non-blocking. ``tiers``: default 3 above 512 hosts."""
    if hosts < 1:
        raise ValueError("hosts must be >= 1")
    if not 1 <= hcas_per_host <= HALF:
        raise ValueError(f"hcas_per_host must be in 1..{HALF}")
    if rail_optimized:
        hpl = hosts_per_leaf or HALF
        down = hpl
        su_hosts = hpl
    else:
        hpl = hosts_per_leaf or max(1, HALF // hcas_per_host)
        down = hpl * hcas_per_host
        su_hosts = hpl * hcas_per_host
    if not 1 <= down <= HALF:
        raise ValueError(f"a leaf would have {down} downlinks; a non-blocking 64-port leaf has at most {HALF}")
    up = down
    n_tiers = tiers if tiers is not None else (3 if hosts > 512 else 2)
    if n_tiers not in (2, 3):
        raise ValueError("tiers must be 2 or 3")
    n_units = math.ceil(hosts / su_hosts)
    units = [unit_name(i) for i in range(n_units)]
    host_names = [f"gpu-{units[i // su_hosts]}{i % su_hosts + 1:03d}" for i in range(hosts)]

    # -- leaves and their hosts
    leaf_specs: list[dict] = []  # name, unit, rail(or index), members [(host, k, port)]
    for u_i, unit in enumerate(units):
        members = host_names[u_i * su_hosts:(u_i + 1) * su_hosts]
        if rail_optimized:
            for r in range(hcas_per_host):
                leaf_specs.append({
                    "name": f"leaf-{unit}-r{r}", "unit": unit, "rail": r, "u": u_i,
                    "members": [(h, r, j + 1) for j, h in enumerate(members)],
                })
        else:
            for li in range(math.ceil(len(members) / hpl)):
                hs = members[li * hpl:(li + 1) * hpl]
                leaf_specs.append({
                    "name": f"leaf-{unit}-{li}", "unit": unit, "rail": None, "u": u_i,
                    "members": [(h, k, j * hcas_per_host + k + 1) for j, h in enumerate(hs) for k in range(hcas_per_host)],
                })

    links: list[Link] = []
    spine_specs: list[dict] = []  # name, plane, pod
    core_specs: list[dict] = []
    for spec in leaf_specs:
        spec["plane"] = 0
        spec["pod"] = None
    n_planes = 1

    if n_tiers == 2:
        if rail_optimized:
            for p in _divisors(hcas_per_host):
                if math.ceil(n_units * (hcas_per_host // p)) <= RADIX:
                    n_planes = p
                    break
            else:
                raise ValueError("too many leaves for a 2-tier fabric; use tiers=3")
            rails_per_plane = hcas_per_host // n_planes
            for spec in leaf_specs:
                spec["plane"] = spec["rail"] // rails_per_plane
        elif len(leaf_specs) > RADIX:
            raise ValueError("too many leaves for a 2-tier fabric; use tiers=3")
        if spines is not None and spines % n_planes:
            raise ValueError(f"spines ({spines}) must be a multiple of the {n_planes} planes")
        s_num = 0
        for plane in range(n_planes):
            p_leaves = [s for s in leaf_specs if s["plane"] == plane]
            if spines is not None:
                per_plane = spines // n_planes
                if per_plane < 1 or up % per_plane or len(p_leaves) * (up // per_plane) > RADIX:
                    raise ValueError(f"{per_plane} spines per plane cannot take {len(p_leaves)} leaves x {up} uplinks")
            else:
                per_plane = next(d for d in _divisors(up) if d * RADIX >= len(p_leaves) * up)
            names: list[dict[str, Any]] = []
            for _ in range(per_plane):
                s_num += 1
                spine: dict[str, Any] = {"name": s_num, "plane": plane, "pod": None, "next_port": 1}
                spine_specs.append(spine)
                names.append(spine)
            for leaf in p_leaves:
                for i in range(up):
                    spine = names[i % per_plane]
                    links.append(Link(End(leaf["name"], HALF + 1 + i), End(spine["name"], spine["next_port"]),
                                      "leaf-spine"))
                    spine["next_port"] += 1
    else:
        per_pod = spines if spines is not None else up
        if per_pod < 1 or up % per_pod:
            raise ValueError(f"{per_pod} spines per pod cannot split {up} leaf uplinks evenly")
        k = up // per_pod
        leaves_per_pod = HALF // k
        leaves_per_unit = hcas_per_host if rail_optimized else max(
            1, math.ceil(su_hosts / hpl))
        units_per_pod = max(1, leaves_per_pod // leaves_per_unit)
        n_pods = math.ceil(n_units / units_per_pod)
        spine_up = HALF
        group = next((d for d in _divisors(spine_up) if n_pods * (spine_up // d) <= RADIX), None)
        if group is None:
            raise ValueError(f"{n_pods} pods are too many for one core layer of 64-port switches")
        cores_by_pos: list[list[dict]] = []
        c_num = 0
        for _ in range(per_pod):
            grp: list[dict[str, Any]] = []
            for _ in range(group):
                c_num += 1
                core: dict[str, Any] = {"name": c_num, "next_port": 1}
                core_specs.append(core)
                grp.append(core)
            cores_by_pos.append(grp)
        s_num = 0
        for pod in range(n_pods):
            p_leaves = [s for s in leaf_specs if s["u"] // units_per_pod == pod]
            for s in p_leaves:
                s["pod"] = pod
            pod_spines: list[dict[str, Any]] = []
            for j in range(per_pod):
                s_num += 1
                spine = {"name": s_num, "plane": 0, "pod": pod, "next_port": 1, "pos": j}
                spine_specs.append(spine)
                pod_spines.append(spine)
            for leaf in p_leaves:
                for i in range(up):
                    spine = pod_spines[i % per_pod]
                    links.append(Link(End(leaf["name"], HALF + 1 + i), End(spine["name"], spine["next_port"]),
                                      "leaf-spine"))
                    spine["next_port"] += 1
            for spine in pod_spines:
                grp = cores_by_pos[spine["pos"]]
                for i in range(spine_up):
                    core = grp[i % group]
                    links.append(Link(End(spine["name"], HALF + 1 + i), End(core["name"], core["next_port"]),
                                      "spine-core"))
                    core["next_port"] += 1

    # -- names for numbered switches (width from the count), then rewrite the placeholder ends
    sw = max(2, len(str(len(spine_specs))))
    cw = max(2, len(str(len(core_specs))))
    spine_name = {s["name"]: f"spine-{s['name']:0{sw}d}" for s in spine_specs}
    core_name = {c["name"]: f"core-{c['name']:0{cw}d}" for c in core_specs}

    def fix(end: End, kind: str, upper: bool) -> End:
        if kind == "leaf-spine" and upper:
            return End(spine_name[end.node], end.port)  # type: ignore[index]
        if kind == "spine-core":
            return End(core_name[end.node] if upper else spine_name[end.node], end.port)  # type: ignore[index]
        return end

    links = [Link(fix(lk.lower, lk.kind, False), fix(lk.upper, lk.kind, True), lk.kind) for lk in links]

    # -- GUIDs and LIDs
    n_sw = len(spine_specs) + len(core_specs) + len(leaf_specs)
    n_ca = hosts * hcas_per_host
    sw_guids = rng_for(seed, "switch-guids").sample(range(1, 1 << 24), n_sw)
    ca_guids = rng_for(seed, "hca-guids").sample(range(1, 1 << 24), n_ca)
    nodes: dict[str, Node] = {}
    lid = 0

    def sw_node(name: str, tier: int, model: str, **kw: object) -> Node:
        nonlocal lid
        lid += 1
        return Node(name=name, kind="SW", tier=tier, guid=f"0x{SWITCH_GUID_PREFIX | sw_guids[lid - 1]:016x}", lid=lid,
                    description=f"MF0;{name}:{model}/U1", nports=SWITCH_NUMPORTS, model=model, **kw)  # type: ignore[arg-type]

    for s in spine_specs:
        n = spine_name[s["name"]]
        nodes[n] = sw_node(n, 2, SPINE_MODEL, plane=s["plane"], pod=s["pod"])
    for c in core_specs:
        n = core_name[c["name"]]
        nodes[n] = sw_node(n, 3, SPINE_MODEL)
    for spec in leaf_specs:
        nodes[spec["name"]] = sw_node(spec["name"], 1, LEAF_MODEL, unit=spec["unit"], rail=spec["rail"],
                                      plane=spec["plane"], pod=spec["pod"])
    host_leaf: dict[tuple[str, int], tuple[str, int]] = {}
    for spec in leaf_specs:
        for h, k, port in spec["members"]:
            host_leaf[(h, k)] = (spec["name"], port)
    hca_links: list[Link] = []
    for i, h in enumerate(host_names):
        for k in range(hcas_per_host):
            lid += 1
            dev = f"mlx5_{k}"
            name = f"{h}/{dev}"
            leaf_name, port = host_leaf[(h, k)]
            nodes[name] = Node(
                name=name, kind="CA", tier=0, guid=f"0x{HCA_GUID_PREFIX | ca_guids[i * hcas_per_host + k]:016x}",
                lid=lid, description=f"{h} {dev}", nports=1, host=h, device=dev, index=k,
                unit=units[i // su_hosts], rail=k if rail_optimized else None,
                plane=nodes[leaf_name].plane, pod=nodes[leaf_name].pod,
            )
            hca_links.append(Link(End(name, 1), End(leaf_name, port), "hca-leaf"))
    sm_lid = nodes[spine_name[spine_specs[0]["name"]]].lid if spine_specs else 1
    return FatTree(
        hosts=host_names, hcas_per_host=hcas_per_host, hosts_per_leaf=hpl, tiers=n_tiers,
        rail_optimized=rail_optimized, seed=seed, planes=n_planes, units=units, nodes=nodes,
        links=hca_links + links, sm_lid=sm_lid,
    )
