"""The fabric as a graph: switches, HCAs, cables with both ends, leaf/spine/core tiers.

Built from whatever topology source the bundle holds (ibnetdiscover topology file or ports report,
iblinkinfo, ibqueryerrors -r, ibdiagnet2 NODES/LINKS), joined to hosts through HCA node
descriptions (``gpu-a017 mlx5_3``) and through the host-side tools (ibstat/sysfs port GUIDs).

Scale: a 2,048-host rail-optimised fat tree has ~18k nodes, ~49k cables and ~100k cable ends (FabricLink
rows). :func:`build_fabric` therefore reads the frames column-wise (one ``tolist()`` per column, not pandas
access per row), merges node attributes and ports in plain dicts, and hands networkx the finished nodes and
edges once; tiers are a breadth-first search over the same adjacency (hop counts, which is what a Dijkstra
over unweighted cables gives). The resulting graph, ports and lookups are the same, in the same order, as
adding the nodes and edges one row at a time.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from diagnose.evidence.context import val
from diagnose.gcpause import gc_paused

_CA_DESC = re.compile(r"^(?P<host>[A-Za-z0-9][\w.\-]*)\s+(?P<dev>(?:mlx\d+_(?:bond_)?\d+|HCA-\d+|ib[\w]+|irdma\d+|bnxt_re\d+))\b")
_SW_NAME = re.compile(r"^(?:MF\d+;)?(?P<name>[^:;]+?)(?::\S+)?$")
SPEED_GBPS_PER_LANE = {"SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.0, "FDR": 14.0625, "EDR": 25.78125,
                       "HDR": 53.125, "NDR": 106.25, "XDR": 212.5}
WIDTH_LANES = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}
TIER_NAMES = {0: "hca", 1: "leaf", 2: "spine", 3: "core"}


def link_gbps(width: str | None, speed: str | None) -> float | None:
    """Signalling rate of a link (Gb/s), e.g. 4X NDR -> 425; data rate is lower by the encoding."""
    if not width or not speed:
        return None
    lanes = WIDTH_LANES.get(width.upper())
    per = SPEED_GBPS_PER_LANE.get(speed.upper())
    return lanes * per if lanes and per else None


@dataclass
class PortInfo:
    guid: str
    port: int
    peer: tuple[str, int] | None
    width: str | None = None
    speed: str | None = None
    state: str | None = None
    evidence: tuple[str, int] | None = None  # (file, line) of the topology line that shows this cable


@dataclass
class Fabric:
    """The fabric model. Read-only once built: the lookups below keep the graph's node attribute dicts."""

    graph: nx.MultiGraph
    ports: dict[tuple[str, int], PortInfo] = field(default_factory=dict)
    by_lid: dict[int, str] = field(default_factory=dict)
    by_host_dev: dict[tuple[str, str], str] = field(default_factory=dict)
    _nodes: dict[str, dict[str, Any]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # guid -> the graph's own attribute dict: the per-port lookups below run ~100k times on a large fabric,
        # and a dict lookup is several times cheaper than going through graph.nodes (a NodeView) each time
        self._nodes = dict(self.graph.nodes(data=True))

    # ---- naming -------------------------------------------------------------------------------------
    def kind(self, guid: str) -> str | None:
        n = self._nodes.get(guid)
        return n.get("type") if n is not None else None

    def name(self, guid: str) -> str:
        n = self._nodes.get(guid)
        if n is None:
            return guid
        if n.get("type") == "CA" and n.get("host"):
            return f"{n['host']}/{n['device']}" if n.get("device") else str(n["host"])
        return str(n.get("name") or guid)

    def label(self, guid: str, port: int | None) -> str:
        """``leaf07/P14``, ``gpu-a017/mlx5_3/P1``: a port named the way an operator finds it."""
        return f"{self.name(guid)}/P{port}" if port is not None else self.name(guid)

    def host_device(self, guid: str) -> tuple[str | None, str | None]:
        n = self._nodes.get(guid, {})
        return n.get("host"), n.get("device")

    # ---- structure ----------------------------------------------------------------------------------
    def peer(self, guid: str, port: int) -> tuple[str, int] | None:
        info = self.ports.get((guid, port))
        return info.peer if info else None

    def tier(self, guid: str) -> int | None:
        return self._nodes.get(guid, {}).get("tier")

    def hca(self, host: str, device: str) -> str | None:
        return self.by_host_dev.get((host, device))

    def leaf_of(self, guid: str) -> set[str]:
        """The switches an HCA is cabled to (its leaf), or the switch itself."""
        if self.kind(guid) != "CA":
            return {guid}
        return {v for v in self.graph.neighbors(guid) if self.kind(v) == "SW"}

    def switches(self) -> list[str]:
        return sorted(g for g, d in self._nodes.items() if d.get("type") == "SW")

    def hcas(self) -> list[str]:
        return sorted(g for g, d in self._nodes.items() if d.get("type") == "CA")

    def summary(self) -> dict[str, object]:
        tiers: dict[str, int] = defaultdict(int)
        for d in self._nodes.values():
            tiers[TIER_NAMES.get(d.get("tier", -1), "unplaced")] += 1
        cabled = [i for i in self.ports.values() if i.peer]
        cables = {(a, b) if a <= b else (b, a) for a, b in (((i.guid, i.port), i.peer) for i in cabled)}
        rate = {ws: link_gbps(*ws) for ws in {(i.width, i.speed) for i in cabled}}  # a handful of pairs
        best = max((r for r in (rate[(i.width, i.speed)] for i in cabled) if r), default=None)
        degraded = sorted(
            {tuple(sorted([(i.guid, i.port), i.peer])) for i in cabled
             if best and (rate[(i.width, i.speed)] or best) < best}
        )
        down = sorted((i.guid, i.port) for i in self.ports.values() if i.peer is None and i.state not in (None, "Active"))
        return {
            "nodes": dict(sorted(tiers.items())),
            "cables": len(cables),
            "hosts": len({d.get("host") for d in self._nodes.values() if d.get("host")}),
            "best_link": best,
            "degraded_links": [f"{self.label(*a)} <-> {self.label(*b)}" for a, b in degraded],
            "ports_down": [self.label(g, p) for g, p in down],
        }


def _sw_name(desc: str | None, guid: str) -> str:
    if not desc:
        return guid
    m = _SW_NAME.match(desc.strip())
    return (m.group("name") if m else desc).strip() or guid


def _values(df: pd.DataFrame, name: str) -> list[Any]:
    """``[val(x) for x in df[name]]`` (NaN/NA/NaT -> None, numpy scalars -> Python) for a whole column at once."""
    col = df[name]
    out = col.tolist()
    missing = np.flatnonzero(col.isna().to_numpy())
    for i in missing.tolist():
        out[i] = None
    if col.dtype == object and any(isinstance(v, np.generic) for v in out):
        out = [val(v) for v in out]  # numpy scalars held in an object column: what val() does with them
    return out


def _strings(df: pd.DataFrame, name: str) -> list[str | None]:
    """``[sval(x) for x in df[name]]``: like :func:`_values`, then ``str()`` of what is not None."""
    return [v if v is None or type(v) is str else str(v) for v in _values(df, name)]




def build_fabric(frames: dict[str, pd.DataFrame]) -> Fabric | None:
    """The fabric of the topology records in ``frames`` (FabricNode, FabricLink, FabricPortState; IbPort for the
    hosts of HCAs whose description does not name them); None without any FabricLink."""
    links = frames.get("FabricLink")
    if links is None or links.empty:
        return None
    with gc_paused():
        return _build_fabric(frames, links)


def _build_fabric(frames: dict[str, pd.DataFrame], links: pd.DataFrame) -> Fabric:
    # node attributes, in the order the nodes are first seen; keys in the order type, desc, lid, then
    # host/device (HCAs) or name (others), then tier
    attrs: dict[str, dict[str, Any]] = {}

    def add_node(guid: str, ntype: str | None, desc: str | None, lid: Any) -> None:
        d = attrs.get(guid)
        if d is None:
            attrs[guid] = {"type": ntype, "desc": desc, "lid": lid}
            return
        if ntype and not d["type"]:
            d["type"] = ntype
        if desc and not d["desc"]:
            d["desc"] = desc
        if lid and not d["lid"]:
            d["lid"] = lid

    nodes = frames.get("FabricNode")
    if nodes is not None and not nodes.empty:
        for guid, ntype, desc, lid in zip(map(str, nodes["guid"].tolist()), _strings(nodes, "node_type"),
                                          _strings(nodes, "description"), _values(nodes, "lid"), strict=True):
            add_node(guid, ntype, desc, lid)

    ports: dict[tuple[str, int], PortInfo] = {}
    slowest: dict[tuple[str, int], float] = {}  # the rate of each port's width/speed so far, None -> 1e9
    edges: dict[tuple[tuple[str, int], tuple[str, int]], tuple[str, str, dict[str, Any]]] = {}
    widths, speeds = _strings(links, "width"), _strings(links, "speed")
    rates = {pair: link_gbps(*pair) or 1e9 for pair in set(zip(widths, speeds, strict=True))}
    columns = zip(
        map(str, links["guid"].tolist()), map(str, links["peer_guid"].tolist()),
        map(int, links["port"].tolist()), map(int, links["peer_port"].tolist()),
        _strings(links, "description"), _values(links, "lid"),
        _strings(links, "peer_description"), _values(links, "peer_lid"),
        widths, speeds, map(rates.__getitem__, zip(widths, speeds, strict=True)), _strings(links, "state"),
        map(str, links["source"].tolist()), map(int, links["line"].tolist()),
        strict=True,
    )
    # per row: add_node() for both ends and a PortInfo per cable end, inlined (this loop runs ~100k times)
    for a, b, pa, pb, desc, lid, pdesc, plid, width, speed, rate, state, source, line in columns:
        d = attrs.get(a)
        if d is None:
            attrs[a] = {"type": None, "desc": desc, "lid": lid}
        else:
            if desc and not d["desc"]:
                d["desc"] = desc
            if lid and not d["lid"]:
                d["lid"] = lid
        d = attrs.get(b)
        if d is None:
            attrs[b] = {"type": None, "desc": pdesc, "lid": plid}
        else:
            if pdesc and not d["desc"]:
                d["desc"] = pdesc
            if plid and not d["lid"]:
                d["lid"] = plid
        end_a, end_b, evidence = (a, pa), (b, pb), (source, line)
        info = ports.get(end_a)
        if info is None:
            ports[end_a] = PortInfo(a, pa, end_b, width, speed, state, evidence)
            slowest[end_a] = rate
        elif rate < slowest[end_a]:
            # the two ends disagree: the slower report wins (a cable trains both ends alike)
            info.width, info.speed, info.evidence = width, speed, evidence
            slowest[end_a] = rate
        info = ports.get(end_b)
        if info is None:
            ports[end_b] = PortInfo(b, pb, end_a, width, speed, state, evidence)
            slowest[end_b] = rate
        elif rate < slowest[end_b]:
            info.width, info.speed, info.evidence = width, speed, evidence
            slowest[end_b] = rate
        key = (end_a, end_b) if end_a <= end_b else (end_b, end_a)
        if key not in edges:
            edges[key] = (a, b, {"width": width, "speed": speed})

    states = frames.get("FabricPortState")
    if states is not None and not states.empty:
        columns = zip(
            map(str, states["guid"].tolist()), map(int, states["port"].tolist()), _strings(states, "description"),
            _values(states, "lid"), _strings(states, "width"), _strings(states, "speed"), _strings(states, "state"),
            map(str, states["source"].tolist()), map(int, states["line"].tolist()),
            strict=True,
        )
        for guid, port, desc, lid, width, speed, state, source, line in columns:
            k = (guid, port)
            if k not in ports:
                add_node(guid, None, desc, lid)
                ports[k] = PortInfo(guid, port, None, width, speed, state, (source, line))

    # adjacency and degree as networkx will count them (parallel cables each count; a loop counts twice)
    adj: dict[str, list[str]] = {g: [] for g in attrs}
    degree: dict[str, int] = dict.fromkeys(attrs, 0)
    for a, b, _ in edges.values():
        adj[a].append(b)
        adj[b].append(a)
        degree[a] += 1
        degree[b] += 1
    # node types the link records did not give: a node with >= 2 distinct switch-ish neighbours and a
    # description like a switch, or 'S-'/'H-' prefixes, are resolved by degree as a last resort
    for guid, d in attrs.items():
        if not d.get("type"):
            d["type"] = "SW" if degree[guid] > 2 else "CA"

    # hosts and devices of HCAs
    ibp = frames.get("IbPort")
    guid_host: dict[str, tuple[str, str]] = {}
    if ibp is not None and not ibp.empty:
        for h, dev, pg, ng in zip(_strings(ibp, "host"), map(str, ibp["device"].tolist()), _strings(ibp, "port_guid"),
                                  _strings(ibp, "node_guid"), strict=True):
            for gg in (pg, ng):
                if h and gg:
                    guid_host.setdefault(gg.lower(), (h, dev))
    by_lid: dict[int, str] = {}
    by_host_dev: dict[tuple[str, str], str] = {}
    for guid, d in attrs.items():
        if d["type"] == "CA":
            m = _CA_DESC.match(d.get("desc") or "")
            if m:
                d["host"], d["device"] = m["host"], m["dev"]
            elif guid in guid_host:
                d["host"], d["device"] = guid_host[guid]
            if d.get("host") and d.get("device"):
                by_host_dev[(d["host"], d["device"])] = guid
        else:
            d["name"] = _sw_name(d.get("desc"), guid)
        if d.get("lid"):
            by_lid[int(d["lid"])] = guid
    # tiers: HCAs 0, switches by hop distance from the nearest HCA (breadth-first from all HCAs at once)
    frontier = [n for n, d in attrs.items() if d["type"] == "CA"]
    dist = dict.fromkeys(frontier, 0)
    hops = 0
    while frontier:
        hops += 1
        reached = []
        for u in frontier:
            for v in adj[u]:
                if v not in dist:
                    dist[v] = hops
                    reached.append(v)
        frontier = reached
    for d in attrs.values():
        if d["type"] == "CA":
            d["tier"] = 0
    for n, hop in dist.items():
        if attrs[n]["type"] != "CA":
            attrs[n]["tier"] = hop

    graph = nx.MultiGraph()
    graph.add_nodes_from(attrs.items())
    for key, (a, b, data) in edges.items():
        graph.add_edge(a, b, key=key, **data)
    return Fabric(graph=graph, ports=ports, by_lid=by_lid, by_host_dev=by_host_dev)
