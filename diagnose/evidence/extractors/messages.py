"""Known messages (the catalog's hits, :mod:`diagnose.evidence.scan`) -> findings of the kinds the catalog names.

One finding per entry, host and distinct attribute set, in file/line order, so a message repeated by every rank of
a host is one finding with a count, and the same message on two hosts is two findings, each placed at its host.
"""

from __future__ import annotations

import json
import re

import pandas as pd

from diagnose.catalog.messages import default_messages
from diagnose.evidence.context import Context, finding
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.context import ROCE_SAID, symptom_rows
from diagnose.evidence.scan import LOCATION_GROUPS
from diagnose.models.diagnosis import Finding, Location
from diagnose.symptoms import SYMPTOM_SOURCE

MAX_FINDINGS_PER_ENTRY = 16


def _location(host: str | None, attrs: dict[str, object]) -> Location:
    loc: dict[str, object] = {"host": host}
    for k in LOCATION_GROUPS:
        if k == "host" or k not in attrs:
            continue
        v = attrs[k]
        if k in ("port", "rank"):
            try:
                loc[k] = int(v)  # type: ignore[call-overload]
            except (TypeError, ValueError):
                continue
        else:
            loc[k] = str(v)
    return Location(**loc)  # type: ignore[arg-type]


@extractor
def known_messages(ctx: Context) -> list[Finding]:
    hits = ctx.frame("MessageHit")
    if hits.empty:
        return []
    says = {e.id: e.says for e in default_messages().entries}
    roce = _roce(ctx)
    out: list[Finding] = []
    hits = hits.sort_values(["source", "line"], kind="stable")
    host_key = hits["host"].fillna("")
    for (msg_id, host, blob), grp in hits.groupby([hits["msg_id"], host_key, hits["attrs"]], sort=True):
        attrs: dict[str, object] = json.loads(str(blob))
        kind = str(grp["kind"].iloc[0])
        where = f" on {host}" if host else ""
        n = len(grp)
        files = sorted(set(grp["source"]))
        summary = f"{says.get(str(msg_id), str(msg_id))}{where} ({n} line{'s' if n != 1 else ''})."
        flat = {k: v for k, v in attrs.items() if isinstance(v, str | int | float | bool) or v is None}
        flat.update({"message": str(msg_id), "lines": n, "in_symptom": files == [SYMPTOM_SOURCE]})
        if kind in _TRANSPORT_KINDS and "roce" not in flat:
            flat["roce"] = roce  # what the same error means depends on the fabric (error 12 on RoCE: GID, PFC)
        if "size" in attrs and "size_mib" not in flat:
            flat["size_mib"] = size_mib(attrs["size"], attrs.get("unit"))
        out.append(finding(kind, summary, grp, _location(str(host) or None, attrs), flat))  # type: ignore[arg-type]
    # an entry that fires on thousands of distinct values (a counter in the message) is capped, deterministically
    by_entry: dict[str, int] = {}
    kept: list[Finding] = []
    for f in out:
        k = str(f.attrs["message"])
        by_entry[k] = by_entry.get(k, 0) + 1
        if by_entry[k] <= MAX_FINDINGS_PER_ENTRY:
            kept.append(f)
    return kept


def hit_frame(ctx: Context, kind: str) -> pd.DataFrame:
    """The catalog's hits of one finding kind (for extractors that weigh them together with parsed records)."""
    hits = ctx.frame("MessageHit")
    return hits[hits["kind"] == kind] if not hits.empty else hits


_TRANSPORT_KINDS = frozenset({"ib_completion_error", "qp_modify_failed", "qp_setup_failed"})


def _roce(ctx: Context) -> bool:
    """The fabric is RoCE: an HCA port with an Ethernet link layer, NCCL's own RoCE device list, or the report."""
    ports = ctx.frame("IbPort")
    if not ports.empty and "link_layer" in ports and (ports["link_layer"] == "Ethernet").any():
        return True
    init = ctx.frame("NcclNetInit")
    if not init.empty and any("RoCE" in str(t) for t in init["link_layers"].tolist()):
        return True
    sym = symptom_rows(ctx)
    return not sym.empty and bool(sym["text"].astype(str).str.contains(ROCE_SAID).any())


_UNIT_MIB = {"k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 * 1024}


def size_mib(size: object, unit: object) -> float | None:
    """``64`` ``m`` -> 64.0; ``1`` ``g`` -> 1024.0 (docker's --shm-size units; bytes when no unit)."""
    try:
        n = float(str(size))
    except ValueError:
        return None
    u = str(unit or "").strip().lower()[:1]
    return round(n * _UNIT_MIB[u], 3) if u in _UNIT_MIB else round(n / 1048576, 3)


@extractor
def stack_versions(ctx: Context) -> list[Finding]:
    """The versions of one component seen in the evidence (pip/conda/dpkg lists, banners, ofed_info, ucx_info):
    two or more distinct ones mean the hosts or the images do not run the same stack."""
    hits = hit_frame(ctx, "component_version")
    if hits.empty:
        return []
    rows = []
    for idx, blob in zip(hits.index, hits["attrs"], strict=True):
        a = json.loads(str(blob))
        comp, ver = a.get("component"), a.get("version")
        if comp and ver:
            rows.append((idx, str(comp), str(ver)))
    out: list[Finding] = []
    by: dict[str, dict[str, list[int]]] = {}
    for idx, comp, ver in rows:
        by.setdefault(comp, {}).setdefault(_release(ver), []).append(idx)
    for comp in sorted(by):
        vers = by[comp]
        if len(vers) < 2:
            continue
        idxs = sorted(i for v in vers.values() for i in v)
        names = sorted(vers)
        out.append(finding(
            "component_versions_differ",
            f"{len(names)} different {comp} versions in the evidence: {', '.join(names[:4])}.",
            hits.loc[idxs], Location(), {"component": comp, "versions": len(names)},
        ))
    return out


def _release(v: str) -> str:
    """``2.18.1+cuda12.1`` and ``2.18.1-1`` are the same NCCL release: compare up to the third number."""
    m = re.match(r"v?(\d+(?:\.\d+){0,2})", v)
    return m.group(1) if m else v
