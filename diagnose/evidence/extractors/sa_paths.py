"""The paths the subnet administrator hands out (``saquery -p`` PathRecords): their MTU and their service level.

An RDMA connection set up through the SA (rdma_cm, ``ib_write_bw -R``, MPI's UCX/openib CM, IPoIB-CM) takes its
MTU and SL from the PathRecord the SA returns for the pair of LIDs (IBA vol. 1 15.2.5.16). OpenSM computes the
path MTU as the smallest MTU of the ports along the route, capped by the partition's ``mtu=`` in
``partitions.conf``; the SL comes from the QoS policy (0 without one). NCCL sets its QPs from the ports' active MTU
and ``NCCL_IB_SL`` instead, so an SA path that disagrees with them shows a hop, a partition or a QoS policy the
job's own settings do not see.

Findings:

* ``ib_path_mtu_low``: PathRecords whose MTU is below what their ends run - the smaller ``active_mtu`` of the two
  end ports where the bundle shows them (``ibv_devinfo``: ``basis`` ``port_active_mtu``), else 4096 when the fabric
  runs HDR or faster (the path's rate, a port's or a cable's speed: ``basis`` ``hdr_fabric``; those fabrics are
  built for 4096). One finding for all of them: ``mtu`` (the smallest such path MTU), ``expected_mtu``, ``paths``
  (how many are low) of ``paths_total``, ``pairs`` (distinct LID pairs), the first one's ``slid``/``dlid`` and both
  ends by name (``src``/``dst``) when a source names the LIDs.
* ``ib_path_sl``: the SA answers different SLs for one LID pair (``reason`` ``pair_sl_differs``, ``sls``), or SLs
  other than the job's (``reason`` ``sl_not_job_sl``: ``NCCL_IB_SL``, 0 when unset, ``sl_set`` says which), with
  ``paths`` and ``pairs`` counted. One finding per reason.

Ends are named through the fabric model when the bundle has a topology (``leaf07``, ``gpu-a017/mlx5_3``), else by
the NodeRecords, ibnetdiscover/ibnodes lines and host tools that name the LID (:mod:`diagnose.evidence.names`).
"""

from __future__ import annotations

import pandas as pd

from diagnose.evidence import names
from diagnose.evidence.context import Context, finding, refs
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.qos_path import job_service_level, sl_label
from diagnose.models.diagnosis import EvidenceRef, Finding, Location

FULL_MTU = 4096  # the largest IB MTU (PortInfo MTUCap enum 5); what HDR and later fabrics are built for
HDR_GBPS = 200.0  # a 4X HDR path (PathRecord rate enum 17); faster links are NDR/XDR
FAST_SPEEDS = ("HDR", "NDR", "XDR")
MAX_NAMED = 3
NUM_SL = 16


@extractor(fabric=True,
           reads=("FabricLink", "FabricNode", "FabricPortState", "IbPort", "SaPath"),
           emits=("ib_path_mtu_low", "ib_path_sl"))
def sa_paths(ctx: Context) -> list[Finding]:
    if "saquery" not in ctx.formats:  # only a saquery file gives PathRecords: read no table otherwise
        return []
    paths = ctx.frame("SaPath")
    if paths.empty or "slid" not in paths.columns:
        return []
    p = paths.copy()
    p["slid_k"] = pd.to_numeric(p["slid"], errors="coerce").fillna(-1).astype(int)
    p["dlid_k"] = pd.to_numeric(p["dlid"], errors="coerce").fillna(-1).astype(int)
    p = p[(p["slid_k"] > 0) & (p["dlid_k"] > 0)]
    # the same record pasted twice (two files of one capture) is one path
    p = p.drop_duplicates(["slid_k", "dlid_k", "sl", "mtu", "pkey"], keep="first")
    if p.empty:
        return []
    out = _mtu(ctx, p)
    out.extend(_sl(ctx, p))
    return out


# --------------------------------------------------------------------------------------------- naming


def _end(ctx: Context, lid: int) -> tuple[str | None, Location]:
    """The name of the port that holds ``lid`` and its location (host and device of an HCA, a switch by name)."""
    fab = ctx.fabric
    guid = fab.by_lid.get(lid) if fab is not None else None
    if fab is not None and guid is not None:
        if fab.kind(guid) == "CA":
            host, dev = fab.host_device(guid)
            return fab.name(guid), Location(host=host, device=dev)
        return fab.name(guid), Location(device=fab.name(guid))
    n = names.node(ctx, lid=lid)
    if n is None:
        return None, Location()
    if n.kind == "SW" or (n.kind is None and n.host is None):
        return n.name, Location(device=n.name)
    label = f"{n.host}/{n.device}" if n.host and n.device else n.name
    return label, Location(host=n.host or n.name, device=n.device)


