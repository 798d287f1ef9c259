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

import numpy as np
import pandas as pd

from diagnose.evidence.context import Context, finding, hosts_label, primary, sval
from diagnose.evidence.counters import EARLY_HINT, LATE_HINT
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.links import _strs, _vals
from diagnose.gcpause import gc_paused
from diagnose.models.diagnosis import EvidenceRef, Finding, Location

# --------------------------------------------------------------------------------------------- shared helpers



def _one(values: pd.Series) -> str | None:
    vs = sorted({str(v) for v in values.dropna() if str(v)})
    return vs[0] if len(vs) == 1 else None


def _order(df: pd.DataFrame) -> pd.Series:
    """A global order of snapshot rows: capture time when printed, then before/after file names, then file order."""
    if "timestamp" in df and df["timestamp"].notna().any():
        ts = pd.to_datetime(df["timestamp"], errors="coerce", utc=True, format="mixed")
        ts_i = ts.fillna(pd.Timestamp(0, tz="UTC")).astype("int64").where(ts.notna(), -1)
    else:
        ts_i = pd.Series(-1, index=df.index)
    name = df["source"].astype(str).str.rsplit("/", n=1).str[-1]
    hint = pd.Series(1, index=df.index).mask(name.str.contains(LATE_HINT), 2).mask(name.str.contains(EARLY_HINT), 0)
    key = pd.DataFrame({"ts": ts_i, "hint": hint, "source": df["source"].astype(str), "line": df["line"]})
    idx = key.sort_values(["ts", "hint", "source", "line"], kind="stable").index
    return pd.Series(range(len(idx)), index=idx).reindex(df.index)


