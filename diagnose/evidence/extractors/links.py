"""HCA ports: state, trained rate, and error counters (one or more snapshots)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from diagnose.evidence.context import Context, finding, hosts_label, sval, val
from diagnose.evidence.counters import CounterTable
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.context import IB_GEN_GBPS, symptom_rows
from diagnose.gcpause import gc_paused
from diagnose.models.counters import ERROR_COUNTERS, counter_bits
from diagnose.models.diagnosis import EvidenceRef, Finding, Location
from diagnose.topology.fabric import Fabric, link_gbps


def _nccl_devices(ctx: Context) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(host -> HCAs NCCL listed in 'NET/IB : Using', host -> HCAs named by NCCL_IB_HCA); '*' = any host."""
    listed: dict[str, set[str]] = {}
    forced: dict[str, set[str]] = {}
    init = ctx.frame("NcclNetInit")
    if not init.empty:
        # every rank of a host lists the same HCAs: one set update per distinct (host, device list)
        ib = init["net"].to_numpy(object) == "IB"
        hosts = init["host"].fillna("*").to_numpy(object)[ib].tolist()
        for host, devs in dict.fromkeys(zip(hosts, init["devices"].to_numpy(object)[ib].tolist(), strict=True)):
            listed.setdefault(host, set()).update(devs)
    env = ctx.frame("EnvSetting")
    if not env.empty:
        hca = env[env["name"] == "NCCL_IB_HCA"]
        for host, value in zip(hca["host"].fillna("*").tolist(), hca["value"].astype(str).tolist(), strict=True):
            if value.lstrip("=").startswith("^"):
                continue  # an exclusion list names what NCCL must not use
            names = {v.split(":")[0].lstrip("=") for v in value.split(",") if v.strip()}
            forced.setdefault(host, set()).update(n for n in names if n)
    return listed, forced


def _relevant(ports: pd.DataFrame, ctx: Context) -> pd.Series:
    """Is each port one the job uses or should be using?

    NCCL_IB_HCA, when set, decides. Otherwise NCCL lists only the ports that are up, so a Down port is
    relevant when it is the same HCA model and link layer as the ones NCCL lists (a missing rail), and
    not when it is, say, an Ethernet management NIC of another model.
    """
    if ports.empty:
        return pd.Series(dtype=bool)
    cached = ctx.cache.get("relevant_ports")
    if isinstance(cached, pd.Series) and cached.index.equals(ports.index):
        return cached  # port_states and port_rates ask about the same IbPort rows
    listed, forced = _nccl_devices(ctx)
    roce = False
    init = ctx.frame("NcclNetInit")
    if not init.empty:
        roce = any("RoCE" in t for t in init["link_layers"].tolist())  # not a .map: 65k lambda calls
    # the columns as plain lists, sval() done per column (32k ports: three sval calls per port took 50 ms)
    host = ["*" if h is None else h for h in strings_of(ports["host"])]
    devs = ports["device"].tolist()
    cas, lls, states = strings_of(ports["ca_type"]), strings_of(ports["link_layer"]), strings_of(ports["state"])
    # the HCAs NCCL lists / is told to use, per distinct host
    listed_on = {h: listed.get(h) or listed.get("*") for h in set(host)}
    forced_on = {h: forced.get(h) or forced.get("*") for h in listed_on}
    kinds: set[tuple[str | None, str | None]] = set()
    for h, dev, ca, ll in zip(host, devs, cas, lls, strict=True):
        if dev in (listed_on[h] or ()):
            kinds.add((ca, ll))
    # with no NCCL list: a Down port of the same model and link layer as an Active one of its host is a missing
    # member of a uniform set (one of 16 identical RoCE NICs), not a management NIC of another kind
    active_kinds = {(h, ca, ll) for h, ca, ll, st in zip(host, cas, lls, states, strict=True) if st == "Active"}
    out = []
    for h, dev, ca, ll, state in zip(host, devs, cas, lls, states, strict=True):
        f = forced_on[h]
        lst = listed_on[h]
        if f:
            out.append(dev in f)
        elif lst:
            out.append(dev in lst or (state != "Active" and (ca, ll) in kinds))
        else:
            out.append(ll != "Ethernet" or roce or (state != "Active" and ca is not None and (h, ca, ll) in active_kinds))
    result = pd.Series(out, index=ports.index, dtype=bool)
    ctx.cache["relevant_ports"] = result
    return result


