"""InfiniBand QoS along the job's path: the job's SL, the VL each port maps it to, and that VL's arbitration weight.

The job marks its packets with one service level (NCCL: ``NCCL_IB_SL``, default 0). Every port a packet leaves
maps the SL to a virtual lane with its SL2VL table (IBA vol. 1 7.6.6; a switch has a table per input/output port
pair, ``smpquery sl2vl <lid> <out port>`` prints the rows of one output port; an HCA has one, ``in 0, out 0``; VL 15
there means the packet is dropped), and the port's VL arbiter serves that lane by the weights of the VLArb high and
low tables (IBA 7.6.9: weights count 64-byte units, an entry of weight 0 is skipped, a VL in no entry with a weight
is never served). Where the tables were measured (``smpquery sl2vl`` / ``smpquery vlarb``) they decide; without them
the OpenSM options that program them (``qos``, ``qos[_ca|_swe|_sw2sw]_sl2vl`` / ``_vlarb_high`` / ``_vlarb_low`` /
``_high_limit`` in ``opensm.conf``, read as ``SmConfigOption`` rows) stand in, OpenSM's hard-coded defaults filling
the options left unset (``doc/qos-config.txt``).

OpenSM's QoS policy file (``qos-policy.conf``, :mod:`diagnose.parsers.qos_policy`) does not replace any of these:
its ``qos-setup`` section (``vlarb-tables`` / ``sl2vl-tables`` per port group) is parsed and ignored, the ports are
programmed from the ``opensm.conf`` options only (linux-rdma/opensm ``doc/QoS_management_in_OpenSM.txt`` section
2.II and its example's ``qos-setup`` comment; ``opensm/osm_qos.c`` ``osm_qos_setup`` builds every port's tables from
``opt.qos_*_options``; NVIDIA's MLNX_OFED manual: "not supported in OFED"). Precedence, then: measured tables, else
``opensm.conf`` (and OpenSM's defaults), never ``qos-setup``; a finding says so when the policy holds such tables.
What the policy does decide is the SL of SA PathRecord queries: the ``DEFAULT`` qos-level, else ``qos-ulps``
``default : N``, for a query no rule matches (``osm_qos_policy.c``), read by OpenSM only with ``qos`` on. That is
the SL of traffic whose paths come from the SA (IPoIB, rdma_cm connections, an MPI that asks the SA for paths);
NCCL sets ``NCCL_IB_SL`` (default 0) on its QPs itself and never asks the SA (doc section 6.6: OpenSM forces no SL on
MPI either). So the job's SL is ``NCCL_IB_SL``; unset, it is 0 when the bundle shows an NCCL job (an NCCL log or
``NCCL_*`` setting) and the policy's default SL when it shows none (``sl_source`` ``qos-policy.conf``).

Findings (all with ``sl``, ``sl_set``: whether ``NCCL_IB_SL`` was set, ``source``: ``measured`` | ``opensm.conf``,
where the tables judged come from; with a ``qos-policy.conf`` in the bundle also ``sl_source``: ``NCCL_IB_SL`` |
``NCCL default`` | ``qos-policy.conf`` | ``default``, ``sa_sl``: the SL the policy gives SA path queries, and
``policy_setup_ignored``: whether it holds ``qos-setup`` tables, which OpenSM does not program):

* ``ib_sl_starved_vl``: on ``ports`` of the ``ports_checked`` egress ports the job's VL ``vl`` has no weight
  (``weight`` 0 in both tables, ``table`` ``none``), is VL 15 (``reason`` ``dropped``), or sits only in the low
  table while other VLs hold the high table with an unbounded high limit (``reason`` ``preempted``, from a
  configured ``qos_high_limit 255``). Located at the first such port: the switch by its name and the port.
* ``ib_sl_shares_vl``: another SL that the bundle shows in use (``NCCL_IB_SL`` of another host or job) maps to the
  same VL on the same ports (``other_sl``).
* ``ib_sl2vl_inconsistent``: the ports map the job's SL to different VLs (``vls``).
* ``ib_sl_vl_ok``: every egress port whose VLArb table was read serves the job's VL with a weight (``min_weight``,
  the smallest; ``table`` ``high`` | ``low`` | ``both``): evidence against a starved lane.

Only ports whose tables the bundle holds are judged: a capture of the job's leaf and spine ports is its path.
Switch output port 0 (the management port) carries none of the job's traffic and is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from diagnose.evidence.context import Context, finding, refs, sval, val
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import EvidenceRef, Finding, Location

NUM_SL = 16
DROP_VL = 15
UNBOUNDED_HIGH_LIMIT = 255  # PortInfo VLHighLimit 255: the high-priority table is never interrupted (IBA 7.6.9)
# OpenSM's hard-coded QoS defaults (opensm doc/qos-config.txt, include/opensm/osm_subnet.h OSM_DEFAULT_QOS_*)
DEFAULT_SL2VL = "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7"
DEFAULT_VLARB_LOW = "0:0,1:4,2:4,3:4,4:4,5:4,6:4,7:4,8:4,9:4,10:4,11:4,12:4,13:4,14:4"
DEFAULT_VLARB_HIGH = "0:4,1:0,2:0,3:0,4:0,5:0,6:0,7:0,8:0,9:0,10:0,11:0,12:0,13:0,14:0"
DEFAULT_HIGH_LIMIT = 0
# the port classes opensm.conf programs apart (the job's data crosses HCA ports and switch external ports)
TARGETS = {"ca": "HCA ports", "swe": "switch external ports", "sw2sw": "switch-to-switch ports"}
# the option prefixes a port class reads, most specific first (qos_sw2sw_* is MLNX OpenSM's: a switch-to-switch
# port is an external port, so upstream OpenSM programs it from qos_swe_*)
CHAIN = {"ca": ("qos_ca_", "qos_"), "swe": ("qos_swe_", "qos_"), "sw2sw": ("qos_sw2sw_", "qos_swe_", "qos_")}
POLICY = "qos-policy.conf"
POLICY_FORMAT = "qos_policy"
NCCL_FORMATS = frozenset({"nccl_log", "nccl_tests", "nccl_ras", "nccl_conf", "nccl_topo_xml"})
ON = ("TRUE", "1", "YES", "ON")


@extractor(fabric=True,
           reads=("EnvSetting", "FabricLink", "FabricNode", "FabricPortState", "IbPort", "QosLevel", "QosSl2VlScope",
                  "QosUlp", "QosVlArbScope", "Sl2VlEntry", "SmConfigOption", "VlArbEntry"),
           emits=("ib_sl2vl_inconsistent", "ib_sl_shares_vl", "ib_sl_starved_vl", "ib_sl_vl_ok"))
def ib_qos_path(ctx: Context) -> list[Finding]:
    sl2 = ctx.frame("Sl2VlEntry")
    if not sl2.empty:
        return _measured(ctx, sl2)
    conf = ctx.frame("SmConfigOption")
    if not conf.empty and "key" in conf.columns:
        return _configured(ctx, conf)
    return []


# --------------------------------------------------------------------------------------------- the job's SL


@dataclass(frozen=True)
class _Policy:
    """What the bundle's qos-policy.conf says: the SL an SA path query that matches no rule gets, and its tables."""

    sl: int | None
    what: str  # 'qos-level DEFAULT' | 'qos-ulps default'
    rows: pd.DataFrame  # the line that gives ``sl``
    setup: pd.DataFrame  # the qos-setup scopes (VLArb and SL2VL), which OpenSM does not program
    read: bool | None  # whether OpenSM reads it: opensm.conf's qos (None: no opensm.conf in the bundle)


