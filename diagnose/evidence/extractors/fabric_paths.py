"""The paths traffic takes through the fabric: uplink balance, QoS class, rails, RoCE lossless setup, MTU.

Measurements only; whether a skew, a priority or an MTU is a fault is decided by the rules' thresholds.

* Switch uplinks: per-port ``PortXmitData``/``PortRcvData``/``PortXmitWait`` (perfquery, ibqueryerrors,
  ibdiagnet PM) on switch ports, classified as uplinks (peer is a switch) or downlinks (peer is a CA) from the
  topology records (``FabricNode``/``FabricLink``); deltas between snapshots when there are several.
* RoCE priorities: mlx5 ``ethtool -S`` per-priority counters. The driver lists ``rx/tx_prio<p>_pause*`` only for
  priorities with PFC enabled (kernel ``mlx5/core/en_stats.c``, ``mlx5e_query_pfc_combined``), so their presence
  tells the lossless priorities; ``rx/tx_prio<p>_bytes`` tell where the traffic is.
* RDMA transport counters (``hw_counters`` / ``rdma statistic``): loss (out_of_sequence, packet_seq_err,
  local_ack_timeout_err, ...) against congestion notification (np_cnp_sent, rp_cnp_handled, ECN marks).
* Queue-pair setup timeouts (errno 110) with their local/remote GIDs, resolved to devices (rails) through the
  GID tables in the bundle; ``NCCL_CROSS_NIC`` and NCCL's graph ``crossNic``.
* Port MTUs (``ibv_devinfo`` active/max MTU) and the MTU NCCL prints for each queue pair.
"""

from __future__ import annotations

import ipaddress
import re
from typing import TypedDict

import numpy as np
import pandas as pd

from diagnose.evidence.context import Context, finding, hosts_label, primary, sval
from diagnose.evidence.counters import EARLY_HINT, LATE_HINT
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.links import strings_of, values_of
from diagnose.evidence.extractors.nccl import nccl_link_layer
from diagnose.evidence.frames import factorize_runs
from diagnose.models.diagnosis import EvidenceRef, Finding, Location

# --------------------------------------------------------------------------------------------- shared helpers



def _one(values: pd.Series) -> str | None:
    vs = sorted({str(v) for v in values.dropna() if str(v)})
    return vs[0] if len(vs) == 1 else None


def _order(df: pd.DataFrame) -> np.ndarray:
    """A global order of snapshot rows (their ranks): capture time when printed, then before/after file names,
    then file order. Times and names are read once per distinct value (a 4,096-host bundle has one file per host
    but hundreds of counter rows in each)."""
    if "timestamp" in df and df["timestamp"].notna().any():
        t_code, t_uniq = pd.factorize(df["timestamp"])  # missing -> -1, which gets -1 like an unparsed time
        ts = pd.to_datetime(pd.Series(t_uniq, dtype=object), errors="coerce", utc=True, format="mixed")
        ts_u = ts.fillna(pd.Timestamp(0, tz="UTC")).astype("int64").where(ts.notna(), -1).to_numpy()
        ts_i = np.append(ts_u, -1)[t_code]
    else:
        ts_i = np.full(len(df), -1, dtype=np.int64)
    s_code, s_uniq = pd.factorize(df["source"].astype(str), sort=True)
    hint = np.array([0 if EARLY_HINT.search(n) else 2 if LATE_HINT.search(n) else 1
                     for n in (str(u).rsplit("/", 1)[-1] for u in s_uniq)], dtype=np.int64)
    idx = np.lexsort((df["line"].to_numpy(), s_code, hint[s_code], ts_i))
    rank = np.empty(len(idx), dtype=np.int64)
    rank[idx] = np.arange(len(idx))
    return rank


