"""The fabric as a graph: switches, HCAs, cables with both ends, leaf/spine/core tiers.

Built from whatever topology source the bundle holds (ibnetdiscover topology file or ports report,
iblinkinfo, ibqueryerrors -r, ibdiagnet2 NODES/LINKS), joined to hosts through HCA node
descriptions (``gpu-a017 mlx5_3``) and through the host-side tools (ibstat/sysfs port GUIDs).

Scale: a 4,096-host rail-optimised fat tree has ~35k nodes, ~100k cables and ~200k cable ends (FabricLink
rows). :func:`build_fabric` therefore works on whole columns: GUIDs and port numbers are factorized into integer
codes (GUIDs in sorted order, so that port codes sort like ``(guid, port)`` tuples), and what adding the records
one at a time would keep (the first description/LID that is set, the slowest report of each port, the first row
of each cable, the order things are first seen in) is picked with numpy; tiers are a breadth-first search over
the node codes (hop counts, which is what a Dijkstra over unweighted cables gives). Python objects are made for
the nodes only: the ports' PortInfo are made when first read (:class:`_Ports`) and the cables go into the graph
when its adjacency is first read (:class:`_CableGraph`), since the triage reads a few hundred ports and mostly
asks the graph whether a GUID is a node. The resulting graph, ports and lookups are the same, in the same order,
as adding the nodes and edges one row at a time (``tests/parsers/test_ibnetdiscover_fast.py`` keeps that build
as the reference).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from diagnose.evidence.context import val
from diagnose.evidence.frames import factorize_runs
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
    ports: Mapping[tuple[str, int], PortInfo] = field(default_factory=dict)
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
        cables = {(a, b) if a <= b else (b, a) for a, b in (((i.guid, i.port), i.peer) for i in cabled if i.peer)}
        rate = {ws: link_gbps(*ws) for ws in {(i.width, i.speed) for i in cabled}}  # a handful of pairs
        best = max((r for r in (rate[(i.width, i.speed)] for i in cabled) if r), default=None)
        degraded = sorted(
            {tuple(sorted([(i.guid, i.port), i.peer])) for i in cabled
             if i.peer and best and (rate[(i.width, i.speed)] or best) < best}
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


def switch_name(desc: str | None, guid: str) -> str:
    """A switch's short name from its node description (``MF0;leaf07:MQM9700/U1`` -> ``leaf07``), else its GUID."""
    if not desc:
        return guid
    m = _SW_NAME.match(desc.strip())
    return (m.group("name") if m else desc).strip() or guid


def _values(col: pd.Series) -> list[Any]:
    """``[val(x) for x in col]`` (NaN/NA/NaT -> None, numpy scalars -> Python) for a whole column at once."""
    out = col.tolist()
    missing = np.flatnonzero(col.isna().to_numpy())
    for i in missing.tolist():
        out[i] = None
    if col.dtype == object and any(issubclass(t, np.generic) for t in set(map(type, out))):
        out = [val(v) for v in out]  # numpy scalars held in an object column: what val() does with them
    return out


def _strings(col: pd.Series) -> list[str | None]:
    """``[sval(x) for x in col]``: like :func:`_values`, then ``str()`` of what is not None."""
    return [v if v is None or type(v) is str else str(v) for v in _values(col)]


def _pick(col: pd.Series, rows: np.ndarray, convert: Callable[[pd.Series], list[Any]] = _strings) -> list[Any]:
    """``convert(col)`` at positions ``rows`` only."""
    return convert(col.iloc[rows]) if len(rows) else []


def _objects(col: pd.Series | None, n: int) -> np.ndarray:
    return col.to_numpy(object) if col is not None else np.full(n, None, dtype=object)


def _is_set(values: np.ndarray, text: bool) -> np.ndarray:
    """Which of ``values`` (an object array) :func:`_strings` (``text``) or :func:`_values` turns into something
    truthy: not missing, not "" (and for values, not 0)."""
    out = ~pd.isna(values) & (values != "")
    return out & (values != 0) if not text else out


def build_fabric(frames: dict[str, pd.DataFrame]) -> Fabric | None:
    """The fabric of the topology records in ``frames`` (FabricNode, FabricLink, FabricPortState; IbPort for the
    hosts of HCAs whose description does not name them); None without any FabricLink."""
    links = frames.get("FabricLink")
    if links is None or links.empty:
        return None
    with gc_paused():
        return _build_fabric(frames, links)


