"""GPU health: Xid events and CUDA errors that point at the NVSwitch fabric manager."""

from __future__ import annotations

from diagnose.evidence.context import Context, finding
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding, Location

_FM_TEXT = r"system not yet initiali[sz]ed|cudaErrorSystemNotReady|CUDA error 802|error 802\b"


@extractor
def xids(ctx: Context) -> list[Finding]:
    x = ctx.frame("XidEvent")
    if x.empty:
        return [finding("dmesg_no_xid", "Kernel logs were collected and show no NVRM Xid.",
                        ctx.frame("KernelEvent").head(1) if ctx.has("KernelEvent") else None)] if "dmesg" in ctx.formats else []
    out = []
    for (host, pci, code), grp in x.groupby([x["host"].fillna(""), "pci", "xid"], sort=True):
        detail = str(grp.iloc[0]["detail"])[:120]
        out.append(finding(
            "xid_event",
            f"Xid {code} on GPU {pci}{' of ' + host if host else ''} ({len(grp)}x): {detail}",
            grp, Location(host=host or None, gpu=pci),
            {"xid": int(code), "events": len(grp)},
        ))
    return out


@extractor
def cuda_system_not_ready(ctx: Context) -> list[Finding]:
    msgs = ctx.messages
    out: list[Finding] = []
    if not msgs.empty:
        hit = msgs[msgs["message"].str.contains(_FM_TEXT, case=False, na=False)]
        ce = ctx.frame("CudaError")
        if not ce.empty:
            coded = ce[ce["code"] == 802]
            if not coded.empty:
                hit = msgs[msgs["message"].str.contains(_FM_TEXT, case=False, na=False)
                           | (msgs["text"].isin(coded["text"]) & msgs["source"].isin(coded["source"]))]
        if not hit.empty:
            hosts = sorted({str(h) for h in hit["host"].dropna()})
            out.append(finding(
                "cuda_system_not_ready",
                f"CUDA reports 'system not yet initialized' (802) {len(hit)} time(s): the NVSwitch fabric is not ready.",
                hit, Location(host=hosts[0] if len(hosts) == 1 else None), {"lines": len(hit)},
            ))
        nvls = msgs[msgs["message"].str.contains(r"NVLS.*(?:invalid argument|failed)|multicast.*fail", case=False, na=False)]
        if not nvls.empty:
            out.append(finding("nvls_setup_failed", f"NVLS/multicast setup failed ({len(nvls)} line(s)).", nvls))
    return out