def _counter_series(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per key group (one counter of one port): first/last value, snapshots and the increment.

    Increments between consecutive snapshots are summed; a decrease is a reset (what was counted after it is
    the new value itself). ``delta`` is None for a single snapshot. Groups in key order (a missing key last);
    the keys are sorted as integer codes, not as text columns.
    """
    codes = []
    for k in keys:
        c, u = pd.factorize(df[k], sort=True)
        codes.append(np.where(c < 0, len(u), c))  # a missing key sorts last and never continues a series
    missing = np.zeros(len(df), dtype=bool)
    for k in keys:
        missing |= df[k].isna().to_numpy()
    pos = np.lexsort((_order(df), *codes[::-1]))
    srt = df[[*keys, "value", "line", "source"]].take(pos).reset_index(drop=True)
    sk = [c[pos] for c in codes]
    new = np.zeros(len(pos), dtype=bool)
    new[:1] = True
    for c in sk:
        new[1:] |= c[1:] != c[:-1]
    gid = np.cumsum(new) - 1
    same = ~new & ~missing[pos]
    same[1:] &= ~missing[pos][:-1]
    value = srt["value"].astype(float).to_numpy()
    step = np.empty_like(value)
    step[0] = np.nan
    step[1:] = value[1:] - value[:-1]
    inc = np.where(same, step, 0.0)
    inc = np.where(same & (step < 0), value, inc)
    starts = np.flatnonzero(new)
    n = len(pos)

    def pick(col: pd.Series, last: bool) -> pd.Series:
        """Each group's first/last value that is not missing (missing if none is), as groupby first/last."""
        at = np.where(col.notna().to_numpy(), np.arange(n), -1 if last else n)
        best = (np.maximum if last else np.minimum).reduceat(at, starts)
        has = (best >= 0) & (best < n)
        got = col.take(np.where(has, best, 0)).reset_index(drop=True)
        return got if has.all() else got.where(has)

    out = srt[keys].take(starts).reset_index(drop=True)
    out["first"], out["last"] = pick(srt["value"], False), pick(srt["value"], True)
    out["snaps"] = np.diff(np.append(starts, n))
    out["inc"] = pd.Series(np.nan_to_num(inc, nan=0.0)).groupby(gid, sort=False).sum().to_numpy()  # as groupby sums
    out["line"], out["source"] = pick(srt["line"], True), pick(srt["source"], True)
    out["delta"] = out["inc"].where(out["snaps"] > 1)
    return out


def _unique_refs(rows: list[tuple[str, int, str]], kind: str, limit: int = 8) -> list[EvidenceRef]:
    """Refs to the first ``limit`` of ``(file, line, text)`` rows in file/line order, each line once."""
    out: list[EvidenceRef] = []
    seen: set[tuple[str, int]] = set()
    for f, ln, t in sorted(rows, key=lambda r: (r[0], r[1])):  # stable: of two rows of one line the first is kept
        if (f, ln) not in seen:
            seen.add((f, ln))
            out.append(EvidenceRef(file=f, line=ln, text=t, finding=kind))
            if len(out) == limit:
                break
    return out


def _rows_refs(df: pd.DataFrame, kind: str, limit: int = 8) -> list[EvidenceRef]:
    if df.empty:
        return []
    return _unique_refs([(str(s), int(ln), str(t)) for s, ln, t in zip(df["source"].tolist(), df["line"].tolist(),
                                                                        df["text"].tolist(), strict=True)], kind, limit)


def _host_link_layers(ctx: Context) -> dict[str, str]:
    """host -> 'RoCE' / 'IB' from NCCL's device list or the HCA ports; '*' when every host agrees (once per run:
    traffic_class and roce_lossless both ask; callers must not change it)."""
    cached = ctx.cache.get("host_link_layers")
    if cached is not None:
        return cached  # type: ignore[return-value]
    res: dict[str, str] = {}
    init = ctx.frame("NcclNetInit")
    if not init.empty:
        for host, net, lls in zip(init["host"].fillna("").tolist(), init["net"].tolist(), init["link_layers"].tolist(),
                                  strict=True):
            vals = [x for x in lls if x]
            if net == "IB" and vals:
                res[host] = nccl_link_layer(vals)
    ports = ctx.frame("IbPort")
    if not ports.empty and "link_layer" in ports:
        act = ports[ports["state"] == "Active"] if (ports["state"] == "Active").any() else ports
        seen: dict[str, set[str]] = {}  # host -> its ports' link layers
        for host, ll in zip(act["host"].fillna("").tolist(), values_of(act["link_layer"]), strict=True):
            lls = seen.setdefault(host, set())
            if ll is not None:
                lls.add(ll)  # type: ignore[arg-type]
        for host in sorted(seen):
            if host not in res:
                if seen[host] == {"Ethernet"}:
                    res[host] = "RoCE"
                elif seen[host] == {"InfiniBand"}:
                    res[host] = "IB"
    kinds = set(res.values())
    if len(kinds) == 1:
        res["*"] = kinds.pop()
    ctx.cache["host_link_layers"] = res
    return res


def _env(ctx: Context, name: str) -> pd.DataFrame:
    env = ctx.frame("EnvSetting")
    if env.empty:
        return env
    sel = env[env["name"] == name]
    return sel.assign(value=sel["value"].astype(str).str.strip().str.strip("'\"").str.lstrip("="))


def _int(v: object) -> int | None:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------------------------- switch uplinks

_CA_DESC = re.compile(r"\b(?:mlx\d_\d+|mlx5_bond_\d+|HCA-\d+|hfi1_\d+|irdma\d+|bnxt_re\d+|qib\d+)\b", re.I)
_SW_DESC = re.compile(r"MF0;|Quantum|\bMQM\d|\bMSB\d|\bQM\d{3,}|SwitchX|Switch-?IB|\bspine|\bleaf|\bcore\b|\bsw\d", re.I)
_SW_TEXT = re.compile(r"^\s*SW\s")
_PEER_SW_TEXT = re.compile(r"\s-\s+SW\s")
_PEER_CA_TEXT = re.compile(r"\s-\s+CA\s")
UPLINK_COUNTERS = ("port_xmit_data", "port_rcv_data", "port_xmit_wait")
# switches whose hottest uplink carries at least this multiple of its siblings' mean get a finding of their own
# (the route_imbalance rule's thresholds start at 1.5 for "even" and 3 for "skewed"); at most this many
SKEW_REPORT_FLOOR = 1.25
MAX_SKEW_FINDINGS = 32


def _topology(ctx: Context) -> tuple[dict[str, str], dict[int, str], pd.DataFrame]:
    """(guid -> 'SW'/'CA', lid -> switch guid, links frame with peer_type and guid_code, the GUID as an integer).

    A 4,096-host fabric has 35k nodes and 200k cable ends: the GUID columns are factorized once and the type
    questions asked once per GUID; the cable ends' text is read only where an end is still untyped."""
    types: dict[str, str] = {}
    lid_guid: dict[int, str] = {}
    nodes = ctx.frame("FabricNode")
    if not nodes.empty:
        for g, t, lid in zip(nodes["guid"].tolist(), strings_of(nodes["node_type"]), values_of(nodes["lid"]), strict=True):
            if t:
                types[str(g)] = t
            if lid is not None and t == "SW":
                lid_guid[int(lid)] = str(g)  # type: ignore[call-overload]
    links = ctx.frame("FabricLink")
    if links.empty:
        return types, lid_guid, links
    # NaN -> -1, which counts as untyped below; a switch's ports are consecutive rows: its GUID is hashed once
    g_code, g_uniq = factorize_runs(links["guid"].astype(str).to_numpy(object))
    p_code, p_uniq = pd.factorize(links["peer_guid"].astype(str))
    g_uniq, p_uniq = g_uniq.tolist(), p_uniq.tolist()

    asked: dict[tuple[int, int], np.ndarray] = {}

    def untyped(code: np.ndarray, uniq: list[str]) -> np.ndarray:
        # types only gains GUIDs: while its size is the same, so is the answer for each GUID (asked once)
        per_guid = asked.get((id(uniq), len(types)))
        if per_guid is None:
            per_guid = asked[(id(uniq), len(types))] = np.append(np.array([u not in types for u in uniq], dtype=bool),
                                                                 True)
        return per_guid[code]

    # ibnetdiscover -p prints both ends' types (``SW 1719 1 0x.. 4x EDR - SW 1516 1 0x..``); only those lines
    # (they start with the node type) are searched, not the topology file's port lines, and only where they
    # can still add a type
    maybe = np.flatnonzero(untyped(g_code, g_uniq) | untyped(p_code, p_uniq))
    if len(maybe):
        cand = links.iloc[maybe]
        prl = cand[[type(x) is str and x.lstrip()[:3] in ("SW ", "CA ", "RT ") for x in cand["text"].tolist()]]
        pr = prl["text"].astype(str)
        for g in prl.loc[pr.str.match(_SW_TEXT), "guid"]:
            types.setdefault(str(g), "SW")
        for g in prl.loc[pr.str.contains(_PEER_SW_TEXT), "peer_guid"]:
            types.setdefault(str(g), "SW")
        for g in prl.loc[pr.str.contains(_PEER_CA_TEXT), "peer_guid"]:
            types.setdefault(str(g), "CA")
    # a node seen with links on two or more ports is a switch (HCAs here have one port per GUID)
    left = links.loc[untyped(g_code, g_uniq), ["guid", "port"]]
    if not left.empty:
        nports = left.groupby("guid")["port"].nunique()
        for g in nports.index[nports >= 3]:
            types.setdefault(str(g), "SW")
    # still untyped nodes: guess from their descriptions (only the nodes left, each once)
    gl, pl = untyped(g_code, g_uniq), untyped(p_code, p_uniq)
    ends = pd.DataFrame({"g": pd.concat([links["guid"][gl], links["peer_guid"][pl]], ignore_index=True).astype(str),
                         "d": pd.concat([links["description"][gl], links["peer_description"][pl]], ignore_index=True)})
    ends = ends[~ends["g"].isin(types.keys()) & ends["d"].notna()].drop_duplicates("g")
    for g, d in zip(ends["g"], ends["d"].astype(str), strict=True):
        if d and g not in types:
            if _CA_DESC.search(d):
                types[g] = "CA"
            elif _SW_DESC.search(d):
                types[g] = "SW"
    # the first switch row of each LID names it (a switch's rows repeat its LID once per port)
    g_type = np.append(np.array([types.get(u) for u in g_uniq], dtype=object), np.array([None], dtype=object))[g_code]
    sw_rows = links.loc[(g_type == "SW") & links["lid"].notna().to_numpy(), ["guid", "lid"]].drop_duplicates("lid")
    for g, lid in zip(sw_rows["guid"].astype(str).tolist(), sw_rows["lid"].tolist(), strict=True):
        lid_guid.setdefault(int(lid), g)
    p_type = np.append(np.array([types.get(u) for u in p_uniq], dtype=object), np.array([None], dtype=object))[p_code]
    return types, lid_guid, links.assign(peer_type=pd.Series(p_type, index=links.index, dtype=object), guid_code=g_code)


@extractor(fabric=True,
           reads=("FabricLink", "FabricNode", "FabricPortState", "IbPort", "PortCounter", "PortCounterWide"),
           emits=("uplink_load_skew",))
def uplink_balance(ctx: Context) -> list[Finding]:
    """Per switch: how evenly its uplinks (ports whose peer is a switch) carry the traffic, and where XmitWait is.

    The series of a 4,096-host fabric (600k) are joined to the uplinks on integer codes: switches ranked by
    GUID, keys switch x port; only the reported switches go back to the frames."""
    table = ctx.counters
    t = table.series
    if t.empty:
        return []
    # the counter of each series as an index into UPLINK_COUNTERS, from the table's codes (not its text column)
    c_all = np.array([UPLINK_COUNTERS.index(c) if c in UPLINK_COUNTERS else -1 for c in table.vocab] + [-1],
                     dtype=np.int64)[table.series_counter]
    port_all = t["port_k"].to_numpy()
    at = np.flatnonzero((c_all >= 0) & (port_all >= 0))
    if not len(at):
        return []
    types, lid_guid, links = _topology(ctx)
    if links.empty:
        return []
    # the switch of each series, as a code into ``names``: its GUID (the table's GUID codes, which are in GUID
    # order), else the switch that owns its LID
    g_code, g_names = table.port_keys["guid_k"]
    code, names = g_code[table.series_port[at]], np.asarray(g_names, dtype=object)
    no_guid = np.flatnonzero(code == 0) if len(names) and names[0] == "" else np.array([], dtype=np.int64)
    if len(no_guid):
        sw = names[code]
        l_code, l_uniq = pd.factorize(t["lid_k"].to_numpy()[at[no_guid]])  # each LID looked up once
        sw[no_guid] = np.array([lid_guid.get(lid) for lid in l_uniq.tolist()], dtype=object)[l_code]
        code, uniq = pd.factorize(sw)  # None -> -1
        names = np.asarray(uniq, dtype=object)
        rank = np.empty(len(names), dtype=np.int64)
        rank[np.argsort(names, kind="stable")] = np.arange(len(names))  # codes in GUID order
    else:
        rank = np.arange(len(names))
    if not len(names):
        return []
    sw_guids = {g for g, k in types.items() if k == "SW"}
    is_sw = pd.Index(names).isin(sw_guids)
    # switch-to-switch cables that are up: only their ports are uplinks (a leaf's many HCA ports are not looked at)
    ports = links[[c for c in ("guid", "guid_code", "port", "peer_type", "state", "peer_guid", "description",
                               "peer_description") if c in links]]
    ports = ports.drop_duplicates(["guid_code", "port"]).rename(columns={"guid": "sw"})
    ports = ports.assign(port=ports["port"].astype(int))
    up = ports["peer_type"] == "SW"
    if "state" in ports:
        up &= ports["state"].isna() | (ports["state"].astype(object) == "Active")
    ports = ports[up & (ports["port"] >= 0)]
    port = port_all[at]
    radix = int(max(port.max(), ports["port"].max() if len(ports) else 0)) + 1
    u_code = pd.Index(names).get_indexer(ports["sw"].astype(object))
    u_key = rank[u_code[u_code >= 0]] * radix + ports["port"].to_numpy()[u_code >= 0]
    key = np.where(code >= 0, rank[code], -1) * radix + port
    idx = np.flatnonzero((code >= 0) & is_sw[code] & np.isin(key, u_key))
    if not len(idx):
        return []
    # per (switch, port): the last value of each counter that has one (amount: the increment between snapshots,
    # else the value), and the most snapshots any of them has
    rows = at[idx]  # the series
    c_code = c_all[rows]
    snaps = t["snaps"].to_numpy()[rows]
    amount = np.where(snaps > 1, t["inc"].to_numpy()[rows], t["last"].to_numpy()[rows]).astype(float)
    key_u, grp = np.unique(key[idx], return_inverse=True)
    val = np.full((len(key_u), len(UPLINK_COUNTERS)), np.nan)
    cell = (grp * len(UPLINK_COUNTERS) + c_code)[~np.isnan(amount)]
    cell_u, first_rev = np.unique(cell[::-1], return_index=True)
    val.flat[cell_u] = amount[~np.isnan(amount)][len(cell) - 1 - first_rev]
    snaps_k = np.zeros(len(key_u), dtype=np.int64)
    np.maximum.at(snaps_k, grp, snaps)
    has = ~np.isnan(val).all(axis=1)  # a port with no value at all is not an uplink row
    key_u, val, snaps_k = key_u[has], val[has], snaps_k[has]
    by_rank = names[np.argsort(rank)]
    j = pd.DataFrame({"sw": by_rank[key_u // radix], "port": key_u % radix,
                      "port_xmit_data": val[:, 0], "port_rcv_data": val[:, 1], "port_xmit_wait": val[:, 2],
                      "snaps_k": snaps_k})
    j["xm"] = j["port_xmit_data"].fillna(0.0).astype(float)
    j["wt"] = j["port_xmit_wait"].fillna(0.0).astype(float)
    j["rv"] = j["port_rcv_data"].fillna(0.0).astype(float)
    # per switch, vectorised: every leaf of a 4,096-host fabric in one pass
    g = j.groupby(key_u // radix, sort=True)
    per = pd.DataFrame({
        "n": g.size(), "measured": g["port_xmit_data"].count(), "xsum": g["xm"].sum(), "xmax": g["xm"].max(),
        "hot": g["xm"].idxmax(), "wsum": g["wt"].sum(), "rsum": g["rv"].sum(), "rmax": g["rv"].max(),
        "delta": g["snaps_k"].min() > 1,
    })
    rows_of = {by_rank[r]: pos for r, pos in g.indices.items()}  # switch -> positions of its uplinks in j
    per.index = pd.Index(by_rank[per.index.to_numpy()], dtype=object)
    per = per[(per["n"] >= 2) & (per["measured"] > 0) & (per["xsum"] > 0)]
    if per.empty:
        return []
    rest = (per["xsum"] - per["xmax"]) / (per["n"] - 1)
    per["imbalance"] = np.where(rest > 0, per["xmax"] / rest.where(rest > 0, 1.0), 1000.0).clip(max=1000.0).round(2)
    per["top_share"] = (per["xmax"] / per["xsum"]).round(3)
    hot_wait = j["wt"].to_numpy()[per["hot"].to_numpy()]
    per["wait_share"] = np.where(per["wsum"] > 0, hot_wait / per["wsum"].where(per["wsum"] > 0, 1.0), np.nan).round(3)
    rrest = (per["rsum"] - per["rmax"]) / (per["n"] - 1)
    per["rcv_imbalance"] = np.where(rrest > 0, per["rmax"] / rrest.where(rrest > 0, 1.0),
                                    np.where(per["rmax"] > 0, 1000.0, np.nan)).clip(max=1000.0).round(2)
    fabric_max = float(per["imbalance"].max())
    # findings for the skewed switches (and always the most skewed one, which carries the fabric-wide maximum
    # that says "every switch is even"); a balanced 1,000-leaf fabric does not need 1,000 findings
    report = per[per["imbalance"] >= SKEW_REPORT_FLOOR].sort_values("imbalance", ascending=False, kind="stable")
    report = report.head(MAX_SKEW_FINDINGS)
    if report.empty:
        report = per.sort_values("imbalance", ascending=False, kind="stable").head(1)
    # evidence candidates: the XmitData/XmitWait series of the reported switches, in table order
    ev = np.flatnonzero((c_code != UPLINK_COUNTERS.index("port_rcv_data")) & is_sw[code[idx]]
                        & pd.Index(names).isin(report.index)[code[idx]])
    ev_series = pd.DataFrame({"sw": names[code[idx[ev]]], "port": port[idx[ev]],
                              "start": t["start"].to_numpy()[rows[ev]], "end": t["end"].to_numpy()[rows[ev]]})
    return _skew_findings(ctx, report.sort_index(), j, rows_of, ports, ev_series, round(fabric_max, 2), len(per))


def _skew_findings(ctx: Context, report: pd.DataFrame, j: pd.DataFrame, rows_of: dict[str, np.ndarray],
                   ports: pd.DataFrame, ev: pd.DataFrame, fabric_max: float, switches: int) -> list[Finding]:
    """One uplink_load_skew finding per reported switch, named from the fabric model or the topology text."""
    table = ctx.counters
    fab = ctx.fabric

    def name_of(g: str | None) -> str | None:  # operator-facing names: 'spine-03', not the raw NodeDesc
        return fab.name(g) if fab is not None and g is not None and g in fab.graph else None

    mine = ports[ports["sw"].isin(report.index)]
    cable = {k: i for i, k in enumerate(zip(mine["sw"].tolist(), mine["port"].tolist(), strict=True))}
    xm, port_no = j["xm"].to_numpy(), j["port"].to_numpy()
    ev_sw, ev_port, ev_start, ev_end = (ev[c].to_numpy() for c in ("sw", "port", "start", "end"))
    drafts: list[tuple[str, Location, dict[str, object], list[int]]] = []
    for sw, s in report.iterrows():
        sw = str(sw)
        pos, hot = rows_of[sw], int(s["hot"])
        others = pos[pos != hot]
        hot_port = int(port_no[hot])
        c = cable[(sw, hot_port)]
        peer_guid = sval(mine["peer_guid"].iat[c])
        peer_name = name_of(peer_guid)
        peer: str | None
        if peer_name is not None:
            peer, name = peer_name, name_of(sw) or sval(mine["description"].iat[c]) or sw
        else:
            peer, name = sval(mine["peer_description"].iat[c]) or peer_guid, sval(mine["description"].iat[c]) or sw
        gb = float(xm[hot]) * 4 / 1e9
        other_gb = float(np.mean(xm[others])) * 4 / 1e9
        what = "between snapshots" if s["delta"] else "since the counters were last cleared (one snapshot)"
        wait_share = None if pd.isna(s["wait_share"]) else float(s["wait_share"])
        rcv_imb = None if pd.isna(s["rcv_imbalance"]) else float(s["rcv_imbalance"])
        wait_txt = f", {wait_share * 100:.0f}% of the uplinks' PortXmitWait" if wait_share is not None else ""
        # evidence: the XmitData/XmitWait samples of the hot uplink and of two siblings
        sel = np.flatnonzero((ev_sw == sw) & np.isin(ev_port, [hot_port, *port_no[others[:2]].tolist()]))
        ev_rows = [r for i in sel.tolist() for r in range(int(ev_start[i]), int(ev_end[i]))]
        drafts.append((
            f"{name} uplink port {hot_port} (to {peer}) sent {gb:.1f} GB {what}, "
            f"{float(s['imbalance']):g}x the mean of its {len(others)} sibling uplink(s) ({other_gb:.1f} GB){wait_txt}.",
            Location(device=name, port=hot_port, peer=str(peer) if peer else None),
            {"switch_guid": sw, "uplinks": int(s["n"]), "hot_port": hot_port,
             "imbalance": float(s["imbalance"]), "top_share": float(s["top_share"]), "wait_share": wait_share,
             "rcv_imbalance": rcv_imb, "delta": bool(s["delta"]), "fabric_max_imbalance": fabric_max,
             "switches": switches},
            ev_rows,
        ))
    # the cited samples of all reported switches read at once (one pass per dump file, not one per line)
    cited = table.frame(sorted({r for *_, rows in drafts for r in rows}))
    sample = dict(zip(cited.index.tolist(), zip(cited["source"].tolist(), cited["line"].tolist(),
                                                 cited["text"].tolist(), strict=True), strict=True))
    return [finding("uplink_load_skew", summary, None, loc, attrs,  # type: ignore[arg-type]
                    evidence=_unique_refs([sample[r] for r in rows], "uplink_load_skew"))
            for summary, loc, attrs, rows in drafts]


# --------------------------------------------------------------------------------------------- RoCE priorities

_PRIO = re.compile(r"^(?P<dir>rx|tx)_prio(?P<p>[0-7])_(?P<what>bytes|packets|pause|pause_duration|pause_transition"
                   r"|buf_discard|cong_discard|marked|discards)$")


def _by_host(hosts: np.ndarray) -> dict[str, np.ndarray]:
    """Row positions of each host key (in row order), in host order: a per-host filter of a 128-host frame
    is then a lookup, not a comparison of every row."""
    codes, uniq = pd.factorize(hosts, sort=True)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniq) + 1))
    return {str(h): order[bounds[i]:bounds[i + 1]] for i, h in enumerate(uniq)}


