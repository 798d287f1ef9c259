"""The fabric as a whole: link flaps, congestion, the subnet manager, partitions and adaptive routing.

Sources: port counters over several snapshots (``LinkDownedCounter``, ``PortXmitWait`` against
``PortXmitData``, discards), kernel link down/up lines, NCCL's IB async events and ``ibv_modify_qp``
failures, ``sminfo``/ibdiagnet SM_INFO, the ``SM lid`` of HCA ports, the OpenSM log (sweeps, traps,
state changes), the job environment (``NCCL_IB_PKEY``, ``NCCL_IB_ADAPTIVE_ROUTING``,
``NCCL_IB_AR_THRESHOLD``) and ibdiagnet messages.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timezone
from typing import cast

import numpy as np
import pandas as pd

from diagnose.evidence.context import Context, finding, hosts_label, sval, val
from diagnose.evidence.counters import CounterTable
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.links import PHY_COUNTERS, port_index_of, values_of
from diagnose.models.diagnosis import EvidenceRef, Finding, Location

MAX_PORT_FINDINGS = 8
BOOT_WINDOW_S = 300.0  # link training right after the driver probe is not flapping
WAIT_FLOOR = 0.01  # per-port XmitWait findings only from 1% of transmit capacity on (the profile covers all)

# --------------------------------------------------------------------------------------------- helpers


def one_value(values: pd.Series) -> str | None:
    vs = sorted({str(v) for v in values.dropna() if str(v)})
    return vs[0] if len(vs) == 1 else None


def _secs(ts: object) -> float | None:
    """A kernel/SM log timestamp as seconds: raw dmesg seconds as is, absolute times as epoch seconds."""
    t = sval(ts)
    return _secs_text(t) if t else None


@functools.lru_cache(maxsize=65536)
def _secs_text(t: str) -> float | None:
    # cached: the hosts of one job log the same start-up seconds, thousands of times over
    t = t.strip().lstrip("+")
    try:
        return float(t)
    except ValueError:
        pass
    t = t.replace(",", ".")
    try:  # ISO 8601 (journal --output=short-iso, dmesg --time-format=iso): the common case, without pandas
        d = datetime.fromisoformat(t.replace("Z", "+00:00"))
        return (d if d.tzinfo else d.replace(tzinfo=timezone.utc)).timestamp()
    except ValueError:
        pass
    for fmt in ("%a %b %d %H:%M:%S %Y", "%a %b %d %H:%M:%S %Z %Y"):  # dmesg -T, date
        try:
            return datetime.strptime(t, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            pass
    m = _NO_YEAR.match(t)
    if m:  # syslog / OpenSM stamps carry no year: any fixed year keeps the differences right
        t = f"2000 {m.group(1)} {int(m.group(2))} {m.group(3)}"
    try:
        v = pd.to_datetime(t, errors="coerce", utc=True, format="mixed")
        return None if pd.isna(v) else float(v.timestamp())
    except (ValueError, OverflowError):
        return None


_NO_YEAR = re.compile(r"^([A-Z][a-z]{2})\s+(\d{1,2})\s+(\d\d:\d\d:\d\d(?:\.\d+)?)$")


def _raw_secs(ts: object) -> bool:
    t = sval(ts)
    return bool(t) and re.fullmatch(r"\s*\+?\d+\.\d+\s*", t or "") is not None


def _counter_table(ctx: Context) -> tuple[pd.DataFrame, CounterTable]:
    """One row per (port, counter) series (see evidence/counters.py) and the table that cites its samples."""
    table = ctx.counters
    return table.series, table


def _rows(start: object, end: object) -> list[int]:
    return list(range(int(start), int(end)))  # type: ignore[call-overload]


def port_where(ctx: Context, host: str, dev: str, guid: str, lid: int, port: int) -> tuple[Location, bool, str]:
    """Location, is-switch, and a label for one counter port."""
    by_lid, by_guid = port_index_of(ctx)
    info = by_guid.get(guid) if guid else None
    if info is None and lid >= 0:
        info = by_lid.get((host, lid)) if host else None
        info = info if info is not None else by_lid.get(("*", lid))
    # a GUID no HCA port of the bundle owns is a switch port; the host is then only where perfquery ran
    switch = info is None and guid != "" and not dev
    h = None if switch else (sval(info["host"]) if info is not None else None) or (host or None)
    d = dev or (str(info["device"]) if info is not None else None)
    if switch:
        d = _node_desc(ctx).get(guid) or guid
    p = port if port >= 0 else None
    label = " ".join(x for x in [h, d, f"port {p}" if p is not None else None, f"(lid {lid})" if lid >= 0 else None]
                     if x) or (f"lid {lid}" if lid >= 0 else "?")
    return Location(host=h, device=d, port=p), switch, label


def _node_desc(ctx: Context) -> dict[str, str]:
    """GUID -> the name an operator uses: the fabric model's short switch name ('leaf07') or 'host/mlx5_3'
    when a topology was built, else the raw node description."""
    cached = ctx.cache.get("node_desc")
    if cached is not None:
        return cached  # type: ignore[return-value]
    nodes = ctx.frame("FabricNode")
    if nodes.empty:
        return {}
    fab = ctx.fabric
    out = {str(g).lower(): (fab.name(str(g)) if fab is not None and str(g) in fab.graph else str(d))
           for g, d in zip(nodes["guid"], nodes["description"], strict=True) if sval(d)}
    ctx.cache["node_desc"] = out
    return out


def row_refs(table: CounterTable, rows: list[int], kind: str, limit: int = 4) -> list[EvidenceRef]:
    return table.refs(rows, kind, limit)


# --------------------------------------------------------------------------------------------- link flaps

_DOWN_WORDS = re.compile(r"Link (?:down|DOWN)\b|lost carrier|carrier (?:lost|off)|Link is Down|link is not ready", re.I)
_UP_WORDS = re.compile(r"Link (?:up|UP|ACTIVE)\b|gained carrier|carrier (?:on|acquired)|Link is Up|link becomes ready",
                       re.I)
_PORT_NO = re.compile(r"Port: ?(\d+)")


@extractor(fabric=True,
           reads=("FabricLink", "FabricNode", "FabricPortState", "IbPort", "KernelEvent", "Mlx5Event", "PortCounter",
                  "PortCounterWide", "ToolMessage"),
           emits=("ibdiagnet_link_down_increase", "link_downed_both_ends", "link_downed_stable",
                  "link_downs_with_phy_errors", "link_flap_events"))
def link_flaps(ctx: Context) -> list[Finding]:
    """Down -> up cycles of one NIC port in the kernel log, and LinkDowned counters that move."""
    out: list[Finding] = []
    parts = []
    mlx = ctx.frame("Mlx5Event")
    boot_ref: dict[tuple[str, str], float] = {}
    if not mlx.empty:
        ev = mlx[mlx["category"].isin(["link_down", "link_up"])].copy()
        if not ev.empty:
            ev["dir"] = np.where(ev["category"] == "link_down", "down", "up")
            ev["key"] = ev["bdf"].astype(str)
            parts.append(ev)
        probe = mlx[~mlx["category"].isin(["link_down", "link_up"])]
        # the start-up reference only matters on hosts whose ports went down
        down_hosts = set(mlx.loc[mlx["category"] == "link_down", "host"].fillna(""))
        kev0 = ctx.frame("KernelEvent")
        if not kev0.empty and "category" in kev0:
            down_hosts |= set(kev0.loc[kev0["category"] == "ib_link", "host"].fillna(""))
        probe = probe[probe["host"].fillna("").isin(down_hosts)]
        for (src, host), grp in probe.groupby([probe["source"], probe["host"].fillna("")]):
            # the driver probe lines come first in a kernel log: their time is the start-up reference
            probe_ts = [t for t in (_secs(x) for x in grp.nsmallest(8, "line")["timestamp"]) if t is not None]
            if probe_ts:
                boot_ref[(str(src), str(host))] = min(probe_ts)
    kev = ctx.frame("KernelEvent")
    if not kev.empty:
        ib = kev[(kev["category"] == "ib_link") & kev["device"].notna()].copy()
        if not ib.empty:
            msg = ib["message"].astype(str)
            ib["dir"] = np.where(msg.str.contains(_DOWN_WORDS), "down",
                                 np.where(msg.str.contains(_UP_WORDS), "up", ""))
            ib = ib[ib["dir"] != ""]
            ib["key"] = ib["device"].astype(str)
            ib["netdev"] = ib["device"]
            parts.append(ib)
    if parts:
        cols = ["source", "line", "text", "host", "timestamp", "dir", "key", "netdev", "message"]
        ev = pd.concat([p[cols] for p in parts], ignore_index=True)
        ev["host"] = ev["host"].fillna("").astype(str)
        # only the ports that went down at least once are looked at (a fleet logs thousands of boot-time "up"s)
        downs = ev.loc[ev["dir"] == "down", ["host", "key"]].drop_duplicates()
        ev = ev.merge(downs, on=["host", "key"], how="inner") if len(downs) < len(ev) else ev
        ev = ev.sort_values(["host", "key", "source", "line"], kind="stable")
        for (host, key), grp in ev.groupby(["host", "key"], sort=True):
            if not (grp["dir"] == "down").any():
                continue
            names = [str(n) for n in grp["netdev"].dropna()]
            ibdev = next((n for n in names if re.fullmatch(r"mlx\d_\d+", n)), None)
            dev = ibdev or (names[0] if names else key)
            pm = grp["message"].astype(str).str.extract(_PORT_NO)[0].dropna()
            port = int(pm.iloc[0]) if not pm.empty else None
            ts = [_secs(t) for t in grp["timestamp"]]
            raw = all(_raw_secs(t) for t in grp["timestamp"] if sval(t))
            ref = 0.0 if raw else boot_ref.get((str(grp["source"].iloc[0]), host))
            # events within BOOT_WINDOW_S of the driver start-up are link training, not flaps
            boot = [t is not None and ref is not None and t - ref <= BOOT_WINDOW_S for t in ts]
            late = grp[[not b for b in boot]]
            late_ts = [t for t, b in zip(ts, boot, strict=True) if not b and t is not None]
            # a RoCE port logs 'enp..: Link down' and 'mlx5_N: Port: 1 Link DOWN' for one event: collapse runs
            dirs = late["dir"].tolist()
            collapsed = [d for i, d in enumerate(dirs) if i == 0 or d != dirs[i - 1]]
            downs = collapsed.count("down")
            ups = collapsed.count("up")
            cycles = sum(1 for a, b in zip(collapsed, collapsed[1:], strict=False) if a == "down" and b == "up")
            at_boot = downs == 0
            if at_boot:
                collapsed = [d for i, d in enumerate(grp["dir"]) if i == 0 or d != grp["dir"].iloc[i - 1]]
                downs, ups = collapsed.count("down"), collapsed.count("up")
            span = round(max(late_ts) - min(late_ts), 1) if len(late_ts) >= 2 else None
            where = f"{host + ' ' if host else ''}{dev}{' (' + key + ')' if dev != key else ''}"
            out.append(finding(
                "link_flap_events",
                f"{where} went down {downs} time(s) and came back {ups} time(s) in the kernel log"
                + (" during driver start-up (link training)" if at_boot else
                   f" after start-up{f' within {span:g} s' if span else ''}")
                + ("; the last event is a down" if collapsed[-1] == "down" else "") + ".",
                grp if at_boot else late, Location(host=host or None, device=dev, port=port),
                {"downs": downs, "ups": ups, "cycles": 0 if at_boot else cycles, "at_boot": at_boot, "span_s": span,
                 "ends_down": collapsed[-1] == "down", "bdf": key if re.match(r"[0-9a-f]{4}:", key) else None},
            ))
    out.extend(_link_downed(ctx))
    out.extend(_ibdiagnet_link_down(ctx))
    return out


def _link_downed(ctx: Context) -> list[Finding]:
    t, frame = _counter_table(ctx)
    if t.empty:
        return []
    ld = t[(t["counter"] == "link_downed") & (t["snaps"] > 1)]
    quiet_ports, quiet_rows = frame.quiet.get("link_downed", (0, []))  # bulk dumps: ports that stayed at zero
    if ld.empty and not quiet_ports:
        return []
    rising = ld[ld["inc"] > 0]
    out: list[Finding] = []
    if rising.empty:
        nz = ld[ld["last"] > 0]
        rows = [r for a, b in zip(ld["start"].tolist()[:3], ld["end"].tolist()[:3], strict=True)
                for r in _rows(a, b)][:3] or quiet_rows
        out.append(finding(
            "link_downed_stable",
            f"LinkDownedCounter did not move between snapshots on {len(ld) + quiet_ports} port(s)"
            + (f" (highest value {int(nz['last'].max())}, old events)" if not nz.empty else "") + ".",
            frame.frame(rows),
            attrs={"ports": len(ld) + quiet_ports, "max_value": int(ld["last"].max()) if not ld.empty else 0},
        ))
        return out
    out.extend(_downs_with_phy_errors(ctx, t, frame, rising))
    # both ends of one cable rising: match rising ports against FabricLink ends (by GUID or LID, and port)
    links = ctx.frame("FabricLink")
    ends: set[tuple[str, int]] = set()
    for guid, lid, port in zip(rising["guid_k"].tolist(), rising["lid_k"].tolist(), rising["port_k"].tolist(),
                               strict=True):
        if guid:
            ends.add((f"g{guid}", int(port)))
        if lid >= 0:
            ends.add((f"l{lid}", int(port)))
    hit: list[int] = []  # positions of the FabricLink rows with both ends rising
    if not links.empty:
        n = len(links)
        cols = [links[c].tolist() for c in ("guid", "port", "peer_guid", "peer_port")]
        lids = [values_of(links[c]) if c in links else [None] * n for c in ("lid", "peer_lid")]
        for i, (guid, port, peer_guid, peer_port, lid, peer_lid) in enumerate(zip(*cols, *lids, strict=True)):
            a = {(f"g{str(guid).lower()}", int(port))}
            if lid is not None and str(lid):
                a.add((f"l{int(lid)}", int(port)))  # type: ignore[call-overload]
            b = {(f"g{str(peer_guid).lower()}", int(peer_port))}
            if peer_lid is not None and str(peer_lid):
                b.add((f"l{int(peer_lid)}", int(peer_port)))  # type: ignore[call-overload]
            if a & ends and b & ends:
                hit.append(i)
    pairs = links.iloc[hit]
    if len(pairs):
        p = pairs.iloc[0]
        desc = f"{sval(p['description']) or p['guid']} port {p['port']} <-> {sval(p['peer_description']) or p['peer_guid']}" \
               f" port {p['peer_port']}"
        out.append(finding(
            "link_downed_both_ends",
            f"LinkDownedCounter rose on both ends of one cable: {desc}.",
            pairs.head(2),
            Location(device=sval(p["description"]) or str(p["guid"]), port=int(p["port"]),
                     peer=sval(p["peer_description"]) or str(p["peer_guid"])),
            {"links": len(pairs) // 2 or 1},
        ))
    return out


def _downs_with_phy_errors(ctx: Context, t: pd.DataFrame, frame: CounterTable, rising: pd.DataFrame) -> list[Finding]:
    """Ports whose physical-layer error counters rose in the same window as their LinkDownedCounter: every retrain of
    a flapping link counts symbol errors and a link error recovery, so these errors come with the link going down
    (link.flapping), where a bad cable corrupts traffic on a link that stays up (link.bad_cable)."""
    keys = ["host_k", "dev_k", "guid_k", "lid_k", "port_k"]
    phy = t[t["counter"].isin(PHY_COUNTERS) & (t["snaps"] > 1) & (t["inc"] > 0)]
    if phy.empty:
        return []
    both = rising[keys + ["inc", "start", "end"]].merge(
        phy.groupby(keys, as_index=False)["inc"].sum().rename(columns={"inc": "phy_inc"}), on=keys)
    if both.empty:
        return []
    both = both.sort_values(["guid_k", "port_k", "lid_k"]).reset_index(drop=True)
    first = both.iloc[0]
    where, switch, label = port_where(ctx, str(first["host_k"]), str(first["dev_k"]), str(first["guid_k"]),
                                       int(first["lid_k"]), int(first["port_k"]))
    fab = ctx.fabric
    guid = str(first["guid_k"]) or (fab.by_lid.get(int(first["lid_k"])) if fab is not None else None)
    if fab is not None and guid and guid in fab.graph and where.port is not None:
        far = fab.peer(guid, where.port)
        if far is not None:
            where = Location(host=where.host, device=where.device, port=where.port, peer=fab.label(*far))
    n_switch = int(sum(1 for h, g in zip(both["host_k"], both["guid_k"], strict=True) if g and not h))
    rows = [r for a, b in zip(both["start"].tolist()[:2], both["end"].tolist()[:2], strict=True) for r in _rows(a, b)]
    return [finding(
        "link_downs_with_phy_errors",
        f"On {len(both)} port(s) ({label}{', ...' if len(both) > 1 else ''}) LinkDownedCounter rose (+"
        f"{int(both['inc'].max())}) in the same window as the physical-layer errors (+{int(both['phy_inc'].max())}):"
        " the errors come with the link going down and retraining, not from a link that stays up.",
        frame.frame(rows[-4:]), where,
        {"ports": len(both), "switch_ports": n_switch, "downs": int(both["inc"].max()),
         "phy_delta": int(both["phy_inc"].max()), "switch": bool(switch)},
    )]


_IBDIAG_LD = re.compile(r'"link_down_counter" increased during the run \(difference value=(?P<d>\d+)')


def _ibdiagnet_link_down(ctx: Context) -> list[Finding]:
    tm = ctx.frame("ToolMessage")
    if tm.empty:
        return []
    hit = tm[tm["message"].astype(str).str.contains('"link_down_counter" increased during the run', regex=False, na=False)]
    if hit.empty:
        return []
    d = hit["message"].astype(str).str.extract(_IBDIAG_LD)["d"].astype(int)
    ports = hit["message"].astype(str).str.split(" - ").str[0]
    return [finding(
        "ibdiagnet_link_down_increase",
        f"ibdiagnet saw link_down_counter increase during its run on {len(hit)} port(s)"
        f" ({', '.join(sorted(set(ports))[:3])}), by up to {int(d.max())}.",
        hit, Location(device=ports.iloc[0] if len(hit) == 1 else None),
        {"ports": len(hit), "delta": int(d.max())},
    )]


# --------------------------------------------------------------------------------------------- NCCL async events

_ASYNC = re.compile(
    r"NET/IB ?: (?:(?P<dev>[\w.\-]+):(?P<port>\d+) )?Got (?:non-fatal )?async (?:error )?event ?: ?"
    r"(?P<ev>[A-Za-z_ ]+?)\s*(?:\(\d+\))?\s*$"
)
_EV_KIND = {
    "port error": "port_error", "port active": "port_active", "lid change": "lid_change",
    "sm change": "sm_change", "client reregistration": "client_reregister", "client reregister": "client_reregister",
    "p_key change": "pkey_change", "gid table change": "gid_change",
}


def _async_events(ctx: Context) -> pd.DataFrame:
    w = ctx.frame("NcclWarn")
    if w.empty:
        return pd.DataFrame()
    ext = w["message"].astype(str).str.extract(_ASYNC)
    hit = w[ext["ev"].notna()].copy()
    if hit.empty:
        return hit
    hit["ev"] = ext.loc[hit.index, "ev"].str.strip().str.lower().map(_EV_KIND).fillna("other")
    hit["ibdev"] = ext.loc[hit.index, "dev"]
    hit["host"] = hit["host"].fillna("").astype(str)
    return hit


@extractor(reads=("NcclWarn",),
           emits=("nccl_ib_pkey_change_event", "nccl_ib_port_events", "nccl_ib_sm_events"))
def nccl_async_events(ctx: Context) -> list[Finding]:
    """NCCL's 'Got (non-fatal) async event' WARNs: port error/active (a link going down and up under a
    running job) and LID/SM changes or client re-registration (the subnet manager re-sweeping)."""
    hit = _async_events(ctx)
    if hit.empty:
        return []
    out: list[Finding] = []
    port_ev = hit[hit["ev"].isin(["port_error", "port_active"])]
    for (host, dev), grp in port_ev.groupby([port_ev["host"], port_ev["ibdev"].fillna("")], sort=True):
        errs = int((grp["ev"] == "port_error").sum())
        acts = int((grp["ev"] == "port_active").sum())
        out.append(finding(
            "nccl_ib_port_events",
            f"NCCL saw {errs} 'port error' and {acts} 'port active' async event(s)"
            f"{' on ' + host if host else ''}{' ' + dev if dev else ''}: the port lost its link under the job.",
            grp, Location(host=host or None, device=dev or None),
            {"port_errors": errs, "port_actives": acts, "pids": int(grp["pid"].nunique())},
        ))
    sm_ev = hit[hit["ev"].isin(["lid_change", "sm_change", "client_reregister"])]
    if not sm_ev.empty:
        hosts = sorted(h for h in sm_ev["host"].unique() if h)
        kinds = sorted(set(sm_ev["ev"]))
        out.append(finding(
            "nccl_ib_sm_events",
            f"NCCL saw {len(sm_ev)} subnet-manager async event(s) ({', '.join(kinds)}) on"
            f" {len(hosts)} host(s) ({hosts_label(hosts)}).",
            sm_ev, Location(host=hosts[0] if len(hosts) == 1 else None),
            {"events": len(sm_ev), "hosts": len(hosts), "lid_change": int((sm_ev["ev"] == "lid_change").sum()),
             "sm_change": int((sm_ev["ev"] == "sm_change").sum()),
             "client_reregister": int((sm_ev["ev"] == "client_reregister").sum())},
        ))
    pk = hit[hit["ev"] == "pkey_change"]
    if not pk.empty:
        out.append(finding(
            "nccl_ib_pkey_change_event",
            f"NCCL saw {len(pk)} 'P_Key change' async event(s): the subnet manager rewrote the port's partition table.",
            pk, Location(host=one_value(pk["host"])), {"events": len(pk)},
        ))
    return out


# --------------------------------------------------------------------------------------------- congestion

_TICK_BYTES = 8  # Quantum/Quantum-2/Quantum-3: one XmitWait tick per 8 bytes that could have been sent
_WORD_BYTES = 4  # PortXmitData counts 4-octet words


def _wait_table(ctx: Context) -> tuple[pd.DataFrame, CounterTable]:
    """Per port with both counters: XmitWait and XmitData (deltas when there are several snapshots,
    else cumulative) and the share of transmit capacity lost to credit waits.

    One row per measured port, in the order of the table's XmitWait series, with the port's key columns
    (``PORT_KEYS``); built once per run (congestion and adaptive_routing both ask)."""
    cached = ctx.cache.get("wait_table")
    if cached is None:
        t, frame = _counter_table(ctx)
        cached = (t if t.empty else _measured_waits(t, frame), frame)
        ctx.cache["wait_table"] = cached
    return cached  # type: ignore[return-value]


PORT_KEYS = ["host_k", "dev_k", "guid_k", "lid_k", "port_k"]


def _measured_waits(t: pd.DataFrame, table: CounterTable) -> pd.DataFrame:
    """The rows of :func:`_wait_table`, with ``pid``: the table's code of the port."""
    vocab, counter = table.vocab, table.series_counter  # the table's codes: no comparison of 600k names
    wi = np.flatnonzero(counter == vocab.index("port_xmit_wait")) if "port_xmit_wait" in vocab else counter[:0]
    di = np.flatnonzero(counter == vocab.index("port_xmit_data")) if "port_xmit_data" in vocab else counter[:0]
    if not len(wi) or not len(di):
        return pd.DataFrame()
    # each XmitWait series joined to the XmitData series of its port (the same key columns: the same port code)
    pid = table.series_port
    pos = pd.Index(pid[di]).get_indexer(pid[wi])
    w_rows, d_rows = wi[pos >= 0], di[pos[pos >= 0]]
    if not len(w_rows):
        return pd.DataFrame()

    def col(name: str, at: np.ndarray) -> np.ndarray:
        return t[name].to_numpy()[at]

    delta_basis = (col("snaps", w_rows) > 1) & (col("snaps", d_rows) > 1)
    w = np.where(delta_basis, col("inc", w_rows), col("last", w_rows)).astype(float)
    d = np.where(delta_basis, col("inc", d_rows), col("last", d_rows)).astype(float)
    # basic (32-bit) PortXmitWait stops at 2^32-1: the rate is then unknown
    sat = ~col("extended", w_rows).astype(bool) & (col("last", w_rows) >= (1 << 32) - 1)
    lost = w * _TICK_BYTES
    sent = d * _WORD_BYTES
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(lost + sent > 0, lost / (lost + sent), np.nan)
    ok = ~np.isnan(ratio) & ~sat & (d > 0)
    w_rows, d_rows = w_rows[ok], d_rows[ok]
    out = {c: col(c, w_rows) for c in PORT_KEYS}
    out.update({"start_w": col("start", w_rows), "end_w": col("end", w_rows), "interval_s_w": col("interval_s", w_rows),
                "start_d": col("start", d_rows), "end_d": col("end", d_rows), "w": w[ok], "d": d[ok],
                "ratio": ratio[ok], "basis": np.where(delta_basis[ok], "delta", "cumulative"), "pid": pid[w_rows]})
    return pd.DataFrame(out)