@extractor(reads=("EnvSetting", "IbPort", "NcclNetInit"),
           emits=("port_not_active", "ports_all_active"))
def port_states(ctx: Context) -> list[Finding]:
    ports = ctx.frame("IbPort")
    if ports.empty:
        return []
    ports = ports.copy()
    ports["relevant"] = _relevant(ports, ctx)
    out: list[Finding] = []
    down = ports[ports["state"].notna() & (ports["state"] != "Active")]
    # hosts where every port the job uses or should use is down: NCCL has no RDMA port left there, so whatever it
    # falls back to (NET/Socket, or no NET at all) is this fault's consequence
    rel = ports[ports["relevant"]]
    none_up = {str(h) for h, g in rel.groupby(rel["host"].fillna(""))["state"] if not (g == "Active").any()}
    for _, row in down.sort_values(["host", "device", "port"], na_position="first").iterrows():
        used = bool(row["relevant"])
        out.append(finding(
            "port_not_active",
            f"{sval(row['host']) or '?'} {row['device']} port {row['port']} is {row['state']}"
            + (f"/{row['phys_state']}" if sval(row["phys_state"]) else "")
            + f" ({sval(row['link_layer']) or 'link layer unknown'})"
            + ("" if used else ", not a port the job uses") + ".",
            pd.DataFrame([row]),
            Location(host=sval(row["host"]), device=sval(row["device"]), port=int(row["port"])),
            {"state": sval(row["state"]), "phys_state": sval(row["phys_state"]), "link_layer": sval(row["link_layer"]),
             "relevant": used, "host_rdma_down": used and (sval(row["host"]) or "") in none_up},
        ))
    rel = ports[ports["relevant"]]
    if not rel.empty and (rel["state"] == "Active").all():
        out.append(finding(
            "ports_all_active",
            f"All {len(rel)} HCA port(s) the job uses are Active on {hosts_label(list(rel['host'].dropna()))}.",
            rel.head(3), attrs={"ports": len(rel)},
        ))
    return out


# fabric listings that show every link's width and speed, switch-to-switch included, or check them (ibdiagnet's Links Speed/Width
# Check runs in its discovery stage): the HCA ports' uniform rates say nothing once one of them was collected
FABRIC_VERDICT_FORMATS = frozenset({"iblinkinfo", "ibdiagnet_lst", "ibdiagnet_log"})
_PORT_RATE = re.compile(r"\b(?P<gen>NDR|HDR|EDR|XDR)\b|\b(?P<g>100|200|400|800)\s?G(?:b(?:/s|ps)?)?\s?(?:HDR|NDR|EDR|IB\b|InfiniBand)", re.I)


def _stated_port_gbps(ctx: Context) -> float | None:
    """The per-port InfiniBand rate the report names ("200G HDR", "NDR"), or None."""
    rates = []
    for t in symptom_rows(ctx)["text"].astype(str):
        for m in _PORT_RATE.finditer(t):
            rates.append(float(IB_GEN_GBPS[m["gen"].upper()]) if m["gen"] else float(m["g"]))
    return max(rates) if rates else None


@extractor(reads=("EnvSetting", "FreeText", "IbPort", "NcclNetInit"),
           emits=("port_rate_low", "port_rates_uniform"))