@dataclass(frozen=True)
class _Sl:
    sl: int
    set: bool  # NCCL_IB_SL set it
    rows: pd.DataFrame  # the lines that give it
    others: list[int]  # SLs other hosts' NCCL_IB_SL give
    origin: str  # 'NCCL_IB_SL' | 'NCCL default' | 'qos-policy.conf' | 'default'


def _policy(ctx: Context) -> _Policy | None:
    """The bundle's qos-policy.conf, when it has one. The ``DEFAULT`` qos-level (by name, case-insensitive, the first)
    wins over the ``qos-ulps`` ``default`` (the last, each overwrites the one before): ``osm_qos_policy.c``."""
    if POLICY_FORMAT not in ctx.formats:  # its tables are read only then (the fabric lane's declared reads)
        return None
    levels, ulps = ctx.frame("QosLevel"), ctx.frame("QosUlp")
    setup = pd.concat([f for f in (ctx.frame("QosVlArbScope"), ctx.frame("QosSl2VlScope")) if not f.empty],
                      ignore_index=True) if ctx.has("QosVlArbScope") or ctx.has("QosSl2VlScope") else pd.DataFrame()
    if levels.empty and ulps.empty and setup.empty:
        return None
    sl: int | None = None
    what, rows = "", pd.DataFrame()
    if not levels.empty and "name" in levels.columns:
        named = levels[levels["name"].astype(str).str.lower().eq("default") & levels["sl"].notna()]
        if not named.empty:
            sl, what, rows = int(named.iloc[0]["sl"]), "qos-level DEFAULT", named.head(1)
    if sl is None and not ulps.empty and "ulp" in ulps.columns:
        dflt = ulps[ulps["ulp"].eq("default") & ulps["sl"].notna()]
        if not dflt.empty:
            sl, what, rows = int(dflt.iloc[-1]["sl"]), "qos-ulps default", dflt.tail(1)
    conf = ctx.frame("SmConfigOption")
    read: bool | None = None
    if not conf.empty and "key" in conf.columns:
        qos = _opts(conf).get("qos")
        read = qos is not None and qos[0].upper() in ON
    return _Policy(sl=sl, what=what, rows=rows, setup=setup, read=read)