def _top_rows(measured: pd.DataFrame, n: int) -> list[int]:
    """The last XmitWait sample of the ``n`` ports with the highest wait share."""
    top = measured["ratio"].reset_index(drop=True).sort_values(ascending=False).index[:n]
    return [int(e) - 1 for e in measured["end_w"].to_numpy()[top]]


def _hot_ports(measured: pd.DataFrame) -> tuple[float, float, pd.DataFrame]:
    """Median and highest wait share, and the ports that wait ten times more than the median one."""
    med = float(np.nanmedian(measured["ratio"]))
    top = float(measured["ratio"].max())
    hot = measured[measured["ratio"] >= max(10 * med, WAIT_FLOOR)] if len(measured) >= 3 else measured.iloc[0:0]
    return med, top, hot


def _node_of(ctx: Context, guid: str, lid: int, host: str, dev: str) -> str | None:
    """The device a counter port belongs to: its node GUID, else the switch behind its LID, else host/device."""
    if guid:
        return guid
    fab = ctx.fabric
    if fab is not None and lid >= 0 and lid in fab.by_lid:
        return str(fab.by_lid[lid])
    return f"{host}/{dev}" if host or dev else None


def _phy_errors_near(ctx: Context, waiting: pd.DataFrame) -> int:
    """The largest rise of a physical-layer error counter on a device that holds a waiting port, or on the far
    end of a waiting port's cable: retransmissions there explain those waits. Errors rising elsewhere in the
    fabric do not: a bad cable under one leaf and congestion on another spine are two problems."""
    if waiting.empty:
        return 0
    t = ctx.counters.series
    if t.empty:
        return 0
    phy = t[t["counter"].isin(PHY_COUNTERS) & (t["snaps"] > 1) & (t["inc"] > 0)]
    if phy.empty:
        return 0
    fab = ctx.fabric
    near_nodes: set[str] = set()
    near_ports: set[tuple[str, int]] = set()
    for host, dev, guid, lid, port in zip(*(waiting[c].tolist() for c in PORT_KEYS), strict=True):
        node = _node_of(ctx, str(guid), int(lid), str(host), str(dev))
        if node is None:
            continue
        near_nodes.add(node)
        if fab is not None and int(port) >= 0:
            far = fab.peer(node, int(port))
            if far is not None:
                near_ports.add((str(far[0]), int(far[1])))
    best = 0
    for host, dev, guid, lid, port, inc in zip(*(phy[c].tolist() for c in [*PORT_KEYS, "inc"]), strict=True):
        node = _node_of(ctx, str(guid), int(lid), str(host), str(dev))
        if node is None and fab is not None and host and dev:
            node = fab.hca(str(host), str(dev))
        if node is not None and (node in near_nodes or (node, int(port)) in near_ports):
            best = max(best, int(inc))
    return best


