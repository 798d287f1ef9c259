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
from diagnose.evidence.extractors.context import IB_GEN_GBPS, symptom_rows
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


@extractor(reads=("IbPort", "NcclNetInit", "NcclTestsRank", "NcclTestsRow", "NcclTestsRun"),
           emits=("busbw_measured",))
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


_GBS = re.compile(r"(?<![\w.])~?(\d+(?:\.\d+)?)(?:\s*-\s*\d+(?:\.\d+)?)?\s*GB/s", re.I)
_STATED = re.compile(r"(?:against|vs\.?|versus|expected|expecting|theoretical(?: of)?|instead of|should (?:be|get|reach)"
                     r"|line rate(?: of)?|peak(?: of)?)\s*(?:~|about |around |of )?$", re.I)
_STATED_AFTER = re.compile(r"^\s*(?:theoretical|expected|line rate|peak)", re.I)
# "4x HDR", "8x 200G IB", "4 x HDR 200Gbps", "8 x 400 Gb/s NDR": the NICs of one node
_NICS = re.compile(r"\b(?P<n>\d{1,2})\s?x\s?(?:(?P<gen>NDR|HDR|EDR|XDR)\b(?:\s?(?P<g2>\d{2,3})\s?G(?:b(?:/s|ps)?)?)?"
                   r"|(?P<g>\d{2,3})\s?G(?:b(?:/s|ps)?|bE)?\b)", re.I)
_AGG = re.compile(r"~?(?P<g>\d{2,4})\s?Gb(?:/s|ps)?\s+(?:of\s+)?(?:IB|InfiniBand|RoCE|network|bandwidth)", re.I)
_ONE = re.compile(r"single[- ]node|one node|within (?:a|one) node|intra-node|single (?:machine|server|host)"
                  r"|\bdesktop\b|\bworkstation\b", re.I)
_MULTI = re.compile(r"\b(?:two|2|three|3|four|4|eight|8|\d{2,})[- ]nodes?\b|multi-?node|across (?:\w+ )?nodes"
                    r"|cross-?node|inter-?node|between (?:two|2) (?:nodes|servers|hosts|machines)", re.I)


def _symptom_nic_gbs(text: str) -> tuple[float | None, str]:
    """GB/s of one node's NICs as the report states them ("4x HDR", "8x 200G", "~400 Gb/s of IB")."""
    m = _NICS.search(text)
    if m:
        gbps = float(m["g"] or m["g2"] or IB_GEN_GBPS[m["gen"].upper()])
        return int(m["n"]) * gbps / 8.0, f"the {m.group(0)} NICs the report names"
    m = _AGG.search(text)
    if m:
        return float(m["g"]) / 8.0, f"the {m.group(0)} the report names"
    return None, ""


# "only about half of the ~12 GB/s the card should deliver", "30% of the expected 100 GB/s": a measured figure
# given as a fraction of the stated one
_FRACTION = re.compile(
    r"\b(?P<f>half|a third|one third|a quarter|one quarter|(?P<pct>\d{1,2}(?:\.\d+)?)\s?%)\s+of\s+(?:the\s+)?"
    r"(?:expected\s+|theoretical\s+|nominal\s+)?~?(?P<v>\d+(?:\.\d+)?)\s*GB/s", re.I)
_FRACTIONS = {"half": 0.5, "a third": 1 / 3, "one third": 1 / 3, "a quarter": 0.25, "one quarter": 0.25}


def _figures(text: str) -> tuple[float | None, float | None]:
    """(measured, stated expectation) in GB/s from one line of the report."""
    stated: float | None
    fr = _FRACTION.search(text)
    if fr:
        stated = float(fr["v"])
        part = float(fr["pct"]) / 100 if fr["pct"] else _FRACTIONS[fr["f"].lower()]
        return round(stated * part, 3), stated
    measured = stated = None
    for m in _GBS.finditer(text):
        val = float(m.group(1))
        if _STATED.search(text[max(0, m.start() - 30):m.start()]) or _STATED_AFTER.search(text[m.end():m.end() + 20]):
            stated = stated if stated is not None else val
        elif measured is None:
            measured = val
    return measured, stated


@extractor(reads=("FreeText", "IbPort", "NcclNetInit", "NcclTestsRow", "NcclTestsSummary"),
           emits=("busbw_measured", "busbw_reported"))
def reported_bandwidth(ctx: Context) -> list[Finding]:
    """A busbw the user typed into the symptom, or the '# Avg bus bandwidth' of an nccl-tests output with no table
    (a pasted footer), against what the hardware should give: the expectation the report states ("against ~100
    GB/s theoretical"), else the per-node NIC aggregate of the ports in the bundle, else the NICs the report names
    ("4x HDR"). Given as ``busbw_measured`` (``basis: reported``), so the rules weigh it as they weigh a table."""
    sym = symptom_rows(ctx)
    text = " ".join(sym["text"].astype(str)) if not sym.empty else ""
    nodes = 1 if _ONE.search(text) else 2 if _MULTI.search(text) else None
    out: list[Finding] = []
    cands: list[tuple[pd.DataFrame, float, float | None, str]] = []
    for _, row in sym.iterrows():
        measured, stated = _figures(str(row["text"]))
        if measured is not None:
            cands.append((pd.DataFrame([row]), measured, stated, "The report says"))
            break
    summ = ctx.frame("NcclTestsSummary")
    if not summ.empty and ctx.frame("NcclTestsRow").empty and "avg_busbw" in summ:
        got = summ[summ["avg_busbw"].notna()]
        if not got.empty:
            best = got.loc[got["avg_busbw"].astype(float).idxmax()]
            cands.append((pd.DataFrame([best]), float(best["avg_busbw"]), None, "nccl-tests averages"))
    for rows, measured, stated, where in cands:
        expected, basis = None, ""
        if stated:
            expected, basis = stated, "the expectation the report states"
        elif nodes != 1:
            nic = _node_nic_gbs(ctx)
            if nic:
                expected, basis = nic, "the per-node NIC aggregate from the ports in the bundle"
            else:
                expected, basis = _symptom_nic_gbs(text)
        ratio = round(measured / expected, 3) if expected else None
        pct = f", {ratio * 100:.0f}% of the {expected:g} GB/s expected from {basis}" if ratio is not None else ""
        measured_table = not ctx.frame("NcclTestsRow").empty  # a measured table speaks for itself
        out.append(finding(
            "busbw_measured" if ratio is not None and not measured_table else "busbw_reported",
            f"{where} {measured:g} GB/s busbw{pct}.", rows,
            attrs={"busbw_gbs": measured, "expected_gbs": expected, "ratio": ratio, "nodes": nodes,
                   "basis": "reported"},
        ))
    return out
