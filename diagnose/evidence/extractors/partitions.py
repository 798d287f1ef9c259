"""Partitions: the job's P_Key against each host's P_Key table and the SM's partition configuration.

NCCL puts its queue pairs in the partition found at index ``NCCL_IB_PKEY`` of each port's P_Key table (default 0).
Every host of the job must hold the same partition (low 15 bits) at that index, and of two ends at least one must
be a full member (bit 15). Sources: ``NCCL_IB_PKEY`` in the job environment, P_Key tables (``smpquery pkeys``,
sysfs ``ports/N/pkeys/I``), OpenSM ``partitions.conf`` membership, ``ibv_modify_qp`` failures by errno and QP
transition, partition (P_Key) errors in the SM log and the fabric tools, and partition-enforcement (constraint)
drops in the port counters.

Places are host names: a table read by LID or GUID and a ``partitions.conf`` GUID are named through the bundle's
topology sources (:mod:`diagnose.evidence.names`: node descriptions, ibstat port/node GUIDs of a host folder).
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from diagnose.evidence import names
from diagnose.evidence.context import Context, finding, hosts_label, primary, sval, val
from diagnose.evidence.counters import CounterTable
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.fabric_state import (
    MQP_NEW,
    MQP_OLD,
    PKEY_TEXT,
    env_value,
    int_or_none,
    one_value,
    port_where,
    row_refs,
)
from diagnose.evidence.extractors.links import port_index_of
from diagnose.models.diagnosis import Finding, Location
from diagnose.parsers._pkeys import DEFAULT_PKEY, FULL_BIT, KEY_MASK, pkey_hex

NCCL_DEFAULT_INDEX = 0  # NCCL_IB_PKEY default (NCCL env documentation)
GROUPS_ALL_CAS = ("ALL", "ALL_CAS")


def _counters(ctx: Context) -> tuple[pd.DataFrame, CounterTable]:
    table = ctx.counters
    return table.series, table


@extractor(fabric=True,
           reads=("CudaError", "EnvSetting", "FabricLink", "FabricNode", "FabricPortState", "FreeText", "IbPort",
                  "KernelEvent", "MessageHit", "Mlx5Event", "NcclWarn", "PartitionMember", "PeermemEvent", "PgError",
                  "PkeyEntry", "PortCounter", "PortCounterWide", "SmEvent", "SmInfo", "ToolError", "ToolMessage",
                  "WatchdogTimeout"),
           emits=("constraint_errors", "nccl_ib_pkey_set", "pkey_index_differs", "pkey_index_rejected",
                  "pkey_limited_only", "pkey_missing_on_host", "pkey_present_everywhere", "qp_modify_error",
                  "sm_partition_errors", "tool_partition_errors"))
def partitions(ctx: Context) -> list[Finding]:
    """NCCL_IB_PKEY (a P_Key table index), the P_Key tables and partitions.conf membership of the job's hosts,
    ibv_modify_qp failures by errno and QP transition, partition (P_Key) errors in the SM log and ibdiagnet, and
    partition-enforcement drops in the port counters."""
    out: list[Finding] = []
    pkey = env_value(ctx, "NCCL_IB_PKEY")
    idx: int | None = None
    if not pkey.empty:
        vals = sorted({str(v).strip() for v in pkey["value"]})
        idx = int_or_none(pkey.iloc[-1]["value"])
        out.append(finding(
            "nccl_ib_pkey_set",
            f"NCCL_IB_PKEY={', '.join(vals)}: NCCL puts its queue pairs in the partition at that index of each"
            " port's P_Key table" + (" (index 0, the default)" if idx == 0 else "") + ".",
            pkey, attrs={"index": idx, "nondefault": idx not in (None, 0), "values": len(vals)},
        ))
    out.extend(_tables(ctx, idx if idx is not None else NCCL_DEFAULT_INDEX, pkey.tail(1)))
    msgs = ctx.messages
    qp_rows = pd.DataFrame()
    if not msgs.empty:
        m = primary(msgs[msgs["message"].str.contains("ibv_modify_qp failed", na=False)])
        if not m.empty:
            new = m["message"].str.extract(MQP_NEW)
            old = m["message"].str.extract(MQP_OLD)
            m = m.assign(errno=new["errno"].fillna(old["errno"]), nxt=new["next"], cur=new["cur"], ibdev=new["dev"])
            m = m[m["errno"].notna()]
            qp_rows = m
            for (errno, nxt), grp in m.groupby([m["errno"], m["nxt"].fillna("")], sort=True):
                hosts = sorted({h for h in grp["host"].dropna()})
                out.append(finding(
                    "qp_modify_error",
                    f"{len(grp)} ibv_modify_qp failure(s) with errno {errno}"
                    + (f" moving the QP {sval(grp['cur'].iloc[0]) or '?'} -> {nxt}" if nxt else "")
                    + (f" on {hosts_label(hosts)}" if hosts else "") + ".",
                    grp, Location(host=hosts[0] if len(hosts) == 1 else None, device=one_value(grp["ibdev"])),
                    {"errno": int(errno), "next_state": nxt or None, "hosts": len(hosts)},
                ))
    if not qp_rows.empty and idx not in (None, 0):
        init_fail = qp_rows[(qp_rows["errno"] == "22") & (qp_rows["nxt"].fillna("INIT") == "INIT")]
        if not init_fail.empty:
            hosts = sorted({h for h in init_fail["host"].dropna()})
            out.append(finding(
                "pkey_index_rejected",
                f"NCCL_IB_PKEY={idx} and ibv_modify_qp fails with EINVAL moving the QP to INIT (the transition that"
                f" sets the P_Key index) on {hosts_label(hosts) or 'the job hosts'}: that index holds no usable"
                " partition key.",
                pd.concat([pkey.tail(1), init_fail.head(3)]),
                Location(host=hosts[0] if len(hosts) == 1 else None, device=one_value(init_fail["ibdev"])),
                {"index": idx, "hosts": len(hosts)},
            ))
    sm = ctx.frame("SmEvent")
    if not sm.empty:
        pk = sm[sm["message"].astype(str).str.contains(r"Bad P_Key|P_Key violation|partition|pkey", case=False, na=False)]
        if not pk.empty:
            # 'Bad P_Key:0x.. on SL:.. from LID1:<sender> ..': name the senders when their LIDs are in the bundle
            senders = pk["message"].astype(str).str.extract(r"Bad P_Key:(0x[0-9a-fA-F]+) on SL:\d+ from LID1:(\d+)")
            by_lid = port_index_of(ctx)[0]
            who = {(sval(r["host"]), sval(r["device"])) for lid in senders[1].dropna()
                   if (r := by_lid.get(("*", int(lid)))) is not None}
            hosts = sorted({h for h, _ in who if h})
            keys = sorted(set(senders[0].dropna()))
            traps = int(pk["message"].astype(str).str.contains(r"num:25[79] \(Bad P_Key", na=False).sum())
            out.append(finding(
                "sm_partition_errors",
                f"The SM log has {len(pk)} partition/P_Key line(s)" + (f", {traps} Bad P_Key trap(s)" if traps else "")
                + (f" for key {', '.join(keys)}" if keys else "")
                + (f" sent from {hosts_label(hosts)}" if hosts else "")
                + f" (e.g. '{str(pk.iloc[0]['message'])[:90]}').",
                pk, Location(host=hosts[0] if len(hosts) == 1 else None),
                {"lines": len(pk), "bad_pkey_traps": traps, "sender_hosts": len(hosts)},
            ))
    tm = ctx.frame("ToolMessage")
    if not tm.empty:
        pk = tm[tm["level"].isin(["error", "warning"]) & tm["message"].astype(str).str.contains(PKEY_TEXT, na=False)]
        if not pk.empty:
            out.append(finding(
                "tool_partition_errors",
                f"{len(pk)} fabric-tool error/warning line(s) about P_Keys/partitions.",
                pk, attrs={"lines": len(pk)},
            ))
    t, frame = _counters(ctx)
    if not t.empty:
        ce = t[t["counter"].isin(["port_rcv_constraint_errors", "port_xmit_constraint_errors"]) & (t["last"] > 0)]
        if not ce.empty:
            rising = ce[(ce["snaps"] > 1) & (ce["inc"] > 0)]
            best = (rising if not rising.empty else ce).sort_values("last", ascending=False).iloc[0]
            loc, switch, label = port_where(ctx, best["host_k"], best["dev_k"], best["guid_k"], int(best["lid_k"]),
                                             int(best["port_k"]))
            out.append(finding(
                "constraint_errors",
                f"Partition-enforcement (constraint) errors on {len(ce)} counter(s); {best['counter']} = {int(best['last'])}"
                f" on {label}" + (f", +{int(best['inc'])} between snapshots" if not rising.empty else "") + ".",
                None, loc,
                {"counters": len(ce), "rising": not rising.empty, "value": int(best["last"]), "switch": switch},
                evidence=row_refs(frame, [int(e) - 1 for e in ce["end"]], "constraint_errors"),
            ))
    return out


# --------------------------------------------------------------------------------------------- P_Key tables


def _placed(ctx: Context, pk: pd.DataFrame) -> pd.DataFrame:
    """The table rows with the host/device of the port each belongs to; a port read by LID/GUID is named through
    the topology sources, a switch port's table is dropped (the job's ports are HCA ports)."""
    pk = pk.copy()
    remote = pk["remote"].fillna(False).astype(bool) if "remote" in pk.columns else pd.Series(False, index=pk.index)
    where: dict[tuple[object, object], tuple[str | None, str | None, bool]] = {}
    for g, lid in set(zip(pk.loc[remote, "guid"].map(sval), pk.loc[remote, "lid"].map(val), strict=True)):
        n = names.node(ctx, guid=g, lid=lid)
        if n is not None and n.kind == "SW":
            where[(g, lid)] = (None, None, True)
        elif n is not None:
            where[(g, lid)] = (n.host or n.name, n.device, False)
        else:
            where[(g, lid)] = (f"lid {int(lid)}" if lid is not None else (g or "?"), None, False)  # type: ignore[call-overload]
    host = pk["host"].astype(object).where(pk["host"].notna(), None)
    dev = pk["device"].astype(object).where(pk["device"].notna(), None)
    switch = pd.Series(False, index=pk.index)
    if remote.any():
        keys = list(zip(pk.loc[remote, "guid"].map(sval), pk.loc[remote, "lid"].map(val), strict=True))
        host.loc[remote] = [where[k][0] for k in keys]
        dev.loc[remote] = [where[k][1] for k in keys]
        switch.loc[remote] = [where[k][2] for k in keys]
    pk["place_host"] = host
    pk["place_dev"] = dev.fillna("")
    pk["place_port"] = pk["port"].map(val).fillna(0) if "port" in pk.columns else 0
    pk["low"] = pk["pkey"].astype(int) & KEY_MASK
    pk = pk[~switch & pk["place_host"].notna()]
    # one table per port and per capture: the last read of a port wins (a loop run twice)
    return pk


def _cat(*dfs: pd.DataFrame) -> pd.DataFrame:
    parts = [d[["source", "line", "text"]] for d in dfs if not d.empty and "source" in d.columns]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _job_key(at_idx: pd.DataFrame, idx: int) -> int | None:
    """The partition (low 15 bits) most ports hold at ``idx``: the job's; a tenant key before the default one."""
    counts = Counter(at_idx["low"].tolist())
    if not counts:
        return None
    top = max(counts.values())
    best = sorted(k for k, c in counts.items() if c == top)
    non_default = [k for k in best if k != DEFAULT_PKEY]
    if idx != 0 and non_default:
        return non_default[0]
    return best[0]


