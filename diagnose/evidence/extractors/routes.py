"""Routing tables: how a leaf's linear forwarding table (``ibroute`` / ``dump_lfts.sh``) spreads the remote hosts
over its uplinks.

A leaf reaches every other switch's LID through an uplink, and each remote host's LIDs through one uplink the SM
chose. With balanced up/down routing (OpenSM's updn/ftree, rdma-core ``check_lft_balance.pl``) each of the N uplinks
carries about 1/N of the remote destinations; a table that sends several times its share through one uplink puts
that share of the job's traffic on one cable while its siblings idle, with no error counter anywhere. Uplinks are the
ports through which the table routes some switch LID; a leaf is a switch with a port that leads to exactly one host
(a spine's ports all lead to leaves, whose host counts may differ legitimately, so spines are not judged).
"""

from __future__ import annotations

import pandas as pd

from diagnose.evidence.context import Context, finding
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding, Location
from diagnose.topology.fabric import switch_name

MIN_DESTS_PER_UPLINK = 2  # fewer remote destinations than this per uplink cannot be spread evenly anyway


@extractor(fabric=True,
           reads=("FabricLink", "FabricNode", "FabricPortState", "IbPort", "LftEntry"),
           emits=("lft_uplink_imbalance", "lft_uplinks_balanced"))
def lft_balance(ctx: Context) -> list[Finding]:
    lft = ctx.frame("LftEntry")
    if lft.empty:
        return []
    lft = _resolved(ctx, lft)
    out: list[Finding] = []
    worst: float = 0.0
    judged = 0
    for guid, rows in lft.groupby("switch_guid", sort=True):
        rows = rows[rows["out_port"] > 0]
        kinds = rows["dest_kind"].astype(str)
        up = sorted({int(p) for p in rows.loc[kinds == "SW", "out_port"]})
        ca = rows[kinds == "CA"]
        if len(up) < 2 or ca.empty:
            continue
        hosts_per_port = ca.groupby("out_port")["dest_guid"].nunique()
        down = [int(p) for p, n in hosts_per_port.items() if n == 1 and int(p) not in up]
        if not down:
            continue  # not a leaf: no port leads to exactly one host
        remote = ca[ca["out_port"].isin(up)]
        counts = remote.groupby("out_port").size().reindex(up, fill_value=0)
        total = int(counts.sum())
        if total < MIN_DESTS_PER_UPLINK * len(up):
            continue
        judged += 1
        mean = total / len(up)
        port = int(counts.idxmax())
        imbalance = round(float(counts.max()) / mean, 3)
        worst = max(worst, imbalance)
        described = rows["switch_name"].dropna()
        name = switch_name(str(described.iloc[0]) if not described.empty else None, str(guid))
        if name == str(guid) and ctx.fabric is not None and str(guid) in ctx.fabric.graph:
            name = ctx.fabric.name(str(guid))  # a dump that names no switch (OpenSM's): the topology does
        if imbalance < 1.5:
            continue
        hot = remote[remote["out_port"] == port]
        out.append(finding(
            "lft_uplink_imbalance",
            f"{name}'s forwarding table sends {int(counts.max())} of its {total} remote host LIDs through uplink "
            f"port {port} ({imbalance:.1f}x the even share of {mean:.1f} over {len(up)} uplinks: "
            + ", ".join(f"P{p} {int(n)}" for p, n in counts.items()) + ").",
            pd.concat([rows.head(1), hot.head(3)]), Location(device=name, port=port),
            {"switch": name, "port": port, "uplinks": len(up), "dests": total, "imbalance": imbalance,
             "max_share": round(float(counts.max()) / total, 3)},
        ))
    if judged and not out:
        out.append(finding(
            "lft_uplinks_balanced",
            f"The forwarding tables of {judged} leaf switch(es) spread their remote hosts evenly over their uplinks "
            f"(at most {worst:.1f}x the even share).",
            lft.head(1), attrs={"switches": judged, "max_imbalance": worst}))
    return out


def _resolved(ctx: Context, lft: pd.DataFrame) -> pd.DataFrame:
    """Rows whose destination the dump does not name (OpenSM's ``osm_ucast_mgr_dump_ucast_routes``, ``ibroute -n``)
    get its kind and GUID from the topology's LIDs."""
    fab = ctx.fabric
    if fab is None or not lft["dest_kind"].isna().any():
        return lft
    lft = lft.copy()
    miss = lft["dest_kind"].isna()
    guids = lft.loc[miss, "dest_lid"].map(lambda lid: fab.by_lid.get(int(lid)))
    lft.loc[miss, "dest_guid"] = guids
    lft.loc[miss, "dest_kind"] = guids.map(lambda g: fab.kind(g) if isinstance(g, str) else None)
    return lft


# ibdiagnet's routing check over the switches' LFTs (real lines quoted in tests/data/ibdiagnet_log/README.md):
#   Unassigned LFT for lid:4 Dead end at:S7cfe900300bdf4f0/N7cfe900300bdf4f0 PLFT:0
#   Fail to find a path from:r1i3n6/U1/1 to:r1i3n12/U1/1
#   Error in mark route from:gs1/U1 SLID:108 to DLID:103
#   0x0001 : UNREACHABLE   (a row of OpenSM's / ibdiagnet2.fdbs routing dump, read as "LID 1 UNREACHABLE from ...")
_ROUTE_ERR = r"Unassigned LFT for lid|Fail to find a path from|Error in mark route from|\bUNREACHABLE from switch"
_DEAD_END = r"Dead end at:\s*S[0-9a-fA-F]+/N(?P<guid>[0-9a-fA-F]+)"


@extractor(fabric=True,
           reads=("FabricLink", "FabricNode", "FabricPortState", "IbPort", "ToolMessage"),
           emits=("sm_routes_incomplete",))
def ibdiagnet_route_errors(ctx: Context) -> list[Finding]:
    """Destinations the programmed forwarding tables do not reach: the subnet manager left LIDs unrouted (a routing
    engine that failed and fell back, switches it could not program, a sweep that did not finish)."""
    tm = ctx.frame("ToolMessage")
    if tm.empty:
        return []
    msg = tm["message"].astype(str)
    hit = tm[msg.str.contains(_ROUTE_ERR, na=False)]
    if hit.empty:
        return []
    hmsg = hit["message"].astype(str)
    dead = hmsg.str.extract(_DEAD_END)["guid"].dropna()
    at = ""
    if not dead.empty:  # named in the text only: the cause (the SM) is not at the switch where a route ends
        fab = ctx.fabric
        guids = sorted({"0x" + str(g).lower().zfill(16) for g in dead})
        names = [fab.name(g) if fab is not None and g in fab.graph else g for g in guids]
        at = f", dead ends at {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}"
    n_dead = int(hmsg.str.contains("Unassigned LFT|UNREACHABLE from switch").sum())
    n_path = int(hmsg.str.contains("Fail to find a path|Error in mark route").sum())
    return [finding(
        "sm_routes_incomplete",
        f"The routing check (ibdiagnet, or the SM's routing dump) found {len(hit)} route(s) the switches' forwarding"
        " tables do not complete"
        f" ({n_dead} LID(s) with no LFT entry at a switch{at}, {n_path} source/destination pair(s) with no path): the"
        " subnet manager did not program complete routes.",
        hit.head(4), None, {"errors": len(hit), "unassigned": n_dead, "no_path": n_path},
    )]
