"""GPU health: Xid events and CUDA errors that point at the NVSwitch fabric manager."""

from __future__ import annotations

import re

from diagnose.evidence.context import Context, finding, sval
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.nccl import message_mask
from diagnose.models.diagnosis import Finding, Location

_FM_TEXT = r"system not yet initiali[sz]ed|cudaErrorSystemNotReady|CUDA error 802|error 802\b"


@extractor(reads=("KernelEvent", "XidEvent"),
           emits=("dmesg_no_xid", "xid_event"))
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


@extractor(reads=("CudaError", "FreeText", "KernelEvent", "MessageHit", "Mlx5Event", "NcclWarn", "PeermemEvent",
                  "PgError", "ToolError", "WatchdogTimeout"),
           emits=("cuda_system_not_ready", "nvls_setup_failed"))
def cuda_system_not_ready(ctx: Context) -> list[Finding]:
    msgs = ctx.messages
    out: list[Finding] = []
    if not msgs.empty:
        fm_text = message_mask(ctx, _FM_TEXT, re.I)
        hit = msgs[fm_text]
        ce = ctx.frame("CudaError")
        if not ce.empty:
            coded = ce[ce["code"] == 802]
            if not coded.empty:
                hit = msgs[fm_text | (msgs["text"].isin(coded["text"]) & msgs["source"].isin(coded["source"]))]
        if not hit.empty:
            hosts = sorted({str(h) for h in hit["host"].dropna()})
            out.append(finding(
                "cuda_system_not_ready",
                f"CUDA reports 'system not yet initialized' (802) {len(hit)} time(s): the NVSwitch fabric is not ready.",
                hit, Location(host=hosts[0] if len(hosts) == 1 else None), {"lines": len(hit)},
            ))
        nvls = msgs[message_mask(ctx, r"NVLS.*(?:invalid argument|failed)|multicast.*fail", re.I)]
        if not nvls.empty:
            out.append(finding("nvls_setup_failed", f"NVLS/multicast setup failed ({len(nvls)} line(s)).", nvls))
    return out


@extractor(reads=("FmEvent",),
           emits=("fm_not_running", "fm_running", "nvswitch_errors"))
def fabric_manager(ctx: Context) -> list[Finding]:
    """Fabric Manager state per host, from its log and journal: the latest start decides."""
    ev = ctx.frame("FmEvent")
    if ev.empty:
        return []
    out: list[Finding] = []
    for host, grp in ev.groupby(ev["host"].fillna(ev["source"]), sort=True):
        hname = sval(grp["host"].iloc[0])
        bad = grp[grp["category"].isin(["version_mismatch", "service_failed"])]
        if not bad.empty:
            kinds = sorted(set(bad["category"]))
            out.append(finding(
                "fm_not_running",
                f"Fabric Manager{' on ' + hname if hname else ''} "
                + ("refuses to run: its version does not match the driver" if "version_mismatch" in kinds
                   else "failed to start") + ".",
                bad, Location(host=hname), {"version_mismatch": "version_mismatch" in kinds},
            ))
            continue
        starts = grp[grp["category"] == "started"]
        ok = grp[grp["category"] == "configured"]
        if not ok.empty:
            out.append(finding(
                "fm_running",
                f"Fabric Manager{' on ' + hname if hname else ''} started and configured all NVSwitches"
                + (f" ({len(starts)} start(s) in the log)" if len(starts) > 1 else "") + ".",
                ok.tail(1), Location(host=hname), {"starts": len(starts)},
            ))
        errs = grp[grp["category"] == "nvswitch_error"]
        if not errs.empty:
            out.append(finding(
                "nvswitch_errors",
                f"Fabric Manager logged {len(errs)} NVSwitch error(s){' on ' + hname if hname else ''}.",
                errs, Location(host=hname), {"lines": len(errs)},
            ))
        del host
    return out