def _nccl_job(ctx: Context) -> bool:
    """Whether the bundle shows an NCCL job (whose SL is NCCL_IB_SL or its default 0, whatever the SA says)."""
    if ctx.formats & NCCL_FORMATS:
        return True
    env = ctx.frame("EnvSetting")
    return not env.empty and bool(env["name"].astype(str).str.startswith("NCCL_").any())


def job_service_level(ctx: Context, policy: _Policy | None = None) -> _Sl:
    """The job's SL: NCCL_IB_SL (the most common setting; other hosts' SLs apart), else 0 for an NCCL job, else the SL
    qos-policy.conf gives SA path queries (when OpenSM reads it), else 0."""
    env = ctx.frame("EnvSetting")
    rows = env[env["name"] == "NCCL_IB_SL"] if not env.empty else env
    if not rows.empty:
        vals = pd.to_numeric(rows["value"].astype(str).str.strip().str.strip("'\""), errors="coerce")
        ok = rows[vals.notna() & (vals >= 0) & (vals < NUM_SL)]
        if not ok.empty:
            sls = vals[ok.index].astype(int)
            counts = sls.value_counts()
            sl = int(sorted(counts.index.tolist(), key=lambda s: (-int(counts[s]), s))[0])  # the most common setting
            others = sorted({int(s) for s in sls.tolist() if int(s) != sl})
            return _Sl(sl, True, ok[sls == sl], others, "NCCL_IB_SL")
    empty = env.iloc[0:0] if not env.empty else pd.DataFrame()
    if _nccl_job(ctx):
        return _Sl(0, False, empty, [], "NCCL default")
    if policy is not None and policy.sl is not None and policy.read is not False:
        return _Sl(policy.sl, False, policy.rows, [], POLICY)
    return _Sl(0, False, empty, [], "default")


def sl_label(sl: int | _Sl, sl_set: bool = False) -> str:
    if isinstance(sl, _Sl):
        if sl.origin == POLICY:
            return f"SL {sl.sl} (what qos-policy.conf gives SA path queries; no NCCL job in the bundle)"
        sl_set = sl.set
        sl = sl.sl
    return f"NCCL_IB_SL={sl}" if sl_set else f"NCCL_IB_SL unset (SL {sl})"


def _policy_note(policy: _Policy | None, job: _Sl, sa_vl: str | None = None) -> str:
    """What the policy adds to a finding's summary: which SL SA path users get, and that qos-setup is not programmed."""
    if policy is None:
        return ""
    out: list[str] = []
    if policy.sl is not None and policy.read is not False:
        where = f"{POLICY} {policy.what}, line {int(policy.rows.iloc[0]['line'])}"
        if job.origin == POLICY:
            out.append(f"SL {policy.sl} is what SA PathRecord queries get ({where}): IPoIB, rdma_cm connections and an "
                       "MPI that asks the SA for its paths; NCCL would use NCCL_IB_SL (default 0) instead")
        else:
            out.append(f"SA PathRecord queries (IPoIB, rdma_cm connections, an MPI that asks the SA) get SL "
                       f"{policy.sl} ({where}){sa_vl or ''}; NCCL uses NCCL_IB_SL (default 0) and never asks the SA")
    elif policy.read is False:
        out.append(f"{POLICY} is not read: opensm.conf has qos off")
    if not policy.setup.empty:
        first = policy.setup.sort_values(["source", "line"]).iloc[0]
        out.append(f"the qos-setup tables of {POLICY} (line {int(first['line'])}) are parsed and ignored by OpenSM, "
                   "which programs the ports from opensm.conf's qos_* options only")
    text = "; ".join(out)
    return f" {text[0].upper()}{text[1:]}." if text else ""