def port_rates(ctx: Context) -> list[Finding]:
    ports = ctx.frame("IbPort")
    if ports.empty or "rate_gbps" not in ports:
        return []
    act = ports[(ports["state"] == "Active") & _relevant(ports, ctx) & ports["rate_gbps"].notna()]
    out: list[Finding] = []
    # peers: ports of the same link layer and the same HCA model (a 100G CX6 management port is no peer of a CX7)
    act = act.assign(_model=act["ca_type"].fillna("?") if "ca_type" in act else "?")
    stated = _stated_port_gbps(ctx)
    for (ll, _model), grp in act.groupby([act["link_layer"].fillna("?"), "_model"]):
        best = float(grp["rate_gbps"].max())
        by_report = stated is not None and ll == "InfiniBand" and stated > best
        if by_report:  # every port of the kind below what the report says the fabric is: peers cannot show it
            best = float(stated)  # type: ignore[arg-type]
        low = grp[grp["rate_gbps"] < best]
        width_low = grp[grp["width"].notna() & ~grp["width"].isin(["4X", "8X", "12X"])] if "width" in grp else grp.iloc[0:0]
        low = pd.concat([low, width_low]).drop_duplicates(subset=["source", "line"])
        for _, row in low.sort_values(["host", "device"], na_position="first").iterrows():
            rate = float(row["rate_gbps"])
            out.append(finding(
                "port_rate_low",
                f"{sval(row['host']) or '?'} {row['device']} port {row['port']} trained at {rate:g} Gb/s"
                + (f" ({row['width']} {sval(row['speed']) or ''})".rstrip() if sval(row.get("width")) else "")
                + (f" while the report says the fabric runs at {best:g} Gb/s." if by_report
                   else f" while its peers run at {best:g} Gb/s."),
                pd.DataFrame([row]),
                Location(host=sval(row["host"]), device=sval(row["device"]), port=int(row["port"])),
                {"rate_gbps": rate, "expected_gbps": best, "ratio": round(rate / best, 3) if best else None,
                 "width": sval(row.get("width")), "link_layer": ll},
            ))
        if low.empty and len(grp) >= 2:
            # the HCA ports say nothing about the switch-to-switch links: when a fabric listing that prints each
            # link's verdict was collected, it decides (link_training: link_below_capability / at capability)
            out.append(finding(
                "port_rates_uniform",
                f"All {len(grp)} active {ll} port(s) run at {best:g} Gb/s.",
                grp.head(2), attrs={"rate_gbps": best, "ports": len(grp),
                                    "fabric_listed": bool(ctx.formats & FABRIC_VERDICT_FORMATS)},
            ))
    return out


def values_of(col: pd.Series) -> list[object]:
    """``[val(x) for x in col]`` for a whole column at once (NaN/NA -> None, numpy scalars -> Python): one
    ``tolist()`` instead of a pandas call per element (a 4,096-host bundle has 32k HCA ports, 200k fabric ports)."""
    out = col.tolist()
    for i in np.flatnonzero(col.isna().to_numpy()).tolist():
        out[i] = None
    if col.dtype == object and any(isinstance(v, np.generic) for v in out):
        out = [val(v) for v in out]
    return out


def strings_of(col: pd.Series) -> list[str | None]:
    """``[sval(x) for x in col]`` for a whole column at once."""
    if isinstance(col.dtype, pd.StringDtype):  # strings already, and values_of made the missing ones None
        return values_of(col)  # type: ignore[return-value]
    return [v if v is None or type(v) is str else str(v) for v in values_of(col)]


