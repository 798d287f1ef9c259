"""What the CUDA samples' peer-to-peer tests say about the GPU peer path (``p2pBandwidthLatencyTest``, ``simpleP2P``).

An expert compares, for each pair CUDA lets access its peer, the ``P2P=Enabled`` bandwidth (a direct peer write
or read across PCIe/NVLink) with the ``P2P=Disabled`` one (the same copy staged through host memory, crossing
the PCIe links twice). A working peer path is at least as fast as the staged copy; a peer path far *below* it is
traffic redirected to the root complex (ACS) or translated by the IOMMU. ``simpleP2P`` reading back wrong values
after its peer kernels means peer writes/reads are corrupted or dropped (IOMMU on AMD/Intel hosts, GeForce cards
whose driver does not support P2P). Pairs that CANNOT access each other are normal across CPU sockets/root
complexes; under one PCIe switch they are not. An NVLink pair whose P2P bandwidth is no better than the staged
PCIe copy does not ride NVLink.

Measurements only: how far below the staged copy, or how little above it for NVLink, decides a cause in the rules'
thresholds. The classification here is the physical one: a peer path slower than a copy through host memory.
"""

from __future__ import annotations

import re
from statistics import median

import pandas as pd

from diagnose.evidence.context import Context, finding, sval
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding, Location

_RUN_KEY = ["source", "run"]
_NV = re.compile(r"^NV(\d+)$")
_SWITCH = {"PIX", "PXB"}  # nvidia-smi topo -m: at most one / several PCIe bridges, not the host bridge


def _runs(ctx: Context) -> pd.DataFrame:
    runs = ctx.frame("CudaP2pRun")
    return runs.sort_values(_RUN_KEY, kind="stable") if not runs.empty else runs


def _pick(df: pd.DataFrame, source: object, run: object) -> pd.DataFrame:
    if df.empty:
        return df
    return df[(df["source"] == source) & (df["run"] == run)]


def _access(acc: pd.DataFrame) -> dict[tuple[int, int], bool]:
    return {(int(s), int(d)): bool(c) for s, d, c in zip(acc["src"], acc["dst"], acc["can_access"], strict=True)}


def _comparisons(meas: pd.DataFrame, access: dict[tuple[int, int], bool]) -> pd.DataFrame:
    """Per ordered pair and matrix (direction, transfer): P2P-enabled and staged bandwidth, for pairs not known
    to be without peer access (their 'enabled' cells are staged copies too)."""
    bw = meas[(meas["metric"] == "bandwidth") & (meas["src"] != meas["dst"])]
    if bw.empty:
        return pd.DataFrame()
    on = bw[bw["p2p"]]
    off = bw[~bw["p2p"]][["direction", "src", "dst", "value", "line"]]
    cmp = on.merge(off, on=["direction", "src", "dst"], suffixes=("", "_off"))
    if cmp.empty:
        return cmp
    keep = [access.get((int(s), int(d)), True) for s, d in zip(cmp["src"], cmp["dst"], strict=True)]
    cmp = cmp[keep]
    cmp = cmp[cmp["value_off"] > 0].copy()
    cmp["ratio"] = cmp["value"].fillna(0.0) / cmp["value_off"]
    return cmp


def _topo_for(ctx: Context, host: str | None) -> dict[tuple[int, int], str]:
    """``nvidia-smi topo -m`` GPU-pair relations of ``host`` (the only topo host when the run names none, or the
    only one in the bundle)."""
    topo = ctx.frame("TopoEntry")
    if topo.empty:
        return {}
    g = topo[topo["row"].astype(str).str.fullmatch(r"GPU\d+") & topo["col"].astype(str).str.fullmatch(r"GPU\d+")]
    if g.empty:
        return {}
    hosts = sorted({str(h) for h in g["host"].dropna()})
    if host is not None and host in hosts:
        g = g[g["host"] == host]
    elif len(hosts) > 1:
        return {}
    return {(int(str(r)[3:]), int(str(c)[3:])): str(rel) for r, c, rel in zip(g["row"], g["col"], g["relation"],
                                                                              strict=True)}