def _policy_attrs(policy: _Policy | None, job: _Sl) -> dict[str, str | int | float | bool | None]:
    if policy is None:
        return {}
    return {"sl_source": job.origin, "sa_sl": policy.sl if policy.read is not False else None,
            "policy_setup_ignored": not policy.setup.empty}


def _dedup(ev: list[EvidenceRef], limit: int = 8) -> list[EvidenceRef]:
    seen: set[tuple[str, int]] = set()
    out: list[EvidenceRef] = []
    for e in ev:
        if (e.file, e.line) not in seen:
            seen.add((e.file, e.line))
            out.append(e)
    return out[:limit]


def _policy_refs(policy: _Policy | None, kind: str) -> list[EvidenceRef]:
    """The policy's default-SL line and its first qos-setup line (at most two references)."""
    if policy is None:
        return []
    parts = [policy.rows] if not policy.rows.empty else []
    if not policy.setup.empty:
        parts.append(policy.setup.sort_values(["source", "line"]).head(1))
    return refs(pd.concat(parts, ignore_index=True), kind, limit=2) if parts else []


# --------------------------------------------------------------------------------------------- measured tables


def _where(ctx: Context, lid: int | None, port: int | None, kind: str) -> tuple[Location, str]:
    """A switch port as the switch's name and the port, an HCA as its host and device; by LID via the topology."""
    fab = ctx.fabric
    guid = fab.by_lid.get(lid) if fab is not None and lid is not None else None
    if guid is not None and fab is not None:
        if fab.kind(guid) == "CA":
            host, dev = fab.host_device(guid)
            loc = Location(host=host, device=dev, port=port)
            return loc, f"{fab.name(guid)}" + (f"/P{port}" if port else "")
        name = fab.name(guid)
        return Location(device=name, port=port), f"{name}/P{port}" if port is not None else name
    name = f"lid {lid}" if lid is not None else kind
    return Location(device=name, port=port), f"{name} port {port}" if port is not None else name