def _label(ctx: Context, lid: int) -> str:
    name, _ = _end(ctx, lid)
    return f"{name} (lid {lid})" if name else f"lid {lid}"


def _pair_text(ctx: Context, slid: int, dlid: int) -> str:
    return f"{_label(ctx, slid)} -> {_label(ctx, dlid)}"


# --------------------------------------------------------------------------------------------- MTU


_NO_PORTS = pd.DataFrame({"lid_k": pd.Series([], dtype="int64"), "port_mtu": pd.Series([], dtype="float64"),
                          "src_row": pd.Series([], dtype="float64")})


def _port_mtus(ctx: Context) -> pd.DataFrame:
    """LID -> the active MTU the host tools show for the port that holds it (an Active port's, the smallest)."""
    ib = ctx.frame("IbPort")
    if ib.empty or "active_mtu" not in ib.columns or "lid" not in ib.columns:
        return _NO_PORTS.copy()
    t = ib[ib["active_mtu"].notna() & ib["lid"].notna()].copy()
    if "state" in t.columns:
        t = t[t["state"].isna() | (t["state"] == "Active")]
    if t.empty:
        return _NO_PORTS.copy()
    t["lid_k"] = pd.to_numeric(t["lid"], errors="coerce").fillna(-1).astype(int)
    t["port_mtu"] = pd.to_numeric(t["active_mtu"], errors="coerce")
    t = t[(t["lid_k"] > 0) & t["port_mtu"].notna()].sort_values(["port_mtu", "source", "line"], kind="stable")
    t["src_row"] = t.index
    return t.drop_duplicates("lid_k", keep="first")[["lid_k", "port_mtu", "src_row"]]


def _fast_fabric(ctx: Context, p: pd.DataFrame) -> bool:
    """Whether the fabric runs HDR or faster: a path's rate, an HCA port's or a cable's speed says so."""
    if pd.to_numeric(p.get("rate_gbps"), errors="coerce").ge(HDR_GBPS).any():
        return True
    ib = ctx.frame("IbPort")
    if not ib.empty and "speed" in ib.columns and ib["speed"].isin(FAST_SPEEDS).any():
        return True
    links = ctx.frame("FabricLink")
    return not links.empty and "speed" in links.columns and bool(links["speed"].isin(FAST_SPEEDS).any())


def _mtu(ctx: Context, p: pd.DataFrame) -> list[Finding]:
    known = p[p["mtu"].notna()].copy()
    if known.empty:
        return []
    known["mtu_b"] = pd.to_numeric(known["mtu"], errors="coerce")
    ports = _port_mtus(ctx)
    src = ports.rename(columns={"lid_k": "slid_k", "port_mtu": "s_mtu", "src_row": "s_row"})
    dst = ports.rename(columns={"lid_k": "dlid_k", "port_mtu": "d_mtu", "src_row": "d_row"})
    j = known.merge(src, how="left", on="slid_k").merge(dst, how="left", on="dlid_k")
    j.index = known.index
    ends = j[["s_mtu", "d_mtu"]].apply(pd.to_numeric, errors="coerce").min(axis=1, skipna=True)  # the smaller end's MTU, of the ends shown
    by_port = ends.notna() & (j["mtu_b"] < ends)
    fast = _fast_fabric(ctx, known)
    by_speed = ends.isna() & (j["mtu_b"] < FULL_MTU) & fast
    low = by_port | by_speed
    if not low.any():
        return []
    lows = j[low]
    first = lows.iloc[0]
    slid, dlid = int(first["slid_k"]), int(first["dlid_k"])
    basis = "port_active_mtu" if bool(by_port.any()) else "hdr_fabric"
    expected = int(ends[by_port].max()) if basis == "port_active_mtu" else FULL_MTU
    mtu = int(lows["mtu_b"].min())
    pairs = lows[["slid_k", "dlid_k"]].drop_duplicates()
    shown = [_pair_text(ctx, int(a), int(b)) for a, b in pairs.head(MAX_NAMED).itertuples(index=False)]
    more = f" and {len(pairs) - MAX_NAMED} more pair(s)" if len(pairs) > MAX_NAMED else ""
    why = (f"below the {expected} bytes the end ports shown run (active_mtu)" if basis == "port_active_mtu"
           else f"below {FULL_MTU} bytes on a fabric running HDR or faster")
    src_name, loc = _end(ctx, slid)
    dst_name, dloc = _end(ctx, dlid)
    loc = loc.model_copy(update={"peer": dst_name or (dloc.host if dloc.host else None)})
    kind = "ib_path_mtu_low"
    ev = refs(lows.drop_duplicates(["slid_k", "dlid_k"]), kind, limit=4)
    ib = ctx.frame("IbPort")
    port_rows = [int(r) for r in pd.concat([lows["s_row"], lows["d_row"]]).dropna().unique().tolist()][:3]
    if port_rows and not ib.empty:
        ev += refs(ib.loc[port_rows], kind, limit=3)
    return [_counted(finding(
        kind,
        f"The SA gives {len(lows)} of {len(known)} path(s) an MTU of {mtu} bytes, {why}: "
        f"{', '.join(shown)}{more}. Connections set up from these paths send packets of {mtu} bytes at most.",
        None, loc,
        {"mtu": mtu, "expected_mtu": expected, "basis": basis, "paths": int(len(lows)),
         "paths_total": int(len(known)), "pairs": int(len(pairs)), "slid": slid, "dlid": dlid,
         "src": src_name, "dst": dst_name, "below_port_mtu": bool(by_port.any()), "hdr_fabric": fast},
        evidence=ev[:8],
    ), len(lows))]