def port_index_of(ctx: Context) -> tuple[dict[tuple[str, int], dict[str, object]], dict[str, dict[str, object]]]:
    """HCA ports by (host, LID) (and ('*', LID)) and by port/node GUID: {"host", "device", "port", "lid"}.

    Plain dicts built by zipping columns: a bundle with ibstat from every host of a 4,096-host job has 32k
    ports, and this index is asked for by several extractors (cached on the context)."""
    cached = ctx.cache.get("port_index")
    if cached is not None:
        return cached  # type: ignore[return-value]
    ports = ctx.frame("IbPort")
    by_lid: dict[tuple[str, int], dict[str, object]] = {}
    by_guid: dict[str, dict[str, object]] = {}
    if not ports.empty:
        n = len(ports)
        cols = {c: ports[c].to_numpy(object) if c in ports else [None] * n
                for c in ("host", "device", "port", "lid")}
        hosts = strings_of(ports["host"]) if "host" in ports else [None] * n
        lids = values_of(ports["lid"]) if "lid" in ports else [None] * n
        pgs = strings_of(ports["port_guid"]) if "port_guid" in ports else [None] * n
        ngs = strings_of(ports["node_guid"]) if "node_guid" in ports else [None] * n
        with gc_paused():  # 32k small dicts: no cycles
            for host, device, port, lid, host_s, lid_v, pg, ng in zip(*cols.values(), hosts, lids, pgs, ngs,
                                                                      strict=True):
                info = {"host": host, "device": device, "port": port, "lid": lid}
                if lid_v:
                    by_lid[(host_s or "", int(lid_v))] = info  # type: ignore[call-overload]
                    by_lid.setdefault(("*", int(lid_v)), info)  # type: ignore[call-overload]
                for guid in (pg, ng):
                    if guid and guid.strip("0x"):  # all-zero GUIDs (Down RoCE ports) identify nothing
                        by_guid.setdefault(guid.lower(), info)
    ctx.cache["port_index"] = (by_lid, by_guid)
    return by_lid, by_guid


PHY_COUNTERS = ("symbol_error", "link_error_recovery", "local_link_integrity_errors")
# the smallest increase between snapshots that the link-level analysis looks at (the rules set the
# thresholds that decide; this only keeps single stray errors out of the cross-port grouping)
RISING_FLOOR = 2
# An error count that did not move across 2+ snapshots and stays below this is history (a reboot, a re-cabling,
# a maintenance window), not a live fault: it goes into one summary finding instead of one finding per port. A
# 4,096-host fabric after maintenance has ~10k ports with LinkDowned 1-4; pushing each through the rule engine
# costs seconds and says nothing. 10 is ibcheckerrs' predefined threshold for SymbolErrors, LinkRecovers,
# LinkDowned and RcvErrors (infiniband-diags), and no rule asks about a static count below it
# (tests/test_counter_history.py keeps the rules' value thresholds at or above it).
HISTORY_FLOOR = 10


def _link_level(fab: Fabric, rising: dict[tuple[str, int], list[EvidenceRef]]) -> list[Finding]:
    """Join rising physical-layer errors across the two ends of each cable and across the ports of a device.

    Errors rising on both ends of one cable point at that cable. Errors rising on many ports of one
    switch whose far ends are clean point at the switch, not at the cables.
    """
    out: list[Finding] = []
    seen: set[tuple[tuple[str, int], tuple[str, int]]] = set()
    for (guid, port), ev in sorted(rising.items()):
        far = fab.peer(guid, port)
        if far is None or far not in rising:
            continue
        cable = (min((guid, port), far), max((guid, port), far))
        if cable in seen:
            continue
        seen.add(cable)
        a, b = cable
        hca_end = a if fab.kind(a[0]) == "CA" else b if fab.kind(b[0]) == "CA" else a
        other = b if hca_end == a else a
        host, dev = fab.host_device(hca_end[0])
        out.append(finding(
            "cable_errors_both_ends",
            f"Physical-layer errors rise on both ends of the cable {fab.label(*hca_end)} <-> {fab.label(*other)}.",
            None,
            Location(host=host, device=dev if host else fab.name(hca_end[0]), port=hca_end[1],
                     peer=fab.label(*other)),
            {"ends": 2}, evidence=(ev + rising[far])[:8],
        ))
    by_switch: dict[str, list[tuple[int, list[EvidenceRef]]]] = {}
    for (guid, port), ev in rising.items():
        if fab.kind(guid) == "SW":
            far = fab.peer(guid, port)
            if far is None or far not in rising:
                by_switch.setdefault(guid, []).append((port, ev))
    for sw, ports in sorted(by_switch.items()):
        if len(ports) >= 3:
            ports.sort()
            out.append(finding(
                "switch_port_errors",
                f"Physical-layer errors rise on {len(ports)} ports of {fab.name(sw)} "
                f"({', '.join('P' + str(p) for p, _ in ports[:8])}) while the far ends are clean: the switch "
                "(ASIC, line card or its cage), not the cables.",
                None, Location(device=fab.name(sw)), {"ports": len(ports)},
                evidence=[e for _, ev in ports for e in ev[:2]][:8],
            ))
    return out


