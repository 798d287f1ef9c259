"""Places by name: the name an operator uses for a GUID or a LID that any source of the bundle can name.

A channel adapter (HCA) is named by its *host*: from its node description (``gpu-a101 mlx5_0``,
``gpu-a101 HCA-1`` as ibnetdiscover, iblinkinfo, ibhosts, ibdiagnet and ibroute print it) or, when the
description does not name the host (``MT4123 ConnectX6 Mellanox Technologies``), from the host folder whose
ibstat / ibv_devinfo / sysfs shows that node or port GUID. A switch is named by its node description, shortened
the way the fabric model shortens it (``MF0;leaf07:MQM9700/U1`` -> ``leaf07``).

GUIDs are normalised (``0x`` + 16 lowercase hex digits, whatever the tool printed: short forms, upper case,
colon groups). A source may give the node GUID or a port GUID: every port GUID a host tool lists is mapped, and
for an HCA whose node GUID is known the next ``ports`` GUIDs are mapped too (mlx4 port GUID = node GUID + port
number), unless another node owns them. LIDs map to the GUID of the port (or switch) that holds them.

The mapping is built once per :class:`~diagnose.evidence.context.Context` from whole frames (``FabricNode``,
``FabricLink`` and ``FabricPortState`` ends, ``IbPort``, ``SmInfo``). The tables read are the fabric lane's
(``FABRIC_TABLES`` and the fabric extractors' ``reads`` in ``diagnose/evidence/extractors/``): a new name source
must be declared there too.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from diagnose.evidence.context import Context
from diagnose.parsers._ib import norm_guid

CACHE_KEY = "names.table"

# the fabric model's patterns (diagnose.topology.fabric): an HCA description naming its host, a switch's short name
CA_DESC = r"^\s*(?P<host>[A-Za-z0-9][\w.\-]*)\s+(?P<dev>(?:mlx\d+_(?:bond_)?\d+|HCA-\d+|ib[\w]+|irdma\d+|bnxt_re\d+))\b"
SW_NAME = r"^\s*(?:MF\d+;)?(?P<name>[^:;]+?)(?::\S+)?\s*$"
DEFAULT_CA_PORTS = 2
MAX_ALIAS_PORTS = 4


@dataclass(frozen=True, slots=True)
class NodeName:
    """What the bundle says about one node: its GUID, the name to show, and where it sits."""

    guid: str
    name: str
    kind: str | None  # 'CA' | 'SW' | 'RT' | None (unknown)
    host: str | None  # the host of an HCA
    device: str | None  # the HCA device ('mlx5_0') or the switch's name
    description: str | None


@dataclass
class NameTable:
    by_guid: dict[str, NodeName]
    by_lid: dict[int, str]


def _guid(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, int):
        return f"0x{value:016x}" if 0 < value < 1 << 64 else None
    if isinstance(value, float):
        return None
    text = str(value).strip()
    if text.isdigit():  # some tools print a GUID as a decimal or a bare hex number: hex (how every IB tool prints)
        text = "0x" + text
    return norm_guid(text)


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    return df[name] if name in df.columns else pd.Series([None] * len(df), index=df.index, dtype=object)


def _norm_guids(col: pd.Series) -> pd.Series:
    """Normalised GUIDs of a column (None where not a GUID); the canonical form, as tools mostly print it, is kept
    as it is."""
    s = col.astype(object).where(col.notna(), None)
    canon = s.astype(str).str.fullmatch(r"0x[0-9a-f]{16}") & s.notna()
    out = s.where(canon, None)
    rest = ~canon & s.notna()
    if rest.any():
        out.loc[rest] = [_guid(v) for v in s[rest].tolist()]
    return out


def _candidates(guid: pd.Series, desc: pd.Series, kind: pd.Series, host: pd.Series, device: pd.Series,
                lid: pd.Series, prio: int) -> pd.DataFrame:
    return pd.DataFrame({"guid": _norm_guids(guid).to_numpy(object), "desc": desc.to_numpy(object),
                         "kind": kind.to_numpy(object), "host": host.to_numpy(object),
                         "device": device.to_numpy(object), "lid": pd.to_numeric(lid, errors="coerce").to_numpy(),
                         "prio": prio})


def _empty(n: int, index: pd.Index) -> pd.Series:
    return pd.Series([None] * n, index=index, dtype=object)


def build(ctx: Context) -> NameTable:
    """The GUID/LID -> name table of ``ctx`` (see the module docstring), cached in ``ctx.cache``."""
    cached = ctx.cache.get(CACHE_KEY)
    if isinstance(cached, NameTable):
        return cached
    table = _build(ctx)
    ctx.cache[CACHE_KEY] = table
    return table


def _build(ctx: Context) -> NameTable:
    parts: list[pd.DataFrame] = []
    lid_parts: list[pd.DataFrame] = []
    nodes = ctx.frame("FabricNode")
    if not nodes.empty:
        parts.append(_candidates(nodes["guid"], _col(nodes, "description"), _col(nodes, "node_type"),
                                 _empty(len(nodes), nodes.index), _empty(len(nodes), nodes.index),
                                 _col(nodes, "lid"), 0))
    links = ctx.frame("FabricLink")
    if not links.empty:
        e = _empty(len(links), links.index)
        parts.append(_candidates(links["guid"], _col(links, "description"), e, e, e, _col(links, "lid"), 1))
        parts.append(_candidates(links["peer_guid"], _col(links, "peer_description"), e, e, e,
                                 _col(links, "peer_lid"), 1))
    states = ctx.frame("FabricPortState")
    if not states.empty:
        e = _empty(len(states), states.index)
        parts.append(_candidates(states["guid"], _col(states, "description"), e, e, e, _col(states, "lid"), 1))
    ports = ctx.frame("IbPort")
    if not ports.empty:
        ib = ports[_col(ports, "host").notna()]
        host, dev = _col(ib, "host").astype(object), _col(ib, "device").astype(object)
        ca = pd.Series("CA", index=ib.index, dtype=object)
        e = _empty(len(ib), ib.index)
        parts.append(_candidates(_col(ib, "port_guid"), e, ca, host, dev, _col(ib, "lid"), 3))
        parts.append(_candidates(_col(ib, "node_guid"), e, ca, host, dev, e, 3))
    smi = ctx.frame("SmInfo")
    if not smi.empty:
        lid_parts.append(pd.DataFrame({"guid": _norm_guids(smi["sm_guid"]).to_numpy(object),
                                       "lid": pd.to_numeric(smi["sm_lid"], errors="coerce").to_numpy(), "prio": 4}))
    if not parts:
        return NameTable({}, _lids(lid_parts))
    cand = pd.concat(parts, ignore_index=True)
    cand = cand[cand["guid"].notna()]
    lid_parts.insert(0, cand[["guid", "lid", "prio"]])
    by_lid = _lids(lid_parts)
    if cand.empty:
        return NameTable({}, by_lid)

    desc = cand["desc"].where(cand["desc"].notna(), None).astype(object)
    desc = desc.where(desc.astype(str).str.strip() != "", None)
    cand["desc"] = desc
    ca = desc.astype(str).str.extract(CA_DESC)
    ca_host = ca["host"].where(desc.notna(), None)
    cand["kind"] = cand["kind"].where(cand["kind"].notna(), None)
    cand["host"] = cand["host"].where(cand["host"].notna(), ca_host)
    cand["device"] = cand["device"].where(cand["device"].notna(), ca["dev"].where(desc.notna(), None))
    cand = cand.sort_values("prio", kind="stable")
    per = cand.groupby("guid", sort=False)
    # per GUID, the first value each attribute is given (sources in priority order)
    first = per[["desc", "kind", "host", "device"]].first()
    kind = first["kind"].where(first["kind"].notna(), None)
    kind = kind.where(kind.notna() | first["host"].isna(), "CA")
    first["kind"] = kind
    sw = first["desc"].astype(str).str.extract(SW_NAME)["name"].where(first["desc"].notna(), None)
    name = first["host"].where(first["host"].notna() & (first["kind"] != "SW"), sw)
    first["name"] = name.where(name.notna(), None)

    by_guid: dict[str, NodeName] = {}
    for g, nm, k, h, d, ds in zip(first.index.tolist(), first["name"].tolist(), first["kind"].tolist(),
                                  first["host"].tolist(), first["device"].tolist(), first["desc"].tolist(),
                                  strict=True):
        if nm is None:
            continue
        is_sw = k == "SW" or (k is None and h is None)
        by_guid[g] = NodeName(guid=g, name=str(nm), kind=k, host=None if is_sw else h,
                              device=str(nm) if is_sw else d, description=ds)
    _add_port_aliases(nodes, by_guid)
    return NameTable(by_guid, by_lid)


def _lids(parts: list[pd.DataFrame]) -> dict[int, str]:
    if not parts:
        return {}
    lids = pd.concat(parts, ignore_index=True)
    lids = lids[lids["guid"].notna() & lids["lid"].notna() & (lids["lid"] > 0)]
    lids = lids.sort_values("prio", kind="stable").drop_duplicates("lid")
    return dict(zip(lids["lid"].astype(int).tolist(), lids["guid"].tolist(), strict=True))


def _add_port_aliases(nodes: pd.DataFrame, by_guid: dict[str, NodeName]) -> None:
    """An HCA's port GUIDs (node GUID + 1 .. + ports), where no other node owns them (mlx4 numbering)."""
    cas = [n for n in by_guid.values() if n.kind == "CA"]
    if not cas:
        return
    nports: dict[str, int] = {}
    if not nodes.empty and "ports" in nodes.columns:
        for g, p in zip(_norm_guids(nodes["guid"]).tolist(), pd.to_numeric(nodes["ports"], errors="coerce").tolist(),
                        strict=True):
            if g is not None and p == p and p:
                nports.setdefault(g, int(p))
    for n in cas:
        base = int(n.guid, 16)
        for k in range(1, min(nports.get(n.guid, DEFAULT_CA_PORTS), MAX_ALIAS_PORTS) + 1):
            alias = f"0x{(base + k) & ((1 << 64) - 1):016x}"
            if alias not in by_guid:
                by_guid[alias] = n
    return