def _select(df: pd.DataFrame, rows: np.ndarray | None, **wanted: set[str]) -> pd.DataFrame:
    """The rows at positions ``rows`` (e.g. one host's) whose columns hold one of the wanted values
    (``column={values}``), in row order: a few hundred set lookups instead of masks over the whole frame."""
    at = rows.tolist() if rows is not None else []
    for c, v in wanted.items():
        col = df[c].to_numpy(object)
        at = [i for i in at if col[i] in v]
    return df.iloc[at]


def _nic_stats(ctx: Context) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """NicStat with its keys (``host_k``: host or '', ``dev_k``: netdev or the file) and the rows of each host;
    once per run (traffic_class and roce_lossless both ask; callers must not change it)."""
    cached = ctx.cache.get("nic_stats")
    if cached is None:
        ns = ctx.frame("NicStat")
        if not ns.empty:
            ns = ns.assign(host_k=ns["host"].fillna(""), dev_k=ns["netdev"].fillna(ns["source"].astype(str)))
        cached = (ns, _by_host(ns["host_k"].to_numpy(object)) if not ns.empty else {})
        ctx.cache["nic_stats"] = cached
    return cached  # type: ignore[return-value]


def _prio_stats(ctx: Context) -> pd.DataFrame:
    """One row per (host, netdev, prio): bytes, pause frames (amount = delta or cumulative), PFC enabled.

    Sorted by host, netdev and prio; the counter names are matched once per distinct name."""
    ns, _ = _nic_stats(ctx)
    if ns.empty:
        return pd.DataFrame()
    c_code, c_uniq = pd.factorize(ns["counter"].astype(str))
    ext = pd.Series(c_uniq, dtype=object).str.extract(_PRIO)
    hit = ext["p"].notna().to_numpy()
    keep = hit[c_code]
    if not keep.any():
        return pd.DataFrame()
    sel = ns[keep].copy()
    sel["prio"] = ext["p"].to_numpy(object)[c_code[keep]].astype(int)
    sel["what"] = (ext["dir"] + "_" + ext["what"]).to_numpy(object)[c_code[keep]]
    series = _counter_series(sel, ["host_k", "dev_k", "prio", "what"])
    series["amount"] = series["delta"].where(series["delta"].notna(), series["last"].astype(float))
    wide = series.pivot_table(index=["host_k", "dev_k", "prio"], columns="what", values="amount", aggfunc="last")
    for c in ("rx_bytes", "tx_bytes", "rx_pause", "tx_pause"):
        if c not in wide:
            wide[c] = float("nan")
    present = sel.assign(_pfc=sel["what"].isin(["rx_pause", "tx_pause"]), _bytes=sel["what"].isin(["rx_bytes", "tx_bytes"]))
    present = present.groupby(["host_k", "dev_k", "prio"])[["_pfc", "_bytes"]].any().reindex(wide.index)
    wide["pfc"] = present["_pfc"].fillna(False)
    wide["has_bytes"] = present["_bytes"].fillna(False)
    wide["bytes"] = wide[["rx_bytes", "tx_bytes"]].fillna(0.0).sum(axis=1)
    wide["pause"] = wide[["rx_pause", "tx_pause"]].fillna(0.0).sum(axis=1)
    wide["delta"] = series.groupby(["host_k", "dev_k", "prio"])["snaps"].max().reindex(wide.index) > 1
    return wide.reset_index()