def _counter_series(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per key group (one counter of one port): first/last value, snapshots and the increment.

    Increments between consecutive snapshots are summed; a decrease is a reset (what was counted after it is
    the new value itself). ``delta`` is None for a single snapshot.
    """
    df = df.assign(_o=_order(df)).sort_values(keys + ["_o"], kind="stable").reset_index(drop=True)
    same = df[keys].eq(df[keys].shift()).all(axis=1)
    step = df["value"].astype(float).diff()
    df["_inc"] = step.where(same, 0.0).where(~(same & (step < 0)), df["value"].astype(float)).fillna(0.0)
    agg = df.groupby(keys, sort=True, dropna=False).agg(
        first=("value", "first"), last=("value", "last"), snaps=("_o", "size"), inc=("_inc", "sum"),
        line=("line", "last"), source=("source", "last"))
    agg["delta"] = agg["inc"].where(agg["snaps"] > 1)
    return agg.reset_index()


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
                res[host] = "RoCE" if "RoCE" in vals else "IB"
    ports = ctx.frame("IbPort")
    if not ports.empty and "link_layer" in ports:
        act = ports[ports["state"] == "Active"] if (ports["state"] == "Active").any() else ports
        seen: dict[str, set[str]] = {}  # host -> its ports' link layers
        for host, ll in zip(act["host"].fillna("").tolist(), _vals(act["link_layer"]), strict=True):
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
    """(guid -> 'SW'/'CA', lid -> switch guid, links frame with peer_type).

    A 4,096-host fabric has 35k nodes and 200k cable ends: the GUID columns are factorized once and the type
    questions asked once per GUID; the cable ends' text is read only where an end is still untyped."""
    types: dict[str, str] = {}
    lid_guid: dict[int, str] = {}
    nodes = ctx.frame("FabricNode")
    if not nodes.empty:
        for g, t, lid in zip(nodes["guid"].tolist(), _strs(nodes["node_type"]), _vals(nodes["lid"]), strict=True):
            if t:
                types[str(g)] = t
            if lid is not None and t == "SW":
                lid_guid[int(lid)] = str(g)  # type: ignore[call-overload]
    links = ctx.frame("FabricLink")
    if links.empty:
        return types, lid_guid, links
    links = links.copy()
    g_code, g_uniq = pd.factorize(links["guid"].astype(str))  # NaN -> -1, which counts as untyped below
    p_code, p_uniq = pd.factorize(links["peer_guid"].astype(str))
    g_uniq, p_uniq = g_uniq.tolist(), p_uniq.tolist()

    def untyped(code: np.ndarray, uniq: list[str]) -> np.ndarray:
        return np.append(np.array([u not in types for u in uniq], dtype=bool), True)[code]

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
    left = links[untyped(g_code, g_uniq)]
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
    g_type = np.append(np.array([types.get(u) for u in g_uniq], dtype=object), None)[g_code]
    sw_rows = links[(g_type == "SW") & links["lid"].notna().to_numpy()].drop_duplicates("lid")
    for g, lid in zip(sw_rows["guid"].astype(str).tolist(), sw_rows["lid"].tolist(), strict=True):
        lid_guid.setdefault(int(lid), g)
    p_type = np.append(np.array([types.get(u) for u in p_uniq], dtype=object), None)[p_code]
    links["peer_type"] = pd.Series(p_type, index=links.index, dtype=object)
    return types, lid_guid, links


@extractor
def uplink_balance(ctx: Context) -> list[Finding]:
    """Per switch: how evenly its uplinks (ports whose peer is a switch) carry the traffic, and where XmitWait is.

    The series of a 4,096-host fabric (600k) are joined to the uplinks on integer codes: switches ranked by
    GUID, keys switch x port; only the reported switches go back to the frames."""
    table = ctx.counters
    t = table.series
    if t.empty:
        return []
    t = t[t["counter"].isin(UPLINK_COUNTERS) & (t["port_k"] >= 0)]
    if t.empty:
        return []
    types, lid_guid, links = _topology(ctx)
    if links.empty:
        return []
    # the switch of each series: its GUID, else the switch that owns its LID
    sw = t["guid_k"].to_numpy(object).copy()
    no_guid = np.flatnonzero(sw == "")
    sw[no_guid] = [lid_guid.get(lid) for lid in t["lid_k"].to_numpy()[no_guid].tolist()]
    code, uniq = pd.factorize(sw)  # None -> -1
    if not len(uniq):
        return []
    names = np.asarray(uniq, dtype=object)
    rank = np.empty(len(names), dtype=np.int64)
    rank[np.argsort(names, kind="stable")] = np.arange(len(names))  # codes in GUID order
    is_sw = np.array([types.get(u) == "SW" for u in names], dtype=bool)
    # switch-to-switch cables that are up: only their ports are uplinks (a leaf's many HCA ports are not looked at)
    ports = links.drop_duplicates(["guid", "port"]).rename(columns={"guid": "sw"})
    ports = ports.assign(port=ports["port"].astype(int))
    up = ports["peer_type"] == "SW"
    if "state" in ports:
        up &= ports["state"].isna() | (ports["state"].astype(object) == "Active")
    ports = ports[up & (ports["port"] >= 0)]
    port = t["port_k"].to_numpy()
    radix = int(max(port.max(), ports["port"].max() if len(ports) else 0)) + 1
    u_code = pd.Index(names).get_indexer(ports["sw"].astype(object))
    u_key = rank[u_code[u_code >= 0]] * radix + ports["port"].to_numpy()[u_code >= 0]
    key = np.where(code >= 0, rank[code], -1) * radix + port
    idx = np.flatnonzero((code >= 0) & is_sw[code] & np.isin(key, u_key))
    if not len(idx):
        return []
    # per (switch, port): the last value of each counter that has one (amount: the increment between snapshots,
    # else the value), and the most snapshots any of them has
    counter = t["counter"].to_numpy(object)[idx]
    c_code = np.select([counter == c for c in UPLINK_COUNTERS], range(len(UPLINK_COUNTERS)))
    snaps = t["snaps"].to_numpy()[idx]
    amount = np.where(snaps > 1, t["inc"].to_numpy()[idx], t["last"].to_numpy()[idx]).astype(float)
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
                        & pd.Index(names[code[idx]]).isin(report.index))
    ev_series = pd.DataFrame({"sw": names[code[idx[ev]]], "port": port[idx[ev]],
                              "start": t["start"].to_numpy()[idx[ev]], "end": t["end"].to_numpy()[idx[ev]]})
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
    line_no = table.samples["line"].to_numpy()
    out: list[Finding] = []
    for sw, s in report.iterrows():
        sw = str(sw)
        pos, hot = rows_of[sw], int(s["hot"])
        others = pos[pos != hot]
        hot_port = int(port_no[hot])
        c = cable[(sw, hot_port)]
        peer_guid = sval(mine["peer_guid"].iat[c])
        peer_name = name_of(peer_guid)
        if peer_name is not None:
            peer, name = peer_name, name_of(sw) or sval(mine["description"].iat[c]) or sw
        else:
            peer, name = sval(mine["peer_description"].iat[c]) or peer_guid, sval(mine["description"].iat[c]) or sw
        gb = float(xm[hot]) * 4 / 1e9
        other_gb = float(pd.Series(xm[others]).mean()) * 4 / 1e9
        what = "between snapshots" if s["delta"] else "since the counters were last cleared (one snapshot)"
        wait_share = None if pd.isna(s["wait_share"]) else float(s["wait_share"])
        rcv_imb = None if pd.isna(s["rcv_imbalance"]) else float(s["rcv_imbalance"])
        wait_txt = f", {wait_share * 100:.0f}% of the uplinks' PortXmitWait" if wait_share is not None else ""
        # evidence: the XmitData/XmitWait samples of the hot uplink and of two siblings
        sel = np.flatnonzero((ev_sw == sw) & np.isin(ev_port, [hot_port, *port_no[others[:2]].tolist()]))
        ev_rows = [r for i in sel.tolist() for r in range(int(ev_start[i]), int(ev_end[i]))]
        out.append(finding(
            "uplink_load_skew",
            f"{name} uplink port {hot_port} (to {peer}) sent {gb:.1f} GB {what}, "
            f"{float(s['imbalance']):g}x the mean of its {len(others)} sibling uplink(s) ({other_gb:.1f} GB){wait_txt}.",
            None,
            Location(device=name, port=hot_port, peer=str(peer) if peer else None),
            {"switch_guid": sw, "uplinks": int(s["n"]), "hot_port": hot_port,
             "imbalance": float(s["imbalance"]), "top_share": float(s["top_share"]), "wait_share": wait_share,
             "rcv_imbalance": rcv_imb, "delta": bool(s["delta"]), "fabric_max_imbalance": fabric_max,
             "switches": switches},
            evidence=_unique_refs([(table.source(r), int(line_no[r]), table.text(r)) for r in ev_rows],
                                  "uplink_load_skew"),
        ))
    return out