def _build_fabric(frames: dict[str, pd.DataFrame], links: pd.DataFrame) -> Fabric:
    """The fabric, column-wise: what adding the records one at a time gives (see the module docstring)."""
    m = len(links)
    nodes = frames.get("FabricNode")
    nodes = nodes if nodes is not None and not nodes.empty else pd.DataFrame(
        {c: pd.Series([], dtype=object) for c in ("guid", "node_type", "description", "lid")})
    states = frames.get("FabricPortState")
    states = states if states is not None and not states.empty else pd.DataFrame(
        {c: pd.Series([], dtype=object) for c in ("guid", "port", "description", "lid", "width", "speed", "state",
                                                   "source", "line")})
    n_node, n_state = len(nodes), len(states)

    # every mention of a node, in the order a row-by-row build meets them: the FabricNode rows, both ends of each
    # FabricLink row (row i's local end is mention n_node + 2i, its peer's the next one), the FabricPortState rows
    def mentions(node_col: str | None, local: str, peer: str, state_col: str | None) -> np.ndarray:
        ends = np.empty(2 * m, dtype=object)
        ends[0::2], ends[1::2] = links[local].to_numpy(object), links[peer].to_numpy(object)
        return np.concatenate([_objects(nodes[node_col] if node_col else None, n_node), ends,
                               _objects(states[state_col] if state_col else None, n_state)])

    # nodes coded in GUID order and port numbers in number order: port codes then sort like (guid, port) tuples
    ncode, guids, seen = _node_codes([(_objects(nodes["guid"], n_node), 0, 1),
                                      (links["guid"].to_numpy(object), n_node, 2),
                                      (links["peer_guid"].to_numpy(object), n_node + 1, 2),
                                      (_objects(states["guid"], n_state), n_node + 2 * m, 1)])
    guids = np.array([str(g) for g in guids], dtype=object)
    numbers = np.concatenate([np.stack([links["port"].to_numpy(np.int64), links["peer_port"].to_numpy(np.int64)],
                                       axis=1).reshape(-1), states["port"].to_numpy(np.int64)])
    pcode, pnums = pd.factorize(numbers, sort=True)
    # one code per port (cable end, or port without peer), in (guid, port) order; ``first``: its first mention
    # (a cable end's, counted from the first link mention); a port state row counts only as a port's first
    port_keys, first, pkey = np.unique(ncode[n_node:].astype(np.int64) * len(pnums) + pcode, return_index=True,
                                       return_inverse=True)
    valid = np.ones(len(ncode), dtype=bool)
    valid[n_node + 2 * m:] = False
    valid[n_node + first[first >= 2 * m]] = True

    # node attributes: the first description/LID that is set (else the first seen), the first type a node record
    # gives (else by degree, below)
    n_guids = len(guids)
    desc_all, lid_all = mentions("description", "description", "peer_description", "description"), mentions(
        "lid", "lid", "peer_lid", "lid")
    desc_of = _first_set(ncode, valid, _is_set(desc_all, True), desc_all, n_guids, _strings)
    lid_of = _first_set(ncode, valid, _is_set(lid_all, False), lid_all, n_guids, _values)
    node_types = _objects(nodes["node_type"], n_node)
    type_of = _first_set(ncode[:n_node], np.ones(n_node, dtype=bool), _is_set(node_types, True), node_types,
                         n_guids, _strings)

    # per port, the width/speed of the slowest report (the two ends disagree: a cable trains both ends alike),
    # the first such row; cables: the first row of each pair of ends
    wcode, wu = pd.factorize(links["width"].to_numpy(object), use_na_sentinel=False)
    scode, su = pd.factorize(links["speed"].to_numpy(object), use_na_sentinel=False)
    wu, su = _strings(pd.Series(wu, dtype=object)), _strings(pd.Series(su, dtype=object))
    rate_of = np.array([[link_gbps(w, s) or 1e9 for s in su] for w in wu], dtype=np.float64).reshape(len(wu), -1)
    rate = rate_of[wcode, scode]
    end_key = pkey[:2 * m]
    by_rate = np.lexsort((np.arange(2 * m), np.repeat(rate, 2), end_key))
    ranked = end_key[by_rate]
    head = np.ones(2 * m, dtype=bool)
    head[1:] = ranked[1:] != ranked[:-1]
    slowest = np.full(len(port_keys), -1, dtype=np.int64)
    slowest[ranked[head]] = by_rate[head] // 2  # the row
    lo, hi = np.minimum(end_key[0::2], end_key[1::2]), np.maximum(end_key[0::2], end_key[1::2])
    cables = np.sort(np.unique(lo * len(port_keys) + hi, return_index=True)[1])
    node_of_end = ncode[n_node:n_node + 2 * m]
    ports = _Ports(links, states, guids, pnums, port_keys, first, pkey, slowest)

    # node types the records did not give: by degree as networkx counts it (parallel cables each count, a loop
    # twice); tiers: HCAs 0, switches by hop distance from the nearest HCA
    ends_of_cables = node_of_end[np.concatenate([2 * cables, 2 * cables + 1])]
    degree = np.bincount(ends_of_cables, minlength=n_guids).tolist()
    type_of = [t or ("SW" if k > 2 else "CA") for t, k in zip(type_of, degree, strict=True)]
    adjacency = _Adjacency(ends_of_cables[:len(cables)], ends_of_cables[len(cables):], n_guids)
    hops = adjacency.hops(np.array([t == "CA" for t in type_of], dtype=bool))

    # node attribute dicts, in the order the nodes are first seen; keys in the order type, desc, lid, then
    # host/device (HCAs: from the description, else from the host-side tools) or name (others), then tier
    host_of = _ibport_hosts(frames.get("IbPort"))
    attrs: dict[str, dict[str, Any]] = {}
    by_lid: dict[int, str] = {}
    by_host_dev: dict[tuple[str, str], str] = {}
    ca_desc = _CA_DESC.match
    guid_list = guids.tolist()
    for c in seen:
        guid, ntype, desc, lid = guid_list[c], type_of[c], desc_of[c], lid_of[c]
        if ntype == "CA":
            mm = ca_desc(desc) if desc else None
            hd = (mm.group("host"), mm.group("dev")) if mm else host_of(guid)
            if hd is None:
                d = {"type": ntype, "desc": desc, "lid": lid}
            else:
                d = {"type": ntype, "desc": desc, "lid": lid, "host": hd[0], "device": hd[1]}
                if hd[0] and hd[1]:
                    by_host_dev[hd] = guid
        else:
            d = {"type": ntype, "desc": desc, "lid": lid, "name": switch_name(desc, guid)}
        if hops[c] >= 0:
            d["tier"] = hops[c]
        attrs[guid] = d
        if lid:
            by_lid[int(lid)] = guid
    graph = _CableGraph.of(attrs, (ports, node_of_end[2 * cables], node_of_end[2 * cables + 1], lo[cables],
                                   hi[cables], cables), adjacency)
    return Fabric(graph=graph, ports=ports, by_lid=by_lid, by_host_dev=by_host_dev)


