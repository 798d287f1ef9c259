"""The host between the GPU and the wire: PCIe links and ACS, the NIC's driver and firmware, GPU-NIC-CPU
affinity, the topology NCCL is given, and RDMA access from inside containers.

* ``lspci -vvv`` (:class:`PcieLink`): ACS control on the bridges directly above GPUs and NICs, link status
  against capability for GPUs, ConnectX NICs and bridges, NIC MaxReadReq;
* ``dmesg`` (:class:`Mlx5Event`, :class:`KernelEvent`): mlx5 command timeouts, health syndromes, firmware
  command errors, slot power, the kernel's ``available PCIe bandwidth, limited by`` line, AER ACS violations,
  IOMMU faults;
* ``nvidia-smi -q`` (:class:`GpuInfo`): PCIe generation/width current against max, replay counters;
* ``ibstat``/``ibv_devinfo`` (:class:`IbPort`) and dmesg ``firmware version:``: firmware per HCA model;
* ``nvidia-smi topo -m`` + NCCL channel lines: which NIC each GPU's NET channels use, against the nearest one;
* NCCL topology XML + ``NCCL_TOPO_FILE``: the GPUs/NICs the file describes against the ones the host has;
* NCCL's ``No device found`` / ``Failed to open libibverbs`` / ``ibv_open_device failed`` against Active HCAs.

Idle GPUs lower their PCIe speed to save power, so a GPU *speed* downgrade is reported on its own (weak); a
width downgrade, or a NIC below its speed, is a fault. Bridges below capability are usually a slower device
behind them and are only summarised. Findings aggregate per host or per device.
"""

from __future__ import annotations

import re

import pandas as pd

from diagnose.evidence.context import Context, finding, hosts_label, primary, sval
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.nccl import message_mask
from diagnose.models.diagnosis import Finding, Location

# ----------------------------------------------------------------------------------------------- helpers

_SWITCH_NAME = re.compile(r"PEX ?\d|PLX|PCIe (?:Gen ?\d )?Switch|Switchtec|PMC-Sierra|Microsemi|Microchip", re.I)
_GPU_CLASSES = ("3D controller", "VGA compatible controller", "Display controller")
_NIC_NAME = re.compile(r"Mellanox|ConnectX|BlueField", re.I)
_NIC_CLASSES = ("Infiniband controller", "Ethernet controller", "Network controller")
_ACS_FLAGS = {"SrcValid", "ReqRedir", "CmpltRedir"}
_REDIRECT = {"ReqRedir", "CmpltRedir"}


def _hostk(df: pd.DataFrame) -> pd.Series:
    return df["host"].fillna("").astype(str) if "host" in df else pd.Series("", index=df.index)


def _one(values: pd.Series) -> str | None:
    hs = sorted({str(v) for v in values.dropna() if str(v)})
    return hs[0] if len(hs) == 1 else None


def _pci3(value: object) -> str | None:
    """Any PCI address spelling -> ``dddd:bb:dd`` (function dropped); NCCL's hex busId (``9a000``) too."""
    s = sval(value)
    if not s:
        return None
    s = s.strip().lower()
    m = re.match(r"^(?:pci:)?(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.[0-7])?$", s)
    if m:
        dom = (m.group(1) or "0").rjust(4, "0")[-4:]
        return f"{dom}:{m.group(2).rjust(2, '0')}:{m.group(3).rjust(2, '0')}"
    if re.fullmatch(r"(?:0x)?[0-9a-f]{4,12}", s):  # NCCL busId: domain|bus|dev|fn as one hex number
        h = s[2:] if s.startswith("0x") else s
        h = h.rjust(9, "0")
        return f"{h[:-5][-4:].rjust(4, '0')}:{h[-5:-3]}:{h[-3:-1]}"
    return None


def _pcie_kind(links: pd.DataFrame) -> pd.Series:
    """gpu / nic / switch (PCIe switch port) / root (other bridge: root port) / other, per PcieLink row."""
    cls = links["device_class"].fillna("").astype(str)
    name = links["name"].fillna("").astype(str)
    gpu = cls.isin(_GPU_CLASSES) & name.str.contains("NVIDIA", case=False)
    nic = cls.isin(_NIC_CLASSES) & name.str.contains(_NIC_NAME)
    bridge = cls.eq("PCI bridge")
    switch = bridge & name.str.contains(_SWITCH_NAME)
    kind = pd.Series("other", index=links.index)
    kind[bridge] = "root"
    kind[switch] = "switch"
    kind[nic] = "nic"
    kind[gpu] = "gpu"
    return kind


def _links(ctx: Context) -> pd.DataFrame:
    links = ctx.frame("PcieLink")
    if links.empty:
        return links
    links = links.assign(_h=_hostk(links)).drop_duplicates(subset=["_h", "bdf"], keep="last").drop(columns="_h")
    bdf = links["bdf"].astype(str)
    return links.assign(
        kind=_pcie_kind(links), hostk=_hostk(links),
        dom=bdf.str.slice(0, -8), bus=bdf.str.slice(-7, -5).map(lambda b: int(b, 16)),
        caps=links["cap_speed_gts"].notna() | links["cap_width"].notna(),
    )


