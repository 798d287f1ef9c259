"""The NIC's own configuration: firmware NV parameters (``mlxconfig q``) and RoCE QoS (``mlnx_qos``).

Findings (the thresholds that decide a cause are in the rules):

* ``nic_max_acc_out_read`` per distinct MAX_ACC_OUT_READ value among the devices with ADVANCED_PCI_SETTINGS on
  (the parameter is hidden otherwise): ``value``, ``auto`` (0 = the firmware's automatic mode per the PRM, see
  Mellanox/nic-configuration-operator), ``devices``, ``hosts``.
* ``nic_link_type_mixed``: LINK_TYPE_P<n> differs across the devices shown (``types`` e.g. ``ETH,IB``).
* ``nic_ats_enabled``: ATS_ENABLED is on (``devices``); context for GPUDirect RDMA through ACS/IOMMU.
* ``roce_trust_pcp``: an interface trusts the VLAN PCP, so DSCP marking (NCCL_IB_TC) does not pick its priority
  (``interfaces``, ``pfc_prios``).
* ``nic_tc_prio_lossless`` / ``nic_tc_prio_not_lossless``: the job's NCCL_IB_TC (0 when unset) through each
  DSCP-trusting interface's own dscp2prio table (``prio = dscp >> 3`` when the table was not printed) against the
  priorities it has PFC on (``tc``, ``dscp``, ``prio``, ``pfc_prios``, ``set``, ``interfaces``).
"""

from __future__ import annotations

import pandas as pd

from diagnose.evidence.context import Context, finding, hosts_label
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding, Location


def _one(values: pd.Series) -> str | None:
    vals = sorted({str(v) for v in values.dropna().tolist()})
    return vals[0] if len(vals) == 1 else None


def _dev_key(df: pd.DataFrame) -> pd.Series:
    return df["host"].fillna("").astype(str) + "|" + df["device"].fillna("").astype(str)


def _dev_label(df: pd.DataFrame) -> list[str]:
    return sorted({f"{h}:{d}" if h else str(d) for h, d in zip(df["host"].fillna(""), df["device"].fillna("?"),
                                                                strict=True)})


@extractor(reads=("NicConfigOption",),
           emits=("nic_ats_enabled", "nic_link_type_mixed", "nic_max_acc_out_read"))
def nic_firmware_config(ctx: Context) -> list[Finding]:
    opts = ctx.frame("NicConfigOption")
    if opts.empty:
        return []
    out: list[Finding] = []
    opts = opts.assign(_dev=_dev_key(opts))
    adv = opts[(opts["key"] == "ADVANCED_PCI_SETTINGS") & (opts["number"] == 1)]
    acc = opts[(opts["key"] == "MAX_ACC_OUT_READ") & opts["_dev"].isin(set(adv["_dev"])) & opts["number"].notna()]
    for value, grp in acc.groupby(acc["number"].astype(int), sort=True):
        devs = _dev_label(grp)
        v = int(value)
        out.append(finding(
            "nic_max_acc_out_read",
            f"MAX_ACC_OUT_READ={v}{' (automatic)' if v == 0 else ''} with ADVANCED_PCI_SETTINGS on, on "
            f"{', '.join(devs[:6])}{' ...' if len(devs) > 6 else ''}.",
            grp, Location(host=_one(grp["host"]), device=_one(grp["device"])),
            {"value": v, "auto": v == 0, "devices": len(devs), "hosts": grp["host"].nunique()},
        ))
    link = opts[opts["key"].astype(str).str.match(r"LINK_TYPE_P\d$")]
    if not link.empty:
        kind = link["value"].astype(str).str.extract(r"^([A-Za-z]+)")[0].str.upper()
        types = sorted(set(kind.dropna()))
        if len(types) > 1:
            out.append(finding(
                "nic_link_type_mixed",
                "The NICs' port protocols differ: " + "; ".join(
                    f"{t} on {', '.join(_dev_label(link[kind == t])[:4])}" for t in types) + ".",
                link, None, {"types": ",".join(types), "devices": len(_dev_label(link))},
            ))
    ats = opts[(opts["key"] == "ATS_ENABLED") & (opts["number"] == 1)]
    if not ats.empty:
        devs = _dev_label(ats)
        out.append(finding(
            "nic_ats_enabled",
            f"ATS is enabled in the NIC firmware on {', '.join(devs[:6])}: with ACS on, its peer-to-peer requests"
            " may carry translated addresses past the IOMMU.",
            ats, Location(host=_one(ats["host"]), device=_one(ats["device"])), {"devices": len(devs)},
        ))
    return out