def _node_codes(parts: list[tuple[np.ndarray, int, int]]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """``pd.factorize(mentions, sort=True)`` of every mention of a node, and the codes in the order the nodes
    are first mentioned.

    ``parts``: the GUID columns (object arrays), part ``(values, at, step)``'s row i being mention ``at + step *
    i``. Each column is factorized alone, by runs (a switch's ports are consecutive rows), then their distinct
    values together: the sorted codes are those of the whole, a node's first mention the least over the columns.
    """
    codes, uniques, firsts = [], [], []
    for values, at, step in parts:
        c, u = factorize_runs(values)
        rows = np.flatnonzero(c >= 0)  # the first row of each code: codes are numbered as they first appear
        new = np.ones(len(rows), dtype=bool)
        new[1:] = c[rows[1:]] > np.maximum.accumulate(c[rows])[:-1]
        codes.append(c)
        uniques.append(np.asarray(u, dtype=object))
        firsts.append(at + step * rows[new])
    node_of, distinct = pd.factorize(np.concatenate(uniques))
    rank, guids = pd.factorize(distinct, sort=True)
    first = np.full(len(distinct), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, node_of, np.concatenate(firsts))
    ncode = np.empty(sum(len(v) for v, _a, _s in parts), dtype=np.int64)
    offset = 0
    for (values, at, step), c, u in zip(parts, codes, uniques, strict=True):
        sorted_code = rank[node_of[offset:offset + len(u)]]
        ncode[at:at + step * len(values):step] = np.where(c >= 0, sorted_code[c], -1) if len(u) else -1
        offset += len(u)
    return ncode, guids, rank[np.argsort(first, kind="stable")].tolist()


def _ibport_hosts(ibp: pd.DataFrame | None) -> Callable[[str], tuple[str, str] | None]:
    """(host, device) of a GUID by the host-side tools (ibstat/sysfs port and node GUIDs, the first row that
    names it), for HCAs whose description does not name them; the table is made on the first question, since
    descriptions usually do."""
    table: dict[str, tuple[str, str]] | None = None

    def host_of(guid: str) -> tuple[str, str] | None:
        nonlocal table
        if table is None:
            table = {}
            if ibp is not None and not ibp.empty:
                for h, dev, pg, ng in zip(_strings(ibp["host"]), map(str, ibp["device"].tolist()),
                                          _strings(ibp["port_guid"]), _strings(ibp["node_guid"]), strict=True):
                    for gg in (pg, ng):
                        if h and gg:
                            table.setdefault(gg.lower(), (h, dev))
        return table.get(guid)

    return host_of


def _first_set(codes: np.ndarray, valid: np.ndarray, is_set: np.ndarray, values: np.ndarray, n: int,
               convert: Callable[[pd.Series], list[Any]]) -> list[Any]:
    """Per code ``0..n-1``, the first of its valid ``values`` that is set, else its first valid value (None for a
    code without any), converted: what merging the mentions one at a time keeps (``if v and not kept: kept = v``).
    """
    first = np.full(n, len(codes), dtype=np.int64)
    np.minimum.at(first, codes[valid], np.flatnonzero(valid))
    first_set = np.full(n, len(codes), dtype=np.int64)
    np.minimum.at(first_set, codes[valid & is_set], np.flatnonzero(valid & is_set))
    pick = np.where(first_set < len(codes), first_set, first)
    pick[pick == len(codes)] = -1
    got = np.flatnonzero(pick >= 0)
    picked = convert(pd.Series(values[pick[got]], dtype=object))
    if len(got) == n:  # every code has a value (the usual case)
        return picked
    out: list[Any] = [None] * n
    for c, v in zip(got.tolist(), picked, strict=True):
        out[c] = v
    return out


class _Adjacency:
    """The nodes next to each node over a list of cables, as one sorted table (compressed rows): node ``c``'s
    neighbours are ``nbr[start[c]:start[c + 1]]``, in the order of the cables, a neighbour once per cable (a loop
    twice). Used for the tiers and to answer ``graph.neighbors`` without adding ~100k cables to the graph."""

    def __init__(self, a: np.ndarray, b: np.ndarray, n: int) -> None:
        src = np.stack([a, b], axis=1).reshape(-1)  # cable i's two ends next to each other: cable order kept
        by_src = np.argsort(src, kind="stable")
        self.nbr = np.stack([b, a], axis=1).reshape(-1)[by_src]
        self.start = np.searchsorted(src[by_src], np.arange(n + 1))

    def of(self, c: int) -> np.ndarray:
        return self.nbr[self.start[c]:self.start[c + 1]]

    def hops(self, sources: np.ndarray) -> list[int]:
        """Breadth-first hop count of each node from the nearest ``sources`` node (a boolean mask), -1 where
        none is reachable: what a Dijkstra over unweighted cables gives."""
        start, nbr = self.start, self.nbr
        dist = np.full(len(start) - 1, -1, dtype=np.int64)
        frontier = np.flatnonzero(sources)
        dist[frontier] = 0
        hop = 0
        while len(frontier):
            hop += 1
            lo, cnt = start[frontier], start[frontier + 1] - start[frontier]
            reach = nbr[np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))]
            frontier = np.unique(reach[dist[reach] < 0])
            dist[frontier] = hop
        return dist.tolist()