def _measured(ctx: Context, sl2: pd.DataFrame) -> list[Finding]:
    policy = _policy(ctx)
    job = job_service_level(ctx, policy)
    sl, sl_set, env_rows, other_sls = job.sl, job.set, job.rows, job.others
    note, pattrs = _policy_note(policy, job), _policy_attrs(policy, job)
    t = sl2.copy()
    t["lid_k"] = pd.to_numeric(t["lid"], errors="coerce").fillna(-1).astype(int)
    t["guid_k"] = t["guid"].astype(object).where(t["guid"].notna(), "")
    grp = ["source", "lid_k", "guid_k", "out_port"]
    # a switch table has input ports above 0 or an output port above 0; an HCA's is the one `in 0, out 0` row
    t["switch"] = t.groupby(grp)["in_port"].transform("max").gt(0) | t["out_port"].gt(0)
    t = t[~(t["switch"] & t["out_port"].eq(0))]
    if t.empty:
        return []
    vls = pd.DataFrame(t["vls"].tolist(), index=t.index)
    t["vl"] = vls[sl] if sl in vls.columns else pd.NA
    t = t[t["vl"].notna()]
    if t.empty:
        return []
    t["vl"] = t["vl"].astype(int)
    t["port_k"] = t["out_port"].where(t["switch"], -1)  # an HCA's VLArb is printed for its port 1: match any port

    # one row per egress port: the VL(s) the job's SL takes there
    ports = (t.groupby(["lid_k", "guid_k", "port_k"], sort=True)
             .agg(vl=("vl", "min"), vl_max=("vl", "max"), switch=("switch", "first"))
             .reset_index())
    arb = _arb_weights(ctx)
    judged = ports.merge(arb, how="left", on=["lid_k", "port_k", "vl"]) if not arb.empty else ports.assign(
        low=pd.NA, high=pd.NA, high_other=pd.NA, arb_port=pd.NA)
    have = judged["low"].notna()
    low_w = pd.to_numeric(judged["low"], errors="coerce").fillna(0)
    high_w = pd.to_numeric(judged["high"], errors="coerce").fillna(0)
    judged["weight"] = low_w + high_w
    judged["reason"] = None
    judged.loc[have & (judged["weight"] <= 0), "reason"] = "zero_weight"
    judged.loc[judged["vl"].eq(DROP_VL), "reason"] = "dropped"

    out: list[Finding] = []
    src_rows = t
    env_ev = refs(env_rows.tail(1), "ib_sl_starved_vl") if not env_rows.empty else []
    starved = judged[judged["reason"].notna()]
    checked = int(have.sum()) + int((~have & judged["vl"].eq(DROP_VL)).sum())
    if not starved.empty:
        first = starved.iloc[0]
        vl = int(first["vl"])
        reason = str(first["reason"])
        loc, label = _where(ctx, _lid(first["lid_k"]), _port(first), "switch" if first["switch"] else "HCA")
        labels = [_where(ctx, _lid(r["lid_k"]), _port(r), "port")[1] for _, r in starved.head(4).iterrows()]
        more = f" and {len(starved) - 4} more" if len(starved) > 4 else ""
        what = ("VL 15, which drops the packets" if reason == "dropped"
                else f"VL {vl}, which has no weight in the VLArb low or high table there: the arbiter never serves it")
        kind = "ib_sl_starved_vl"
        setting, conf_rows = _conf_setting(ctx, vl)
        ev = env_ev + _port_refs(src_rows, starved, kind) + _arb_refs(ctx, starved, kind)
        conf_ev = refs(conf_rows, kind, limit=2) if not conf_rows.empty else []
        pol_ev = _policy_refs(policy, kind)
        out.append(finding(
            kind,
            f"{sl_label(job)}: SL {sl} maps to {what} ({', '.join(labels)}{more}; "
            f"{len(starved)} of {max(checked, len(starved))} ports read)"
            + (f"; opensm.conf sets {setting}." if setting else ".") + note,
            None, loc,
            {"sl": sl, "vl": vl, "ports": len(starved), "ports_checked": max(checked, len(starved)),
             "weight": 0, "table": "none", "reason": reason, "sl_set": sl_set, "source": "measured",
             "port": label, "setting": setting, **pattrs},
            evidence=_dedup(ev[:8 - len(conf_ev) - len(pol_ev)] + conf_ev + pol_ev),
        ))
    ok = judged[have & judged["reason"].isna()]
    if starved.empty and not ok.empty:
        kind = "ib_sl_vl_ok"
        in_low = pd.to_numeric(ok["low"], errors="coerce").fillna(0).gt(0)
        in_high = pd.to_numeric(ok["high"], errors="coerce").fillna(0).gt(0)
        table = "both" if (in_low & in_high).all() else "high" if in_high.all() and not in_low.any() else (
            "low" if in_low.all() and not in_high.any() else "both")
        vls_ok = sorted(set(ok["vl"].astype(int).tolist()))
        loc, _ = _where(ctx, _lid(ok.iloc[0]["lid_k"]), _port(ok.iloc[0]), "port")
        pol_ev = _policy_refs(policy, kind)
        out.append(finding(
            kind,
            f"{sl_label(job)}: SL {sl} maps to VL {','.join(map(str, vls_ok))} on the {len(ok)} port(s) read,"
            f" and the VLArb tables serve it there (smallest weight {int(ok['weight'].min())})." + note,
            None, loc if len(ok) == 1 else Location(),
            {"sl": sl, "vl": vls_ok[0], "ports": len(ok), "min_weight": int(ok["weight"].min()), "table": table,
             "sl_set": sl_set, "source": "measured", **pattrs},
            evidence=_dedup((env_ev + _port_refs(src_rows, ok, kind) + _arb_refs(ctx, ok, kind))[:8 - len(pol_ev)]
                            + pol_ev),
        ))
    all_vls = sorted(set(t["vl"].astype(int).tolist()))
    if len(all_vls) > 1:
        kind = "ib_sl2vl_inconsistent"
        per_vl = t.groupby("vl")["port_k"].size()
        minority = int(per_vl.idxmin())
        odd = t[t["vl"] == minority]
        loc, label = _where(ctx, _lid(odd.iloc[0]["lid_k"]), _port(odd.iloc[0]), "port")
        out.append(finding(
            kind,
            f"SL {sl} is mapped to different VLs along the path ({', '.join(f'VL {v}' for v in all_vls)}): "
            f"{label} maps it to VL {minority}.",
            odd, loc,
            {"sl": sl, "vls": ",".join(map(str, all_vls)), "ports": int(len(ports)), "sl_set": sl_set,
             "source": "measured"},
        ))
    out.extend(_shares(ctx, t, sl, sl_set, other_sls))
    return out