def _prio_rows(ctx: Context, host: str, devs: list[str], prios: list[int], whats: tuple[str, ...]) -> pd.DataFrame:
    ns, by_host = _nic_stats(ctx)
    names = {f"{d}_prio{p}_{w}" for d in ("rx", "tx") for p in prios for w in whats}
    return _select(ns, by_host.get(host), dev_k=set(devs), counter=names)


def _runs(keys: list[tuple[object, ...]]) -> list[tuple[int, int]]:
    """(start, end) of each run of equal consecutive keys."""
    cut = [i for i in range(1, len(keys)) if keys[i] != keys[i - 1]]
    return list(zip([0, *cut], [*cut, len(keys)], strict=True))


class _PrioVerdict(TypedDict):
    """What traffic_class gathers for one (verdict, traffic priority, PFC priorities) of a host."""

    share: float
    delta: bool
    pause: str
    pause_on_traffic: bool
    gb: float


@extractor(reads=("EnvSetting", "IbPort", "NcclNetInit", "NicStat"),
           emits=("nccl_tc_lossless", "nccl_tc_not_lossless", "roce_pfc_disabled", "roce_traffic_off_lossless_prio",
                  "roce_traffic_on_lossless_prio"))
def traffic_class(ctx: Context) -> list[Finding]:
    """Which priority the RoCE traffic rides on, which priorities are lossless (PFC), and NCCL's traffic class."""
    out: list[Finding] = []
    lls = _host_link_layers(ctx)
    st = _prio_stats(ctx)
    pfc_all: set[int] = set()
    if not st.empty:
        # one pass over the (host, netdev, prio) rows as lists: a 128-host RoCE bundle has 1,000 netdevs
        host_k, dev_k, prio = st["host_k"].tolist(), st["dev_k"].tolist(), [int(p) for p in st["prio"].tolist()]
        pfc_f, has_bytes, pause, delta = (st[c].tolist() for c in ("pfc", "has_bytes", "pause", "delta"))
        byt = st["bytes"].to_numpy(float)
        devs_of: dict[str, list[tuple[str, int, int]]] = {}  # host -> its netdevs' row runs, in order
        for a, b in _runs(list(zip(host_k, dev_k, strict=True))):
            devs_of.setdefault(host_k[a], []).append((dev_k[a], a, b))
        for host, dev_runs in devs_of.items():
            verdicts: dict[tuple[str, int, str], list[str]] = {}
            info: dict[tuple[str, int, str], _PrioVerdict] = {}
            for dev, a, b in dev_runs:
                pfc = sorted(prio[i] for i in range(a, b) if pfc_f[i])
                pfc_all.update(pfc)
                if not any(has_bytes[a:b]):
                    continue
                total = float(byt[a:b].sum())
                if total <= 0:
                    continue
                top = a + int(np.argmax(byt[a:b]))
                tprio = prio[top]
                share = round(float(byt[top]) / total, 3)
                pause_prios = sorted(prio[i] for i in range(a, b) if pause[i] > 0)
                pfc_s = ",".join(map(str, pfc)) or "none"
                if not pfc:
                    kind = "roce_pfc_disabled"
                elif tprio in pfc:
                    kind = "roce_traffic_on_lossless_prio"
                else:
                    kind = "roce_traffic_off_lossless_prio"
                key = (kind, tprio, pfc_s)
                verdicts.setdefault(key, []).append(str(dev))
                cur = info.setdefault(key, {"share": share, "delta": any(delta[a:b]),
                                            "pause": ",".join(map(str, pause_prios)) or "none",
                                            "pause_on_traffic": tprio in pause_prios, "gb": 0.0})
                cur["share"] = min(float(cur["share"]), share)
                cur["gb"] = float(cur["gb"]) + float(byt[top]) / 1e9
            for (kind, tprio, pfc_s), devs in sorted(verdicts.items()):
                i = info[(kind, tprio, pfc_s)]
                what = "between snapshots" if i["delta"] else "(cumulative)"
                where = f"{host + ' ' if host else ''}{', '.join(devs[:4])}{' and more' if len(devs) > 4 else ''}"
                if kind == "roce_pfc_disabled":
                    summary = (f"{where}: no per-priority pause counters, so PFC is enabled on no priority; traffic"
                               f" rides priority {tprio} ({float(i['share']) * 100:.0f}% of the bytes {what}).")
                elif kind == "roce_traffic_on_lossless_prio":
                    summary = (f"{where}: {float(i['share']) * 100:.0f}% of the bytes {what} ride priority {tprio},"
                               f" the PFC (lossless) priority.")
                else:
                    paused = (f"pause frames counted on priority {i['pause']}" if i["pause"] != "none"
                              else "no pause frames counted")
                    summary = (f"{where}: {float(i['share']) * 100:.0f}% of the bytes {what} ride priority {tprio},"
                               f" while PFC is enabled only on priority {pfc_s} ({paused}).")
                ev = _prio_rows(ctx, str(host), devs, sorted({tprio, *[_int(p) or 0 for p in pfc_s.split(',')
                                                                       if p != 'none']}), ("bytes", "pause"))
                out.append(finding(
                    kind, summary, None,
                    Location(host=str(host) or None, device=devs[0] if len(devs) == 1 else None),
                    {"traffic_prio": tprio, "traffic_share": float(i["share"]), "pfc_prios": pfc_s,
                     "pause_prios": str(i["pause"]), "pause_on_traffic_prio": bool(i["pause_on_traffic"]),
                     "netdevs": len(devs), "delta": bool(i["delta"]), "gbytes": round(float(i["gb"]), 1)},
                    evidence=_rows_refs(ev, kind),
                ))
    # NCCL's traffic class against the lossless priorities (default DSCP->priority map: prio = DSCP >> 3)
    tc = _env(ctx, "NCCL_IB_TC")
    roce = "RoCE" in lls.values()
    if pfc_all and (roce or not tc.empty or not st.empty):
        if not tc.empty:
            row = tc.iloc[-1]
            tcv = _int(row["value"])
            src = tc.tail(1)
        else:
            tcv, src = 0, None
        if tcv is not None:
            dscp = tcv >> 2
            tc_prio = dscp >> 3
            pfc_s = ",".join(map(str, sorted(pfc_all)))
            kind = "nccl_tc_lossless" if tc_prio in pfc_all else "nccl_tc_not_lossless"
            set_txt = f"NCCL_IB_TC={tcv}" if src is not None else "NCCL_IB_TC is not set (traffic class 0)"
            out.append(finding(
                kind,
                f"{set_txt}: DSCP {dscp}, priority {tc_prio} by the default DSCP map, "
                + ("a PFC-enabled priority." if kind == "nccl_tc_lossless"
                   else f"but PFC is enabled only on priority {pfc_s}."),
                src, Location(host=sval(src.iloc[0]["host"])) if src is not None else None,
                {"tc": tcv, "dscp": dscp, "prio": tc_prio, "pfc_prios": pfc_s, "set": src is not None},
            ))
    return out