@extractor(fabric=True,
           reads=("FabricLink", "FabricNode", "FabricPortState", "IbPort", "PortCounter", "PortCounterWide"),
           emits=("port_xmit_wait", "xmit_wait_profile"))
def congestion(ctx: Context) -> list[Finding]:
    """PortXmitWait against PortXmitData, per port: the share of the port's transmit capacity lost waiting
    for credits (lost bytes = XmitWait x 8 on NVIDIA Quantum switches), from deltas between snapshots
    when there are several, else from the cumulative counters (an average since the last reset)."""
    measured, frame = _wait_table(ctx)
    if measured.empty:
        return []
    out: list[Finding] = []
    # per-port findings only where the wait is measurable (1% of capacity); the profile covers the rest
    waiting = measured[measured["ratio"] >= WAIT_FLOOR].sort_values(["ratio"], ascending=False)
    for _, row in waiting.head(MAX_PORT_FINDINGS).iterrows():
        host, dev, guid, lid, port = (row[c] for c in PORT_KEYS)
        loc, switch, label = port_where(ctx, host, dev, guid, int(lid), int(port))
        rows = sorted(set(_rows(row["start_w"], row["end_w"])) | set(_rows(row["start_d"], row["end_d"])))
        iv = row["interval_s_w"]
        basis = str(row["basis"])
        out.append(finding(
            "port_xmit_wait",
            f"{label}{' (switch port)' if switch else ''}: PortXmitWait {'+' if basis == 'delta' else ''}{int(row['w'])}"
            f" against PortXmitData {'+' if basis == 'delta' else ''}{int(row['d'])} words"
            + (f" in {iv:g} s" if basis == "delta" and iv == iv and iv > 0 else "")
            + f": about {row['ratio']:.0%} of the port's transmit capacity was spent waiting for credits"
            + (" (since the last counter reset)" if basis == "cumulative" else "") + ".",
            None, loc,
            {"ratio": round(float(row["ratio"]), 4), "xmit_wait": int(row["w"]), "xmit_data": int(row["d"]),
             "basis": basis, "switch": switch,
             "interval_s": round(float(iv), 1) if basis == "delta" and iv == iv else None},
            evidence=row_refs(frame, rows, "port_xmit_wait"),
        ))
    hca_guids = set(port_index_of(ctx)[1])
    med, top, hot = _hot_ports(measured)
    phy_near = _phy_errors_near(ctx, waiting)
    rows = _top_rows(measured, 3)
    out.append(finding(
        "xmit_wait_profile",
        f"PortXmitWait measured on {len(measured)} port(s) ({int((measured['basis'] == 'delta').sum())} from deltas):"
        f" highest {top:.1%} of transmit capacity lost to credit waits, median {med:.1%}"
        + (f"; {len(hot)} port(s) stand out as hot spots" if len(hot) else "") + ".",
        frame.frame(rows),
        attrs={"ports": len(measured), "max_ratio": round(top, 4), "median_ratio": round(med, 4),
               "phy_delta_near": phy_near,
               "hot_ports": len(hot), "delta_ports": int((measured["basis"] == "delta").sum()),
               "switch_ports": _switch_ports(measured, frame, hca_guids)},
    ))
    return out


