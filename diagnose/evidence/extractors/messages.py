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


def catalog_kinds() -> set[str]:
    """The kinds :func:`known_messages` emits: those the message catalog's entries yield."""
    return default_messages().kinds()


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


@extractor(reads=("FreeText", "IbPort", "MessageHit", "NcclNetInit"),
           emits=catalog_kinds)
def known_messages(ctx: Context) -> list[Finding]:
    hits = ctx.frame("MessageHit")
    if hits.empty:
        return []
    says = {e.id: e.says for e in default_messages().entries}
    roce = roce_fabric(ctx)
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


def roce_fabric(ctx: Context) -> bool:
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


# what a process loaded and printed (a banner), as opposed to what a package list says is installed
_LOADED = frozenset({"versions.nccl.banner", "versions.ucx.init_banner", "versions.nccl_tests"})


@extractor(reads=("MessageHit",),
           emits=("component_versions_differ",))
def stack_versions(ctx: Context) -> list[Finding]:
    """The versions of one component that the evidence's sources (each file, and each host a file names) report:
    pip/conda/dpkg lists, banners, ofed_info, ucx_info. Two sources whose sets of releases differ mean the hosts or
    images do not run the same stack (one host's pip list with nccl 2.20.5 where the others have 2.19.3, or two
    nodes' NCCL banners). Two releases in one source are not a mismatch: an environment holds the cu11 and the
    cu12 wheel side by side. The symptom's own versions ("worked with 2.6, fails with 2.7") are a version change,
    read by the context extractor, not a second stack."""
    hits = hit_frame(ctx, "component_version")
    if hits.empty:
        return []
    hits = hits[hits["source"] != SYMPTOM_SOURCE]
    # per component: per source key (file, host) the releases it reports, and whether it printed what it loaded
    seen: dict[str, dict[tuple[str, str], set[str]]] = {}
    loaded: dict[str, set[tuple[str, str]]] = {}
    idxs: dict[str, list[int]] = {}
    for idx, src, host, msg, blob in zip(hits.index, hits["source"], hits["host"].fillna(""), hits["msg_id"],
                                         hits["attrs"], strict=True):
        a = json.loads(str(blob))
        comp, ver = a.get("component"), a.get("version")
        if not (comp and ver):
            continue
        key = (str(src), str(host))
        seen.setdefault(str(comp), {}).setdefault(key, set()).add(_release(str(ver)))
        idxs.setdefault(str(comp), []).append(idx)
        if msg in _LOADED:
            loaded.setdefault(str(comp), set()).add(key)
    out: list[Finding] = []
    for comp in sorted(seen):
        by_src = seen[comp]
        if len({frozenset(v) for v in by_src.values()}) < 2:
            continue
        names = sorted(set().union(*by_src.values()))
        out.append(finding(
            "component_versions_differ",
            f"{len(by_src)} sources report different {comp} versions ({', '.join(names[:4])}): the hosts or images "
            "do not run one stack.",
            hits.loc[sorted(idxs[comp])], Location(),
            {"component": comp, "versions": len(names), "sources": len(by_src),
             "loaded": len(loaded.get(comp, ())) >= 2},
        ))
    return out


def _release(v: str) -> str:
    """``2.18.1+cuda12.1`` and ``2.18.1-1`` are the same NCCL release: compare up to the third number."""
    m = re.match(r"v?(\d+(?:\.\d+){0,2})", v)
    return m.group(1) if m else v