def _shares(ctx: Context, t: pd.DataFrame, sl: int, sl_set: bool, other_sls: list[int]) -> list[Finding]:
    if not other_sls:
        return []
    vls = pd.DataFrame(t["vls"].tolist(), index=t.index)
    out: list[Finding] = []
    for other in other_sls:
        if other not in vls.columns:
            continue
        same = t[vls[other].astype(int).eq(t["vl"])]
        if same.empty:
            continue
        kind = "ib_sl_shares_vl"
        loc, label = _where(ctx, _lid(same.iloc[0]["lid_k"]), _port(same.iloc[0]), "port")
        vl = int(same.iloc[0]["vl"])
        out.append(finding(
            kind,
            f"SL {sl} (this job) and SL {other} (set by another host's NCCL_IB_SL) share VL {vl} on "
            f"{same[['lid_k', 'port_k']].drop_duplicates().shape[0]} port(s), {label} first.",
            same, loc,
            {"sl": sl, "other_sl": other, "vl": vl, "ports": int(same[["lid_k", "port_k"]].drop_duplicates().shape[0]),
             "sl_set": sl_set, "source": "measured"},
        ))
        break
    return out


def _arb_weights(ctx: Context) -> pd.DataFrame:
    """Per (lid, port, VL): the summed weight of its low and high table entries (measured VLArb)."""
    arb = ctx.frame("VlArbEntry")
    if arb.empty:
        return pd.DataFrame()
    a = arb.copy()
    a["lid_k"] = pd.to_numeric(a["lid"], errors="coerce").fillna(-1).astype(int)
    a["w"] = pd.to_numeric(a["weight"], errors="coerce").fillna(0)
    per = a.pivot_table(index=["lid_k", "port", "vl"], columns="table", values="w", aggfunc="sum", fill_value=0)
    per = per.reindex(columns=["low", "high"], fill_value=0).reset_index()
    # every VL a port's tables could name: a VL in no entry has weight 0 in both
    vls = pd.DataFrame({"vl": range(NUM_SL)})
    keys = per[["lid_k", "port"]].drop_duplicates()
    full = keys.merge(vls, how="cross").merge(per, how="left", on=["lid_k", "port", "vl"]).fillna(
        {"low": 0, "high": 0})
    full["arb_port"] = full["port"]
    hcas = full.assign(port_k=-1)  # an HCA's table (SL2VL in 0 out 0) matches the VLArb of any port of its LID
    sw = full.assign(port_k=full["port"])
    both = pd.concat([sw, hcas], ignore_index=True).drop_duplicates(["lid_k", "port_k", "vl"])
    return both[["lid_k", "port_k", "vl", "low", "high", "arb_port"]]


def _lid(v: object) -> int | None:
    x = val(v)
    return int(x) if x is not None and int(x) >= 0 else None  # type: ignore[call-overload]


def _port(row: pd.Series) -> int | None:
    p = val(row.get("arb_port")) if int(row["port_k"]) < 0 else val(row["port_k"])
    return int(p) if p is not None else None  # type: ignore[call-overload]


def _port_refs(t: pd.DataFrame, ports: pd.DataFrame, kind: str) -> list[EvidenceRef]:
    keys = set(zip(ports["lid_k"].tolist(), ports["port_k"].tolist(), strict=True))
    hit = t[[k in keys for k in zip(t["lid_k"].tolist(), t["port_k"].tolist(), strict=True)]]
    return refs(hit.drop_duplicates(["lid_k", "port_k"]), kind, limit=3)