def _port_gbps(ctx: Context, fab: Fabric | None, host: str | None, device: str | None, guid: str | None,
               port: int | None) -> float | None:
    """The link's rate in Gb/s, from the topology (width x speed) or from ibstat's Rate."""
    if fab is not None and guid and port is not None:
        info = fab.ports.get((guid, port))
        if info is not None:
            r = link_gbps(info.width, info.speed)
            if r:
                return r
    ports = ctx.frame("IbPort")
    if not ports.empty and device:
        sel = ports[(ports["device"] == device) & ((ports["host"] == host) if host else True)]
        if "rate_gbps" in sel and sel["rate_gbps"].notna().any():
            return float(sel["rate_gbps"].dropna().iloc[0])
    return None


def _series_refs(table: CounterTable, starts: list[int], ends: list[int], kind: str,
                 limit: int = 4) -> list[list[EvidenceRef]]:
    """For each series (its samples ``start:end``), the refs of its last ``limit`` samples, oldest first: what
    ``table.refs(table.rows(start, end), kind, limit)`` gives, in one call for all series, since each call
    reads the samples' line column again."""
    rows = [r for a, b in zip(starts, ends, strict=True) for r in range(max(int(a), int(b) - limit), int(b))]
    flat = table.refs(rows, kind, limit=len(rows)) if rows else []
    out, i = [], 0
    for a, b in zip(starts, ends, strict=True):
        k = int(b) - max(int(a), int(b) - limit)
        out.append(flat[i:i + k])
        i += k
    return out


@extractor(fabric=True,
           reads=("FabricLink", "FabricNode", "FabricPortState", "IbPort", "PortCounter", "PortCounterWide"),
           emits=("cable_errors_both_ends", "port_counter_errors", "port_counters_clean", "port_counters_history",
                  "port_counters_stable", "switch_port_errors"))