def _pair(i: int, j: int) -> str:
    return f"{i}->{j}"


@extractor(reads=("CudaP2pAccess", "CudaP2pMeasure", "CudaP2pRun", "CudaP2pVerifyError", "TopoEntry"),
           emits=("p2p_access_denied", "p2p_access_denied_same_switch", "p2p_bandwidth_ok", "p2p_copy_corrupt",
                  "p2p_enabled_slower", "p2p_nvlink_pairs"))
def cuda_p2p(ctx: Context) -> list[Finding]:
    """One set of findings per host (per file when no prompt names the host): every run of the samples there."""
    runs = _runs(ctx)
    if runs.empty:
        return []
    acc_all, meas_all, err_all = ctx.frame("CudaP2pAccess"), ctx.frame("CudaP2pMeasure"), ctx.frame("CudaP2pVerifyError")
    out: list[Finding] = []
    keys = runs["host"].where(runs["host"].notna(), runs["source"])
    for _, grp in runs.groupby(keys, sort=True):
        host = sval(grp["host"].iloc[0])
        where = f" on {host}" if host else ""
        loc = Location(host=host)
        topo = _topo_for(ctx, host)
        access: dict[tuple[int, int], bool] = {}
        acc_parts, cmp_parts = [], []
        for _, run in grp.iterrows():
            src, rid = run["source"], run["run"]
            acc = _pick(acc_all, src, rid)
            run_access = _access(acc) if not acc.empty else {}
            access.update(run_access)  # a later run (after a driver or BIOS change) decides
            if not acc.empty:
                acc_parts.append(acc)
            meas = _pick(meas_all, src, rid)
            if not meas.empty:
                cmp = _comparisons(meas, run_access)
                if not cmp.empty:
                    cmp_parts.append(cmp)
            if sval(run["tool"]) == "simpleP2P" and (
                    int(run["verification_errors"]) > 0 or sval(run["result"]) == "failed"):
                errs = _pick(err_all, src, rid)
                pair = sval(run["tested_pair"])
                out.append(finding(
                    "p2p_copy_corrupt",
                    f"simpleP2P{where} read back wrong data after peer access between GPU "
                    f"{(pair or '?').replace('-', ' and GPU ')} ({int(run['verification_errors'])} verification "
                    "error(s)): peer reads/writes are corrupted or dropped.",
                    errs if not errs.empty else pd.DataFrame([run]), loc,
                    {"errors": int(run["verification_errors"]), "pair": pair,
                     "memcpy_gbps": None if pd.isna(run["memcpy_gbps"]) else float(run["memcpy_gbps"])},
                ))
        if cmp_parts:
            out += _bandwidth(pd.concat(cmp_parts, ignore_index=True), bool(access), topo, where, loc)
        if acc_parts:
            out += _access_findings(pd.concat(acc_parts, ignore_index=True), access, topo, where, loc)
    return out


