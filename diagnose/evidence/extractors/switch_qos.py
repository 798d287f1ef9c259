"""A RoCE switch's own view of the lossless class: drops on the lossless queue, and whether PFC ever paused.

A lossless priority never drops: when a switch queue fills, PFC pauses the sender on that priority (the switch's
``show pfc counters`` counts the pause frames it sent, ``Tx``, and received, ``Rx``). Drops on a lossless queue
(``show queue counters`` ``Drop/pkts`` of ``UC<prio>``) therefore mean the lossless configuration is broken on
that switch: PFC not enabled for the priority on the port (no pause frame counted there at all), or headroom and
buffers too small to absorb the pause's round trip (pause frames counted, drops anyway). Drops on a lossy queue are
ordinary congestion loss and say nothing about PFC.

Which priorities are lossless: the hosts' ``mlnx_qos`` PFC settings when collected, else the priority of
``NCCL_IB_TC`` (DSCP = TC >> 2, priority = DSCP >> 3 by the default DSCP map), else SONiC's default lossless
priorities 3 and 4 (``pfc_enable: "3,4"`` in sonic-buildimage's QoS templates).
"""

from __future__ import annotations

import pandas as pd

from diagnose.evidence.context import Context, finding
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding, Location

SONIC_DEFAULT_LOSSLESS = (3, 4)


def _lossless(ctx: Context) -> tuple[set[int], str]:
    qos = ctx.frame("RoceQosConfig")
    if not qos.empty and "pfc_prios" in qos:
        got = {int(p) for s in qos["pfc_prios"].dropna() for p in str(s).split(",") if p.strip().isdigit()}
        if got:
            return got, "the hosts' PFC setting (mlnx_qos)"
    env = ctx.frame("EnvSetting")
    if not env.empty:
        tc = env[env["name"] == "NCCL_IB_TC"]
        if not tc.empty and str(tc.iloc[-1]["value"]).strip().isdigit():
            prio = (int(str(tc.iloc[-1]["value"]).strip()) >> 2) >> 3
            return {prio}, f"NCCL_IB_TC={tc.iloc[-1]['value']} (priority {prio})"
    return set(SONIC_DEFAULT_LOSSLESS), "SONiC's default lossless priorities 3 and 4"


@extractor(reads=("EnvSetting", "RoceQosConfig", "SwitchPfcCount", "SwitchQueueCount"),
           emits=("switch_lossless_queue_drops", "switch_lossless_queues_clean"))
def switch_lossless_queues(ctx: Context) -> list[Finding]:
    q = ctx.frame("SwitchQueueCount")
    if q.empty:
        return []
    prios, basis = _lossless(ctx)
    pfc = ctx.frame("SwitchPfcCount")
    q = q.assign(sw=q["host"].fillna(""), drops=pd.to_numeric(q["drop_pkts"], errors="coerce").fillna(0))
    lossless = q[q["prio"].isin(sorted(prios))]
    if lossless.empty:
        return []
    hit = lossless[lossless["drops"] > 0]
    out: list[Finding] = []
    if hit.empty:
        out.append(finding(
            "switch_lossless_queues_clean",
            f"The switch's lossless queues (priority {','.join(map(str, sorted(prios)))}, from {basis}) dropped"
            f" nothing on {lossless['port'].nunique()} port(s).",
            lossless.head(2), attrs={"ports": int(lossless["port"].nunique())},
        ))
        return out
    if not pfc.empty:
        pfc = pfc.assign(sw=pfc["host"].fillna(""), n=pd.to_numeric(pfc["frames"], errors="coerce").fillna(0))
    for sw, grp in hit.groupby("sw", sort=True):
        grp = grp.sort_values(["drops", "port"], ascending=[False, True])
        top = grp.iloc[0]
        drop_prios = sorted(set(grp["prio"].astype(int)))
        seen = pfc[(pfc["sw"] == sw) & pfc["prio"].isin(drop_prios)] if not pfc.empty else None
        at_top = seen[seen["port"] == top["port"]] if seen is not None else None
        paused = int(seen["n"].sum()) if seen is not None and not seen.empty else None
        if paused is None:
            pfc_txt = "PFC counters not collected"
        elif paused == 0:
            pfc_txt = (f"and not one PFC pause frame was sent or received on priority {','.join(map(str, drop_prios))}"
                       " on any port: PFC is not enabled there")
        else:
            pfc_txt = (f"although {paused} PFC pause frames were counted on that priority (pausing started too late:"
                       " headroom or buffers)")
        where = f"{sw} " if sw else ""
        out.append(finding(
            "switch_lossless_queue_drops",
            f"The switch {where}dropped {int(grp['drops'].sum())} packets on its lossless queue"
            f" ({', '.join(f'{p} {q_}' for p, q_ in zip(grp['port'].head(3), grp['queue'].head(3), strict=True))}"
            f"{', ...' if len(grp) > 3 else ''}; lossless by {basis}), {pfc_txt}.",
            pd.concat([grp.head(3), at_top.head(1)]) if at_top is not None else grp.head(3),
            Location(device=f"{where}{top['port']}"),
            {"drops": int(grp["drops"].sum()), "ports": int(grp["port"].nunique()), "pfc_frames": paused,
             "pfc_seen": None if paused is None else paused > 0,
             "port_pfc_frames": None if paused is None or at_top is None else int(at_top["n"].sum()),
             "prio": int(top["prio"])},
        ))
    return out
