"""perftest runs (``ib_write_bw`` & co.) as evidence about one host pair's RDMA path.

- ``perftest_bw_below_line_rate`` / ``perftest_bw_ok``: the BW average of a run's largest message (64 KiB or more:
  smaller messages are bounded by the message rate, not the wire) against the line rate of the port it ran on
  (the bundle's IbPort records for the run's device, the slower of both ends when both are there, ``basis:
  port``), else the rate the report states (``basis: stated``). A bidirectional run is held against twice the
  rate. A healthy link gives 90-97% of its rate to one RC QP at 64 KiB and more (perftest's own numbers: FDR10
  37.8 of 40 Gb/s, EDR 96.6 of 100): below :data:`HEALTHY_FRACTION` the run is classed below line rate; what
  fraction points to which cause is for the rules (a port that trained low shows a full fraction of its own,
  low, rate: only ``basis: stated`` says the link is slow for its hardware).
- ``perftest_mr_failed``: ``ibv_reg_mr`` failed (``use_cuda``: on a GPU buffer, GPUDirect RDMA unavailable).
- ``perftest_transport_error``: a work completion error (status 12 retry exceeded, 13 RNR, 4 local protection...).
- ``perftest_mtu``: the MTU a run's QPs used, its link type, and the port's active MTU when the bundle has it.

One finding per host and device (the server and the client print their own copy of the same transfer).
"""

from __future__ import annotations

import re

import pandas as pd

from diagnose.evidence.context import Context, finding, sval, val
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.context import IB_GEN_GBPS, symptom_rows
from diagnose.models.diagnosis import Finding, Location

LARGE_MSG = 65536  # perftest's default BW message size; below it a run is message-rate bound
HEALTHY_FRACTION = 0.9  # classification only (see the module docstring); the rules' thresholds decide causes
_8B10B = re.compile(r"\b(?:SDR|DDR|QDR)\b")
# "HDR 200G", "200 Gb/s", "4X NDR", "100GbE": the link rate a report states
_STATED = re.compile(r"\b(?P<g>25|40|50|56|100|200|400|800)\s?G(?:b(?:/s|ps|it/s)?|bE)?\b|\b(?P<gen>NDR|HDR|EDR|FDR|XDR)\b",
                     re.I)
_STATUS = {12: "transport retry counter exceeded", 13: "RNR retry counter exceeded", 4: "local protection error",
           5: "work request flushed", 10: "remote access error", 9: "remote invalid request", 2: "local QP operation"}


def _int(v: object) -> int | None:
    v = val(v)
    return None if v is None else int(v)  # type: ignore[call-overload]


def _host(row: pd.Series) -> str | None:
    return sval(row.get("host"))


def _key(row: pd.Series) -> tuple[str, str]:
    return (sval(row.get("host")) or str(row["source"]), sval(row.get("device")) or "")


def _port_rate(ports: pd.DataFrame, run: pd.Series) -> tuple[float | None, pd.DataFrame]:
    """Line rate (Gb/s of data) of the port(s) a run crossed, and the port rows it came from."""
    if ports.empty or "rate_gbps" not in ports:
        return None, ports.iloc[0:0]
    act = ports[ports["rate_gbps"].notna() & (ports["state"].astype(str) == "Active")]
    link = sval(run.get("link_type"))
    if link and "link_layer" in act:
        want = "Ethernet" if link == "Ethernet" else "InfiniBand"
        same = act[act["link_layer"].astype(str) == want]
        act = same if not same.empty else act
    dev = sval(run.get("device"))
    cand = act[act["device"] == dev] if dev else act.iloc[0:0]
    ends = {h for h in (sval(run.get("host")), sval(run.get("peer"))) if h}
    if not cand.empty and ends and "host" in cand:
        near = cand[cand["host"].isin(ends)]
        cand = near if not near.empty else cand
    if cand.empty:
        rates = set(act["rate_gbps"].astype(float))
        if len(rates) != 1:
            return None, act.iloc[0:0]
        cand = act
    rate = float(cand["rate_gbps"].astype(float).min())
    speed = " ".join(str(s) for s in cand.get("speed", pd.Series(dtype=str)).dropna())
    if _8B10B.search(speed):
        rate *= 0.8  # 8b/10b encoding: the data rate is 80% of the signalling rate
    return rate, cand