def _arb_refs(ctx: Context, ports: pd.DataFrame, kind: str) -> list[EvidenceRef]:
    arb = ctx.frame("VlArbEntry")
    if arb.empty:
        return []
    lid = pd.to_numeric(arb["lid"], errors="coerce").fillna(-1).astype(int)
    want = {(int(r["lid_k"]), _port(r)) for _, r in ports.iterrows()}
    hit = arb[[(k, p) in want for k, p in zip(lid.tolist(), arb["port"].tolist(), strict=True)]]
    return refs(hit.drop_duplicates(["source", "line"]), kind, limit=4)


# --------------------------------------------------------------------------------------------- opensm.conf


def _conf_setting(ctx: Context, vl: int) -> tuple[str | None, pd.DataFrame]:
    """The opensm.conf options that leave ``vl`` out of the VLArb tables (switch external ports first), when the
    bundle holds the SM's configuration with QoS on: the setting an operator changes."""
    conf = ctx.frame("SmConfigOption")
    if conf.empty or "key" not in conf.columns:
        return None, pd.DataFrame()
    opts = _opts(conf)
    if opts.get("qos", ("FALSE",))[0].upper() not in ON:
        return None, pd.DataFrame()
    for tgt in ("swe", "sw2sw", "ca"):
        parts: list[str] = []
        rows: list[pd.DataFrame] = []
        for name in ("vlarb_low", "vlarb_high"):
            for key in (pre + name for pre in CHAIN[tgt]):
                if key in opts:
                    value, row = opts[key]
                    if _vlarb(value).get(vl, 0) > 0:
                        return None, pd.DataFrame()  # the configuration serves the VL: not what the ports show
                    parts.append(f"{key} {value}")
                    rows.append(row)
                    break
        if parts:
            return "; ".join(parts), pd.concat(rows, ignore_index=True)
    return None, pd.DataFrame()


def _opts(conf: pd.DataFrame) -> dict[str, tuple[str, pd.DataFrame]]:
    """key -> (value, its row) for the qos options, the last setting winning; ``(null)`` is unset."""
    c = conf[conf["key"].astype(str).str.startswith("qos")]
    out: dict[str, tuple[str, pd.DataFrame]] = {}
    for i, (k, v) in enumerate(zip(c["key"].astype(str).tolist(), c["value"].astype(str).tolist(), strict=True)):
        v = v.strip()
        if v and v != "(null)":
            out[k] = (v, c.iloc[[i]])
    return out


def _vlarb(text: str) -> dict[int, int]:
    """``0:4,1:0,2:32`` -> {VL: summed weight}; entries that do not read are skipped."""
    w: dict[int, int] = {}
    for part in text.split(","):
        vl, _, wt = part.strip().partition(":")
        try:
            v, x = int(vl, 0), int(wt, 0)
        except ValueError:
            continue
        w[v] = w.get(v, 0) + x
    return w


_Bad = tuple[str, int, str, str, pd.DataFrame]  # (target, vl, reason, setting text, rows)


def _judge_options(opts: dict[str, tuple[str, pd.DataFrame]], sl: int) -> tuple[list[_Bad], list[tuple[str, int, int]]]:
    """Per port class: the VL the options map ``sl`` to and whether the VLArb options serve it (bad: (target, vl,
    reason, setting, rows); good: (target, vl, weight))."""
    bad: list[_Bad] = []
    good: list[tuple[str, int, int]] = []
    for tgt in TARGETS:
        def pick(name: str, default: str, tgt: str = tgt) -> tuple[str, str, pd.DataFrame | None]:
            for key in (pre + name for pre in CHAIN[tgt]):
                if key in opts:
                    return opts[key][0], key, opts[key][1]
            return default, f"qos_{name} (OpenSM default)", None

        s2v, s2v_key, s2v_row = pick("sl2vl", DEFAULT_SL2VL)
        low, low_key, low_row = pick("vlarb_low", DEFAULT_VLARB_LOW)
        high, high_key, high_row = pick("vlarb_high", DEFAULT_VLARB_HIGH)
        lim, _, lim_row = pick("high_limit", str(DEFAULT_HIGH_LIMIT))
        vl_list = [x.strip() for x in s2v.split(",")]
        try:
            vl = int(vl_list[sl], 0)
        except (IndexError, ValueError):
            continue
        lw, hw = _vlarb(low).get(vl, 0), _vlarb(high).get(vl, 0)
        try:
            limit = int(lim, 0)
        except ValueError:
            limit = DEFAULT_HIGH_LIMIT
        rows = pd.concat([r for r in (s2v_row, low_row, high_row, lim_row) if r is not None], ignore_index=True) \
            if any(r is not None for r in (s2v_row, low_row, high_row, lim_row)) else pd.DataFrame()
        setting = f"{s2v_key} {s2v}; {low_key} {low}; {high_key} {high}"
        if vl == DROP_VL:
            bad.append((tgt, vl, "dropped", f"{s2v_key} {s2v}", rows))
        elif lw + hw <= 0:
            bad.append((tgt, vl, "zero_weight", setting, rows))
        elif hw <= 0 and limit == UNBOUNDED_HIGH_LIMIT and any(w > 0 for v, w in _vlarb(high).items() if v != vl):
            bad.append((tgt, vl, "preempted", f"{high_key} {high}; qos_high_limit {limit}", rows))
        else:
            good.append((tgt, vl, lw + hw))
    return bad, good


