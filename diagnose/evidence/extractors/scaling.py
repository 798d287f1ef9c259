"""How one collective's bus bandwidth changes with the job's node count, across several nccl-tests runs.

With static routing, collective traffic of a few nodes that share a leaf never crosses a spine, while at 8-16 nodes
flows hash onto the same uplinks and collide: busbw holds at 2-4 nodes and falls beyond. The series is built
from every nccl-tests run in the bundle: the run's node count is the number of distinct hosts in its ``Rank .. on
<host>`` lines, else a node count in its file name (``all_reduce_4n.log``, ``..._16nodes.txt``, ``-N 8``); its
busbw is the peak over message sizes of at least 64 MiB. This module measures; the rules decide what a drop means.
"""

from __future__ import annotations

import re

import pandas as pd

from diagnose.evidence.context import Context, finding, sval
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding

LARGE_MSG = 64 * 1024 * 1024
_NODES_IN_NAME = re.compile(r"(?:^|[^A-Za-z0-9])(?:(?P<a>\d{1,4})[-_]?(?:n|nodes?)|(?:nodes?|N)[-_]?(?P<b>\d{1,4}))"
                            r"(?=$|[^A-Za-z0-9])", re.I)


def _nodes_from_name(source: str) -> int | None:
    base = source.rsplit("/", 1)[-1]
    m = _NODES_IN_NAME.search(base.rsplit(".", 1)[0])
    if not m:
        return None
    n = int(m.group("a") or m.group("b"))
    return n if n >= 1 else None


def _series(ctx: Context) -> pd.DataFrame:
    rows = ctx.frame("NcclTestsRow")
    if rows.empty:
        return pd.DataFrame()
    big = rows[rows["size_bytes"] >= LARGE_MSG].copy()
    if big.empty:
        return pd.DataFrame()
    big["bw"] = big[["oop_busbw", "ip_busbw"]].max(axis=1)
    big = big[big["bw"].notna()]
    if big.empty:
        return pd.DataFrame()
    best = big.loc[big.groupby(["source", "run_index"])["bw"].idxmax()]
    ranks = ctx.frame("NcclTestsRank")
    if not ranks.empty:
        nh = ranks.dropna(subset=["host"]).groupby(["source", "run_index"])["host"].nunique().rename("hosts")
        best = best.join(nh, on=["source", "run_index"])
    else:
        best = best.assign(hosts=float("nan"))
    runs = ctx.frame("NcclTestsRun")
    if not runs.empty:
        coll = runs.set_index(["source", "run_index"])["collective"]
        coll = coll[~coll.index.duplicated(keep="last")].rename("collective")
        best = best.join(coll, on=["source", "run_index"])
    else:
        best = best.assign(collective=None)
    named = best["source"].astype(str).map(_nodes_from_name)
    best["nodes"] = best["hosts"].where(best["hosts"].fillna(0) >= 2, named)
    best = best[best["nodes"].notna()]
    best["nodes"] = best["nodes"].astype(int)
    best["collective"] = best["collective"].fillna("collective").astype(str)
    return best


@extractor(reads=("NcclTestsRank", "NcclTestsRow", "NcclTestsRun"),
           emits=("busbw_scaling_drop",))
def busbw_scaling(ctx: Context) -> list[Finding]:
    """One finding per collective measured at three or more node counts: the best busbw at the smallest scale
    against the busbw at the largest."""
    best = _series(ctx)
    out: list[Finding] = []
    if best.empty:
        return out
    for coll, grp in best.groupby("collective", sort=True):
        per = grp.sort_values(["nodes", "bw"]).groupby("nodes").tail(1).sort_values("nodes")
        if per["nodes"].nunique() < 3:
            continue
        small = per[per["nodes"] <= per["nodes"].iloc[1]]  # the two smallest scales
        good = small.loc[small["bw"].idxmax()]
        bad = per.iloc[-1]
        if int(bad["nodes"]) < 2 * int(good["nodes"]) or float(good["bw"]) <= 0:
            continue
        ratio = round(float(bad["bw"]) / float(good["bw"]), 3)
        curve = ", ".join(f"{int(n)}n {float(b):g}" for n, b in zip(per["nodes"], per["bw"], strict=True))
        out.append(finding(
            "busbw_scaling_drop",
            f"nccl-tests {coll}: busbw {float(good['bw']):g} GB/s at {int(good['nodes'])} nodes and"
            f" {float(bad['bw']):g} GB/s at {int(bad['nodes'])} nodes ({ratio:.0%}); by node count: {curve} GB/s.",
            pd.DataFrame([good, bad]),
            attrs={"collective": sval(coll), "good_nodes": int(good["nodes"]), "bad_nodes": int(bad["nodes"]),
                   "good_busbw": float(good["bw"]), "bad_busbw": float(bad["bw"]), "ratio": ratio,
                   "points": int(per["nodes"].nunique())},
        ))
    return out