# --------------------------------------------------------------------------------------------- RoCE lossless

LOSS_COUNTERS = ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "roce_adp_retrans",
                 "implied_nak_seq_err")
CNP_COUNTERS = ("np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets")
_STORM = ("tx_pause_storm_warning_events", "tx_pause_storm_error_events")
_DROPS = re.compile(r"^(?:rx_discards_phy|rx_out_of_buffer|rx_prio[0-7]_buf_discard|rx_prio[0-7]_cong_discard"
                    r"|rx_prio[0-7]_discards)$")
_PAUSE = re.compile(r"^(?:rx|tx)_prio[0-7]_pause$")


def _sums_by_host(series: pd.DataFrame, key: str) -> dict[str, list[tuple[str, float]]]:
    """host -> [(``key`` value, summed amount)] in key order (missing keys left out), one groupby for all hosts:
    a group's rows and their order are those of a groupby of the host's rows alone, so are the sums."""
    sums = series.groupby(["host_k", key], sort=True)["amount"].sum()
    out: dict[str, list[tuple[str, float]]] = {}
    for (host, k), v in zip(sums.index.tolist(), sums.tolist(), strict=True):
        out.setdefault(host, []).append((k, v))
    return out


def _matching(col: pd.Series, pattern: re.Pattern[str]) -> np.ndarray:
    """``col.astype(str).str.match(pattern)``, matched once per distinct value."""
    code, uniq = pd.factorize(col.astype(str))
    return np.array([pattern.match(u) is not None for u in uniq], dtype=bool)[code]


@extractor(reads=("IbPort", "NcclNetInit", "NicStat", "RdmaHwCounter"),
           emits=("nic_rx_drops", "pfc_pause_frames", "pfc_pause_storm", "roce_transport_counters"))