# --------------------------------------------------------------------------------------------- RoCE priorities

_PRIO = re.compile(r"^(?P<dir>rx|tx)_prio(?P<p>[0-7])_(?P<what>bytes|packets|pause|pause_duration|pause_transition"
                   r"|buf_discard|cong_discard|marked|discards)$")


def _prio_stats(ctx: Context) -> pd.DataFrame:
    """One row per (host, netdev, prio): bytes, pause frames (amount = delta or cumulative), PFC enabled."""
    ns = ctx.frame("NicStat")
    if ns.empty:
        return pd.DataFrame()
    ext = ns["counter"].astype(str).str.extract(_PRIO)
    sel = ns[ext["p"].notna()].copy()
    if sel.empty:
        return pd.DataFrame()
    sel["prio"] = ext.loc[sel.index, "p"].astype(int)
    sel["what"] = ext.loc[sel.index, "dir"] + "_" + ext.loc[sel.index, "what"]
    sel["host_k"] = sel["host"].fillna("")
    sel["dev_k"] = sel["netdev"].fillna(sel["source"].astype(str))
    series = _counter_series(sel, ["host_k", "dev_k", "prio", "what"])
    series["amount"] = series["delta"].where(series["delta"].notna(), series["last"].astype(float))
    wide = series.pivot_table(index=["host_k", "dev_k", "prio"], columns="what", values="amount", aggfunc="last")
    for c in ("rx_bytes", "tx_bytes", "rx_pause", "tx_pause"):
        if c not in wide:
            wide[c] = float("nan")
    present = sel.groupby(["host_k", "dev_k", "prio"])["what"].agg(set)
    wide["pfc"] = present.map(lambda s: bool({"rx_pause", "tx_pause"} & s)).reindex(wide.index).fillna(False)
    wide["has_bytes"] = present.map(lambda s: bool({"rx_bytes", "tx_bytes"} & s)).reindex(wide.index).fillna(False)
    wide["bytes"] = wide[["rx_bytes", "tx_bytes"]].fillna(0.0).sum(axis=1)
    wide["pause"] = wide[["rx_pause", "tx_pause"]].fillna(0.0).sum(axis=1)
    wide["delta"] = series.groupby(["host_k", "dev_k", "prio"])["snaps"].max().reindex(wide.index) > 1
    return wide.reset_index()


def _prio_rows(ctx: Context, host: str, devs: list[str], prios: list[int], whats: tuple[str, ...]) -> pd.DataFrame:
    ns = ctx.frame("NicStat")
    names = {f"{d}_prio{p}_{w}" for d in ("rx", "tx") for p in prios for w in whats}
    return ns[(ns["host"].fillna("") == host) & ns["netdev"].fillna(ns["source"].astype(str)).isin(devs)
              & ns["counter"].isin(names)]


