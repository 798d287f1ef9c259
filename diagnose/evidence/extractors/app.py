"""Collective timeouts and desync reports from the training framework."""

from __future__ import annotations

from diagnose.evidence.context import Context, finding
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding, Location


@extractor(reads=("DesyncReport", "WatchdogTimeout"),
           emits=("desync_report", "watchdog_timeout"))
def timeouts(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    wd = ctx.frame("WatchdogTimeout")
    if not wd.empty:
        ranks = sorted({int(r) for r in wd["rank"].dropna()})
        ops = sorted({str(o) for o in wd["op_type"].dropna()})
        out.append(finding(
            "watchdog_timeout",
            f"The NCCL watchdog timed out a collective on {len(ranks) or len(wd)} rank(s)"
            + (f" ({', '.join(ops)})" if ops else "") + ".",
            wd, attrs={"ranks": len(ranks), "lines": len(wd)},
        ))
    ds = ctx.frame("DesyncReport")
    if not ds.empty:
        lag = sorted({int(r) for t in ds["lagging_ranks"] for r in t})
        out.append(finding(
            "desync_report",
            "PyTorch's desync report names "
            + (f"rank(s) {', '.join(map(str, lag[:8]))} as lagging, dead or mismatched." if lag else "a desync."),
            ds, Location(rank=lag[0] if len(lag) == 1 else None), {"lagging": len(lag)},
        ))
    return out