def roce_lossless(ctx: Context) -> list[Finding]:
    """RoCE transport loss against congestion notification, pause storms and NIC receive drops.

    Per host from arrays and per-host row positions (a 128-host bundle has 1,000 netdevs and 30k counter rows);
    per-counter and per-device sums from one groupby over all hosts."""
    out: list[Finding] = []
    lls = _host_link_layers(ctx)
    hw = ctx.frame("RdmaHwCounter")
    if not hw.empty:
        hw = hw[hw["counter"].isin(LOSS_COUNTERS + CNP_COUNTERS)].copy()
    if not hw.empty:
        hw["host_k"] = hw["host"].fillna("")
        hw["port_k"] = hw["port"].fillna(-1).astype(int)
        cnp_present = set(hw.loc[hw["counter"].isin(CNP_COUNTERS), "host_k"].tolist())
        series = _counter_series(hw, ["host_k", "device", "port_k", "counter"])
        series["amount"] = series["delta"].where(series["delta"].notna(), series["last"].astype(float))
        is_loss = series["counter"].isin(LOSS_COUNTERS).to_numpy()
        loss_by_dev = _sums_by_host(series[is_loss], "device")
        loss_by_counter = _sums_by_host(series[is_loss], "counter")
        cnp_by_counter = _sums_by_host(series[~is_loss], "counter")
        amount, snaps_a = series["amount"].to_numpy(float), series["snaps"].to_numpy()
        device = series["device"].to_numpy(object)
        ev_src = ctx.frame("RdmaHwCounter")
        ev_hosts = _by_host(ev_src["host"].fillna("").to_numpy(object))
        for host, pos in _by_host(series["host_k"].to_numpy(object)).items():
            ll = lls.get(host) or lls.get("*")
            if ll == "IB" or (ll is None and host not in cnp_present):
                continue  # congestion-notification counters exist only on RoCE ports
            lp, cp = pos[is_loss[pos]], pos[~is_loss[pos]]
            snaps = int(snaps_a[pos].max())
            loss_amt = float(amount[lp].sum())
            cnp_amt = float(amount[cp].sum())
            by_dev = loss_by_dev.get(host, [])
            top = max((v for _, v in by_dev), default=0.0)
            worst = str(next(d for d, v in by_dev if v == top)) if top > 0 else None
            per = loss_by_counter.get(host, [])
            parts = ", ".join(f"{c} +{int(v)}" if snaps > 1 else f"{c} {int(v)}" for c, v in per if v > 0)
            rising = snaps > 1 and loss_amt > 0
            cnp_txt = ", ".join(f"{c} {'+' if snaps > 1 else ''}{int(v)}" for c, v in cnp_by_counter.get(host, []))
            wanted = {"counter": {*[c for c, v in per if v > 0], *CNP_COUNTERS}}
            ev = _select(ev_src, ev_hosts.get(host), **wanted, **({"device": {worst}} if worst is not None else {}))
            out.append(finding(
                "roce_transport_counters",
                f"{host or 'RoCE HCAs'}: " + (f"loss/retransmission counters {parts}" if parts
                                              else "no loss/retransmission counted")
                + (" between snapshots" if snaps > 1 else "") + f"; congestion notification: {cnp_txt or 'not captured'}.",
                None, Location(host=str(host) or None, device=worst),
                {"loss": int(loss_amt), "loss_rising": rising, "cnp": int(cnp_amt),
                 "cnp_rising": snaps > 1 and cnp_amt > 0, "cnp_zero": len(cp) > 0 and cnp_amt == 0,
                 "snapshots": snaps, "devices": len({d for d in device[pos].tolist() if not pd.isna(d)})},
                evidence=_rows_refs(ev, "roce_transport_counters"),
            ))
    ns, _ = _nic_stats(ctx)
    if ns.empty:
        return out
    storm = ns[ns["counter"].isin(_STORM)]
    if not storm.empty:
        s = _counter_series(storm, ["host_k", "dev_k", "counter"])
        last, counter = s["last"].to_numpy(), s["counter"].to_numpy(object)
        storm_hosts = _by_host(storm["host_k"].to_numpy(object))
        for host, pos in _by_host(s["host_k"].to_numpy(object)).items():
            err, warn = (last[pos[counter[pos] == c]] for c in ("tx_pause_storm_error_events",
                                                                 "tx_pause_storm_warning_events"))
            err_n, warn_n = int(np.nanmax(err)) if len(err) else 0, int(np.nanmax(warn)) if len(warn) else 0
            if err_n == 0 and warn_n == 0:
                continue
            g = s.iloc[pos]
            rising = bool((g["delta"].fillna(0) > 0).any())
            devs = sorted(set(g.loc[g["last"] > 0, "dev_k"]))
            rows = _select(storm, storm_hosts[host], dev_k=set(devs))
            out.append(finding(
                "pfc_pause_storm",
                f"{host + ' ' if host else ''}{', '.join(devs)}: the NIC hit its pause-storm watchdog"
                f" (tx_pause_storm_error_events {err_n}, warning events {warn_n}"
                f"{', rising between snapshots' if rising else ''}): it paused the link for too long and stopped"
                " honouring PFC, so drops could occur.",
                None, Location(host=str(host) or None, device=devs[0] if len(devs) == 1 else None),
                {"error_events": err_n, "warning_events": warn_n, "rising": rising, "netdevs": len(devs)},
                evidence=_rows_refs(rows, "pfc_pause_storm"),
            ))
    drops = ns[_matching(ns["counter"], _DROPS)]
    if not drops.empty:
        s = _counter_series(drops, ["host_k", "dev_k", "counter"])
        s["amount"] = s["delta"].where(s["delta"].notna(), s["last"].astype(float))
        amount, snaps_a, dev = s["amount"].to_numpy(float), s["snaps"].to_numpy(), s["dev_k"].to_numpy(object)
        per_counter = _sums_by_host(s, "counter")
        drop_hosts = _by_host(drops["host_k"].to_numpy(object))
        for host, pos in _by_host(s["host_k"].to_numpy(object)).items():
            amt = float(amount[pos].sum())
            if amt <= 0:
                continue
            snaps = int(snaps_a[pos].max())
            per = per_counter.get(host, [])
            devs = sorted(set(dev[pos[amount[pos] > 0]].tolist()))
            rows = _select(drops, drop_hosts[host], dev_k=set(devs), counter={c for c, v in per if v > 0})
            out.append(finding(
                "nic_rx_drops",
                f"{host + ' ' if host else ''}{', '.join(devs[:4])}: the NIC dropped received packets ("
                + ", ".join(f"{c} {'+' if snaps > 1 else ''}{int(v)}" for c, v in per if v > 0)
                + (" between snapshots" if snaps > 1 else "") + ").",
                None, Location(host=str(host) or None, device=devs[0] if len(devs) == 1 else None),
                {"drops": int(amt), "rising": snaps > 1, "netdevs": len(devs)},
                evidence=_rows_refs(rows, "nic_rx_drops"),
            ))
    pause = ns[_matching(ns["counter"], _PAUSE)]
    if not pause.empty:
        s = _counter_series(pause, ["host_k", "dev_k", "counter"])
        s["amount"] = s["delta"].where(s["delta"].notna(), s["last"].astype(float))
        amount, snaps_a, dev = s["amount"].to_numpy(float), s["snaps"].to_numpy(), s["dev_k"].to_numpy(object)
        counter = s["counter"].to_numpy(object)
        pause_hosts = _by_host(pause["host_k"].to_numpy(object))
        for host, pos in _by_host(s["host_k"].to_numpy(object)).items():
            amt = float(amount[pos].sum())
            snaps = int(snaps_a[pos].max())
            if amt <= 0:
                continue
            a, c = amount[pos], counter[pos]
            rx = float(a[np.array([str(x).startswith("rx") for x in c], dtype=bool)].sum())
            tx = float(a[np.array([str(x).startswith("tx") for x in c], dtype=bool)].sum())
            prios = sorted({int(x[7]) for x in c[a > 0]})
            devs = sorted(set(dev[pos[a > 0]].tolist()))
            rows = _select(pause, pause_hosts[host], dev_k=set(devs))
            out.append(finding(
                "pfc_pause_frames",
                f"{host + ' ' if host else ''}{', '.join(devs[:4])}: {'+' if snaps > 1 else ''}{int(rx)} pause frames"
                f" received and {'+' if snaps > 1 else ''}{int(tx)} sent on priority {','.join(map(str, prios))}"
                + (" between snapshots." if snaps > 1 else " (cumulative)."),
                None, Location(host=str(host) or None, device=devs[0] if len(devs) == 1 else None),
                {"rx_pause": int(rx), "tx_pause": int(tx), "rising": snaps > 1, "prios": ",".join(map(str, prios)),
                 "one_way": (rx == 0) != (tx == 0)},
                evidence=_rows_refs(rows, "pfc_pause_frames", 4),
            ))
    return out


# --------------------------------------------------------------------------------------------- rails

_QP_TIMEOUT = re.compile(
    r"(?P<m>ibv_modify_qp failed with (?:110 Connection timed out|error Connection timed out(?: errno 110)?))"
    r"(?:, on dev (?P<dev>[\w.\-]+):(?P<port>\d+), curr state (?P<cur>\w+), next state (?P<next>\w+),"
    r" local GID index (?P<gidx>-?\d+), local GID (?P<lgid>[0-9a-fA-F:.]+|N/A), remote GID (?P<rgid>[0-9a-fA-F:.]+|N/A))?",
)