def node(ctx: Context, guid: object = None, lid: object = None) -> NodeName | None:
    """The node the bundle names for ``guid`` (tried first) or ``lid``; None when no source names it."""
    table = build(ctx)
    g = _guid(guid)
    if g is not None:
        hit = table.by_guid.get(g)
        if hit is not None:
            return hit
    lid_i = _lid(lid)
    if lid_i is not None:
        lg = table.by_lid.get(lid_i)
        if lg is not None:  # an unknown GUID (a port GUID no source lists) with a LID that a source places
            return table.by_guid.get(lg)
    return None


def _lid(lid: object) -> int | None:
    if lid is None:
        return None
    try:
        text = str(lid).strip()
        v = int(text, 16) if text.lower().startswith("0x") else int(float(text))
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def guid_for(ctx: Context, guid: object = None, lid: object = None) -> str | None:
    """The normalised GUID given, else the GUID a source gives for ``lid``."""
    g = _guid(guid)
    if g is not None:
        return g
    lid_i = _lid(lid)
    return build(ctx).by_lid.get(lid_i) if lid_i is not None else None


def name_for(ctx: Context, guid: str | None = None, lid: int | None = None) -> str | None:
    """The host name of an HCA, the short node description of a switch; None when no source names it."""
    n = node(ctx, guid, lid)
    return n.name if n is not None else None


def label(ctx: Context, guid: object = None, lid: object = None) -> str:
    """``gpu-a101 (0x0002c903000e0b72)`` when a source names it; else the GUID, else ``lid N``."""
    n = node(ctx, guid, lid)
    g = guid_for(ctx, guid, lid)
    if n is not None:
        return f"{n.name} ({g or n.guid})"
    if g is not None:
        return g
    lid_i = _lid(lid)
    if lid_i is not None:
        return f"lid {lid_i}"
    return str(guid) if guid is not None else "?"