@extractor
def traffic_class(ctx: Context) -> list[Finding]:
    """Which priority the RoCE traffic rides on, which priorities are lossless (PFC), and NCCL's traffic class."""
    out: list[Finding] = []
    lls = _host_link_layers(ctx)
    st = _prio_stats(ctx)
    pfc_all: set[int] = set()
    if not st.empty:
        for host, hgrp in st.groupby("host_k", sort=True):
            verdicts: dict[tuple[str, int, str], list[str]] = {}
            info: dict[tuple[str, int, str], dict[str, object]] = {}
            for dev, g in hgrp.groupby("dev_k", sort=True):
                pfc = sorted(int(p) for p in g.loc[g["pfc"], "prio"])
                pfc_all.update(pfc)
                if not g["has_bytes"].any():
                    continue
                total = float(g["bytes"].sum())
                if total <= 0:
                    continue
                top = g.loc[g["bytes"].idxmax()]
                tprio = int(top["prio"])
                share = round(float(top["bytes"]) / total, 3)
                pause_prios = sorted(int(p) for p in g.loc[g["pause"] > 0, "prio"])
                pfc_s = ",".join(map(str, pfc)) or "none"
                if not pfc:
                    kind = "roce_pfc_disabled"
                elif tprio in pfc:
                    kind = "roce_traffic_on_lossless_prio"
                else:
                    kind = "roce_traffic_off_lossless_prio"
                key = (kind, tprio, pfc_s)
                verdicts.setdefault(key, []).append(str(dev))
                cur = info.setdefault(key, {"share": share, "delta": bool(g["delta"].any()),
                                            "pause": ",".join(map(str, pause_prios)) or "none",
                                            "pause_on_traffic": tprio in pause_prios, "gb": 0.0})
                cur["share"] = min(float(cur["share"]), share)  # type: ignore[arg-type]
                cur["gb"] = float(cur["gb"]) + float(top["bytes"]) / 1e9  # type: ignore[arg-type]
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
            prio = dscp >> 3
            pfc_s = ",".join(map(str, sorted(pfc_all)))
            kind = "nccl_tc_lossless" if prio in pfc_all else "nccl_tc_not_lossless"
            set_txt = f"NCCL_IB_TC={tcv}" if src is not None else "NCCL_IB_TC is not set (traffic class 0)"
            out.append(finding(
                kind,
                f"{set_txt}: DSCP {dscp}, priority {prio} by the default DSCP map, "
                + ("a PFC-enabled priority." if kind == "nccl_tc_lossless"
                   else f"but PFC is enabled only on priority {pfc_s}."),
                src, Location(host=sval(src.iloc[0]["host"])) if src is not None else None,
                {"tc": tcv, "dscp": dscp, "prio": prio, "pfc_prios": pfc_s, "set": src is not None},
            ))
    return out


# --------------------------------------------------------------------------------------------- RoCE lossless

LOSS_COUNTERS = ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "roce_adp_retrans",
                 "implied_nak_seq_err")
CNP_COUNTERS = ("np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets")
_STORM = ("tx_pause_storm_warning_events", "tx_pause_storm_error_events")
_DROPS = re.compile(r"^(?:rx_discards_phy|rx_out_of_buffer|rx_prio[0-7]_buf_discard|rx_prio[0-7]_cong_discard"
                    r"|rx_prio[0-7]_discards)$")