def port_counters(ctx: Context) -> list[Finding]:
    table = ctx.counters
    if table.empty:
        return []
    t = table.series
    err_all = t[t["counter"].isin(ERROR_COUNTERS) & (t["last"] > 0)] if not t.empty else t
    history = (((err_all["snaps"] > 1) & (err_all["inc"] == 0) & ~err_all["reset"].astype(bool)
                & (err_all["last"] < HISTORY_FLOOR)) if not err_all.empty else pd.Series(False, index=err_all.index))
    err = err_all[~history]
    by_lid, by_guid = port_index_of(ctx)
    fab = ctx.fabric
    out: list[Finding] = []
    n_err = int(history.sum())
    rising_phy: dict[tuple[str, int], list[EvidenceRef]] = {}
    # the series table is already per (port, counter); Python only touches non-zero error counters, column
    # lists rather than pandas element access (a 4,096-host fabric has thousands of non-zero LinkDowned)
    cols = [err[c].tolist() for c in ("host_k", "dev_k", "guid_k", "lid_k", "port_k", "counter", "last", "snaps",
                                      "extended", "inc", "reset", "t0", "t1")]
    evs = _series_refs(table, err["start"].tolist(), err["end"].tolist(), "port_counter_errors")
    prefetch = getattr(fab.ports, "prefetch", None) if fab is not None else None
    if prefetch is not None:  # the cable of each of these ports is read below: make their records in one batch
        prefetch(zip(cols[2], map(int, cols[4]), strict=True))
    with gc_paused():  # thousands of findings: no cycles, and a collection pass walks the whole bundle
        for host, dev, guid, lid, port, counter, last, snaps, extended, inc, reset, t0, t1, ev in zip(*cols, evs,
                                                                                                      strict=True):
            n_err += 1
            lid, port = int(lid), int(port)
            last, snaps, reset = int(last), int(snaps), bool(reset)
            info = by_guid.get(guid) if guid else None
            if info is None and lid >= 0:
                info = by_lid.get((host, lid)) if host else None
                info = info if info is not None else by_lid.get(("*", lid))
            dev_host = (sval(info["host"]) if info is not None else None) or (host or None)
            device = dev or (str(info["device"]) if info is not None else None)
            hca_port = port if port >= 0 else None
            is_switch = info is None and guid != "" and not host
            peer = None
            node_guid = guid or (fab.by_lid.get(lid) if fab is not None and lid >= 0 else None)
            if fab is not None and not node_guid and dev_host and device:
                node_guid = fab.hca(dev_host, device)
            if fab is not None and node_guid and node_guid in fab.graph:
                if fab.kind(node_guid) == "SW":
                    is_switch, dev_host, device = True, None, fab.name(node_guid)
                else:
                    h, d = fab.host_device(node_guid)
                    dev_host, device = dev_host or h, device or d
                far = fab.peer(node_guid, hca_port) if hca_port is not None else None
                if far is not None:
                    peer = fab.label(*far)
            delta = int(inc) if snaps > 1 else None
            bits = counter_bits(counter)
            # basic (non -x) PMA counters stop at their maximum instead of wrapping: the rate is then unknown
            saturated = (not bool(extended)) and bits is not None and last >= (1 << bits) - 1
            where = " ".join(x for x in [dev_host or (f"guid {guid}" if guid and not device else None), device,
                                         f"port {hca_port}" if hca_port is not None else None,
                                         f"(lid {lid})" if lid >= 0 else None] if x)
            if peer:
                where += f", cabled to {peer}"
            trend = ((f", +{delta} across {snaps} snapshots" if delta else ", not rising across snapshots")
                     if snaps > 1 else "")
            if reset:
                trend += " (the counter was reset between snapshots)"
            attrs: dict[str, str | int | float | bool | None] = {
                "counter": counter, "value": last, "snapshots": snaps, "rising": bool(delta and delta > 0),
                "saturated": saturated, "switch": is_switch, "reset": reset,
            }
            if delta is not None:
                attrs["delta"] = delta
                window = float(t1 - t0) if t1 == t1 and t0 == t0 else 0.0  # NaN-safe
                if window > 0:
                    attrs["window_s"] = round(window)
                    attrs["per_hour"] = round(delta * 3600.0 / window, 2)
                    gbps = (_port_gbps(ctx, fab, dev_host, device, node_guid, hca_port)
                            if counter == "symbol_error" else None)
                    if gbps:
                        # bit error rate over the window: errors / bits carried at the link's signalling rate
                        ber = delta / (gbps * 1e9 * window)
                        attrs["ber"] = float(f"{ber:.3e}")
                        attrs["ber_log10"] = round(math.log10(ber), 2) if ber > 0 else None
                        attrs["link_gbps"] = gbps
            out.append(finding(
                "port_counter_errors",
                f"{counter} = {last}{' (saturated)' if saturated else ''} on {where}{trend}.",
                None, Location(host=dev_host, device=device, port=hca_port, peer=peer), attrs, evidence=ev,
            ))
            if (fab is not None and node_guid and hca_port is not None and counter in PHY_COUNTERS
                    and delta is not None and delta >= RISING_FLOOR):
                rising_phy.setdefault((node_guid, hca_port), []).extend(ev)

    if fab is not None and rising_phy:
        out.extend(_link_level(fab, rising_phy))
    if history.any():
        old = err_all[history]
        per = old.groupby("counter", sort=True).size()
        rows = sorted(int(e) - 1 for e in old["end"].head(3).tolist())
        out.append(finding(
            "port_counters_history",
            f"{len(old)} port counter(s) hold old error counts below {HISTORY_FLOOR} that did not move between "
            f"snapshots ({', '.join(f'{c} on {n}' for c, n in per.items())}): history, not listed port by port.",
            table.frame(rows), attrs={"counters": len(old), "floor": HISTORY_FLOOR,
                                      **{f"n_{c}": int(n) for c, n in per.items()}},
        ))
    n_ports = table.n_ports
    if n_err == 0:
        out.append(finding(
            "port_counters_clean",
            f"Error counters are zero on all {n_ports} port(s) queried.",
            table.frame(table.clean_rows), attrs={"ports": n_ports},
        ))
    elif table.max_order > 0 and not any(f.attrs.get("rising") for f in out):
        first_rows = sorted((int(s), int(ln)) for s, ln in zip(err_all["start"], err_all["end"] - 1,
                                                                 strict=True))[:3]
        out.append(finding(
            "port_counters_stable",
            f"Error counters on {n_ports} port(s) did not move between snapshots (old, not ongoing errors).",
            table.frame([r for _, r in first_rows]), attrs={"ports": n_ports},
        ))
    return out