def _switch_ports(measured: pd.DataFrame, table: CounterTable, hca_guids: set[str]) -> int:
    """Measured ports with a GUID, no device and a GUID no HCA port owns: the questions are asked once per
    distinct GUID and device, through the table's key codes of the ports (a 4,096-host fabric measures 200k
    switch ports of a few thousand switches)."""
    (g_code, guids), (d_code, devs) = table.port_keys["guid_k"], table.port_keys["dev_k"]
    pid = measured["pid"].to_numpy()
    guid = g_code[pid][(guids != "")[g_code[pid]] & (devs == "")[d_code[pid]]]
    return int(np.array([g not in hca_guids for g in guids.tolist()], dtype=bool)[guid].sum())


# --------------------------------------------------------------------------------------------- subnet manager

_STATE_CHANGE = re.compile(r"Entering (?:MASTER|STANDBY|DISCOVERING|NOT.?ACTIVE) state", re.I)
_REMOTE_SM = re.compile(r"remote SM|another SM|non-matching sm_key|SM .*higher priority", re.I)
_TRAP_LID = re.compile(r"from LID:(\d+)")
_SM_BIND = re.compile(r"Mgmt class 0x81 binding to port GUID (0x[0-9a-fA-F]+)")  # the SM's port (libvendor)


def _sm_at(ctx: Context, guid: object = None, lid: object = None) -> tuple[Location, str | None]:
    """Where the SM with ``guid`` / ``lid`` runs, as a Location (a switch by its name, an HCA by host, device and
    port when a host tool lists it), and its label (``sw-ib01 (0x...)``); an empty Location when no source names
    it."""
    from diagnose.evidence import names

    n = names.node(ctx, guid, lid)
    if n is None:
        g = names.guid_for(ctx, guid, lid)
        return Location(), g
    lab = names.label(ctx, guid, lid)
    if n.kind == "SW" or n.host is None:
        return Location(device=n.name), lab
    ports = ctx.frame("IbPort")
    port = None
    if not ports.empty and n.device:
        hit = ports[(ports["host"] == n.host) & (ports["device"].astype(str) == n.device)]
        lid_i = val(lid) if lid is not None else None
        if lid_i is not None and "lid" in hit.columns:
            exact = hit[pd.to_numeric(hit["lid"], errors="coerce") == lid_i]
            hit = exact if not exact.empty else hit
        port = int(hit.iloc[0]["port"]) if len(hit) == 1 or (not hit.empty and lid_i is not None) else None
    return Location(host=n.host, device=n.device, port=port), lab


