"""Where the GPUs and NICs sit in the PCI tree (``lspci -tv``, :class:`~diagnose.parsers.lspci_tree.PciTreeDevice`).

An expert reads three things off the tree:

* **a hypervisor's synthetic topology** (``pci_tree_flat_vm``): GPUs and NICs with no PCIe switch above them, and
  a tell that this is a VM - hypervisor devices (``Red Hat, Inc. Virtio ...``, QEMU's ``82G33/G31/P35/P31`` q35
  host bridge or ``440FX``, ``Device 1234:1111``, Hyper-V, VMware), GPUs/NICs sharing one bus at different device
  numbers (a conventional PCI bus: on PCIe every endpoint is device 00 below its own port), or GPUs/NICs directly
  on a root bus. The hypervisor hides the host's switches, so NCCL's detection sees every GPU-NIC pair as PHB/SYS
  and needs a topology file, and peer traffic still crosses the host's real switches under the host's ACS setting;
* **per GPU, the nearest RDMA NIC** (ConnectX/BlueField, EFA, Slingshot, ...): behind the same PCIe switch
  (``gpu_nic_share_switch``: NCCL's PIX/PXB, peer-to-peer stays below the switch, GPUDirect RDMA is enabled by
  default) or only across the root complex or another root bus (``gpu_nic_cross_cpu``: PHB/NODE/SYS, beyond
  NCCL's default ``NCCL_NET_GDR_LEVEL`` of PXB, so GDR is off unless the level is raised);
* NVSwitches, counted in the attributes (``nvswitches``): the GPUs are NVLink-connected.

Switch ports are recognised by structure (see the parser). A truncated tree keeps ``complete: false``: a NIC nearer
to a GPU may be in the part that is missing, so the rules weigh the cross-CPU reading only on complete trees.
Findings are one per tree and kind.
"""

from __future__ import annotations

import re

import pandas as pd

from diagnose.evidence.context import Context, finding
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding, Location

_HYPERVISOR = re.compile(
    r"Red Hat, Inc\.|Virtio|\bQEMU\b|82G33/G31/P35/P31 Express DRAM Controller|\b440FX\b|Device 1234:1111"
    r"|Hyper-V|Microsoft Corporation|VMware|Xen Platform|Amazon\.com|Google, Inc\. Compute Engine", re.I)
_SWITCH_ROLES = ("switch_upstream", "switch_downstream")
# GPU -> nearest-NIC levels, nearest first (NCCL's path types: PIX/PXB, PIX, PHB, NODE/SYS)
_LEVELS = ("switch", "bridge", "root_complex", "cross_root")


def _level(g_chain: tuple[str, ...], g_root: str, n_chain: tuple[str, ...], n_root: str,
           switch_ports: set[str]) -> str:
    common = set(g_chain) & set(n_chain)
    if common & switch_ports:
        return "switch"
    if common:
        return "bridge"
    if g_root == n_root:
        return "root_complex"
    return "cross_root"


def _shared_bus(devs: pd.DataFrame, eps: pd.DataFrame) -> pd.DataFrame:
    """GPU/NIC/NVSwitch endpoints on a non-root bus that holds another endpoint at a different device number,
    or sitting directly on a root bus."""
    nonbr = devs[~devs["is_bridge"]]
    slots = nonbr.assign(slot=nonbr["devfn"].str.slice(0, 2)).groupby(["domain", "bus"])["slot"].nunique()
    multi = {k for k, v in slots.items() if v > 1}
    on_shared = eps.apply(lambda r: r["parent"] is not None and (r["domain"], r["bus"]) in multi, axis=1)
    on_root = eps["parent"].isna()
    return eps[on_shared | on_root]


@extractor(reads=("PciTree", "PciTreeDevice"),
           emits=("gpu_nic_cross_cpu", "gpu_nic_share_switch", "pci_tree_flat_vm"))