@extractor(reads=("Mlx5Event",),
           emits=("nic_link_down_event",))
def link_events(ctx: Context) -> list[Finding]:
    ev = ctx.frame("Mlx5Event")
    out: list[Finding] = []
    if not ev.empty:
        down = ev[ev["category"] == "link_down"]
        if not down.empty:
            for (host, bdf), grp in down.groupby([down["host"].fillna(""), "bdf"], sort=True):
                ups = ev[(ev["category"] == "link_up") & (ev["bdf"] == bdf) & (ev["host"].fillna("") == host)]
                out.append(finding(
                    "nic_link_down_event",
                    f"mlx5 {bdf}{' (' + str(grp.iloc[0]['netdev']) + ')' if sval(grp.iloc[0]['netdev']) else ''}"
                    f" reported Link down {len(grp)} time(s){' on ' + host if host else ''}"
                    f"{', and link up ' + str(len(ups)) + ' time(s)' if len(ups) else ''}.",
                    pd.concat([grp, ups]).head(8), Location(host=host or None, device=bdf),
                    {"downs": len(grp), "ups": len(ups)},
                ))
    return out


@extractor(reads=("DevNetMap", "EnvSetting", "FreeText", "IbPort", "NcclNetInit"),
           emits=("rdma_netdev_down",))
def netdev_states(ctx: Context) -> list[Finding]:
    """``ibdev2netdev`` lines whose netdev is ``(Down)``: on RoCE the netdev is the port, on InfiniBand the IPoIB
    interface follows the port's state, so a Down netdev is a port that does not carry traffic, unless the port's
    own state (ibstat, sysfs) in the bundle says Active (then only the IPoIB interface is down). ``relevant``: the
    job uses or should use the device (NCCL lists it or is told to, the report names it, or every RDMA device the
    host lists is down)."""
    maps = ctx.frame("DevNetMap")
    if maps.empty or "up" not in maps:
        return []
    down = maps[maps["up"].eq(False)]
    if down.empty:
        return []
    ports = ctx.frame("IbPort")
    active: set[tuple[str, str]] = set()
    if not ports.empty:
        act = ports[ports["state"] == "Active"]
        active = {(sval(h) or "", str(d)) for h, d in zip(act["host"], act["device"], strict=True)}
    listed, forced = _nccl_devices(ctx)
    sym = " ".join(symptom_rows(ctx)["text"].astype(str))
    out: list[Finding] = []
    for (host, dev), grp in down.groupby([down["host"].fillna(""), down["device"]], sort=True):
        if (str(host), str(dev)) in active or ("", str(dev)) in active:
            continue
        named = dev in (forced.get(host) or forced.get("*") or set()) | (listed.get(host) or listed.get("*") or set())
        said = bool(re.search(rf"\b{re.escape(str(dev))}\b|\b{re.escape(str(grp['netdev'].iloc[0]))}\b", sym))
        on_host = maps[maps["host"].fillna("") == host]
        all_down = bool(on_host["up"].eq(False).all())
        row = grp.head(1)
        out.append(finding(
            "rdma_netdev_down",
            f"ibdev2netdev shows {dev} port {int(row['port'].iloc[0])} -> {row['netdev'].iloc[0]} Down"
            + (f" on {host}" if host else "") + ": the port does not carry traffic.",
            row, Location(host=str(host) or None, device=str(dev), port=int(row["port"].iloc[0])),
            {"relevant": bool(named or said or all_down), "all_down": all_down},
        ))
    return out