def sm_location(ctx: Context) -> Location:
    """Where the master SM runs: the one MASTER that sminfo / ibdiagnet name, else the SM lid every HCA port
    reports, resolved through any source that names that LID; an empty Location when nothing names it."""
    smi = ctx.frame("SmInfo")
    if not smi.empty:
        masters = smi[smi["state"] == "MASTER"]
        guids = sorted({str(g) for g in masters["sm_guid"].dropna()})
        if len(guids) == 1:
            lids = sorted({int(x) for x in masters["sm_lid"].dropna()})
            return _sm_at(ctx, guids[0], lids[0] if lids else None)[0]
        if len(guids) > 1:
            return Location()  # SMs fighting: no one node is where the configuration acts
    ports = ctx.frame("IbPort")
    if not ports.empty and "sm_lid" in ports.columns:
        sm_lids = {int(x) for x in pd.to_numeric(ports["sm_lid"], errors="coerce").dropna() if int(x) > 0}
        if len(sm_lids) == 1:
            return _sm_at(ctx, None, sm_lids.pop())[0]
    return Location()


def _log_sm_guid(sm: pd.DataFrame) -> str | None:
    """The port GUID the SM that wrote the log bound to (its last start), when the log has the line."""
    got = sm["message"].astype(str).str.extract(_SM_BIND)[0].dropna()
    return str(got.iloc[-1]) if not got.empty else None


@extractor(fabric=True,
           reads=("FabricLink", "FabricNode", "FabricPortState", "IbPort", "SmEvent", "SmInfo", "ToolError"),
           emits=("ports_without_sm", "sm_lid_consistent", "sm_lid_inconsistent", "sm_link_state_traps",
                  "sm_master_single", "sm_multiple_masters", "sm_no_master", "sm_query_failed", "sm_sweep_activity"))