def _why(reason: str, vl: int) -> str:
    return {"dropped": "VL 15, which drops the packets",
            "zero_weight": f"VL {vl}, which neither VLArb table gives a weight",
            "preempted": f"VL {vl} in the low table only, while other VLs hold the high table without limit"}[reason]


def _configured(ctx: Context, conf: pd.DataFrame) -> list[Finding]:
    opts = _opts(conf)
    qos = opts.get("qos")
    if qos is None or qos[0].upper() not in ON:
        return []  # OpenSM does not program QoS: the ports keep their power-on tables, which no option here shows
    policy = _policy(ctx)
    job = job_service_level(ctx, policy)
    sl, sl_set, env_rows = job.sl, job.set, job.rows
    out: list[Finding] = []
    bad, good = _judge_options(opts, sl)
    sa_vl = None
    if policy is not None and policy.sl is not None and policy.sl != sl and job.origin != POLICY:
        sa_bad, sa_good = _judge_options(opts, policy.sl)
        if sa_bad:
            sa_vl = (f"; opensm.conf's options map that SL to {_why(sa_bad[0][2], sa_bad[0][1])} on the "
                     f"{', '.join(TARGETS[b[0]] for b in sa_bad)}")
        elif sa_good:
            sa_vl = f"; that SL's VL {sa_good[0][1]} is served (smallest weight {min(g[2] for g in sa_good)})"
    note, pattrs = _policy_note(policy, job, sa_vl), _policy_attrs(policy, job)
    where = Location(host=sval(conf.iloc[0]["host"])) if "host" in conf.columns else Location()
    env_ev = refs(env_rows.tail(1), "ib_sl_starved_vl") if not env_rows.empty else []
    if bad:
        tgt, vl, reason, setting, rows = bad[0]
        kind = "ib_sl_starved_vl"
        pol_ev = _policy_refs(policy, kind)
        out.append(finding(
            kind,
            f"{sl_label(job)}: OpenSM's QoS options map SL {sl} to {_why(reason, vl)} on the "
            f"{', '.join(TARGETS[b[0]] for b in bad)} ({setting})." + note,
            None, where,
            {"sl": sl, "vl": vl, "ports": len(bad), "ports_checked": len(TARGETS), "weight": 0, "table": "none",
             "reason": reason, "sl_set": sl_set, "source": "opensm.conf", "setting": setting[:200], **pattrs},
            evidence=_dedup((env_ev + refs(rows, kind))[:8 - len(pol_ev)] + pol_ev),
        ))
    elif good:
        kind = "ib_sl_vl_ok"
        out.append(finding(
            kind,
            f"{sl_label(job)}: OpenSM's QoS options map SL {sl} to a VL the VLArb tables serve on HCA and "
            f"switch ports (smallest weight {min(g[2] for g in good)})." + note,
            None, where,
            {"sl": sl, "vl": good[0][1], "ports": len(good), "min_weight": min(g[2] for g in good), "table": "both",
             "sl_set": sl_set, "source": "opensm.conf", **pattrs},
            evidence=_dedup(env_ev + _policy_refs(policy, kind)),
        ))
    return out