def _member_hosts(ctx: Context, low: int) -> tuple[bool, dict[str, str], pd.DataFrame]:
    """From partitions.conf: whether partition ``low`` has ALL/ALL_CAS, its members by host name (-> membership),
    and its rows (empty when the configuration is not in the bundle or has no such partition)."""
    pm = ctx.frame("PartitionMember")
    if pm.empty:
        return False, {}, pm
    part = pm[pm["pkey"].map(val).map(lambda v: v is not None and (int(v) & KEY_MASK) == low)]  # type: ignore[arg-type]
    groups = set(part["member"].astype(str)) & set(GROUPS_ALL_CAS)
    by_host: dict[str, str] = {}
    for g, ms in zip(part["member"].astype(str), part["membership"].astype(str), strict=True):
        if not g.startswith("0x"):
            continue
        h = names.name_for(ctx, guid=g)
        if h is not None:
            by_host[h] = "full" if by_host.get(h) == "full" or ms in ("full", "both") else ms
    return bool(groups), by_host, part


def _job_hosts(ctx: Context) -> list[str]:
    ib = ctx.frame("IbPort")
    if ib.empty or "host" not in ib.columns:
        return []
    ll = ib["link_layer"].astype(str) if "link_layer" in ib.columns else pd.Series("", index=ib.index)
    ib = ib[ll != "Ethernet"]
    return sorted({str(h) for h in ib["host"].dropna()})


