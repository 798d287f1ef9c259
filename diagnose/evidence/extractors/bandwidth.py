"""Measured bus bandwidth against what the hardware should give.

nccl-tests reports busbw already normalised by the collective's bus factor (AllReduce 2(n-1)/n,
AllGather/ReduceScatter (n-1)/n; nccl-tests doc/PERFORMANCE.md), so it compares directly with the
hardware's bottleneck: across nodes, the per-node aggregate of the NICs NCCL uses (a ring's busbw
is bounded by the NIC bandwidth of a node); within one node, NVLink.
"""

from __future__ import annotations

import re

import pandas as pd

from diagnose.evidence.context import Context, finding, sval
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding

LARGE_MSG = 64 * 1024 * 1024

# Reference designs when the bundle does not show the NICs: (GPU name pattern, NIC Gb/s per GPU, NVLink busbw GB/s)
_REFERENCE = (
    (re.compile(r"H100|H200|H800|GH200", re.I), 400.0, 360.0, "HGX H100 reference design: one 400 Gb/s NIC per GPU"),
    (re.compile(r"A100|A800", re.I), 200.0, 230.0, "HGX A100 reference design: one 200 Gb/s NIC per GPU"),
    (re.compile(r"B200|GB200|B300", re.I), 400.0, 650.0, "HGX B200 reference design: one 400 Gb/s NIC per GPU"),
)


def _node_nic_gbs(ctx: Context) -> float | None:
    """GB/s of the NICs NCCL uses on the best-equipped host (computed once per run)."""
    if "bandwidth.node_nic_gbs" not in ctx.cache:
        ctx.cache["bandwidth.node_nic_gbs"] = _max_host_nic_gbs(ctx)
    return ctx.cache["bandwidth.node_nic_gbs"]  # type: ignore[return-value]


def _max_host_nic_gbs(ctx: Context) -> float | None:
    ports = ctx.frame("IbPort")
    if ports.empty or "rate_gbps" not in ports:
        return None
    act = ports[(ports["state"] == "Active") & ports["rate_gbps"].notna()]
    init = ctx.frame("NcclNetInit")
    used: set[str] = set()
    if not init.empty:
        for devs in init[init["net"] == "IB"]["devices"].tolist():
            used.update(devs)
    if used:
        act = act[act["device"].isin(used)]
    elif "link_layer" in act:
        act = act[act["link_layer"] == "InfiniBand"] if (act["link_layer"] == "InfiniBand").any() else act
    if act.empty:
        return None
    # one capture per host: group by host, or by file when the host is unknown
    per_host = act.groupby(act["host"].fillna(act["source"]))["rate_gbps"].sum()
    return float(per_host.max()) / 8.0


@extractor
def busbw(ctx: Context) -> list[Finding]:
    rows = ctx.frame("NcclTestsRow")
    out: list[Finding] = []
    if rows.empty:
        return out
    ranks = ctx.frame("NcclTestsRank")
    runs = ctx.frame("NcclTestsRun")
    # a run is numbered within its file: two nccl-tests outputs (before and after a fix, one per node) each have a
    # run 0, told apart by their file
    for (source, run_index), grp in rows.groupby(["source", "run_index"], sort=True):
        big = grp[grp["size_bytes"] >= LARGE_MSG]
        if big.empty:
            continue
        bw = pd.concat([big["oop_busbw"], big["ip_busbw"]]).dropna()
        if bw.empty:
            continue
        measured = float(bw.max())
        best_row = big.loc[big[["oop_busbw", "ip_busbw"]].max(axis=1).idxmax()]
        rk = ranks[(ranks["source"] == source) & (ranks["run_index"] == run_index)] if not ranks.empty else ranks
        hosts = sorted({str(h) for h in rk["host"].dropna().tolist()}) if not rk.empty else []
        gpu = str(rk["gpu_name"].dropna().iloc[0]) if not rk.empty and rk["gpu_name"].notna().any() else ""
        coll = None
        if not runs.empty:
            r = runs[(runs["source"] == source) & (runs["run_index"] == run_index)]
            coll = sval(r.iloc[0]["collective"]) if not r.empty else None
        expected = None
        basis = ""
        if len(hosts) >= 2:
            nic = _node_nic_gbs(ctx)
            if nic:
                expected, basis = nic, f"the per-node NIC aggregate from the ports in the bundle ({nic:g} GB/s)"
            else:
                for pat, gbps, _nv, why in _REFERENCE:
                    if pat.search(gpu):
                        expected, basis = gbps * 8 / 8.0, why
                        break
        elif len(hosts) == 1:
            for pat, _g, nvl, _why in _REFERENCE:
                if pat.search(gpu):
                    expected, basis = nvl, f"NVLink busbw of a single {pat.pattern.split('|')[0]} node"
                    break
        ratio = round(measured / expected, 3) if expected else None
        pct = f" = {ratio * 100:.0f}% of the {expected:g} GB/s expected from {basis}" if ratio is not None else ""
        out.append(finding(
            "busbw_measured",
            f"nccl-tests {coll or 'collective'} peaks at {measured:g} GB/s busbw on {len(hosts) or '?'} node(s){pct}.",
            pd.DataFrame([best_row]),
            attrs={"busbw_gbs": measured, "expected_gbs": expected, "ratio": ratio, "nodes": len(hosts),
                   "collective": coll},
        ))
    return out


_REPORTED = re.compile(r"(\d+(?:\.\d+)?)\s*GB/s", re.I)


@extractor
def reported_bandwidth(ctx: Context) -> list[Finding]:
    """A busbw figure the user typed into the symptom, compared with the NICs in the bundle."""
    ft = ctx.frame("FreeText")
    if ft.empty:
        return []
    out = []
    for _, row in ft.iterrows():
        m = _REPORTED.search(str(row["text"]))
        if not m:
            continue
        val = float(m.group(1))
        nic = _node_nic_gbs(ctx)
        ratio = round(val / nic, 3) if nic else None
        out.append(finding(
            "busbw_reported",
            f"The symptom reports {val:g} GB/s" + (f", {ratio * 100:.0f}% of the {nic:g} GB/s per-node NIC aggregate." if ratio else "."),
            pd.DataFrame([row]), attrs={"busbw_gbs": val, "expected_gbs": nic, "ratio": ratio},
        ))
    return out