# --------------------------------------------------------------------------------------------- SL


def _sl_refs(rows: pd.DataFrame, kind: str, limit: int = 4) -> list[EvidenceRef]:
    r = rows[rows["sl_line"].notna()].sort_values(["source", "sl_line"], kind="stable").head(limit)
    return [EvidenceRef(file=str(s), line=int(ln), text=str(t), finding=kind)
            for s, ln, t in zip(r["source"], r["sl_line"], r["sl_text"], strict=True)]


def _sl(ctx: Context, p: pd.DataFrame) -> list[Finding]:
    t = p[p["sl"].notna()].copy()
    if t.empty:
        return []
    t["sl_k"] = pd.to_numeric(t["sl"], errors="coerce").fillna(-1).astype(int)
    t = t[t["sl_k"] >= 0]
    if t.empty:
        return []
    out: list[Finding] = []
    kind = "ib_path_sl"
    per_pair = t.groupby(["slid_k", "dlid_k"], sort=True)["sl_k"].nunique()
    mixed = per_pair[per_pair > 1]
    if not mixed.empty:
        keys = set(mixed.index.tolist())
        rows = t[[k in keys for k in zip(t["slid_k"].tolist(), t["dlid_k"].tolist(), strict=True)]]
        sls = sorted(set(rows["sl_k"].tolist()))
        slid, dlid = mixed.index[0]
        src_name, loc = _end(ctx, int(slid))
        dst_name, _ = _end(ctx, int(dlid))
        out.append(_counted(finding(
            kind,
            f"The SA answers SLs {', '.join(map(str, sls))} for the same pair of ports "
            f"({_pair_text(ctx, int(slid), int(dlid))}"
            + (f" and {len(mixed) - 1} more pair(s)" if len(mixed) > 1 else "")
            + "): connections between them land on different virtual lanes depending on which path they take.",
            None, loc.model_copy(update={"peer": dst_name}),
            {"reason": "pair_sl_differs", "sls": ",".join(map(str, sls)), "paths": int(len(rows)),
             "pairs": int(len(mixed)), "slid": int(slid), "dlid": int(dlid), "src": src_name, "dst": dst_name},
            evidence=_sl_refs(rows, kind),
        ), len(rows)))
    job = job_service_level(ctx)  # qos_path's reading of NCCL_IB_SL (the most common setting, else 0)
    job_sl, sl_set, env_rows = job.sl, job.set, job.rows
    other = t[t["sl_k"] != job_sl]
    if not other.empty:
        sls = sorted(set(other["sl_k"].tolist()))
        pairs = other[["slid_k", "dlid_k"]].drop_duplicates()
        slid, dlid = int(pairs.iloc[0]["slid_k"]), int(pairs.iloc[0]["dlid_k"])
        src_name, loc = _end(ctx, slid)
        dst_name, _ = _end(ctx, dlid)
        setting = sl_label(job_sl, sl_set)
        ev = refs(env_rows.tail(1), kind) + _sl_refs(other, kind)
        out.append(_counted(finding(
            kind,
            f"{setting}, but the SA gives {len(other)} of {len(t)} path(s) SL {', '.join(map(str, sls))} "
            f"({_pair_text(ctx, slid, dlid)}"
            + (f" and {len(pairs) - 1} more pair(s)" if len(pairs) > 1 else "")
            + "): the fabric's QoS policy puts this traffic on another service level than the job uses.",
            None, loc.model_copy(update={"peer": dst_name}),
            {"reason": "sl_not_job_sl", "sl": job_sl, "sl_set": sl_set, "sls": ",".join(map(str, sls)),
             "paths": int(len(other)), "pairs": int(len(pairs)), "slid": slid, "dlid": dlid, "src": src_name,
             "dst": dst_name},
            evidence=ev[:8],
        ), len(other)))
    return out


def _counted(f: Finding, n: int) -> Finding:
    """The finding counting the paths it stands for (not the lines it cites)."""
    return f.model_copy(update={"count": max(1, int(n))})