def _bandwidth(cmp: pd.DataFrame, access_known: bool, topo: dict[tuple[int, int], str], where: str,
               loc: Location) -> list[Finding]:
    out: list[Finding] = []
    ratios = [float(r) for r in cmp["ratio"]]
    pairs = {(int(s), int(d)) for s, d in zip(cmp["src"], cmp["dst"], strict=True)}
    worst = cmp.sort_values(["ratio", "line"], kind="stable").iloc[0]
    slower = cmp[cmp["ratio"] < 1.0]
    attrs: dict[str, str | int | float | bool | None] = {
        "pairs": len({(min(p), max(p)) for p in pairs}),
        "comparisons": len(cmp),
        "median_ratio": round(median(ratios), 3),
        "worst_ratio": round(float(worst["ratio"]), 3),
        "worst_pair": _pair(int(worst["src"]), int(worst["dst"])),
        "worst_direction": str(worst["direction"]),
        "worst_enabled_gbps": round(float(worst["value"]), 2) if pd.notna(worst["value"]) else 0.0,
        "worst_disabled_gbps": round(float(worst["value_off"]), 2),
        "access_known": access_known,
    }
    if not slower.empty:
        attrs["slower"] = len(slower)
        attrs["all_slower"] = len(slower) == len(cmp)
        out.append(finding(
            "p2p_enabled_slower",
            f"p2pBandwidthLatencyTest{where}: P2P-enabled bandwidth is below the copy staged through host memory "
            f"in {len(slower)} of {len(cmp)} pair measurement(s) (median {attrs['median_ratio']}x, worst "
            f"{attrs['worst_pair']} {attrs['worst_enabled_gbps']} vs {attrs['worst_disabled_gbps']} GB/s "
            f"{attrs['worst_direction']}).",
            slower.sort_values(["ratio", "line"], kind="stable"), loc, attrs,
        ))
    else:
        out.append(finding(
            "p2p_bandwidth_ok",
            f"p2pBandwidthLatencyTest{where}: every pair with peer access is at least as fast with P2P as through "
            f"host memory ({len(cmp)} measurement(s), median {attrs['median_ratio']}x).",
            cmp.sort_values(["ratio", "line"], kind="stable").head(2), loc, attrs,
        ))
    nv = cmp[[bool(_NV.match(topo.get((int(s), int(d)), ""))) for s, d in zip(cmp["src"], cmp["dst"], strict=True)]]
    nv = nv[nv["direction"] == "unidirectional"]
    if not nv.empty:
        w = nv.sort_values(["ratio", "line"], kind="stable").iloc[0]
        links = _NV.match(topo[(int(w["src"]), int(w["dst"]))])
        out.append(finding(
            "p2p_nvlink_pairs",
            f"p2pBandwidthLatencyTest{where}: over the NVLink pairs of nvidia-smi topo -m, P2P runs at "
            f"{round(float(w['ratio']), 2)}x or more of the staged PCIe copy (worst {_pair(int(w['src']), int(w['dst']))}: "
            f"{round(float(w['value']), 2)} vs {round(float(w['value_off']), 2)} GB/s).",
            nv.sort_values(["ratio", "line"], kind="stable"), loc,
            {"pairs": len({(min(int(s), int(d)), max(int(s), int(d))) for s, d in zip(nv["src"], nv["dst"], strict=True)}),
             "min_ratio": round(float(w["ratio"]), 3), "worst_pair": _pair(int(w["src"]), int(w["dst"])),
             "min_gbps": round(float(w["value"]), 2), "links": int(links[1]) if links else None},
        ))
    return out


def _access_findings(acc: pd.DataFrame, access: dict[tuple[int, int], bool], topo: dict[tuple[int, int], str],
                     where: str, loc: Location) -> list[Finding]:
    if acc.empty:
        return []
    denied_pairs = sorted({(min(i, j), max(i, j)) for (i, j), can in access.items() if not can})
    allowed = {(min(i, j), max(i, j)) for (i, j), can in access.items() if can}
    if not denied_pairs:
        return []
    denied = acc[[not access.get((int(s), int(d)), True) for s, d in zip(acc["src"], acc["dst"], strict=True)]]
    out = [finding(
        "p2p_access_denied",
        f"CUDA{where} reports no peer access for {len(denied_pairs)} GPU pair(s)"
        + (f" ({len(allowed)} pair(s) have it)" if allowed else ", none has it") + ".",
        denied, loc,
        {"pairs": len(denied_pairs), "allowed": len(allowed), "all_denied": not allowed,
         "topology_known": bool(topo)},
    )]
    same = [p for p in denied_pairs if topo.get(p, topo.get((p[1], p[0]), "")) in _SWITCH]
    if same:
        rows = denied[[(min(int(s), int(d)), max(int(s), int(d))) in set(same)
                       for s, d in zip(denied["src"], denied["dst"], strict=True)]]
        out.append(finding(
            "p2p_access_denied_same_switch",
            f"CUDA{where} refuses peer access between {len(same)} GPU pair(s) that nvidia-smi topo -m shows behind "
            f"one PCIe switch ({', '.join(f'{a}-{b}' for a, b in same[:4])}).",
            rows, loc, {"pairs": len(same)},
        ))
    return out