def pci_tree_placement(ctx: Context) -> list[Finding]:
    devs = ctx.frame("PciTreeDevice")
    if devs.empty:
        return []
    trees = ctx.frame("PciTree")
    truncated: dict[tuple[str, str], bool] = {}
    if not trees.empty:
        for _, t in trees.iterrows():
            truncated[(str(t["host"] or ""), str(t["source"]))] = truncated.get(
                (str(t["host"] or ""), str(t["source"])), False) or bool(t["truncated"])
    devs = devs.assign(hostk=devs["host"].fillna("").astype(str),
                       parent=devs["parent"].where(devs["parent"].notna(), None))
    out: list[Finding] = []
    for (host, src), grp in devs.groupby(["hostk", "source"], sort=True):
        complete = not truncated.get((host, str(src)), False)
        gpus = grp[grp["kind"] == "gpu"]
        if gpus.empty:
            continue
        nics = grp[(grp["kind"] == "nic") & grp["rdma"].astype(bool)]
        nvs = grp[grp["kind"] == "nvswitch"]
        switch_ports = set(grp.loc[grp["role"].isin(_SWITCH_ROLES), "bdf"])
        hyper = grp[grp["description"].fillna("").str.contains(_HYPERVISOR)]
        eps = pd.concat([gpus, nics, nvs])
        shared = _shared_bus(grp, eps)
        below_switch = eps[[bool(set(c) & switch_ports) for c in eps["chain"]]]
        vm = not hyper.empty or not shared.empty
        loc = Location(host=host or None)
        base = {"gpus": len(gpus), "nics": len(nics), "nvswitches": len(nvs), "vm": vm, "complete": complete}
        if vm and below_switch.empty:
            why = []
            if not hyper.empty:
                why.append(f"{len(hyper)} hypervisor device(s) ({hyper['description'].iloc[0]})")
            if not shared.empty:
                why.append(f"{len(shared)} GPU/NIC/NVSwitch(es) sharing one bus or on a root bus"
                           f" ({', '.join(shared['bdf'].head(3))})")
            out.append(finding(
                "pci_tree_flat_vm",
                f"{host or '?'}: lspci -t shows a hypervisor's synthetic PCI tree - {len(gpus)} GPU(s) and"
                f" {len(nics)} RDMA NIC(s) with no PCIe switch above them, {'; '.join(why)}"
                + (f"; {len(nvs)} NVSwitch(es)" if len(nvs) else "")
                + ("" if complete else "; the paste is truncated") + ".",
                pd.concat([gpus.head(2), shared.head(1), hyper.head(1), nics.head(1)]).drop_duplicates(
                    subset=["bdf"]),
                loc, {**base, "shared_bus": len(shared), "hypervisor_devices": len(hyper)},
            ))
        if nics.empty:
            continue
        best: dict[str, tuple[str, str]] = {}
        for _, g in gpus.iterrows():
            lv = min(((_level(tuple(g["chain"]), g["root_bus"], tuple(n["chain"]), n["root_bus"], switch_ports),
                       n["bdf"]) for _, n in nics.iterrows()), key=lambda t: _LEVELS.index(t[0]))
            best[g["bdf"]] = lv
        sharing = [b for b, (lv, _) in best.items() if lv == "switch"]
        crossing = [b for b, (lv, _) in best.items() if lv in ("root_complex", "cross_root")]
        if sharing:
            shown = gpus[gpus["bdf"].isin(sharing)]
            out.append(finding(
                "gpu_nic_share_switch",
                f"{host or '?'}: {len(sharing)} of {len(gpus)} GPU(s) have an RDMA NIC behind the same PCIe switch"
                f" ({', '.join(f'{b}->{best[b][1]}' for b in sharing[:3])})"
                + (" in a VM's emulated switches" if vm else "") + ".",
                pd.concat([shown.head(3), nics[nics["bdf"].isin({best[b][1] for b in sharing})].head(2)]),
                loc, {**base, "gpus_sharing": len(sharing), "all": len(sharing) == len(gpus)},
            ))
        if crossing:
            worst = max((best[b][0] for b in crossing), key=_LEVELS.index)
            shown = gpus[gpus["bdf"].isin(crossing)]
            out.append(finding(
                "gpu_nic_cross_cpu",
                f"{host or '?'}: for {len(crossing)} of {len(gpus)} GPU(s) the nearest RDMA NIC is reached only"
                f" {'through the root complex' if worst == 'root_complex' else 'across root buses'}"
                f" ({', '.join(f'{b}->{best[b][1]}' for b in crossing[:3])}): no PCIe switch is shared"
                + ("; the tree is a VM's" if vm else "") + ("" if complete else "; the paste is truncated") + ".",
                pd.concat([shown.head(3), nics.head(2)]),
                loc, {**base, "gpus_cross": len(crossing), "level": worst, "all": len(crossing) == len(gpus)},
            ))
    return out