@extractor
def roce_lossless(ctx: Context) -> list[Finding]:
    """RoCE transport loss against congestion notification, pause storms and NIC receive drops."""
    out: list[Finding] = []
    lls = _host_link_layers(ctx)
    hw = ctx.frame("RdmaHwCounter")
    if not hw.empty:
        hw = hw[hw["counter"].isin(LOSS_COUNTERS + CNP_COUNTERS)].copy()
    if not hw.empty:
        hw["host_k"] = hw["host"].fillna("")
        hw["port_k"] = hw["port"].fillna(-1).astype(int)
        cnp_present = hw[hw["counter"].isin(CNP_COUNTERS)].groupby("host_k").size()
        series = _counter_series(hw, ["host_k", "device", "port_k", "counter"])
        series["amount"] = series["delta"].where(series["delta"].notna(), series["last"].astype(float))
        series["is_loss"] = series["counter"].isin(LOSS_COUNTERS)
        for host, g in series.groupby("host_k", sort=True):
            ll = lls.get(str(host)) or lls.get("*")
            if ll == "IB" or (ll is None and host not in cnp_present.index):
                continue  # congestion-notification counters exist only on RoCE ports
            loss = g[g["is_loss"]]
            cnp = g[~g["is_loss"]]
            snaps = int(g["snaps"].max())
            loss_amt = float(loss["amount"].sum())
            cnp_amt = float(cnp["amount"].sum())
            by_dev = loss.groupby("device")["amount"].sum()
            worst = str(by_dev.idxmax()) if not by_dev.empty and by_dev.max() > 0 else None
            per = loss.groupby("counter")["amount"].sum()
            parts = ", ".join(f"{c} +{int(v)}" if snaps > 1 else f"{c} {int(v)}" for c, v in per.items() if v > 0)
            rising = snaps > 1 and loss_amt > 0
            cnp_txt = ", ".join(f"{c} {'+' if snaps > 1 else ''}{int(v)}"
                                for c, v in cnp.groupby("counter")["amount"].sum().items())
            ev_src = ctx.frame("RdmaHwCounter")
            ev = ev_src[(ev_src["host"].fillna("") == host) & ev_src["counter"].isin(
                [*[c for c, v in per.items() if v > 0], *CNP_COUNTERS])]
            if worst is not None:
                ev = ev[ev["device"] == worst]
            out.append(finding(
                "roce_transport_counters",
                f"{host or 'RoCE HCAs'}: " + (f"loss/retransmission counters {parts}" if parts
                                              else "no loss/retransmission counted")
                + (" between snapshots" if snaps > 1 else "") + f"; congestion notification: {cnp_txt or 'not captured'}.",
                None, Location(host=str(host) or None, device=worst),
                {"loss": int(loss_amt), "loss_rising": rising, "cnp": int(cnp_amt),
                 "cnp_rising": snaps > 1 and cnp_amt > 0, "cnp_zero": not cnp.empty and cnp_amt == 0,
                 "snapshots": snaps, "devices": int(g["device"].nunique())},
                evidence=_rows_refs(ev, "roce_transport_counters"),
            ))
    ns = ctx.frame("NicStat")
    if ns.empty:
        return out
    ns = ns.assign(host_k=ns["host"].fillna(""), dev_k=ns["netdev"].fillna(ns["source"].astype(str)))
    storm = ns[ns["counter"].isin(_STORM)]
    if not storm.empty:
        s = _counter_series(storm, ["host_k", "dev_k", "counter"])
        for host, g in s.groupby("host_k", sort=True):
            err = g[g["counter"] == "tx_pause_storm_error_events"]
            warn = g[g["counter"] == "tx_pause_storm_warning_events"]
            err_n, warn_n = int(err["last"].max()) if not err.empty else 0, int(warn["last"].max()) if not warn.empty else 0
            if err_n == 0 and warn_n == 0:
                continue
            rising = bool((g["delta"].fillna(0) > 0).any())
            devs = sorted(set(g.loc[g["last"] > 0, "dev_k"]))
            rows = storm[(storm["host_k"] == host) & storm["dev_k"].isin(devs)]
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
    drops = ns[ns["counter"].astype(str).str.match(_DROPS)]
    if not drops.empty:
        s = _counter_series(drops, ["host_k", "dev_k", "counter"])
        s["amount"] = s["delta"].where(s["delta"].notna(), s["last"].astype(float))
        for host, g in s.groupby("host_k", sort=True):
            amt = float(g["amount"].sum())
            if amt <= 0:
                continue
            snaps = int(g["snaps"].max())
            per = g.groupby("counter")["amount"].sum()
            devs = sorted(set(g.loc[g["amount"] > 0, "dev_k"]))
            rows = drops[(drops["host_k"] == host) & drops["dev_k"].isin(devs)
                         & drops["counter"].isin([c for c, v in per.items() if v > 0])]
            out.append(finding(
                "nic_rx_drops",
                f"{host + ' ' if host else ''}{', '.join(devs[:4])}: the NIC dropped received packets ("
                + ", ".join(f"{c} {'+' if snaps > 1 else ''}{int(v)}" for c, v in per.items() if v > 0)
                + (" between snapshots" if snaps > 1 else "") + ").",
                None, Location(host=str(host) or None, device=devs[0] if len(devs) == 1 else None),
                {"drops": int(amt), "rising": snaps > 1, "netdevs": len(devs)},
                evidence=_rows_refs(rows, "nic_rx_drops"),
            ))
    pause = ns[ns["counter"].astype(str).str.match(r"^(?:rx|tx)_prio[0-7]_pause$")]
    if not pause.empty:
        s = _counter_series(pause, ["host_k", "dev_k", "counter"])
        s["amount"] = s["delta"].where(s["delta"].notna(), s["last"].astype(float))
        for host, g in s.groupby("host_k", sort=True):
            amt = float(g["amount"].sum())
            snaps = int(g["snaps"].max())
            if amt <= 0:
                continue
            rx = float(g.loc[g["counter"].str.startswith("rx"), "amount"].sum())
            tx = float(g.loc[g["counter"].str.startswith("tx"), "amount"].sum())
            prios = sorted({int(c[7]) for c in g.loc[g["amount"] > 0, "counter"]})
            devs = sorted(set(g.loc[g["amount"] > 0, "dev_k"]))
            rows = pause[(pause["host_k"] == host) & pause["dev_k"].isin(devs)]
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