def _gid_key(gid: object) -> str | None:
    s = sval(gid)
    if not s or s == "N/A":
        return None
    try:
        return str(ipaddress.IPv6Address(s.strip()).exploded)
    except ValueError:
        return None


@extractor(reads=("CudaError", "EnvSetting", "FreeText", "GidEntry", "KernelEvent", "MessageHit", "Mlx5Event",
                  "NcclChannel", "NcclGraph", "NcclWarn", "PeermemEvent", "PgError", "ToolError", "WatchdogTimeout"),
           emits=("nccl_cross_nic", "nccl_net_pairs_cross_nic", "nccl_net_pairs_same_nic", "pxn_disabled_env",
                  "qp_rtr_timeout"))
def rail_reachability(ctx: Context) -> list[Finding]:
    """Queue pairs that time out moving to RTR (errno 110), resolved to rails, and NCCL's cross-NIC setting."""
    out: list[Finding] = []
    msgs = ctx.messages
    if not msgs.empty:
        # the regex only on the lines that carry its fixed part (a 4,096-host job log has ~1M messages)
        msgs = msgs[msgs["message"].str.contains("ibv_modify_qp failed with ", regex=False, na=False)]
        ext = msgs["message"].str.extract(_QP_TIMEOUT)
        hit = primary(msgs[ext["m"].notna()]).copy()
        if not hit.empty:
            for c in ("dev", "lgid", "rgid", "next"):
                hit[c] = ext.loc[hit.index, c]
            gids = ctx.frame("GidEntry")
            owner: dict[str, tuple[str, str]] = {}
            if not gids.empty:
                for h, d, g in zip(gids["host"].fillna(""), gids["device"], gids["gid"], strict=True):
                    k = _gid_key(g)
                    if k and not k.startswith("fe80") and k.strip("0:"):
                        owner.setdefault(k, (str(h), str(d)))
            cross = same = 0
            pairs: list[str] = []
            for _, r in hit.iterrows():
                lk, rk = _gid_key(r["lgid"]), _gid_key(r["rgid"])
                ldev = sval(r["dev"]) or (owner[lk][1] if lk in owner else None)
                rem = owner.get(rk) if rk else None
                if ldev and rem:
                    if rem[1] == ldev:
                        same += 1
                    else:
                        cross += 1
                    pairs.append(f"{ldev} -> {rem[0] + ' ' if rem[0] else ''}{rem[1]}")
            hosts = sorted({str(h) for h in hit["host"].dropna()})
            devs = sorted({str(d) for d in hit["dev"].dropna()})
            resolved = cross + same
            link_local = bool(hit["lgid"].fillna("").str.lower().str.startswith("fe80").any())
            txt = (f"; {cross} of {resolved} resolved pair(s) join different rails ({', '.join(sorted(set(pairs))[:3])})"
                   if resolved else "; the remote end is not resolved to a device (no GIDs in the message or no GID"
                   " table for it)")
            out.append(finding(
                "qp_rtr_timeout",
                f"{len(hit)} queue pair(s) timed out (errno 110) moving to RTR on {hosts_label(hosts) or 'the job'}"
                + (f" ({', '.join(devs[:4])})" if devs else "") + txt + ".",
                hit, Location(host=hosts[0] if len(hosts) == 1 else None, device=devs[0] if len(devs) == 1 else None,
                              peer=pairs[0].split(" -> ")[1] if len(set(pairs)) == 1 else None),
                {"lines": len(hit), "hosts": len(hosts), "resolved": resolved, "cross_rail_pairs": cross,
                 "same_rail_pairs": same, "cross_rail": cross > 0 and same == 0,
                 "gids_in_message": bool(hit["lgid"].notna().any()), "link_local_gid": link_local},
            ))
    out.extend(_net_pairs(ctx))
    pxn = _env(ctx, "NCCL_PXN_DISABLE")
    if not pxn.empty and _int(pxn.iloc[-1]["value"]) == 1:
        out.append(finding(
            "pxn_disabled_env",
            "NCCL_PXN_DISABLE=1: NCCL cannot move data over NVLink to the GPU on the destination's rail, so"
            " point-to-point traffic leaves each node on the sending GPU's own NIC.",
            pxn.tail(1), Location(host=_one(pxn["host"])),
        ))
    env = _env(ctx, "NCCL_CROSS_NIC")
    graph = ctx.frame("NcclGraph")
    gx = graph[graph["cross_nic"] == 1] if not graph.empty else graph
    if not env.empty or not gx.empty:
        ev = _int(env.iloc[-1]["value"]) if not env.empty else None
        parts = []
        if ev is not None:
            parts.append(f"NCCL_CROSS_NIC={ev}")
        if not gx.empty:
            parts.append(f"{len(gx)} NCCL graph(s) searched with crossNic 1 (rings/trees may leave a node on another NIC"
                         " than they entered)")
        src = pd.concat([x for x in (env.tail(1), gx.head(3)) if not x.empty])
        out.append(finding(
            "nccl_cross_nic",
            "; ".join(parts) + ".",
            src, Location(host=_one(pd.concat([env["host"], gx["host"]]) if not gx.empty else env["host"])),
            {"env_value": ev, "graph_cross": not gx.empty, "graphs": len(gx),
             "allowed": (ev == 1) or not gx.empty},
        ))
    return out


_NET_CH = re.compile(r"Channel (?P<ch>\d+)/(?P<ci>\d+) : (?P<src>\d+)\[(?P<sd>\d+)\] -> (?P<dst>\d+)\[(?P<dd>\d+)\]"
                     r" \[(?P<dir>send|receive)\] via NET/\w+/(?P<nic>\d+)")
_WORD = re.compile(r"\w+")
_CONNECTION = ["channel", "conn", "rank", "nvml_dev", "peer", "peer_nvml_dev"]  # what names a connection