def subnet_manager(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    out.extend(_sm_info(ctx))
    out.extend(_port_sm_lids(ctx))
    out.extend(_sm_log(ctx))
    return out


def _stray_master(ctx: Context, masters: pd.DataFrame, guids: list[str]) -> tuple[str, int | None, Location]:
    """Of several MASTER SMs, the one the subnet's arbitration says should be STANDBY, and where it runs.

    IBTA SM arbitration: the higher priority wins, then the lower port GUID. The loser (the first one, when there are
    more) is the stray SM an engineer goes to stop; its LID leads to the host and HCA port it runs on through the
    ports' ``Base lid`` (ibstat) or the topology, when either is in the bundle."""
    prio: dict[str, int] = {}
    lid_of: dict[str, int] = {}
    for g, p, lid in zip(masters["sm_guid"].astype(str).tolist(), masters["priority"].tolist(),
                         masters["sm_lid"].tolist(), strict=True):
        if p is not None and p == p:
            prio[g] = max(prio.get(g, -1), int(p))
        if lid is not None and lid == lid:
            lid_of.setdefault(g, int(lid))

    def guid_value(g: str) -> int:
        try:
            return int(g, 16)
        except ValueError:
            return 1 << 64

    stray = sorted(guids, key=lambda g: (-prio.get(g, -1), guid_value(g), g))[1]
    lid = lid_of.get(stray)
    if lid is None:
        return stray, None, Location()
    ports = ctx.frame("IbPort")
    if not ports.empty and "lid" in ports.columns:
        hit = ports[pd.to_numeric(ports["lid"], errors="coerce") == lid]
        if not hit.empty:
            row = hit.iloc[0]
            port = cast("int | None", val(row["port"]))  # an IbPort's port: int
            return stray, lid, Location(host=sval(row["host"]), device=sval(row["device"]),
                                        port=int(port) if port is not None else None)
    fab = ctx.fabric
    node = fab.by_lid.get(lid) if fab is not None else None
    if node is not None:
        if fab.kind(node) == "SW":  # type: ignore[union-attr]
            return stray, lid, Location(device=fab.name(node))  # type: ignore[union-attr]
        host, dev = fab.host_device(node)  # type: ignore[union-attr]
        return stray, lid, Location(host=host, device=dev)
    return stray, lid, _sm_at(ctx, stray, lid)[0]


def _sm_info(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    smi = ctx.frame("SmInfo")
    if not smi.empty:
        masters = smi[smi["state"] == "MASTER"]
        guids = sorted({str(g) for g in masters["sm_guid"].dropna()})
        known = smi[smi["state"].notna()]
        if len(guids) >= 2:
            stray, lid, where = _stray_master(ctx, masters, guids)
            at = f" {where.label()}" if where.host or where.device else ""
            from diagnose.evidence import names

            out.append(finding(
                "sm_multiple_masters",
                f"{len(guids)} different subnet managers answer as MASTER"
                f" ({', '.join(names.label(ctx, g) for g in guids[:3])}): SMs are fighting."
                f" By priority and GUID the one that should step down is {names.label(ctx, stray, lid)}"
                f"{f' (lid {lid})' if lid is not None else ''}{at}.",
                masters, where, attrs={"masters": len(guids), "stray_guid": stray, "stray_lid": lid},
            ))
        elif not known.empty and masters.empty and _no_master(ctx, known):
            states = sorted(set(known["state"]))
            out.append(finding(
                "sm_no_master",
                f"No subnet manager answers as MASTER (states seen: {', '.join(states)}).",
                known, attrs={"states": ",".join(states)},
            ))
        elif len(guids) == 1:
            m = masters.copy()
            m["host_k"] = m["host"].fillna("")
            stalled = moving = False
            for _h, grp in m.groupby("host_k"):
                acts = grp["activity"].dropna()
                if len(acts) >= 2 and acts.max() == acts.min():
                    stalled = True
                elif len(acts) >= 2:
                    moving = True  # two readings of one SM from one host, its activity count grew
            lids = sorted({int(x) for x in masters["sm_lid"].dropna()})
            where, lab = _sm_at(ctx, guids[0], lids[0] if lids else None)
            out.append(finding(
                "sm_master_single",
                f"One subnet manager is MASTER ({lab or guids[0]}, lid {', '.join(map(str, lids))}) in"
                f" {len(masters)} reading(s)" + ("; its activity count did not move between two readings" if stalled
                                                  else "") + ".",
                masters.head(3), where, attrs={"readings": len(masters), "stalled": stalled, "moving": moving, "sm_guid": guids[0],
                                               "sm_name": where.host or where.device},
            ))
    te = ctx.frame("ToolError")
    if not te.empty:
        fail = te[(te["tool"] == "sminfo") & te["message"].astype(str).str.contains(r"iberror|failed", case=False, na=False)]
        if not fail.empty:
            out.append(finding(
                "sm_query_failed",
                f"sminfo found no subnet manager to answer ({len(fail)} failed query line(s)"
                f"{' on ' + hosts_label(list(fail['host'].dropna())) if fail['host'].notna().any() else ''}).",
                fail, Location(host=one_value(fail["host"])), {"lines": len(fail)},
            ))
    return out


def _no_master(ctx: Context, known: pd.DataFrame) -> bool:
    """No reading is MASTER: is that the fabric's SM, or only a standby queried by its LID?
    A discovering/inactive SM, or the SM the HCA ports point at, answering as non-master is a problem."""
    if known["state"].isin(["DISCOVERING", "NOTACTIVE"]).any():
        return True
    ports = ctx.frame("IbPort")
    if ports.empty or "sm_lid" not in ports:
        return False
    port_lids = {int(x) for x in ports["sm_lid"].dropna() if int(x) > 0}
    return bool(port_lids & {int(x) for x in known["sm_lid"].dropna()})


def _port_sm_lids(ctx: Context) -> list[Finding]:
    ports = ctx.frame("IbPort")
    if ports.empty or "sm_lid" not in ports:
        return []
    ib = ports[(ports["link_layer"] == "InfiniBand") & ports["state"].notna() & (ports["state"] != "Down")]
    if ib.empty:
        return []
    out: list[Finding] = []
    nosm = ib[ib["sm_lid"].fillna(0).astype(int) == 0]
    if not nosm.empty:
        hosts = sorted({h for h in nosm["host"].dropna()})
        states = sorted(set(nosm["state"].astype(str)))
        out.append(finding(
            "ports_without_sm",
            f"{len(nosm)} InfiniBand port(s) with a link ({', '.join(states)}) report SM lid 0"
            f"{' on ' + hosts_label(hosts) if hosts else ''}: no subnet manager has configured them.",
            nosm, Location(host=hosts[0] if len(hosts) == 1 else None,
                           device=str(nosm.iloc[0]["device"]) if len(nosm) == 1 else None),
            {"ports": len(nosm), "hosts": len(hosts), "active": int((nosm["state"] == "Active").sum())},
        ))
    withsm = ib[ib["sm_lid"].fillna(0).astype(int) > 0]
    lids = sorted({int(x) for x in withsm["sm_lid"]})
    if len(lids) >= 2:
        out.append(finding(
            "sm_lid_inconsistent",
            f"HCA ports point at {len(lids)} different SM lids ({', '.join(map(str, lids))}): more than one SM"
            " has configured this fabric.",
            withsm.drop_duplicates("sm_lid"), attrs={"sm_lids": len(lids)},
        ))
    elif len(lids) == 1 and nosm.empty and len(withsm) >= 2:
        out.append(finding(
            "sm_lid_consistent",
            f"All {len(withsm)} active InfiniBand port(s) report the same SM lid {lids[0]}.",
            withsm.head(2), attrs={"ports": len(withsm), "sm_lid": lids[0]},
        ))
    return out


def names_label(ctx: Context, guid: str) -> str:
    from diagnose.evidence import names

    return names.label(ctx, guid)


def _log_sm(ctx: Context, sm: pd.DataFrame) -> tuple[Location, str | None, str | None]:
    """The node of the SM that wrote the log: the port GUID it bound to, else the single MASTER sminfo names,
    else the SM LID the HCA ports report; else the host folder the log was found in. With several MASTERs the
    log's own SM is not the place (the stray one is: sm_multiple_masters), so nothing is placed."""
    guid = _log_sm_guid(sm)
    smi = ctx.frame("SmInfo")
    if not smi.empty and smi.loc[smi["state"] == "MASTER", "sm_guid"].dropna().nunique() >= 2:
        return Location(), (names_label(ctx, guid) if guid else None), guid
    if guid is not None:
        where, lab = _sm_at(ctx, guid)
        if not where.is_empty():
            return where, lab, guid
    if guid is None and not smi.empty:
        masters = smi[smi["state"] == "MASTER"]
        mg = sorted({str(g) for g in masters["sm_guid"].dropna()})
        if len(mg) == 1:
            lids = masters["sm_lid"].dropna()
            where, lab = _sm_at(ctx, mg[0], int(lids.iloc[0]) if not lids.empty else None)
            if not where.is_empty():
                return where, lab, mg[0]
    ports = ctx.frame("IbPort")
    if guid is None and not ports.empty and "sm_lid" in ports:
        lids = pd.to_numeric(ports["sm_lid"], errors="coerce")
        lids = lids[lids > 0]
        if lids.nunique() == 1:
            where, lab = _sm_at(ctx, None, int(lids.iloc[0]))
            if not where.is_empty():
                return where, lab, None
    host = one_value(sm["host"]) if "host" in sm else None
    return Location(host=host), (f"{host} ({guid})" if host and guid else host or guid), guid


def _sm_log(ctx: Context) -> list[Finding]:
    sm = ctx.frame("SmEvent")
    if sm.empty:
        return []
    out: list[Finding] = []
    # the log is in time order: the first and last stamp of each file give the span (no per-line parsing)
    ends = sm.sort_values(["source", "line"]).groupby("source")["timestamp"].agg(["first", "last"])
    known = [t for t in (_secs(x) for x in pd.concat([ends["first"], ends["last"]])) if t is not None]
    span_min = round((max(known) - min(known)) / 60.0, 1) if len(known) >= 2 else None
    ups = sm[sm["category"] == "subnet_up"]
    heavy = sm[sm["category"] == "heavy_sweep"]
    lidc = sm[sm["category"] == "lid_change"]
    msgs = sm["message"].astype(str)
    changes = sm[msgs.str.contains(_STATE_CHANGE, na=False)]
    remote = sm[msgs.str.contains(_REMOTE_SM, na=False)]
    smport = sm[msgs.str.contains(r"SM port is down", case=False, na=False)]
    per_hour = round(len(ups) / (span_min / 60.0), 1) if span_min and span_min > 0 else None
    decisive = pd.concat([ups.tail(3), heavy.tail(2), lidc.head(2), changes.head(3), remote.head(2)])
    where, lab, sm_guid = _log_sm(ctx, sm)
    bind = sm[sm["message"].astype(str).str.contains("Mgmt class 0x81 binding to port GUID", regex=False, na=False)]
    bind = bind.tail(1) if sm_guid else sm.head(0)
    out.append(finding(
        "sm_sweep_activity",
        f"The SM log{f' of {lab}' if lab else ''} shows {len(ups)} SUBNET UP, {len(heavy)} heavy sweep(s),"
        f" {len(lidc)} LID change(s) and"
        f" {len(changes)} SM state change(s)" + (f" over {span_min:g} min" if span_min else "")
        + (f" ({per_hour:g} SUBNET UP per hour)" if per_hour is not None else "") + ".",
        pd.concat([bind, decisive]) if not decisive.empty else pd.concat([bind, sm.head(2)]), where,
        attrs={"subnet_ups": len(ups), "heavy_sweeps": len(heavy), "lid_changes": len(lidc),
               "state_changes": len(changes), "remote_sm": len(remote), "sm_port_down": len(smport),
               "masters_entered": int(changes["message"].astype(str).str.contains("MASTER", case=False).sum()),
               "span_min": span_min, "per_hour": per_hour, "sm_guid": sm_guid,
               "sm_name": where.host or where.device},
    ))
    traps = sm[sm["category"] == "port_state_change"]
    if not traps.empty:
        lids = traps["message"].astype(str).str.extract(_TRAP_LID)[0]
        counts = lids.value_counts()
        top = str(counts.index[0]) if not counts.empty else None
        out.append(finding(
            "sm_link_state_traps",
            f"The SM received {len(traps)} link state change trap(s) (trap 128)"
            + (f" from {len(counts)} switch LID(s); LID {top} sent {int(counts.iloc[0])}" if top else "") + ".",
            traps, Location(device=f"lid {top}" if top else None),
            {"traps": len(traps), "lids": int(len(counts)), "max_per_lid": int(counts.iloc[0]) if top else len(traps)},
        ))
    return out


# --------------------------------------------------------------------------------------------- partitions

MQP_NEW = re.compile(
    r"ibv_modify_qp failed with (?P<errno>\d+) (?P<err>[^,]+),\s*on dev (?P<dev>[\w.\-]+):(?P<port>-?\d+),"
    r"\s*curr state (?P<cur>\w+), next state (?P<next>\w+)"
)
MQP_OLD = re.compile(r"ibv_modify_qp failed with error (?P<err>.+?) errno (?P<errno>\d+)")
PKEY_TEXT = re.compile(r"p_?key|partition", re.I)


def env_value(ctx: Context, name: str) -> pd.DataFrame:
    env = ctx.frame("EnvSetting")
    if env.empty:
        return env
    return env[env["name"] == name]


def int_or_none(v: object) -> int | None:
    s = (sval(v) or "").strip().strip("'\"").rstrip(".")
    try:
        return int(s, 0)
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------- adaptive routing

_AR_ENGINE = re.compile(r"\b(?P<eng>[\w-]+) tables configured on all switches|routing engine[:= ]+'?(?P<eng2>[\w-]+)", re.I)
_AR_ENGINES = ("ar_updn", "ar_ftree", "ar_torus", "ar_dor", "ar_")


@extractor(fabric=True,
           reads=("EnvSetting", "NcclTestsRank", "NcclTestsRow", "NcclTestsRun", "PortCounter", "PortCounterWide",
                  "SmConfigOption", "SmEvent", "ToolMessage"),
           emits=("ar_off_with_congestion", "ar_off_with_scaling_drop", "nccl_ar_disabled_env", "nccl_ar_enabled_env",
                  "nccl_ar_threshold_high", "sm_routing_engine", "switch_ar_state"))
def adaptive_routing(ctx: Context) -> list[Finding]:
    """What says whether adaptive routing is in use: NCCL's AR settings, and the SM's routing engine
    or ibdiagnet's AR summary when those lines were captured."""
    out: list[Finding] = []
    ar = env_value(ctx, "NCCL_IB_ADAPTIVE_ROUTING")
    if not ar.empty:
        v = int_or_none(ar.iloc[-1]["value"])
        if v == 0:
            out.append(finding(
                "nccl_ar_disabled_env",
                f"NCCL_IB_ADAPTIVE_ROUTING=0: NCCL is told not to use adaptive-routing sends"
                f"{' on ' + hosts_label(list(ar['host'].dropna())) if ar['host'].notna().any() else ''}.",
                ar, attrs={"value": 0},
            ))
        elif v is not None:
            out.append(finding(
                "nccl_ar_enabled_env",
                f"NCCL_IB_ADAPTIVE_ROUTING={v}: NCCL uses adaptive-routing sends.",
                ar, attrs={"value": v},
            ))
    thr = env_value(ctx, "NCCL_IB_AR_THRESHOLD")
    if not thr.empty:
        v = int_or_none(thr.iloc[-1]["value"])
        buf = int_or_none(env_value(ctx, "NCCL_BUFFSIZE").iloc[-1]["value"]) if not env_value(ctx, "NCCL_BUFFSIZE").empty else None
        limit = buf or 4 * 1024 * 1024
        if v is not None and v >= limit:
            out.append(finding(
                "nccl_ar_threshold_high",
                f"NCCL_IB_AR_THRESHOLD={v} is not below the NCCL buffer size ({limit} bytes): no message is large"
                " enough for adaptive routing.",
                thr, attrs={"value": v, "buffsize": limit},
            ))
    out.extend(_sm_ar_lines(ctx))
    off = [f for f in out if f.kind in ("nccl_ar_disabled_env", "nccl_ar_threshold_high")
           or (f.kind == "sm_routing_engine" and not f.attrs.get("adaptive"))
           or (f.kind == "switch_ar_state" and not f.attrs.get("enabled"))]
    if off:
        measured, frame = _wait_table(ctx)
        if not measured.empty:
            _med, top, hot = _hot_ports(measured)
            rows = _top_rows(measured, 2)
            ev = [e for f in off for e in f.evidence[:1]] + row_refs(frame, rows, "ar_off_with_congestion")
            out.append(finding(
                "ar_off_with_congestion",
                f"Adaptive routing is off ({', '.join(sorted({f.kind for f in off}))}) while ports lose up to {top:.0%}"
                f" of their transmit capacity to credit waits" + (f" ({len(hot)} hot port(s))" if len(hot) else "") + ".",
                None, attrs={"max_ratio": round(top, 4), "hot_ports": len(hot), "config": len(off)}, evidence=ev,
            ))
        from diagnose.evidence.extractors.scaling import busbw_scaling  # the scaling curve, measured there

        for drop in busbw_scaling(ctx):
            if int(drop.attrs.get("bad_nodes") or 0) < 8:
                continue
            out.append(finding(
                "ar_off_with_scaling_drop",
                f"Adaptive routing is off ({', '.join(sorted({f.kind for f in off}))}) and {drop.summary}",
                None, location=next((f.location for f in off if not f.location.is_empty()), None),
                attrs={**drop.attrs, "config": len(off)},
                evidence=[e for f in off for e in f.evidence[:1]] + drop.evidence[:2],
            ))
    return out


def _sm_ar_lines(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    sm = ctx.frame("SmEvent")
    texts = []
    if not sm.empty:
        texts.append(sm[["source", "line", "text", "message"]])
    tm = ctx.frame("ToolMessage")
    if not tm.empty:
        texts.append(tm[["source", "line", "text", "message"]])
    if texts:
        tx = pd.concat(texts, ignore_index=True)
        msg = tx["message"].astype(str)
        eng = msg.str.extract(_AR_ENGINE)
        eng = eng["eng"].fillna(eng["eng2"])
        hit = tx[eng.notna()]
        if not hit.empty:
            name = str(eng[eng.notna()].iloc[-1]).lower()
            is_ar = name.startswith(_AR_ENGINES)
            out.append(finding(
                "sm_routing_engine",
                f"The subnet manager routes with '{name}'" + ("" if is_ar else ", which is not an adaptive-routing engine")
                + ".", hit.tail(2), attrs={"engine": name, "adaptive": is_ar},
            ))
        arsum = tx[msg.str.contains(r"Adaptive Routing is (?:enabled|disabled)|AR is (?:enabled|disabled|not)", case=False,
                                    na=False)]
        if not arsum.empty:
            last = str(arsum.iloc[-1]["message"])
            enabled = bool(re.search(r"enabled on [1-9]", last, re.I))
            out.append(finding(
                "switch_ar_state",
                f"ibdiagnet/SM: '{last[:100]}'.", arsum.tail(1), attrs={"enabled": enabled},
            ))
    if not any(f.kind == "sm_routing_engine" for f in out):
        out.extend(_sm_conf_ar(ctx))
    return out


_AR_OFF_VALUES = frozenset({"0", "false", "disable", "disabled", "off", "no"})
_AR_CONF_KEYS = ("ar_mode", "adaptive_routing", "ar_enable")


def _sm_conf_ar(ctx: Context) -> list[Finding]:
    """The routing engine and AR switches an SM configuration file (opensm.conf) sets, when no log line says which
    engine runs. The first engine of a list is the one OpenSM uses unless it fails."""
    conf = ctx.frame("SmConfigOption")
    if conf.empty:
        return []
    eng = conf[conf["key"] == "routing_engine"]
    eng = eng[~eng["value"].astype(str).str.lower().isin(["(null)", "null", ""])]
    arkeys = conf[conf["key"].isin(_AR_CONF_KEYS)]
    off = arkeys[arkeys["value"].astype(str).str.lower().isin(_AR_OFF_VALUES)]
    name = str(eng.iloc[-1]["value"]).split(",")[0].strip().lower() if not eng.empty else None
    if name is None and off.empty:
        return []  # no engine line and no AR switch set off: nothing to weigh
    is_ar = bool(name and name.startswith(_AR_ENGINES)) and off.empty
    rows = pd.concat([eng.tail(1), off.tail(1)]) if not off.empty else eng.tail(1)
    host = sval(rows.iloc[0]["host"]) if "host" in rows.columns else None
    why = (f"routes with '{name}'" if name else "has no routing_engine line") + (
        f" and sets {off.iloc[-1]['key']} {off.iloc[-1]['value']}" if not off.empty else "")
    return [finding(
        "sm_routing_engine",
        f"The subnet manager configuration {why}" + ("" if is_ar else ": adaptive routing is not configured") + ".",
        rows, location=Location(host=host) if host else None,
        attrs={"engine": name or "", "adaptive": is_ar, "source": "opensm_conf"},
    )]