def _tables(ctx: Context, idx: int, env_row: pd.DataFrame) -> list[Finding]:
    pk = ctx.frame("PkeyEntry")
    out: list[Finding] = []
    placed = _placed(ctx, pk) if not pk.empty else pd.DataFrame()
    ports = placed.groupby(["place_host", "place_dev", "place_port"], sort=True) if not placed.empty else None
    at_idx = placed[placed["index"] == idx] if not placed.empty else placed
    low = _job_key(at_idx, idx) if not placed.empty else None
    if low is None:
        return out
    held = at_idx[at_idx["low"] == low]
    full_key = FULL_BIT | low
    key_label = pkey_hex(full_key) or "?"
    has_all, members, part_rows = _member_hosts(ctx, low)
    config = not part_rows.empty

    missing: dict[str, list[tuple[str, int | None, pd.DataFrame]]] = {}
    differs: list[tuple[str, str, int, int | None, pd.DataFrame]] = []
    limited_ports: dict[str, list[bool]] = {}
    assert ports is not None
    for (h, d, _p), rows in ports:
        here = rows[rows["index"] == idx]
        mine = here[here["low"] == low]
        if not mine.empty:
            limited_ports.setdefault(str(h), []).append(not bool(mine["full"].astype(bool).any()))
            continue
        there = rows[rows["low"] == low]
        k = int(here["pkey"].iloc[0]) if not here.empty else None
        if not there.empty:
            differs.append((str(h), str(d), int(there["index"].iloc[0]), k, pd.concat([here, there.head(1)])))
        else:
            missing.setdefault(str(h), []).append((str(d), k, rows.head(2)))
    table_hosts = {str(h) for h, _d, _p in ports.groups}
    # hosts the SM's configuration leaves out of the partition (named by the GUIDs a host folder shows)
    config_missing = [h for h in _job_hosts(ctx) if config and not has_all and h not in members]

    all_missing = sorted(set(missing) | {h for h in config_missing if h not in table_hosts})
    for h in all_missing:
        devs = [d for d, _k, _r in missing.get(h, [])]
        in_table = h in missing
        in_conf = (h in config_missing) if config else None
        rows = [r for _d, _k, r in missing.get(h, [])]
        conf_rows = part_rows.head(2) if in_conf else pd.DataFrame()
        ib = ctx.frame("IbPort")
        host_rows = ib[ib["host"] == h].head(1) if not in_table and not ib.empty else pd.DataFrame()
        ev = _cat(*rows, conf_rows, host_rows, env_row)
        helds = sorted({pkey_hex(k) or "0x0000" for _d, k, _r in missing.get(h, [])})
        what = (f"index {idx} of its P_Key table holds {', '.join(helds)} on {len(devs)} port(s)"
                f" ({', '.join(d for d in devs if d) or 'the port read'}), not {key_label}" if in_table
                else "no P_Key table of it is in the bundle, and the partition configuration does not list its port"
                     " GUIDs")
        out.append(finding(
            "pkey_missing_on_host",
            f"{h} is not in the job's partition {key_label}: {what}"
            + ("; partitions.conf does not list it either" if in_table and in_conf else "")
            + (f" (the other {len(table_hosts - set(missing))} host(s) hold it at index {idx})"
               if table_hosts - set(missing) else "")
            + (f"; all hosts without it: {hosts_label(all_missing)}" if len(all_missing) > 1 else "") + ".",
            ev, Location(host=h, device=devs[0] if len(set(devs)) == 1 and devs[0] else None),
            {"pkey": key_label, "index": idx, "hosts": len(all_missing), "ports": len(devs),
             "table": in_table, "config": in_conf},
        ))
    if differs:
        hs = sorted({h for h, *_ in differs})
        other = differs[0][2]
        out.append(finding(
            "pkey_index_differs",
            f"The job's partition {key_label} sits at index {idx} on most ports but at index {other} on"
            f" {hosts_label(hs)}: with NCCL_IB_PKEY={idx} those ports send with"
            f" {pkey_hex(differs[0][3]) or '0x0000'} and their peers drop the packets.",
            _cat(*[r for *_x, r in differs[:4]], env_row),
            Location(host=hs[0] if len(hs) == 1 else None),
            {"pkey": key_label, "index": idx, "other_index": other, "hosts": len(hs)},
        ))
    limited = sorted(h for h, flags in limited_ports.items() if all(flags))
    full_hosts = sorted(h for h, flags in limited_ports.items() if not all(flags))
    if len(limited) >= 2:
        out.append(finding(
            "pkey_limited_only",
            f"{hosts_label(limited)} hold the job's partition {pkey_hex(low)} at index {idx} only as limited members"
            " (bit 15 clear): two limited members cannot talk to each other"
            + (f"; {hosts_label(full_hosts)} are full members" if full_hosts else "") + ".",
            _cat(held[held["place_host"].isin(limited)].head(4), env_row),
            Location(host=limited[0]),
            {"pkey": pkey_hex(low), "index": idx, "hosts": len(limited), "full_hosts": len(full_hosts)},
        ))
    if not missing and not differs and not config_missing and len(limited) < 2 and limited_ports:
        hs = sorted(limited_ports)
        out.append(finding(
            "pkey_present_everywhere",
            f"Every P_Key table read ({len(hs)} host(s): {hosts_label(hs)}) holds the job's partition {key_label} at"
            f" index {idx}" + (" as a full member" if not limited else f", {hosts_label(limited)} as a limited member")
            + (", and partitions.conf lists every job host" if config else "") + ".",
            _cat(held.head(4), part_rows.head(1), env_row),
            None,
            {"pkey": key_label, "index": idx, "hosts": len(hs), "full": not limited, "config": config},
        ))
    return out