def _stated_rate(ctx: Context) -> tuple[float | None, pd.DataFrame]:
    sym = symptom_rows(ctx)
    for _, row in sym.iterrows():
        m = _STATED.search(str(row["text"]))
        if m:
            gbps = float(m["g"]) if m["g"] else float(IB_GEN_GBPS[m["gen"].upper()])
            return gbps, pd.DataFrame([row])
    return None, sym.iloc[0:0]


@extractor(reads=("IbPort", "PerftestResult", "PerftestRun"),
           emits=("perftest_bw_below_line_rate", "perftest_bw_measured", "perftest_bw_ok"))
def perftest_bandwidth(ctx: Context) -> list[Finding]:
    rows = ctx.frame("PerftestResult")
    runs = ctx.frame("PerftestRun")
    if rows.empty or runs.empty:
        return []
    bw = rows[(rows["kind"] == "bw") & rows["bw_avg_gbps"].notna()]
    if bw.empty:
        return []
    ports = ctx.frame("IbPort")
    stated: tuple[float | None, pd.DataFrame] | None = None
    best: dict[tuple[str, str], tuple[float, Finding]] = {}
    for (source, ri), grp in bw.groupby(["source", "run_index"], sort=True):
        top = grp[grp["bytes"] == grp["bytes"].max()]
        row = top.loc[top["bw_avg_gbps"].astype(float).idxmax()]
        if int(row["bytes"]) < LARGE_MSG or float(row["bw_avg_gbps"]) <= 0:
            continue
        r = runs[(runs["source"] == source) & (runs["run_index"] == ri)]
        if r.empty:
            continue
        run = r.iloc[0]
        gbps = round(float(row["bw_avg_gbps"]), 3)
        expected, basis_rows = _port_rate(ports, run)
        basis = "port" if expected else None
        if expected is None:
            if stated is None:
                stated = _stated_rate(ctx)
            expected, basis_rows = stated
            basis = "stated" if expected else None
        bidi = bool(val(run.get("bidirectional")))
        if expected and bidi:
            expected *= 2
        fraction = round(gbps / expected, 3) if expected else None
        use_cuda = bool(val(run.get("use_cuda")))
        dev = sval(run.get("device"))
        test = sval(run.get("test")) or sval(run.get("tool")) or "perftest"
        kind = "perftest_bw_ok" if fraction is not None and fraction >= HEALTHY_FRACTION else "perftest_bw_below_line_rate"
        if fraction is None:
            kind = "perftest_bw_measured"
        pct = (f", {fraction * 100:.0f}% of the {expected:g} Gb/s {'port rate' if basis == 'port' else 'rate the report states'}"
               if fraction is not None else " (no line rate known to compare with)")
        f = finding(
            kind,
            f"{test} on {dev or 'the HCA'}{' (GPU memory)' if use_cuda else ''} averages {gbps:g} Gb/s at "
            f"{int(row['bytes'])} B{pct}.",
            pd.concat([pd.DataFrame([row]), basis_rows.head(2)], ignore_index=True) if basis else pd.DataFrame([row]),
            location=Location(host=_host(run), device=dev),
            attrs={"gbps": gbps, "expected_gbps": round(expected, 3) if expected else None, "fraction": fraction,
                   "basis": basis, "bytes": int(row["bytes"]), "use_cuda": use_cuda, "bidirectional": bidi,
                   "link_type": sval(run.get("link_type")), "qps": _int(run.get("qps"))},
        )
        k = _key(run)
        if k not in best or gbps > best[k][0]:
            best[k] = (gbps, f)
    return [f for _, f in (best[k] for k in sorted(best)) if f.kind != "perftest_bw_measured"]


@extractor(reads=("PerftestError", "PerftestRun"),
           emits=("perftest_mr_failed", "perftest_transport_error"))