class _Ports(Mapping[tuple[str, int], PortInfo]):
    """The ports by (node GUID, port number), in the order the records first show them; a PortInfo is made when
    it is first read (then kept: the same object on every read).

    A 4,096-host fabric has ~200k ports and the triage reads a few hundred of them (the peers of ports with
    errors); making every PortInfo, its key and the dict took a third of the fabric build. Iterating (``items()``,
    ``summary()``) makes them all, once. Port ``d`` (0.. in (guid, port) order) is mention ``first[d]``: a cable
    end (link row ``first[d] // 2``, local end if even) or, from ``2 * len(links)`` on, a port state row.
    """

    def __init__(self, links: pd.DataFrame, states: pd.DataFrame, guids: np.ndarray, numbers: np.ndarray,
                 keys: np.ndarray, first: np.ndarray, mention_port: np.ndarray, slowest: np.ndarray) -> None:
        self._links, self._states, self._guids, self._numbers = links, states, guids, numbers
        self._keys, self._first, self._mention_port, self._slowest = keys, first, mention_port, slowest
        self._n_ends = 2 * len(links)
        self._node_of = {g: i for i, g in enumerate(guids.tolist())}
        self._made: dict[int, PortInfo] = {}
        self._all: dict[tuple[str, int], PortInfo] | None = None

    def _code(self, key: object) -> int:
        """Port code of ``key``, -1 if it is no port."""
        guid: Any
        port: Any
        try:
            guid, port = key  # type: ignore[misc]
        except (TypeError, ValueError):
            return -1
        c = self._node_of.get(guid)
        if c is None or not isinstance(port, (int, float, np.integer, np.floating)):
            return -1
        j = int(np.searchsorted(self._numbers, port))
        if j >= len(self._numbers) or self._numbers[j] != port:
            return -1
        want = c * len(self._numbers) + j
        d = int(np.searchsorted(self._keys, want))
        return d if d < len(self._keys) and self._keys[d] == want else -1

    def node_code(self, guid: str) -> int:
        return self._node_of[guid]

    def node_guids(self, codes: Iterable[int]) -> list[str]:
        return [self._guids[c] for c in codes]

    def ends(self, codes: np.ndarray) -> list[tuple[str, int]]:
        """``(guid, port)`` of ports ``codes``."""
        k = self._keys[codes]
        return list(zip(self._guids[k // len(self._numbers)].tolist(), self._numbers[k % len(self._numbers)].tolist(),
                        strict=True))

    def _make(self, codes: np.ndarray) -> list[PortInfo]:
        """PortInfo of ports ``codes`` (made now, or the ones made before)."""
        new = np.array([d for d in codes.tolist() if d not in self._made], dtype=np.int64)
        f = self._first[new]
        linked = f < self._n_ends
        for sel, made in ((linked, self._cable_ends), (~linked, self._port_states)):
            for d, info in zip(new[sel].tolist(), made(new[sel], f[sel]), strict=True):
                self._made[d] = info
        return [self._made[d] for d in codes.tolist()]

    def _cable_ends(self, codes: np.ndarray, f: np.ndarray) -> list[PortInfo]:
        rows, slow, lk = f // 2, self._slowest[codes], self._links
        ends, peers = self.ends(codes), self.ends(self._mention_port[f ^ 1])  # the other end of the row
        return list(map(PortInfo, map(itemgetter(0), ends), map(itemgetter(1), ends), peers,
                        _pick(lk["width"], slow), _pick(lk["speed"], slow), _pick(lk["state"], rows),
                        zip(_pick(lk["source"], slow, _str), _pick(lk["line"], slow, _int), strict=True)))

    def _port_states(self, codes: np.ndarray, f: np.ndarray) -> list[PortInfo]:
        rows, st = f - self._n_ends, self._states
        ends = self.ends(codes)
        return list(map(PortInfo, map(itemgetter(0), ends), map(itemgetter(1), ends), repeat(None),
                        _pick(st["width"], rows), _pick(st["speed"], rows), _pick(st["state"], rows),
                        zip(_pick(st["source"], rows, _str), _pick(st["line"], rows, _int), strict=True)))

    def prefetch(self, keys: Iterable[tuple[str, int]]) -> None:
        """Make the PortInfo of every port in ``keys`` now, in one vectorized pass (keys that are no port are
        skipped). For a caller about to read thousands of ports one by one: a single first read costs a few
        pandas lookups, a batch costs about the same for all of them."""
        codes = [d for d in map(self._code, keys) if d >= 0 and d not in self._made]
        if codes:
            self._make(np.unique(np.array(codes, dtype=np.int64)))

    def _dict(self) -> dict[tuple[str, int], PortInfo]:
        if self._all is None:
            order = np.argsort(self._first, kind="stable")
            self._all = dict(zip(self.ends(order), self._make(order), strict=True))
        return self._all

    def __getitem__(self, key: tuple[str, int]) -> PortInfo:
        d = self._code(key)
        if d < 0:
            raise KeyError(key)
        info = self._made.get(d)
        return info if info is not None else self._make(np.array([d]))[0]

    def __contains__(self, key: object) -> bool:
        return self._code(key) >= 0

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._keys)

    def keys(self) -> KeysView[tuple[str, int]]:
        return self._dict().keys()

    def items(self) -> ItemsView[tuple[str, int], PortInfo]:
        return self._dict().items()

    def values(self) -> ValuesView[PortInfo]:
        return self._dict().values()

    def __repr__(self) -> str:
        return repr(self._dict())

    def cables(self, a: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray,
               rows: np.ndarray) -> Iterator[tuple[str, str, tuple[Any, Any], str | None, str | None]]:
        """The graph edges of the cables: (local node, peer node, key (both ends, in order), width, speed)."""
        return zip(self._guids[a].tolist(), self._guids[b].tolist(), zip(self.ends(lo), self.ends(hi), strict=True),
                   _pick(self._links["width"], rows), _pick(self._links["speed"], rows), strict=True)