def _net_pairs(ctx: Context) -> list[Finding]:
    """Both ends of NCCL's inter-node connections: a [send] line on one host and the matching [receive] line on
    another; the NIC index each side uses tells whether the connection joins two rails.

    On integer codes of the parsed columns (a 4,096-host job logs ~130k NET channel lines): the lines that print
    the whole connection (``Channel c/i : r[d] -> p[e] [send|receive] via NET/<net>/<nic>``), the [send] lines,
    each (connection, host) once, in log order, each joined to the matching [receive] lines (also each once per
    host) in log order, which is the inner merge of the two."""
    ch = ctx.frame("NcclChannel")
    if ch.empty or "transport" not in ch or not set(_CONNECTION).issubset(ch.columns):
        return []
    net = ch.loc[(ch["transport"] == "NET").to_numpy(), ["source", "line", "text", "host", "direction", "net",
                                                          "net_dev", *_CONNECTION]]
    if net.empty:
        return []
    net_codes, nets = pd.factorize(net["net"].to_numpy(object))  # a handful of networks: IB, Socket...
    word = np.array([isinstance(v, str) and _WORD.fullmatch(v) is not None for v in nets] + [False])
    whole = (net["conn"].notna() & net["net_dev"].notna() & net["direction"].isin(["send", "receive"])).to_numpy()
    net = net[whole & word[net_codes]]
    if net.empty:
        return []
    texts, host_raw = net["text"].tolist(), net["host"].to_numpy(object)
    direction, nic = net["direction"].to_numpy(object), net["net_dev"].to_numpy().astype(np.int64)
    key = np.zeros(len(net), dtype=np.int64)
    for col in _CONNECTION:  # the connection's numbers combined into one code (mixed radix over their distinct values)
        codes, uniq = pd.factorize(net[col].to_numpy())
        key = pd.factorize(key * len(uniq) + codes)[0].astype(np.int64)
    host, h_uniq = pd.factorize(host_raw)  # a missing host (-1) is a host of its own here
    empty = int(pd.Index(h_uniq).get_indexer([""])[0])  # -1 when no host is ""
    host_eq = np.where(host < 0, empty, host)  # but not when the two ends are compared (missing == "")

    def first_per_host(rows: np.ndarray) -> np.ndarray:
        """The first of ``rows`` (ascending) of each (connection, host), in row order."""
        kh = key[rows].astype(np.int64) * (int(host.max()) + 2) + host[rows] + 1
        return rows[np.sort(np.unique(kh, return_index=True)[1])]

    sends = first_per_host(np.flatnonzero(direction == "send"))
    recvs = first_per_host(np.flatnonzero(direction == "receive"))
    recvs = recvs[np.argsort(key[recvs], kind="stable")]  # by connection, each in row order
    # every [send] row against the [receive] rows of its connection: sends in row order, then receives
    lo = np.searchsorted(key[recvs], key[sends], "left")
    n = np.searchsorted(key[recvs], key[sends], "right") - lo
    pair_s = np.repeat(sends, n)
    pair_r = recvs[np.repeat(lo - np.cumsum(n) + n, n) + np.arange(int(n.sum()))]
    apart = host_eq[pair_s] != host_eq[pair_r]
    pair_s, pair_r = pair_s[apart], pair_r[apart]
    n_pairs = len(pair_s)
    if not n_pairs:
        return []
    cross = nic[pair_s] != nic[pair_r]
    n_crossed = int(cross.sum())
    same = pair_s[:2].tolist()  # the first pairs' [send] rows and the first crossed pairs, for evidence
    crossed = list(zip(pair_s[cross][:3].tolist(), pair_r[cross][:3].tolist(), strict=True))
    attrs: dict[str, str | int | float | bool | None] = {"pairs": n_pairs, "cross_pairs": n_crossed,
                                                          "same_pairs": n_pairs - n_crossed}
    src, line = net["source"].to_numpy(object), net["line"].to_numpy()

    def ref(i: int, kind: str) -> EvidenceRef:
        return EvidenceRef(file=str(src[i]), line=int(line[i]), text=str(texts[i]), finding=kind)

    if not crossed:
        return [finding("nccl_net_pairs_same_nic",
                        f"All {n_pairs} inter-node NCCL connection(s) seen from both ends use the same NIC index on"
                        " both hosts (rail-aligned).", None, attrs=attrs,
                        evidence=[ref(si, "nccl_net_pairs_same_nic") for si in same])]
    s0, r0 = crossed[0]
    c0 = _NET_CH.search(texts[s0]) if isinstance(texts[s0], str) else None
    if c0 is not None:  # the connection as the line prints it
        conn = f"{c0['ch']}/{c0['ci']} {c0['src']}[{c0['sd']}] -> {c0['dst']}[{c0['dd']}]"
    else:  # (a line cut short) as NCCL prints it
        c, i, r, d, p, e = (int(net[k].iloc[s0]) for k in _CONNECTION)
        conn = f"{c:02d}/{i} {r}[{d}] -> {p}[{e}]"
    # the summary prints the host column's value ('nan' when missing)
    ev = [ref(i, "nccl_net_pairs_cross_nic") for si, ri in crossed for i in (si, ri)]
    return [finding(
        "nccl_net_pairs_cross_nic",
        f"{n_crossed} of {n_pairs} inter-node NCCL connection(s) leave one host on one NIC index and arrive on"
        f" another (e.g. channel {conn}: NET/"
        f"{nic[s0]} on {host_raw[s0]}, NET/{nic[r0]} on {host_raw[r0]}): cross-rail on a rail-optimized fabric.",
        None, Location(host=sval(host_raw[s0]), peer=sval(host_raw[r0])), attrs, evidence=ev[:8],
    )]


# --------------------------------------------------------------------------------------------- MTU

_MTU_ENUM = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}


@extractor(reads=("IbPort", "NcclNetInit", "NcclQpInfo"),
           emits=("nccl_qp_mtu_mixed", "nccl_qp_mtu_uniform", "port_active_mtu_low", "port_mtu_uniform"))
def mtu_paths(ctx: Context) -> list[Finding]:
    """Active vs maximum MTU of the HCA ports, across hosts, and the MTU NCCL used for its queue pairs."""
    out: list[Finding] = []
    ports = ctx.frame("IbPort")
    if not ports.empty and "active_mtu" in ports and ports["active_mtu"].notna().any():
        act = ports[(ports["state"] == "Active") & ports["active_mtu"].notna()].copy()
        init = ctx.frame("NcclNetInit")
        used: set[str] = set()
        if not init.empty:
            for devs in init[init["net"] == "IB"]["devices"]:
                used.update(devs)
        if used and act["device"].isin(used).any():
            act = act[act["device"].isin(used)]
        act["ll"] = act["link_layer"].fillna("?")
        for ll, grp in act.groupby("ll", sort=True):
            grp = grp.drop_duplicates(["host", "device", "port"], keep="last")
            best = int(grp["active_mtu"].max())
            cap = grp["max_mtu"].astype(float)
            below_max = grp["max_mtu"].notna() & (grp["active_mtu"].astype(float) < cap)
            below_peers = grp["active_mtu"].astype(float) < best
            low = grp[below_max | below_peers]
            roce = ll == "Ethernet"
            for host, hg in low.groupby(low["host"].fillna(""), sort=True):
                mtus = sorted({int(m) for m in hg["active_mtu"]})
                maxes = sorted({int(m) for m in hg["max_mtu"].dropna()})
                devs = sorted(set(hg["device"]))
                bp = bool(below_peers.loc[hg.index].any())
                bm = bool(below_max.loc[hg.index].any())
                out.append(finding(
                    "port_active_mtu_low",
                    f"{host + ' ' if host else ''}{', '.join(devs[:4])}{' and more' if len(devs) > 4 else ''}:"
                    f" active_mtu {'/'.join(map(str, mtus))}"
                    + (f" below max_mtu {'/'.join(map(str, maxes))}" if bm else "")
                    + (f"{' and' if bm else ''} below the {best} of the other {ll} ports" if bp else "")
                    + (" (a RoCE port follows its netdev MTU: 1024 means an interface MTU of 1500)" if roce and 1024 in mtus
                       else "") + ".",
                    hg, Location(host=str(host) or None, device=devs[0] if len(devs) == 1 else None,
                                 port=int(hg.iloc[0]["port"]) if len(devs) == 1 else None),
                    {"active_mtu": mtus[0], "max_mtu": maxes[-1] if maxes else None, "peer_mtu": best,
                     "below_max": bm, "below_peers": bp, "link_layer": ll, "roce": roce, "ports": len(hg)},
                ))
            if low.empty:
                at_max = bool((grp["max_mtu"].isna() | (grp["active_mtu"] >= grp["max_mtu"])).all())
                out.append(finding(
                    "port_mtu_uniform",
                    f"All {len(grp)} active {ll} port(s) run active_mtu {best}"
                    + (" (their max_mtu)." if at_max else "."),
                    grp.head(3), attrs={"mtu": best, "ports": len(grp), "at_max": at_max, "link_layer": ll},
                ))
    qp = ctx.frame("NcclQpInfo")
    if not qp.empty:
        qp = qp.assign(mtu_b=qp["mtu"].map(lambda e: _MTU_ENUM.get(int(e))))
        qp = qp[qp["mtu_b"].notna()]
        if not qp.empty:
            per_host = qp.groupby(qp["host"].fillna(""))["mtu_b"].agg(["min", "max"])
            lo, hi = int(qp["mtu_b"].min()), int(qp["mtu_b"].max())
            if lo != hi:
                low_hosts = sorted(str(h) for h in per_host.index[per_host["min"] < hi])
                rows = pd.concat([qp[qp["mtu_b"] == lo].head(4), qp[qp["mtu_b"] == hi].head(2)])
                out.append(finding(
                    "nccl_qp_mtu_mixed",
                    f"NCCL queue pairs use MTU {lo} on {hosts_label(low_hosts) or 'some ranks'} but {hi} elsewhere"
                    f" (the 'mtu' enum of the NET/IB QP lines): the endpoints' active MTUs differ.",
                    rows, Location(host=low_hosts[0] if len(low_hosts) == 1 else None),
                    {"min_bytes": lo, "max_bytes": hi, "low_hosts": len(low_hosts), "hosts": len(per_host)},
                ))
            else:
                out.append(finding(
                    "nccl_qp_mtu_uniform",
                    f"All {len(qp)} NCCL queue pair line(s) use MTU {lo} on {len(per_host)} host(s).",
                    qp.head(2), attrs={"mtu_bytes": lo, "hosts": len(per_host), "qps": len(qp)},
                ))
    return out
