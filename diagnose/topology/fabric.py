"""The fabric as a graph: switches, HCAs, cables with both ends, leaf/spine/core tiers.

Built from whatever topology source the bundle holds (ibnetdiscover topology file or ports report,
iblinkinfo, ibqueryerrors -r, ibdiagnet2 NODES/LINKS), joined to hosts through HCA node
descriptions (``gpu-a017 mlx5_3``) and through the host-side tools (ibstat/sysfs port GUIDs).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx
import pandas as pd

from diagnose.evidence.context import sval, val

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
    graph: nx.MultiGraph
    ports: dict[tuple[str, int], PortInfo] = field(default_factory=dict)
    by_lid: dict[int, str] = field(default_factory=dict)
    by_host_dev: dict[tuple[str, str], str] = field(default_factory=dict)

    # ---- naming -------------------------------------------------------------------------------------
    def kind(self, guid: str) -> str | None:
        return self.graph.nodes[guid].get("type") if guid in self.graph else None

    def name(self, guid: str) -> str:
        if guid not in self.graph:
            return guid
        n = self.graph.nodes[guid]
        if n.get("type") == "CA" and n.get("host"):
            return f"{n['host']}/{n['device']}" if n.get("device") else str(n["host"])
        return str(n.get("name") or guid)

    def label(self, guid: str, port: int | None) -> str:
        """``leaf07/P14``, ``gpu-a017/mlx5_3/P1``: a port named the way an operator finds it."""
        return f"{self.name(guid)}/P{port}" if port is not None else self.name(guid)

    def host_device(self, guid: str) -> tuple[str | None, str | None]:
        n = self.graph.nodes.get(guid, {})
        return n.get("host"), n.get("device")

    # ---- structure ----------------------------------------------------------------------------------
    def peer(self, guid: str, port: int) -> tuple[str, int] | None:
        info = self.ports.get((guid, port))
        return info.peer if info else None

    def tier(self, guid: str) -> int | None:
        return self.graph.nodes.get(guid, {}).get("tier")

    def hca(self, host: str, device: str) -> str | None:
        return self.by_host_dev.get((host, device))

    def leaf_of(self, guid: str) -> set[str]:
        """The switches an HCA is cabled to (its leaf), or the switch itself."""
        if self.kind(guid) != "CA":
            return {guid}
        return {v for v in self.graph.neighbors(guid) if self.kind(v) == "SW"}

    def switches(self) -> list[str]:
        return sorted(g for g, d in self.graph.nodes(data=True) if d.get("type") == "SW")

    def hcas(self) -> list[str]:
        return sorted(g for g, d in self.graph.nodes(data=True) if d.get("type") == "CA")

    def summary(self) -> dict[str, object]:
        tiers: dict[str, int] = defaultdict(int)
        for _, d in self.graph.nodes(data=True):
            tiers[TIER_NAMES.get(d.get("tier", -1), "unplaced")] += 1
        cables = {tuple(sorted([(i.guid, i.port), i.peer])) for i in self.ports.values() if i.peer}
        rates = [link_gbps(i.width, i.speed) for i in self.ports.values() if i.peer]
        best = max((r for r in rates if r), default=None)
        degraded = sorted(
            {tuple(sorted([(i.guid, i.port), i.peer])) for i in self.ports.values()
             if i.peer and best and (link_gbps(i.width, i.speed) or best) < best}
        )
        down = sorted((i.guid, i.port) for i in self.ports.values() if i.peer is None and i.state not in (None, "Active"))
        return {
            "nodes": dict(sorted(tiers.items())),
            "cables": len(cables),
            "hosts": len({d.get("host") for _, d in self.graph.nodes(data=True) if d.get("host")}),
            "best_link": best,
            "degraded_links": [f"{self.label(*a)} <-> {self.label(*b)}" for a, b in degraded],
            "ports_down": [self.label(g, p) for g, p in down],
        }


def _sw_name(desc: str | None, guid: str) -> str:
    if not desc:
        return guid
    m = _SW_NAME.match(desc.strip())
    return (m.group("name") if m else desc).strip() or guid


def build_fabric(frames: dict[str, pd.DataFrame]) -> Fabric | None:
    nodes = frames.get("FabricNode")
    links = frames.get("FabricLink")
    if links is None or links.empty:
        return None
    g = nx.MultiGraph()
    fab = Fabric(graph=g)

    def add_node(guid: str, ntype: str | None, desc: str | None, lid: int | None) -> None:
        if guid not in g:
            g.add_node(guid, type=ntype, desc=desc, lid=lid)
        d = g.nodes[guid]
        if ntype and not d.get("type"):
            d["type"] = ntype
        if desc and not d.get("desc"):
            d["desc"] = desc
        if lid and not d.get("lid"):
            d["lid"] = lid

    if nodes is not None and not nodes.empty:
        for guid, ntype, desc, lid in zip(nodes["guid"], nodes["node_type"], nodes["description"], nodes["lid"],
                                          strict=True):
            add_node(str(guid), sval(ntype), sval(desc), val(lid))  # type: ignore[arg-type]
    for r in links.itertuples(index=False):
        a, b = str(r.guid), str(r.peer_guid)
        add_node(a, None, sval(r.description), val(r.lid))  # type: ignore[arg-type]
        add_node(b, None, sval(r.peer_description), val(r.peer_lid))  # type: ignore[arg-type]
        pa, pb = int(r.port), int(r.peer_port)
        width, speed = sval(r.width), sval(r.speed)
        for (x, px), (y, py) in (((a, pa), (b, pb)), ((b, pb), (a, pa))):
            info = fab.ports.get((x, px))
            if info is None:
                fab.ports[(x, px)] = PortInfo(x, px, (y, py), width, speed, sval(r.state),
                                              (str(r.source), int(r.line)))
            elif (link_gbps(width, speed) or 1e9) < (link_gbps(info.width, info.speed) or 1e9):
                # the two ends disagree: the slower report wins (a cable trains both ends alike)
                info.width, info.speed, info.evidence = width, speed, (str(r.source), int(r.line))
        key = (min((a, pa), (b, pb)), max((a, pa), (b, pb)))
        if not g.has_edge(a, b, key=key):
            g.add_edge(a, b, key=key, width=sval(r.width), speed=sval(r.speed))
    states = frames.get("FabricPortState")
    if states is not None and not states.empty:
        for r in states.itertuples(index=False):
            k = (str(r.guid), int(r.port))
            if k not in fab.ports:
                add_node(k[0], None, sval(r.description), val(r.lid))  # type: ignore[arg-type]
                fab.ports[k] = PortInfo(k[0], k[1], None, sval(r.width), sval(r.speed), sval(r.state),
                                        (str(r.source), int(r.line)))
    # node types the link records did not give: a node with >= 2 distinct switch-ish neighbours and a
    # description like a switch, or 'S-'/'H-' prefixes, are resolved by degree as a last resort
    for guid, d in g.nodes(data=True):
        if not d.get("type"):
            d["type"] = "SW" if g.degree(guid) > 2 else "CA"
    # hosts and devices of HCAs
    ibp = frames.get("IbPort")
    guid_host: dict[str, tuple[str, str]] = {}
    if ibp is not None and not ibp.empty:
        for host, dev, pg, ng in zip(ibp["host"], ibp["device"], ibp["port_guid"], ibp["node_guid"], strict=True):
            h = sval(host)
            for gg in (sval(pg), sval(ng)):
                if h and gg:
                    guid_host.setdefault(gg.lower(), (h, str(dev)))
    for guid, d in g.nodes(data=True):
        if d["type"] == "CA":
            m = _CA_DESC.match(d.get("desc") or "")
            if m:
                d["host"], d["device"] = m["host"], m["dev"]
            elif guid in guid_host:
                d["host"], d["device"] = guid_host[guid]
            if d.get("host") and d.get("device"):
                fab.by_host_dev[(d["host"], d["device"])] = guid
        else:
            d["name"] = _sw_name(d.get("desc"), guid)
        if d.get("lid"):
            fab.by_lid[int(d["lid"])] = guid
    # tiers: HCAs 0, switches by hop distance from the nearest HCA
    cas = [n for n, d in g.nodes(data=True) if d["type"] == "CA"]
    for n in cas:
        g.nodes[n]["tier"] = 0
    if cas:
        dist = nx.multi_source_dijkstra_path_length(g, cas)
        for n, dd in dist.items():
            if g.nodes[n]["type"] != "CA":
                g.nodes[n]["tier"] = int(dd)
    return fab