@extractor(reads=("DscpPrio", "EnvSetting", "RoceQosConfig"),
           emits=("nic_tc_prio_lossless", "nic_tc_prio_not_lossless", "roce_trust_pcp"))
def roce_qos_config(ctx: Context) -> list[Finding]:
    qos = ctx.frame("RoceQosConfig")
    if qos.empty:
        return []
    out: list[Finding] = []
    labels = [f"{h}:{i}" if h else str(i) for h, i in zip(qos["host"].fillna(""), qos["interface"].fillna("?"),
                                                           strict=True)]
    qos = qos.assign(_label=labels)
    pcp = qos[qos["trust"] == "pcp"]
    if not pcp.empty:
        ifs = sorted(set(pcp["_label"]))
        pcp_pfc = sorted({p for s in pcp["pfc_prios"].dropna() for p in str(s).split(",") if p})
        out.append(finding(
            "roce_trust_pcp",
            f"{', '.join(ifs[:6])} trust{'s' if len(ifs) == 1 else ''} the VLAN PCP, not DSCP: NCCL_IB_TC's DSCP"
            " does not choose the priority there (untagged RoCE lands on priority 0).",
            pcp, Location(host=_one(pcp["host"])), {"interfaces": len(ifs), "pfc_prios": ",".join(pcp_pfc)},
        ))
    dscp_if = qos[(qos["trust"] == "dscp") & qos["pfc_prios"].notna()]
    if dscp_if.empty:
        return out
    env = ctx.frame("EnvSetting")
    tc_rows = env[env["name"] == "NCCL_IB_TC"] if not env.empty else env
    tc_set = not tc_rows.empty
    try:
        tc = int(str(tc_rows.iloc[-1]["value"]).strip(), 0) if tc_set else 0
    except ValueError:
        return out
    dscp = (tc >> 2) & 63
    maps = ctx.frame("DscpPrio")
    verdicts: dict[tuple[bool, int, str], list[int]] = {}
    for i, (h, iface, pfc) in enumerate(zip(dscp_if["host"], dscp_if["interface"], dscp_if["pfc_prios"],
                                            strict=True)):
        prio = dscp >> 3
        if not maps.empty:
            sel = maps[(maps["dscp"] == dscp) & (maps["host"].fillna("") == (h or ""))
                       & (maps["interface"].fillna("") == (iface or ""))]
            if not sel.empty:
                prio = int(sel.iloc[-1]["prio"])
        pfc_set = {int(p) for p in str(pfc).split(",") if p}
        verdicts.setdefault((prio in pfc_set, prio, str(pfc)), []).append(i)
    for (ok, prio, pfc), idx in sorted(verdicts.items()):
        rows = dscp_if.iloc[idx]
        ifs = sorted(set(rows["_label"]))
        kind = "nic_tc_prio_lossless" if ok else "nic_tc_prio_not_lossless"
        what = f"NCCL_IB_TC={tc}" if tc_set else "NCCL_IB_TC unset (traffic class 0)"
        ev = pd.concat([rows, tc_rows.tail(1)], ignore_index=True) if tc_set else rows
        out.append(finding(
            kind,
            f"{what} is DSCP {dscp}, which {', '.join(ifs[:6])} map{'s' if len(ifs) == 1 else ''} to priority {prio}; "
            + ("PFC is on there." if ok else f"PFC is on only for priority {pfc or 'none'} ({hosts_label(sorted(set(rows['host'].dropna())))}).")
            ,
            ev, Location(host=_one(rows["host"])),
            {"tc": tc, "dscp": dscp, "prio": prio, "pfc_prios": pfc, "set": tc_set, "interfaces": len(ifs)},
        ))
    return out