def _parent_bridges(grp: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """Endpoint row index -> the bridges directly above it (same host).

    PCI buses are numbered depth first, so the bridges above an endpoint on bus ``e`` are the ones on the
    highest bridge bus below ``e`` in the same domain (the switch's internal bus, or the root bus for a
    device on a root port). Only bridges present in the capture can be placed.
    """
    bridges = grp[grp["kind"].isin(["switch", "root"])]
    out: dict[int, pd.DataFrame] = {}
    if bridges.empty:
        return out
    for idx, ep in grp[grp["kind"].isin(["gpu", "nic"])].iterrows():
        cand = bridges[(bridges["dom"] == ep["dom"]) & (bridges["bus"] < ep["bus"])]
        if cand.empty:
            continue
        out[idx] = cand[cand["bus"] == cand["bus"].max()]
    return out


# ----------------------------------------------------------------------------------------------- ACS / IOMMU

_IOMMU_FAULT = re.compile(
    r"DMAR: \[DMA (?:Read|Write)|DMAR: DRHD: handling fault|AMD-Vi: Event logged \[IO_PAGE_FAULT|IO_PAGE_FAULT"
    r"|arm-smmu(?:-v3)?.*(?:event|fault)|iommu.*(?:fault|page fault)",
    re.I,
)


def _acs_grep(ctx: Context) -> list[Finding]:
    """``lspci -vvv | grep ACSCtl`` (the NCCL troubleshooting guide's check): ACS flags without their devices. A
    ``SrcValid+`` or a redirect flag on any line means ACS is on somewhere in the tree; all ``-`` is ACS off on the
    lines pasted (a grep says nothing of where the bridges are, a paste may not hold all of them)."""
    acs = ctx.frame("AcsControl")
    if acs.empty:
        return []
    on = acs[acs["enabled"].map(lambda t: bool(_ACS_FLAGS.intersection(t or ())))]
    shown = on if not on.empty else acs
    flags = sorted({f for t in on["enabled"] for f in _ACS_FLAGS.intersection(t or ())})
    what = (f"ACS on ({'+, '.join(flags)}+) in {len(on)} of {len(acs)} ACSCtl line(s)" if not on.empty
            else f"ACS off in all {len(acs)} ACSCtl line(s) shown")
    return [finding("pcie_acs_listed", f"lspci -vvv | grep ACSCtl: {what}; the devices are not in the paste.",
                    shown.head(3), Location(host=_one(shown["host"])), {"acs_on": len(on), "lines": len(acs)})]


@extractor(reads=("AcsControl", "CudaError", "FreeText", "KernelEvent", "MessageHit", "Mlx5Event", "NcclWarn",
                  "PcieLink", "PeermemEvent", "PgError", "ToolError", "WatchdogTimeout"),
           emits=("iommu_fault", "pcie_acs_enabled", "pcie_acs_listed", "pcie_acs_off", "pcie_acs_violation"))
def pcie_acs(ctx: Context) -> list[Finding]:
    """ACS on the PCIe bridges directly above GPUs and NICs; AER ACS violations; IOMMU faults."""
    out: list[Finding] = []
    links = _links(ctx)
    if not links.empty:
        acs = links["acs_enabled"].map(lambda t: sorted(_ACS_FLAGS.intersection(t or ())))
        links = links.assign(acs=acs, acs_on=acs.map(bool),
                             redirect=links["acs_enabled"].map(lambda t: bool(_REDIRECT.intersection(t or ()))))
        any_above = False
        placed = 0
        for host, grp in links.groupby("hostk", sort=True):
            parents = _parent_bridges(grp)
            placed += sum(1 for p in parents.values() if p["caps"].any())
            above = {i: p[p["acs_on"]] for i, p in parents.items() if p["acs_on"].any()}
            acs_bridges = grp[grp["kind"].isin(["switch", "root"]) & grp["acs_on"]]
            if acs_bridges.empty:
                continue
            eps = grp.loc[list(above)] if above else grp.iloc[0:0]
            par = pd.concat(list(above.values())).drop_duplicates(subset=["bdf"]) if above else grp.iloc[0:0]
            shown = par if not par.empty else acs_bridges
            sw = acs_bridges[acs_bridges["kind"] == "switch"]
            flags = sorted({f for fl in shown["acs"] for f in fl})
            any_above |= not eps.empty
            n_ep = int(grp["kind"].isin(["gpu", "nic"]).sum())
            what = (f"{len(eps)} GPU/NIC(s) ({', '.join(eps['bdf'].head(4))})" if not eps.empty
                    else "no GPU or NIC in the capture" if n_ep == 0 else "none of the GPUs/NICs in the capture")
            out.append(finding(
                "pcie_acs_enabled",
                f"{host or '?'}: ACS ({'+, '.join(flags)}+) is enabled on {len(acs_bridges)} PCIe bridge(s)"
                f" ({len(sw)} switch port(s)); directly above it: {what}.",
                pd.concat([shown.head(2), eps.head(2)]), Location(host=host or None, device=sval(shown["bdf"].iloc[0])),
                {"above_gpu_nic": len(eps), "switch_ports": len(sw), "bridges": len(acs_bridges),
                 "redirect": bool(shown["redirect"].any()), "gpu_nic_in_capture": n_ep,
                 "via_switch": bool((par["kind"] == "switch").any()) if not par.empty else False},
            ))
        if not any_above and placed:
            eps = links[links["kind"].isin(["gpu", "nic"])]
            out.append(finding(
                "pcie_acs_off",
                f"lspci shows ACS off on the PCIe bridges directly above {placed} GPU/NIC(s)"
                + (f" on {hosts_label(list(links['hostk']))}." if hosts_label(list(links["hostk"])) else "."),
                eps.head(3), attrs={"endpoints": placed},
            ))
    out += _acs_grep(ctx)
    ke = ctx.frame("KernelEvent")
    if not ke.empty:
        viol = ke[(ke["category"] == "pcie_aer") & ke["message"].str.contains(r"\bACSViol\b", na=False)]
        if not viol.empty:
            out.append(finding(
                "pcie_acs_violation",
                f"PCIe AER reports ACS violations ({len(viol)} line(s)) on "
                f"{', '.join(sorted({str(d) for d in viol['device'].dropna()})[:3]) or 'a device'}.",
                viol, Location(host=_one(viol["host"]), device=_one(viol["device"])), {"lines": len(viol)},
            ))
    msgs = ctx.messages
    if not msgs.empty:
        io = msgs[(msgs["origin"] == "dmesg") & message_mask(ctx, _IOMMU_FAULT)]
        if not io.empty:
            out.append(finding(
                "iommu_fault",
                f"The IOMMU logged {len(io)} DMA fault(s) on {hosts_label(list(io['host'].dropna())) or 'the host'}:"
                " a device's DMA was blocked by address translation.",
                io, Location(host=_one(io["host"])), {"lines": len(io)},
            ))
    return out


# ----------------------------------------------------------------------------------------------- PCIe link state

_BW_LIMITED = re.compile(
    r"(?P<avail>[\d.]+) Gb/s available PCIe bandwidth, limited by (?P<speed>[\d.]+) GT/s PCIe x(?P<width>\d+) link"
    r" at (?P<at>\S+) \(capable of (?P<cap>[\d.]+) Gb/s with (?P<cspeed>[\d.]+) GT/s PCIe x(?P<cwidth>\d+) link\)"
)


@extractor(reads=("GpuInfo", "Mlx5Event", "PcieLink"),
           emits=("gpu_pcie_replays", "nic_pcie_bandwidth_limited", "pcie_bridge_below_capability",
                  "pcie_link_downgraded", "pcie_links_ok"))
def pcie_link_state(ctx: Context) -> list[Finding]:
    """GPU/NIC PCIe links below their capability (lspci, nvidia-smi -q, the kernel's probe-time line)."""
    out: list[Finding] = []
    faults = 0
    seen_devices = 0
    gpu_idle = 0
    links = _links(ctx)
    if not links.empty:
        vis = links[links["caps"] & links["sta_speed_gts"].notna()].copy()
        vis["width_down"] = (vis["sta_width"].fillna(0) > 0) & (vis["sta_width"] < vis["cap_width"])
        vis["speed_down"] = vis["sta_speed_gts"] < vis["cap_speed_gts"]
        ends = vis[vis["kind"].isin(["gpu", "nic"])]
        seen_devices += len(ends)
        bad = ends[ends["width_down"] | ((ends["kind"] == "nic") & ends["speed_down"])]
        for _, r in bad.sort_values(["hostk", "bdf"]).iterrows():
            faults += 1
            host = r["hostk"] or None
            what = "GPU" if r["kind"] == "gpu" else "NIC"
            out.append(finding(
                "pcie_link_downgraded",
                f"{host or '?'} {what} {r['bdf']} ({str(r['name'])[:48]}) runs its PCIe link at"
                f" {r['sta_speed_gts']:g} GT/s x{int(r['sta_width'] or 0)} instead of {r['cap_speed_gts']:g} GT/s"
                f" x{int(r['cap_width'] or 0)}" + (" (width downgraded)." if r["width_down"] else " (speed downgraded)."),
                pd.DataFrame([r]),
                Location(host=host, device=r["bdf"] if r["kind"] == "nic" else None,
                         gpu=r["bdf"] if r["kind"] == "gpu" else None),
                {"device_kind": r["kind"], "width_down": bool(r["width_down"]), "speed_down": bool(r["speed_down"]),
                 "cap_gts": float(r["cap_speed_gts"]), "sta_gts": float(r["sta_speed_gts"]),
                 "cap_width": int(r["cap_width"] or 0), "sta_width": int(r["sta_width"] or 0), "source": "lspci",
                 "devices": 1},
            ))
        idle = ends[(ends["kind"] == "gpu") & ends["speed_down"] & ~ends["width_down"]]
        gpu_idle += len(idle)
        for host, grp in idle.groupby("hostk", sort=True):
            out.append(finding(
                "pcie_link_downgraded",
                f"{host or '?'}: {len(grp)} GPU(s) show a lower PCIe speed than their capability"
                f" ({grp['sta_speed_gts'].min():g} instead of {grp['cap_speed_gts'].max():g} GT/s) at full width;"
                " GPUs lower their link speed when idle, so this only matters under load.",
                grp, Location(host=host or None, gpu=sval(grp["bdf"].iloc[0]) if len(grp) == 1 else None),
                {"device_kind": "gpu", "width_down": False, "speed_down": True, "devices": len(grp),
                 "cap_gts": float(grp["cap_speed_gts"].max()), "sta_gts": float(grp["sta_speed_gts"].min()),
                 "source": "lspci"},
            ))
        br = vis[vis["kind"].isin(["switch", "root"]) & (vis["width_down"] | vis["speed_down"])]
        for host, grp in br.groupby("hostk", sort=True):
            out.append(finding(
                "pcie_bridge_below_capability",
                f"{host or '?'}: {len(grp)} PCIe bridge port(s) run below their capability ({', '.join(grp['bdf'].head(3))});"
                " usually a slower device behind the port.",
                grp.head(4), Location(host=host or None),
                {"ports": len(grp), "width_down": bool(grp["width_down"].any())},
            ))
    gi = ctx.frame("GpuInfo")
    if not gi.empty:
        g = gi.assign(hostk=_hostk(gi))
        known = g[g["pcie_width_max"].notna() & g["pcie_width_current"].notna()]
        seen_devices += len(known)
        wd = known[known["pcie_width_current"] < known["pcie_width_max"]]
        for _, r in wd.sort_values(["hostk", "pci"]).iterrows():
            faults += 1
            out.append(finding(
                "pcie_link_downgraded",
                f"{r['hostk'] or '?'} GPU {r['pci']} ({sval(r['product']) or 'GPU'}): PCIe link width x{int(r['pcie_width_current'])}"
                f" instead of x{int(r['pcie_width_max'])} (nvidia-smi -q).",
                pd.DataFrame([r]), Location(host=r["hostk"] or None, gpu=r["pci"]),
                {"device_kind": "gpu", "width_down": True, "speed_down": bool(
                    pd.notna(r["pcie_gen_current"]) and pd.notna(r["pcie_gen_max"])
                    and r["pcie_gen_current"] < r["pcie_gen_max"]),
                 "cap_width": int(r["pcie_width_max"]), "sta_width": int(r["pcie_width_current"]),
                 "source": "nvidia_smi", "devices": 1},
            ))
        gen = known[(known["pcie_width_current"] >= known["pcie_width_max"]) & known["pcie_gen_current"].notna()
                    & (known["pcie_gen_current"] < known["pcie_gen_max"])]
        gpu_idle += len(gen)
        for host, grp in gen.groupby("hostk", sort=True):
            out.append(finding(
                "pcie_link_downgraded",
                f"{host or '?'}: {len(grp)} GPU(s) report PCIe Gen{int(grp['pcie_gen_current'].min())} while capable of"
                f" Gen{int(grp['pcie_gen_max'].max())} at full width (nvidia-smi -q); normal when idle.",
                grp, Location(host=host or None, gpu=sval(grp["pci"].iloc[0]) if len(grp) == 1 else None),
                {"device_kind": "gpu", "width_down": False, "speed_down": True, "devices": len(grp),
                 "source": "nvidia_smi"},
            ))
        rp = g[g["replays"].fillna(0) > 0]
        if not rp.empty:
            top = rp.sort_values("replays", ascending=False).iloc[0]
            out.append(finding(
                "gpu_pcie_replays",
                f"{len(rp)} GPU(s) count PCIe replays; the most: {int(top['replays'])} on {top['pci']}"
                f"{' of ' + top['hostk'] if top['hostk'] else ''}.",
                rp.sort_values("replays", ascending=False).head(4),
                Location(host=top["hostk"] or None, gpu=top["pci"]),
                {"replays": int(top["replays"]), "gpus": len(rp)},
            ))
    mx = ctx.frame("Mlx5Event")
    if not mx.empty:
        bw = mx[mx["category"] == "pcie_bandwidth"]
        ext = bw["message"].str.extract(_BW_LIMITED)
        lim = bw[ext["avail"].notna()].copy()
        if not lim.empty:
            for col in ("avail", "cap", "speed", "width", "cspeed", "cwidth", "at"):
                lim[col] = ext.loc[lim.index, col]
            lim["hostk"] = _hostk(lim)
            lim = lim.drop_duplicates(subset=["hostk", "bdf"], keep="last")
            for _, r in lim.sort_values(["hostk", "bdf"]).iterrows():
                ratio = round(float(r["avail"]) / float(r["cap"]), 3) if float(r["cap"]) else None
                faults += 1
                out.append(finding(
                    "nic_pcie_bandwidth_limited",
                    f"{r['hostk'] or '?'} NIC {r['bdf']}: the kernel measured {r['avail']} Gb/s available PCIe bandwidth,"
                    f" limited by a {r['speed']} GT/s x{r['width']} link at {r['at']} (capable of {r['cap']} Gb/s).",
                    pd.DataFrame([r]), Location(host=r["hostk"] or None, device=r["bdf"]),
                    {"avail_gbps": float(r["avail"]), "cap_gbps": float(r["cap"]), "ratio": ratio,
                     "width_down": int(r["width"]) < int(r["cwidth"]), "limiting": str(r["at"])},
                ))
    if seen_devices and not faults:
        src = links[links["kind"].isin(["gpu", "nic"])] if not links.empty else links
        if src.empty:
            src = ctx.frame("GpuInfo")
        out.append(finding(
            "pcie_links_ok",
            f"All {seen_devices} GPU/NIC PCIe link(s) seen run at full width (NICs also at full speed)"
            + (f"; {gpu_idle} GPU(s) at a lower speed, as idle GPUs do." if gpu_idle else "."),
            src.head(3), attrs={"devices": seen_devices, "gpus_low_speed": gpu_idle},
        ))
    return out


# ----------------------------------------------------------------------------------------------- mlx5 driver / firmware

_FW_VER = re.compile(r"^firmware version: (?P<v>\d+\.\d+\.\d+)")
_CMD_NAME = re.compile(r"\b([A-Z][A-Z0-9_]{3,})\(0x[0-9a-f]+\)")
_SYND = re.compile(r"\bsynd(?:rome)? (0x[0-9a-f]+)", re.I)
_ASYNC_FATAL = re.compile(r"Got async event\s*:\s*(?:local catastrophic error|.*\bfatal\b)", re.I)


def _mlx5_group(out: list[Finding], ev: pd.DataFrame, kind: str, what: str) -> None:
    for (host, bdf), grp in ev.groupby([ev["hostk"], ev["bdf"]], sort=True):
        cmds = sorted({m for s in grp["message"] for m in _CMD_NAME.findall(s)})
        synd = sorted({m.lower() for s in grp["message"] for m in _SYND.findall(s)})
        out.append(finding(
            kind,
            f"{host or '?'} mlx5 {bdf}: {len(grp)} {what} line(s)"
            + (f" ({', '.join(cmds[:3])})" if cmds else "") + (f", syndrome {', '.join(synd[:2])}" if synd else "") + ".",
            grp, Location(host=host or None, device=bdf),
            {"lines": len(grp), "commands": len(cmds), "syndrome": synd[0] if synd else None},
        ))


def _fw_versions(ctx: Context) -> pd.DataFrame:
    """One row per (host, device, model, firmware) from ibstat/ibv_devinfo, else from dmesg probe lines."""
    ports = ctx.frame("IbPort")
    cols = ["host", "device", "model", "firmware", "source", "line", "text"]
    if not ports.empty and ports["firmware"].notna().any():
        # only the columns returned (the port table of a 4,096-host job has 32k rows of 20 columns)
        p = ports.loc[ports["firmware"].notna(), ["host", "device", "ca_type", "firmware", "source", "line", "text"]]
        p = p.assign(host=_hostk(p), ca_type=p["ca_type"].fillna("?").astype(str)).rename(columns={"ca_type": "model"})
        return p.drop_duplicates(subset=["host", "device"])[cols]
    mx = ctx.frame("Mlx5Event")
    if mx.empty:
        return pd.DataFrame(columns=cols)
    ver = mx["message"].str.extract(_FW_VER)["v"]
    d = mx[ver.notna()].copy()
    if d.empty:
        return pd.DataFrame(columns=cols)
    d["firmware"] = ver[ver.notna()]
    d["model"] = "fw " + d["firmware"].str.split(".").str[0]  # the major number names the ConnectX generation
    d["host"] = _hostk(d)
    d["device"] = d["bdf"]
    return d.drop_duplicates(subset=["host", "device"], keep="last")[cols]


@extractor(reads=("CudaError", "FreeText", "IbPort", "KernelEvent", "MessageHit", "Mlx5Event", "NcclWarn", "PcieLink",
                  "PeermemEvent", "PgError", "ToolError", "WatchdogTimeout"),
           emits=("ib_async_fatal_event", "mlx5_cmd_timeout", "mlx5_fw_cmd_error", "mlx5_health_error",
                  "mlx5_no_driver_errors", "mlx5_pcie_power_low", "nic_firmware_mismatch", "nic_firmware_uniform",
                  "nic_max_read_req"))
def nic_driver_firmware(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    mx = ctx.frame("Mlx5Event")
    if not mx.empty:
        # the few lines of each category, not the whole table (65k mlx5 lines in a 4,096-host bundle) with a host key
        cat = mx["category"].to_numpy(object)

        def of(category: str) -> pd.DataFrame:
            rows = mx[cat == category]
            return rows.assign(hostk=_hostk(rows))

        errors = (cat == "cmd_timeout") | (cat == "health") | (cat == "fw_error")
        if errors.any():
            _mlx5_group(out, of("cmd_timeout"), "mlx5_cmd_timeout", "firmware command timeout")
            _mlx5_group(out, of("health"), "mlx5_health_error", "health/fatal-error")
            _mlx5_group(out, of("fw_error"), "mlx5_fw_cmd_error", "failed firmware command")
        pw = of("pcie_power")
        for host, grp in pw.groupby("hostk", sort=True):
            out.append(finding(
                "mlx5_pcie_power_low",
                f"{host or '?'}: mlx5 reports insufficient PCIe slot power on {grp['bdf'].nunique()} NIC(s)"
                " (often a slot power-limit report of the platform, not a fault by itself).",
                grp.head(4), Location(host=host or None, device=_one(grp["bdf"])), {"nics": int(grp["bdf"].nunique())},
            ))
        if not errors.any():
            out.append(finding(
                "mlx5_no_driver_errors",
                f"Kernel logs hold {len(mx)} mlx5 line(s) and no command timeout, health event or firmware error.",
                mx.head(1), attrs={"lines": len(mx)},
            ))
    fw = _fw_versions(ctx)
    if not fw.empty:
        mismatch = False
        multi = False  # a model with 2+ devices
        first: dict[str, object] = {}  # model -> its first firmware
        models = fw["model"].to_numpy(object)
        distinct = pd.unique(models)
        for model in sorted(distinct[pd.notna(distinct)].tolist()):
            grp = fw if len(distinct) == 1 else fw[models == model]
            multi = multi or int(grp["device"].notna().sum()) >= 2
            known = grp["firmware"].dropna()
            if not known.empty:
                first[model] = known.iloc[0]
            counts = known.value_counts()
            if len(counts) < 2:
                continue
            mismatch = True
            major = counts.index[0]
            tie = bool(counts.iloc[0] == counts.iloc[1])  # no majority: cannot tell which side is odd
            odd = grp[grp["firmware"] != major]
            odd_hosts = sorted(set(odd["host"]))
            ev = odd.head(4)
            if not mx.empty:  # the kernel's probe line names the version itself
                ver = mx["message"].str.extract(_FW_VER)["v"]
                kline = mx[ver.isin(set(odd["firmware"])) & _hostk(mx).isin(odd_hosts)]
                if not kline.empty:
                    ev = pd.concat([kline.head(4), odd.head(1)])
            out.append(finding(
                "nic_firmware_mismatch",
                f"HCAs of model {model} run {len(counts)} firmware versions: {counts.iloc[0]}x {major} and"
                f" {len(odd)}x other ({', '.join(sorted(set(odd['firmware'])))}) on {hosts_label(odd_hosts) or '?'}.",
                ev, Location(host=odd_hosts[0] if len(odd_hosts) == 1 and odd_hosts[0] and not tie else None,
                             device=None if tie else _one(odd["device"])),
                {"model": model, "versions": len(counts), "odd_devices": len(odd), "odd_hosts": len(odd_hosts),
                 "majority": str(major)},
            ))
        if not mismatch and multi:
            out.append(finding(
                "nic_firmware_uniform",
                "Identical HCAs run identical firmware: " + "; ".join(f"{m} {v}" for m, v in first.items()) + ".",
                fw.head(2), attrs={"models": int(fw["model"].nunique()), "devices": len(fw)},
            ))
    msgs = ctx.messages
    if not msgs.empty:
        fatal = primary(msgs[message_mask(ctx, _ASYNC_FATAL)])
        if not fatal.empty:
            out.append(finding(
                "ib_async_fatal_event",
                f"NCCL received a fatal asynchronous device event ({len(fatal)} line(s)):"
                f" {str(fatal['message'].iloc[0])[:100]}",
                fatal, Location(host=_one(fatal["host"])), {"lines": len(fatal)},
            ))
    links = _links(ctx)
    if not links.empty:
        nics = links[(links["kind"] == "nic") & links["max_read_req"].notna()]
        for host, grp in nics.groupby("hostk", sort=True):
            low = grp[grp["max_read_req"] == grp["max_read_req"].min()]
            out.append(finding(
                "nic_max_read_req",
                f"{host or '?'}: ConnectX MaxReadReq is {int(grp['max_read_req'].min())} bytes on {len(low)} of"
                f" {len(grp)} NIC function(s).",
                low.head(3), Location(host=host or None, device=_one(low["bdf"])),
                {"bytes": int(grp["max_read_req"].min()), "nics": len(low)},
            ))
    return out


# ----------------------------------------------------------------------------------------------- GPU/NIC affinity

_REL_RANK = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "SOC": 5}
_NEAR = 2  # PIX/PXB: under the same PCIe switch


def _topo_gpu_nic(ctx: Context) -> dict[str, dict[int, dict[str, tuple[int, str, pd.Series]]]]:
    """host -> GPU index -> NIC device name -> (rank, relation, TopoEntry row), from nvidia-smi topo -m."""
    te = ctx.frame("TopoEntry")
    td = ctx.frame("TopoDevice")
    res: dict[str, dict[int, dict[str, tuple[int, str, pd.Series]]]] = {}
    if te.empty:
        return res
    names: dict[tuple[str, str], str] = {}
    if not td.empty:
        for h, n, d in zip(_hostk(td), td["name"], td["device"], strict=True):
            if sval(d):
                names[(h, str(n))] = str(d)
    te = te.assign(hostk=_hostk(te))
    sel = te[te["row"].str.match(r"^GPU\d+$") & ~te["col"].str.match(r"^GPU\d+$") & te["relation"].isin(_REL_RANK)]
    for idx, h, row, col, rel in zip(sel.index, sel["hostk"], sel["row"], sel["col"], sel["relation"], strict=True):
        nic = names.get((h, col), col)
        res.setdefault(h, {}).setdefault(int(row[3:]), {})[nic] = (_REL_RANK[rel], rel, sel.loc[idx])
    return res


def _gpu_index(ctx: Context, ngpus: dict[str, int]) -> dict[tuple[str, int], int]:
    """(host, pid) -> the GPU's index in nvidia-smi (NVML orders GPUs by PCI bus ID).

    Taken from the busId of each rank's ``ncclCommInitRank`` line when the host shows as many distinct
    GPUs as topo -m has, so per-task ``CUDA_VISIBLE_DEVICES`` (every rank on cudaDev 0) maps right."""
    ir = ctx.frame("NcclInitRank")
    out: dict[tuple[str, int], int] = {}
    if ir.empty:
        return out
    ir = ir.assign(hostk=_hostk(ir), bus=ir["bus_id"].map(_pci3))
    for h, grp in ir.groupby("hostk", sort=True):
        buses = sorted({b for b in grp["bus"] if b})
        if not buses or len(buses) != ngpus.get(h, -1):
            continue
        order = {b: i for i, b in enumerate(buses)}
        for pid, b in zip(grp["pid"], grp["bus"], strict=True):
            if b in order:
                out[(h, int(pid))] = order[b]
    return out


def _nccl_gpu_nics(ctx: Context, ngpus: dict[str, int]) -> dict[str, dict[int, tuple[set[str], pd.DataFrame]]]:
    """host -> GPU index -> (NIC names its own NET/IB channels use, the channel rows); PXN hops are left out."""
    ch = ctx.frame("NcclChannel")
    init = ctx.frame("NcclNetInit")
    res: dict[str, dict[int, tuple[set[str], pd.DataFrame]]] = {}
    if ch.empty or init.empty:
        return res
    gidx = _gpu_index(ctx, ngpus)
    ib = init[init["net"] == "IB"].assign(hostk=lambda d: _hostk(d))
    lists: dict[tuple[str, int], tuple[str, ...]] = {}
    for h, pid, devs in zip(ib["hostk"], ib["pid"], ib["devices"], strict=True):
        lists.setdefault((h, int(pid)), tuple(devs))
        lists.setdefault((h, -1), tuple(devs))
    net = ch[(ch["transport"] == "NET") & (ch["net"] == "IB") & ch["net_dev"].notna()
             & ~ch["via"].astype(str).str.contains(r"\(", regex=True)].assign(hostk=lambda d: _hostk(d))
    for (h, pid, dev), grp in net.groupby(["hostk", "pid", "dev"], sort=True):
        devs = lists.get((h, int(pid))) or lists.get((h, -1)) or ()
        used = {devs[int(i)] for i in grp["net_dev"] if 0 <= int(i) < len(devs)}
        gpu = gidx.get((h, int(pid)), int(dev))
        if used:
            prev = res.setdefault(h, {}).get(gpu)
            if prev:
                used |= prev[0]
                grp = pd.concat([prev[1], grp])
            res[h][gpu] = (used, grp)
    return res


def _ports_down(ctx: Context) -> set[tuple[str, str]]:
    """(host, HCA device) of ports ibstat/ibv_devinfo show as not Active (Down, Polling, Init)."""
    ports = ctx.frame("IbPort")
    if ports.empty or "state" not in ports:
        return set()
    bad = ports[ports["state"].notna() & (ports["state"] != "Active")]
    return {(str(h), str(d)) for h, d in zip(_hostk(bad), bad["device"], strict=True)}


def _hca_allows(spec: str, nic: str) -> bool:
    """Does ``NCCL_IB_HCA=<spec>`` let NCCL use ``nic``? A leading ``^`` excludes, a leading ``=`` asks for
    exact names, otherwise each entry is a name prefix (``mlx5`` matches every ``mlx5_N``)."""
    s = spec.strip()
    exclude = s.startswith("^")
    s = s.lstrip("^")
    exact = s.startswith("=")
    names = [x.split(":")[0].strip() for x in s.lstrip("=").split(",") if x.strip()]
    hit = any(nic == n if exact else nic.startswith(n) for n in names)
    return not hit if exclude else hit


@extractor(reads=("EnvSetting", "IbPort", "NcclChannel", "NcclInitRank", "NcclNetInit", "TopoDevice", "TopoEntry"),
           emits=("gpu_far_nic", "gpu_near_nic_used", "gpu_nic_far_by_design"))
def gpu_nic_affinity(ctx: Context) -> list[Finding]:
    topo = _topo_gpu_nic(ctx)
    if not topo:
        return []
    usage = _nccl_gpu_nics(ctx, {h: len(g) for h, g in topo.items()})
    env = ctx.frame("EnvSetting")
    hca = env[env["name"] == "NCCL_IB_HCA"] if not env.empty else env
    spec = str(hca["value"].iloc[-1]).strip().strip("'\"") if not hca.empty else ""
    out: list[Finding] = []
    far_any = False
    near_used = 0
    by_design: list[tuple[str, int, str]] = []
    single_host_usage = len(usage) == 1 and len(topo) == 1
    down = _ports_down(ctx)
    for host, gpus in sorted(topo.items()):
        use = usage.get(host) or (next(iter(usage.values())) if single_host_usage else {})
        far_rows: list[pd.Series] = []
        far_desc: list[str] = []
        excluded = False
        for gpu, nics in sorted(gpus.items()):
            best = min(r for r, _, _ in nics.values())
            # a near NIC whose port is down cannot carry the GPU's traffic: NCCL going to the next NIC is then
            # the port's fault (link.port_down), not a placement choice
            near = sorted(n for n, (r, _, _) in nics.items() if r <= _NEAR and (host, n) not in down)
            if best > _NEAR:
                by_design.append((host, gpu, min(nics.values(), key=lambda t: t[0])[1]))
            used, chrows = use.get(gpu, (set(), None))
            if used:
                used_known = [n for n in used if n in nics]
                if not used_known:
                    continue
                best_used = min(nics[n][0] for n in used_known)
                if best_used > _NEAR and near and not set(near) & used:
                    far_any = True
                    nic = min(used_known, key=lambda n: nics[n][0])
                    far_desc.append(f"GPU{gpu}->{nic} ({nics[nic][1]}; {near[0]} is {nics[near[0]][1]})")
                    far_rows.append(nics[nic][2])
                    if chrows is not None:
                        far_rows.extend(r for _, r in chrows.head(1).iterrows())
                elif best_used <= _NEAR:
                    near_used += 1
            elif spec and near and not any(_hca_allows(spec, n) for n in near):
                far_any = True
                far_desc.append(f"GPU{gpu}: NCCL_IB_HCA={spec} excludes its {near[0]} ({nics[near[0]][1]})")
                far_rows.append(nics[near[0]][2])
            if far_desc and spec and near and not any(_hca_allows(spec, n) for n in near):
                excluded = True
        if far_desc:
            src = "nccl_channels" if any("->" in d for d in far_desc) else "nccl_ib_hca"
            ev = pd.DataFrame(far_rows)
            if excluded:
                ev = pd.concat([ev, hca.head(1)])
            gpus_far = [int(re.match(r"GPU(\d+)", d).group(1)) for d in far_desc]  # type: ignore[union-attr]
            out.append(finding(
                "gpu_far_nic",
                f"{host or '?'}: {len(far_desc)} GPU(s) send through a NIC across the PCIe root/socket while a NIC"
                f" on their own PCIe switch is left unused: {'; '.join(far_desc[:4])}"
                + (f"; NCCL_IB_HCA={spec} leaves out their near NIC" if excluded else "") + ".",
                ev, Location(host=host or None, gpu=f"GPU{gpus_far[0]}" if len(gpus_far) == 1 else None),
                {"gpus": len(far_desc), "source": src, "forced_by_env": excluded},
            ))
    if not far_any and near_used:
        out.append(finding(
            "gpu_near_nic_used",
            f"Each of {near_used} GPU(s) with inter-node channels uses a NIC on its own PCIe switch (PIX/PXB).",
            ctx.frame("TopoDevice").head(2), attrs={"gpus": near_used},
        ))
    if not far_any and by_design:
        hosts = sorted({h for h, _, _ in by_design})
        out.append(finding(
            "gpu_nic_far_by_design",
            f"{len(by_design)} GPU(s) on {hosts_label(hosts) or '?'} have no NIC nearer than"
            f" {by_design[0][2]}: the far path is the hardware's, not a placement choice.",
            ctx.frame("TopoDevice").head(2), Location(host=hosts[0] if len(hosts) == 1 and hosts[0] else None),
            {"gpus": len(by_design)},
        ))
    return out


# ----------------------------------------------------------------------------------------------- NCCL's topology

_GPU_CLASS_HEX = ("0x0300", "0x0302")
_NIC_CLASS_HEX = ("0x0207", "0x0200")


def _xml_devices(nodes: pd.DataFrame) -> tuple[set[str], set[str], set[str]]:
    """(GPU busids, NIC busids, NET device names) an NCCL topology XML describes."""
    gpus: set[str] = set()
    nics: set[str] = set()
    names: set[str] = set()
    for kind, attrs, parent in zip(nodes["kind"], nodes["attrs"], nodes["parent_busid"], strict=True):
        a = dict(attrs)
        if kind == "pci":
            cls = str(a.get("class", ""))
            b = _pci3(a.get("busid"))
            if b and cls.startswith(_GPU_CLASS_HEX):
                gpus.add(b)
            elif b and cls.startswith(_NIC_CLASS_HEX):
                nics.add(b)
        elif kind == "gpu" and _pci3(parent):
            gpus.add(_pci3(parent))  # type: ignore[arg-type]
        elif kind == "net" and a.get("name"):
            names.add(str(a["name"]))
    return gpus, nics, names


def _hw_gpus(ctx: Context) -> dict[str, set[str]]:
    res: dict[str, set[str]] = {}
    for name, col in (("GpuInfo", "pci"), ("GpuSummary", "bus_id"), ("NcclInitRank", "bus_id")):
        df = ctx.frame(name)
        if df.empty or col not in df:
            continue
        for h, v in zip(_hostk(df), df[col], strict=True):
            b = _pci3(v)
            if b:
                res.setdefault(h, set()).add(b)
    links = _links(ctx)
    if not links.empty:
        g = links[links["kind"] == "gpu"]
        for h, b in zip(g["hostk"], g["bdf"], strict=True):
            res.setdefault(h, set()).add(_pci3(b) or b)
    return res


def _hw_nic_names(ctx: Context) -> dict[str, set[str]]:
    res: dict[str, set[str]] = {}
    ports = ctx.frame("IbPort")
    if not ports.empty:
        for h, d in zip(_hostk(ports), ports["device"], strict=True):
            res.setdefault(h, set()).add(str(d))
    init = ctx.frame("NcclNetInit")
    if not init.empty:
        for h, devs in zip(_hostk(init), init["devices"], strict=True):
            res.setdefault(h, set()).update(devs)
    return res


@extractor(reads=("EnvSetting", "GpuInfo", "GpuSummary", "IbPort", "NcclGraph", "NcclInitRank", "NcclNetInit",
                  "NcclTopoNode", "PcieLink", "TopoEntry"),
           emits=("nccl_graph_without_nvlink", "nccl_topo_file_set", "nccl_topo_match", "nccl_topo_mismatch",
                  "pcie_tree_hidden"))
def nccl_topology(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    env = ctx.frame("EnvSetting")
    tf = env[env["name"] == "NCCL_TOPO_FILE"] if not env.empty else env
    if not tf.empty:
        vals = sorted({str(v) for v in tf["value"]})
        out.append(finding(
            "nccl_topo_file_set",
            f"NCCL_TOPO_FILE={', '.join(vals)}: NCCL merges this file into the topology it detects.",
            tf.head(4), Location(host=_one(tf["host"])), {"value": vals[0], "values": len(vals)},
        ))
    nodes = ctx.frame("NcclTopoNode")
    if not nodes.empty:
        sysnodes = nodes[nodes["graph_id"].isna()] if "graph_id" in nodes else nodes
        hw = _hw_gpus(ctx)
        hw_names = _hw_nic_names(ctx)
        for (host, src), grp in sysnodes.groupby([_hostk(sysnodes), sysnodes["source"]], sort=True):
            xg, _xn, names = _xml_devices(grp)
            if not xg:
                continue
            real = hw.get(host) if host else None
            if real is None:  # a file for the whole bundle: compare with every host that shows its GPUs
                real = set().union(*hw.values()) if hw else set()
            if not real:
                continue
            missing = sorted(real - xg)
            extra = sorted(xg - real)
            rnames = hw_names.get(host) or (set().union(*hw_names.values()) if hw_names else set())
            unknown = sorted(n for n in names if rnames and n not in rnames)
            cited = grp[grp["kind"] == "pci"].head(1)
            if missing or unknown:
                busids = grp["attrs"].map(lambda a: _pci3(dict(a).get("busid")))
                bad = grp[busids.isin(extra)]
                out.append(finding(
                    "nccl_topo_mismatch",
                    f"The NCCL topology file {src} does not describe this hardware: {len(missing)} of {len(real)} GPU(s)"
                    f" the host has are absent from it ({', '.join(missing[:3])})"
                    + (f", it lists {len(extra)} GPU(s) the host does not have ({', '.join(extra[:3])})" if extra else "")
                    + (f", NIC name(s) {', '.join(unknown[:3])} do not exist" if unknown else "") + ".",
                    pd.concat([cited, bad.head(3)]), Location(host=host or None),
                    {"gpus_missing": len(missing), "gpus_extra": len(extra), "nics_unknown": len(unknown),
                     "gpus_hw": len(real)},
                ))
            else:
                out.append(finding(
                    "nccl_topo_match",
                    f"The NCCL topology file {src} lists the same {len(xg)} GPU bus IDs the hardware shows.",
                    cited, Location(host=host or None), {"gpus": len(xg)},
                ))
    graph = ctx.frame("NcclGraph")
    te = ctx.frame("TopoEntry")
    if not graph.empty and not te.empty:
        p2p_off = False
        if not env.empty:
            p2p = env[env["name"].isin(["NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"])]
            p2p_off = bool(((p2p["name"] == "NCCL_P2P_DISABLE") & (p2p["value"].astype(str).str.strip() == "1")).any()
                           or (p2p["name"] == "NCCL_P2P_LEVEL").any())
        te = te.assign(hostk=_hostk(te))
        nv_hosts = set(te[te["row"].str.startswith("GPU") & te["col"].str.startswith("GPU")
                          & te["relation"].str.match(r"^NV\d+$")]["hostk"])
        g = graph.assign(hostk=_hostk(graph), intra=graph["path_type"].astype(str).str.split("/").str[0])
        slow = g[g["intra"].isin(["PIX", "PXB", "PHB", "NODE", "SYS"])
                 & (g["hostk"].isin(nv_hosts) | (len(nv_hosts) == 1 and "" in set(g["hostk"])))]
        if not slow.empty and nv_hosts and not p2p_off:
            out.append(finding(
                "nccl_graph_without_nvlink",
                f"NCCL's graph search connects GPUs through {', '.join(sorted(set(slow['intra'])))}"
                f" (bw {slow['bw_intra'].max():g} GB/s) although nvidia-smi topo -m shows NVLink between them.",
                slow.head(4), Location(host=_one(slow["host"])),
                {"path": str(slow["intra"].iloc[0]), "bw": float(slow["bw_intra"].max())},
            ))
    if not te.empty:
        te2 = te.assign(hostk=_hostk(te))
        links = _links(ctx)
        for host, grp in te2.groupby("hostk", sort=True):
            pcie = grp[(grp["row"] != grp["col"]) & grp["relation"].isin(_REL_RANK)
                       & grp["row"].str.startswith("GPU")]
            if pcie.empty or pcie["relation"].isin(["PIX", "PXB"]).any():
                continue
            nic_cells = pcie[~pcie["col"].str.startswith("GPU")]
            if nic_cells.empty:
                continue
            lh = links[links["hostk"] == host] if not links.empty else links
            bridges = None if lh.empty else int((lh["device_class"] == "PCI bridge").sum())
            out.append(finding(
                "pcie_tree_hidden",
                f"{host or '?'}: nvidia-smi topo -m shows no GPU-NIC pair under a common PCIe switch (only"
                f" {', '.join(sorted(set(nic_cells['relation'])))})"
                + (f" and lspci lists {bridges} PCI bridge(s)" if bridges is not None else "")
                + ": the PCIe tree is flat or hidden (typical of a VM).",
                nic_cells.head(2), Location(host=host or None),
                {"bridges_seen": bridges, "relations": ",".join(sorted(set(nic_cells["relation"])))},
            ))
    return out


# ----------------------------------------------------------------------------------------------- container RDMA access

_OPEN_FAIL = re.compile(
    r"ibv_open_device failed|Unable to open device|ibv_get_device_list failed|Call to ibv_get_device_list"
    r"|no userspace device-specific driver found",
    re.I,
)


@extractor(reads=("CudaError", "EnvSetting", "FreeText", "IbPort", "KernelEvent", "MessageHit", "Mlx5Event",
                  "NcclNetNoDevice", "NcclPluginNote", "NcclWarn", "PeermemEvent", "PgError", "ToolError",
                  "WatchdogTimeout"),
           emits=("ib_device_open_failed", "ibv_no_devices", "rdma_unusable_hw_up"))
def container_rdma(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    msgs = ctx.messages
    opened = primary(msgs[message_mask(ctx, _OPEN_FAIL)]) if not msgs.empty else msgs
    if not opened.empty:
        out.append(finding(
            "ib_device_open_failed",
            f"NCCL could not open the RDMA device(s) on {hosts_label(list(opened['host'].dropna())) or 'the host'}"
            f" ({len(opened)} line(s)): the verbs device nodes are missing or not accessible.",
            opened, Location(host=_one(opened["host"])), {"lines": len(opened)},
        ))
    te = ctx.frame("ToolError")
    nodev = te[te["message"].str.contains(r"No IB devices found|Failed to get IB devices list", case=False, na=False)] \
        if not te.empty else te
    if not nodev.empty:
        out.append(finding(
            "ibv_no_devices",
            f"{', '.join(sorted(set(nodev['tool'].astype(str))))} found no RDMA device on"
            f" {hosts_label(list(nodev['host'].dropna())) or 'the host'}.",
            nodev, Location(host=_one(nodev["host"])), {"lines": len(nodev)},
        ))
    # NCCL could not use RDMA: per host
    parts = []
    for name, cond in (("NcclNetNoDevice", lambda d: d["net"] == "IB"),
                       ("NcclPluginNote", lambda d: d["category"] == "verbs_unavailable")):
        df = ctx.frame(name)
        if not df.empty:
            parts.append(df[cond(df)][["source", "line", "text", "host"]])
    if not opened.empty:
        parts.append(opened[["source", "line", "text", "host"]])
    parts = [p for p in parts if not p.empty]
    if not parts:
        return out
    noib = pd.concat(parts, ignore_index=True)
    noib["hostk"] = _hostk(noib)
    env = ctx.frame("EnvSetting")
    disabled: set[str] = set()
    if not env.empty:
        off = env[((env["name"] == "NCCL_IB_DISABLE") & (env["value"].astype(str).str.strip() == "1"))
                  | ((env["name"] == "NCCL_NET") & (env["value"].astype(str).str.strip("'\" ").str.lower() == "socket"))]
        disabled = set(_hostk(off))
    if "" in disabled:
        return out  # the whole job is told not to use IB: that is configuration, not access
    noib = noib[~noib["hostk"].isin(disabled)]
    ports = ctx.frame("IbPort")
    if noib.empty or ports.empty:
        return out
    ports = ports.assign(hostk=_hostk(ports))
    up = ports[ports["state"] == "Active"]
    hca = env[env["name"] == "NCCL_IB_HCA"] if not env.empty else env
    if not hca.empty:  # a selection that matches none of the Active HCAs is a configuration error instead
        spec = str(hca["value"].iloc[-1]).strip().strip("'\"")
        up = up[up["device"].astype(str).map(lambda d: _hca_allows(spec, d))]
    if up.empty:
        return out
    nhosts = sorted(set(noib["hostk"]) - {""})
    same = sorted(set(nhosts) & set(up["hostk"]))
    if same:
        hw = up[up["hostk"].isin(same)]
        hosts = same
    elif not (set(ports["hostk"]) & set(nhosts)):
        hw = up  # NCCL ran in containers/pods named differently from the nodes whose ibstat was collected
        hosts = nhosts
    else:
        return out
    ev = pd.concat([noib[noib["hostk"].isin(hosts) | (noib["hostk"] == "")].head(4), hw.head(2)])
    out.append(finding(
        "rdma_unusable_hw_up",
        f"NCCL on {hosts_label(hosts) or 'the job'} found no usable IB/RoCE device while ibstat shows"
        f" {len(hw)} Active HCA port(s) on {hosts_label(list(hw['hostk']))}: the hardware is up, the process"
        " cannot reach it.",
        ev, Location(host=hosts[0] if len(hosts) == 1 else None),
        {"hosts": len(hosts), "active_ports": len(hw), "same_host": bool(same)},
    ))
    return out
