"""Common-cause analysis over the fabric graph: when the failing endpoints share one switch, name it."""

from __future__ import annotations

import pandas as pd

from diagnose.evidence.context import Context, finding, primary
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.nccl import COMPLETION, message_extract
from diagnose.models.diagnosis import Finding, Location


@extractor(fabric=True,
           reads=("CudaError", "FabricLink", "FabricNode", "FabricPortState", "FreeText", "IbPort", "KernelEvent",
                  "MessageHit", "Mlx5Event", "NcclWarn", "PeermemEvent", "PgError", "ToolError", "WatchdogTimeout"),
           emits=("errors_share_switch",))
def errors_share_switch(ctx: Context) -> list[Finding]:
    """NCCL transport errors on several hosts whose HCAs all hang off one leaf switch.

    Ten ranks failing behind one leaf are one problem at that leaf (a cable or port on it), not ten.
    """
    fab = ctx.fabric
    msgs = ctx.messages
    if fab is None or msgs.empty:
        return []
    ext = message_extract(ctx, COMPLETION)
    hit = primary(msgs[ext["st"].notna()]).copy()
    if hit.empty:
        return []
    hit["hca"] = ext.loc[hit.index, "hca"]
    endpoints: dict[tuple[str, str | None], pd.DataFrame] = {}
    for (host, hca), grp in hit.groupby([hit["host"].fillna(""), hit["hca"].fillna("")], sort=True):
        if host:
            endpoints[(host, hca or None)] = grp
    if len({h for h, _ in endpoints}) < 2:
        return []
    leaves_per_ep: list[set[str]] = []
    host_hcas: dict[str, list[str]] = {}  # an endpoint without HCA name stands for all of its host's HCAs
    if any(not hca for _h, hca in endpoints):
        for (h, _d), hca_guid in fab.by_host_dev.items():
            host_hcas.setdefault(h, []).append(hca_guid)
    for host, hca in endpoints:
        guids = [fab.hca(host, hca)] if hca else host_hcas.get(host, [])
        leaves: set[str] = set()
        for g in guids:
            if g:
                leaves |= fab.leaf_of(g)
        if not leaves:
            return []  # an endpoint we cannot place: no claim
        leaves_per_ep.append(leaves)
    common = set.intersection(*leaves_per_ep)
    if len(common) != 1:
        return []
    leaf = next(iter(common))
    rows = pd.concat(endpoints.values())
    hosts = sorted({h for h, _ in endpoints})
    return [finding(
        "errors_share_switch",
        f"NCCL transport errors on {len(hosts)} hosts ({', '.join(hosts[:4])}{'...' if len(hosts) > 4 else ''}) "
        f"all go through {fab.name(leaf)}: one fault at that switch, not {len(hosts)}.",
        rows, Location(device=fab.name(leaf)), {"hosts": len(hosts), "endpoints": len(endpoints)},
    )]
