"""Host resources NCCL needs: /dev/shm, locked memory, GPUDirect kernel modules."""

from __future__ import annotations

import re

import pandas as pd

from diagnose.evidence.context import Context, finding, primary, sval
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.nccl import message_mask
from diagnose.models.diagnosis import Finding, Location

_SHM_ERR = (
    r"shared memory segment|/dev/shm|posix_fallocate|shm_open|ncclShmOpen|"
    r"Error while creating shared memory|unable to allocate shared memory"
)
_MEMLOCK_ERR = (
    r"ibv_reg_mr|ibv_create_cq|ibv_alloc_pd|ibv_create_qp|ncclIbRegMr|Cannot allocate memory.*(?:ibv|mr|IB)"
    r"|memlock|RLIMIT_MEMLOCK|locked memory"
)


def _one_host(s: pd.Series) -> str | None:
    hs = sorted({str(h) for h in s.dropna()})
    return hs[0] if len(hs) == 1 else None


@extractor(reads=("CudaError", "Filesystem", "FreeText", "KernelEvent", "MessageHit", "Mlx5Event", "NcclWarn",
                  "PeermemEvent", "PgError", "ToolError", "WatchdogTimeout"),
           emits=("shm_error", "shm_size"))
def shm(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    fs = ctx.frame("Filesystem")
    if not fs.empty:
        sel = fs[(fs["mount"] == "/dev/shm") & fs["size_bytes"].notna()]
        # per host, the smallest /dev/shm another host of the bundle has: a roomy /dev/shm on one host says
        # nothing about a full one on another
        sizes = {str(h): float(v) for h, v in sel.groupby(sel["host"].fillna(""))["size_bytes"].min().items()}
        for _, row in sel.sort_values(["host", "source"], na_position="first").iterrows():
            size = row["size_bytes"]
            mib = round(float(size) / 1048576, 1)
            hk = sval(row["host"]) or ""
            others = [v for h, v in sizes.items() if h != hk]
            out.append(finding(
                "shm_size",
                f"/dev/shm is {mib:g} MiB{' on ' + str(row['host']) if sval(row['host']) else ''}"
                + (f", {int(row['use_pct'])}% used" if pd.notna(row.get("use_pct")) else "") + ".",
                pd.DataFrame([row]), Location(host=sval(row["host"])),
                {"size_mib": mib, "use_pct": int(row["use_pct"]) if pd.notna(row.get("use_pct")) else None,
                 "others_smaller": bool(others) and min(others) < float(size)},
            ))
    msgs = ctx.messages
    if not msgs.empty:
        hit = primary(msgs[message_mask(ctx, _SHM_ERR, re.I)
                           & message_mask(ctx, r"fail|error|No space|unable|cannot|Bus error", re.I)])
        if not hit.empty:
            out.append(finding(
                "shm_error",
                f"{len(hit)} shared-memory failure(s) while NCCL set up intra-node transport.",
                hit, Location(host=_one_host(hit["host"])), {"lines": len(hit)},
            ))
    return out


@extractor(reads=("CudaError", "FreeText", "KernelEvent", "Limit", "MessageHit", "Mlx5Event", "NcclWarn",
                  "PeermemEvent", "PgError", "ToolError", "WatchdogTimeout"),
           emits=("ib_mem_registration_failed", "memlock_limit"))
def memlock(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    lim = ctx.frame("Limit")
    if not lim.empty:
        sel = lim[(lim["flag"] == "-l") | lim["name"].str.contains("locked", case=False, na=False)]
        # per host, its lowest limit (unlimited = infinite): an unlimited host says nothing about a low one
        lows: dict[str, float] = {}
        for h, unl, v in zip(sel["host"].fillna(""), sel["unlimited"], sel["value"], strict=True):
            cur = float("inf") if bool(unl) or pd.isna(v) else float(v)
            lows[str(h)] = min(lows.get(str(h), float("inf")), cur)
        for _, row in sel.sort_values(["host", "source"], na_position="first").iterrows():
            unl = bool(row["unlimited"])
            kib = None if unl or pd.isna(row["value"]) else int(row["value"])
            mine = float("inf") if kib is None else float(kib)
            others = [v for h, v in lows.items() if h != (sval(row["host"]) or "")]
            out.append(finding(
                "memlock_limit",
                f"max locked memory is {'unlimited' if unl else str(kib) + ' KiB'}"
                f"{' on ' + str(row['host']) if sval(row['host']) else ''}.",
                pd.DataFrame([row]), Location(host=sval(row["host"])),
                {"unlimited": unl, "kib": kib, "others_lower": bool(others) and min(others) < mine},
            ))
    msgs = ctx.messages
    if not msgs.empty:
        hit = primary(msgs[message_mask(ctx, _MEMLOCK_ERR, re.I)
                           & message_mask(ctx, r"fail|error|Cannot|unable", re.I)])
        if not hit.empty:
            out.append(finding(
                "ib_mem_registration_failed",
                f"{len(hit)} verbs resource allocation failure(s) (memory registration / CQ creation).",
                hit, Location(host=_one_host(hit["host"])), {"lines": len(hit)},
            ))
    return out


_PEERMEM = frozenset({"nvidia_peermem", "nv_peer_mem"})


@extractor(reads=("KernelModule", "PeermemEvent"),
           emits=("peermem_error", "peermem_loaded", "peermem_not_loaded"))
def peermem(ctx: Context) -> list[Finding]:
    pm = ctx.frame("PeermemEvent")
    out: list[Finding] = []
    if not pm.empty:
        err = pm[pm["category"] == "error"]
        if not err.empty:
            out.append(finding(
                "peermem_error",
                f"nvidia-peermem reported {len(err)} error(s): GPUDirect RDMA memory registration is broken.",
                err, Location(host=_one_host(err["host"])),
            ))
        ok = pm[pm["category"] == "loaded"]
        if not ok.empty and err.empty:
            out.append(finding("peermem_loaded", "nvidia-peermem is loaded.", ok, Location(host=_one_host(ok["host"]))))
    mods = ctx.frame("KernelModule")
    if not mods.empty:
        for _host, grp in mods.groupby(mods["host"].fillna(mods["source"]), sort=True):
            names = set(grp["name"])
            if "nvidia" not in names:
                continue  # not a GPU node's module list
            peer = grp[grp["name"].isin(sorted(_PEERMEM))]
            if peer.empty:  # a filtered paste (`lsmod | grep nvidia`) shows the module only as a user of nvidia
                users = grp["used_by"].map(lambda u: bool(_PEERMEM.intersection(u or ())))
                peer = grp[users]
            hname = sval(grp["host"].iloc[0])
            if len(grp) < 3 and peer.empty:
                continue  # a fragment of a module list (a grep's output) never shows that a module is absent
            if peer.empty:
                out.append(finding(
                    "peermem_not_loaded",
                    f"lsmod{' on ' + hname if hname else ''} lists the nvidia driver but neither nvidia_peermem nor"
                    " nv_peer_mem: GPUDirect RDMA can only work through DMA-BUF.",
                    grp[grp["name"] == "nvidia"], Location(host=hname),
                ))
            else:
                first = peer.iloc[0]
                name = first["name"] if first["name"] in _PEERMEM else sorted(_PEERMEM.intersection(first["used_by"]))[0]
                out.append(finding("peermem_loaded", f"{name} is loaded{' on ' + hname if hname else ''}.", peer,
                                   Location(host=hname)))
    return out