def _str(col: pd.Series) -> list[str]:
    return list(map(str, col.tolist()))


def _int(col: pd.Series) -> list[int]:
    return list(map(int, col.tolist()))


class _CableGraph(nx.MultiGraph):
    """A MultiGraph whose cables go into its adjacency the first time anything reads the adjacency.

    What the triage asks of the graph is whether a GUID is one of its nodes, which the nodes answer, and the
    neighbours of a few HCAs (their leaf), which the cable table answers (:meth:`neighbors`); the ~100k cables of a
    4,096-host fabric cost a fifth of the build. networkx reads and writes the adjacency through ``self._adj``
    (already a data descriptor on nx.Graph, so that setting it resets the cached views); this ``_adj`` does the
    same and adds the ``pending`` cables (see :meth:`_Ports.cables`) on first read, the way
    ``add_edge(a, b, key=key, width=w, speed=s)`` would, one cable after the other. Copies, views, conversions
    and pickling read ``_adj`` and so see every cable.
    """

    def __init__(self, incoming_graph_data: Any = None, multigraph_input: bool | None = None, **attr: Any) -> None:
        self.pending: tuple[Any, ...] | None = None
        self.near: _Adjacency | None = None  # the pending cables as a neighbour table
        super().__init__(incoming_graph_data, multigraph_input, **attr)

    @classmethod
    def of(cls, nodes: dict[str, dict[str, Any]], pending: tuple[Any, ...], near: _Adjacency) -> _CableGraph:
        """The graph of ``nodes`` (node -> its attribute dict, taken as is: what ``add_nodes_from(nodes.items())``
        gives, without copying ~35k dicts) and the ``pending`` cables, ``near`` being their neighbour table (over
        the node codes of :class:`_Ports`)."""
        graph = cls()
        graph._node.update(nodes)
        graph._adj.update((n, {}) for n in nodes)
        graph.pending, graph.near = pending, near
        return graph

    def neighbors(self, n: Any) -> Iterator[Any]:
        """What ``MultiGraph.neighbors`` gives (each neighbour once, in the order the cables were added), read off
        the neighbour table while the cables are pending."""
        od = self.__dict__
        if od.get("pending") is None or od.get("near") is None:
            return super().neighbors(n)
        if n not in self._node:
            raise nx.NetworkXError(f"The node {n} is not in the graph.")
        ports = od["pending"][0]
        codes = od["near"].of(ports.node_code(n)).tolist()
        return iter(ports.node_guids(dict.fromkeys(codes)))

    @property  # type: ignore[override]
    def _adj(self) -> dict[Any, Any]:
        od = self.__dict__
        if od.get("pending") is not None:
            ports, *cables = od["pending"]
            od["pending"] = od["near"] = None
            adj = od["_adjacency"]
            for a, b, key, width, speed in ports.cables(*cables):
                keydict = adj[a].get(b)
                if keydict is None:
                    keydict = adj[a][b] = adj[b][a] = {}
                keydict[key] = {"width": width, "speed": speed}
        return od["_adjacency"]  # type: ignore[no-any-return]

    @_adj.setter
    def _adj(self, value: dict[Any, Any]) -> None:
        od = self.__dict__
        od["_adjacency"] = value
        od["pending"] = od["near"] = None
        for prop in ("adj", "edges", "degree"):
            od.pop(prop, None)

    def __getstate__(self) -> dict[str, Any]:
        self._adj  # noqa: B018 - adds the pending cables
        return self.__dict__