@extractor
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
# _NET_CH once per line of a newline-joined block, as (connection, dir, nic), all '' on a line without it; the
# connection's text stands for its six numbers (the separators between them are fixed)
_NET_CH_LINES = re.compile(r"(?m)^(?:[^\n]*?Channel (\d+/\d+ : \d+\[\d+\] -> \d+\[\d+\])"
                           r" \[(send|receive)\] via NET/\w+/(\d+))?[^\n]*$")


def _net_pairs(ctx: Context) -> list[Finding]:
    """Both ends of NCCL's inter-node connections: a [send] line on one host and the matching [receive] line on
    another; the NIC index each side uses tells whether the connection joins two rails.

    One regex pass over the lines joined into one block and a dict join (a 4,096-host job logs ~130k NET channel
    lines): the [send] lines, each (channel, ranks, host) once, in log order, each joined to the matching
    [receive] lines (also each once per host) in log order, which is the inner merge of the two."""
    ch = ctx.frame("NcclChannel")
    if ch.empty or "transport" not in ch:
        return []
    net = ch[ch["transport"] == "NET"]
    if net.empty:
        return []
    texts, hosts = net["text"].tolist(), _vals(net["host"])
    nics: dict[int, str] = {}
    sends: dict[tuple[str, object], int] = {}  # (key, host) -> row of its first [send] line
    recvs: dict[str, list[int]] = {}  # key -> rows of the first [receive] line of each host
    seen_recv: set[tuple[str, object]] = set()
    with gc_paused():  # ~100k small tuples: no cycles, and a collection pass would walk the whole bundle
        found = _NET_CH_LINES.findall("\n".join(t.replace("\n", "\0") if type(t) is str else "" for t in texts))
        for i, ((key, direction, nic), host) in enumerate(zip(found, hosts, strict=True)):
            if direction == "send":
                if (key, host) not in sends:
                    sends[(key, host)] = i
                    nics[i] = nic
            elif direction and (key, host) not in seen_recv:
                seen_recv.add((key, host))
                recvs.setdefault(key, []).append(i)
                nics[i] = nic
    n_pairs = n_crossed = 0
    same: list[int] = []  # the first pairs' [send] rows and the first crossed pairs, for evidence
    crossed: list[tuple[int, int]] = []
    for (key, host), si in sends.items():
        for ri in recvs.get(key, ()):
            if (host or "") == (hosts[ri] or ""):
                continue
            n_pairs += 1
            if len(same) < 2:
                same.append(si)
            if nics[si] != nics[ri]:
                n_crossed += 1
                if len(crossed) < 3:
                    crossed.append((si, ri))
    if not n_pairs:
        return []
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
    c0 = _NET_CH.search(texts[s0])
    assert c0 is not None  # the line matched in the block
    host_raw = net["host"].to_numpy(object)  # the summary prints the column's value ('nan' when missing)
    ev = [ref(i, "nccl_net_pairs_cross_nic") for si, ri in crossed for i in (si, ri)]
    return [finding(
        "nccl_net_pairs_cross_nic",
        f"{n_crossed} of {n_pairs} inter-node NCCL connection(s) leave one host on one NIC index and arrive on"
        f" another (e.g. channel {c0['ch']}/{c0['ci']} {c0['src']}[{c0['sd']}] -> {c0['dst']}[{c0['dd']}]: NET/"
        f"{nics[s0]} on {host_raw[s0]}, NET/{nics[r0]} on {host_raw[r0]}): cross-rail on a rail-optimized fabric.",
        None, Location(host=sval(hosts[s0]), peer=sval(hosts[r0])), attrs, evidence=ev[:8],
    )]


# --------------------------------------------------------------------------------------------- MTU

_MTU_ENUM = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}


@extractor
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