def perftest_errors(ctx: Context) -> list[Finding]:
    errs = ctx.frame("PerftestError")
    if errs.empty:
        return []
    out: list[Finding] = []
    hosts = errs["host"].where(errs["host"].notna(), errs["source"]) if "host" in errs else errs["source"]
    mr = errs[errs["kind"] == "mr"]
    for _h, grp in mr.groupby(hosts[mr.index], sort=True):
        cuda = bool(grp["use_cuda"].any())
        errno = next((int(d) for d in grp["detail"].dropna() if str(d).isdigit()), None)
        out.append(finding(
            "perftest_mr_failed",
            f"perftest could not register its {'GPU' if cuda else 'host'} buffer (ibv_reg_mr failed"
            f"{f', errno {errno}' if errno else ''})" + (": GPUDirect RDMA is not available to it." if cuda else "."),
            grp, location=Location(host=sval(grp["host"].iloc[0]) if "host" in grp else None),
            attrs={"use_cuda": cuda, "errno": errno}))
    comp = errs[(errs["kind"] == "completion") & errs["status"].notna()]
    runs = ctx.frame("PerftestRun")
    roce_runs: set[tuple[str, int]] = set()
    if not runs.empty and "link_type" in runs:
        r = runs[runs["link_type"].astype(str) == "Ethernet"]
        roce_runs = set(zip(r["source"], r["run_index"].astype(int), strict=True))
    for (_h, st), grp in comp.groupby([hosts[comp.index], comp["status"].astype(int)], sort=True):
        vend = next((int(v) for v in grp["vendor_err"].dropna()), None)
        name = _STATUS.get(int(st), f"status {int(st)}")
        out.append(finding(
            "perftest_transport_error",
            f"perftest's RDMA transfer failed with completion status {int(st)} ({name}"
            f"{f', vendor syndrome 0x{vend:x}' if vend is not None else ''}).",
            grp, location=Location(host=sval(grp["host"].iloc[0]) if "host" in grp else None),
            attrs={"status": int(st), "vendor_err": vend, "retry_exceeded": int(st) == 12,
                   "roce": any((s, int(i)) in roce_runs for s, i in zip(grp["source"], grp["run_index"], strict=True)),
                   "side": sval(grp["side"].dropna().iloc[0]) if grp["side"].notna().any() else None}))
    return out


@extractor(reads=("IbPort", "PerftestError", "PerftestRun"),
           emits=("perftest_mtu",))
def perftest_mtu(ctx: Context) -> list[Finding]:
    runs = ctx.frame("PerftestRun")
    if runs.empty or "mtu" not in runs:
        return []
    runs = runs[runs["mtu"].notna()]
    if runs.empty:
        return []
    errs = ctx.frame("PerftestError")
    lowered = errs[errs["kind"] == "mtu_lowered"] if not errs.empty else errs
    ports = ctx.frame("IbPort")
    seen: dict[tuple[str, str], Finding] = {}
    for _, run in runs.sort_values(["source", "line"]).iterrows():
        k = _key(run)
        if k in seen:
            continue
        active = None
        if not ports.empty and "active_mtu" in ports and sval(run.get("device")):
            p = ports[(ports["device"] == run["device"]) & ports["active_mtu"].notna()]
            if not p.empty and "host" in p and sval(run.get("host")):
                same = p[p["host"] == run["host"]]
                p = same if not same.empty else p
            active = int(p["active_mtu"].min()) if not p.empty else None
        low = lowered[(lowered["source"] == run["source"]) & (lowered["run_index"] == run["run_index"])] \
            if not lowered.empty else lowered
        mtu, link = int(run["mtu"]), sval(run.get("link_type"))
        seen[k] = finding(
            "perftest_mtu",
            f"perftest's QPs on {sval(run.get('device')) or 'the HCA'} used MTU {mtu} over "
            f"{'RoCE' if link == 'Ethernet' else link or 'an unknown link type'}"
            + (f" (port active MTU {active})" if active else "")
            + (" after lowering the requested MTU to the port's" if not low.empty else "") + ".",
            pd.DataFrame([run]), location=Location(host=_host(run), device=sval(run.get("device"))),
            attrs={"mtu": mtu, "link_type": link, "gid_index": _int(run.get("gid_index")),
                   "port_active_mtu": active, "below_port_mtu": active is not None and mtu < active,
                   "lowered": not low.empty, "roce": link == "Ethernet"})
    return list(seen.values())
