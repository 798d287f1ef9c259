"""What NCCL's own log says about the transport it chose."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import cast

import numpy as np
import pandas as pd

from diagnose.evidence.context import MAX_REFS, Context, finding, hosts_label, primary, refs
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.context import fact_patterns, symptom_rows
from diagnose.evidence.extractors.messages import roce_fabric
from diagnose.models.diagnosis import Finding, Location

_VIRTUAL_IF = re.compile(r"^(docker\d*|virbr\d*|veth\w*|lo|br-\w+|cni\d*|flannel[\w.]*|podman\d*)$")


# Big bundles repeat a handful of texts in their large columns (the same dmesg line, setting or interface on
# thousands of hosts), so the helpers below run a test or a regex once per distinct value and broadcast the
# result back to the rows. Other extractor modules use them too.


def _factorize(values: pd.Series) -> tuple[np.ndarray, list[object]]:
    """(code per row, distinct values); code -1 is a missing value."""
    codes, uniques = pd.factorize(values.to_numpy(object))
    return codes, uniques.tolist()


def _broadcast_test(codes: np.ndarray, uniques: list[object], test: Callable[[object], bool]) -> np.ndarray:
    per_value = np.fromiter((bool(test(v)) for v in uniques), dtype=bool, count=len(uniques))
    return np.append(per_value, False)[codes]  # code -1 (missing) -> the False appended


def distinct_mask(values: pd.Series, test: Callable[[object], bool]) -> np.ndarray:
    """``test`` of every non-missing value of ``values`` (False where missing), as a boolean array."""
    return _broadcast_test(*_factorize(values), test)


def distinct_extract(values: pd.Series, rx: re.Pattern[str]) -> pd.DataFrame:
    """``values.str.extract(rx)``."""
    return _broadcast_extract(*_factorize(values), values, rx)


def _broadcast_extract(codes: np.ndarray, uniques: list[object], values: pd.Series, rx: re.Pattern[str]) -> pd.DataFrame:
    per_value = pd.Series([*uniques, None], dtype=values.dtype).str.extract(rx)
    ext = per_value.iloc[np.where(codes < 0, len(uniques), codes)]
    ext.index = values.index
    return ext


def _distinct_messages(ctx: Context) -> tuple[np.ndarray, list[object]]:
    """``ctx.messages["message"]`` factorized once per run for every message pattern."""
    got = ctx.cache.get("messages.distinct")
    if got is None:
        got = ctx.cache["messages.distinct"] = _factorize(ctx.messages["message"])
    return got  # type: ignore[return-value]


def message_mask(ctx: Context, pattern: str | re.Pattern[str], flags: int = 0) -> np.ndarray:
    """Rows of ``ctx.messages`` whose message ``pattern`` finds (``re.search``): the same rows as
    ``msgs["message"].str.contains(pattern, flags=flags, na=False)``, computed once per run and pattern."""
    rx = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, flags)
    key = f"messages.mask:{rx.flags}:{rx.pattern}"
    mask = ctx.cache.get(key)
    if mask is None:
        # the distinct values of the message column: texts
        mask = _broadcast_test(*_distinct_messages(ctx), lambda t: rx.search(cast(str, t)) is not None)
        mask.flags.writeable = False  # shared by every caller
        ctx.cache[key] = mask
    return mask  # type: ignore[return-value]


def message_extract(ctx: Context, rx: re.Pattern[str]) -> pd.DataFrame:
    """``ctx.messages["message"].str.extract(rx)``, computed once per run (callers share the frame and must
    not modify it)."""
    key = f"messages.extract:{rx.flags}:{rx.pattern}"
    ext = ctx.cache.get(key)
    if ext is None:
        ext = ctx.cache[key] = _broadcast_extract(*_distinct_messages(ctx), ctx.messages["message"], rx)
    return ext  # type: ignore[return-value]


# Findings over 100k+ rows (every NET channel line of a large job) cite only the first few of them: the helpers
# below take the rows as masks over their frames, count them and pick the rows to cite without copying the rest.

Rows = list[tuple[pd.DataFrame, np.ndarray]]  # the rows of pd.concat([df[mask] for df, mask in parts])


def _first_positions(df: pd.DataFrame, pos: np.ndarray, limit: int) -> np.ndarray:
    """The first ``limit`` of the rows at positions ``pos`` in (source, line) order, ties in row order (what
    ``refs`` sorts by)."""
    line = df["line"].to_numpy()[pos]
    if line.dtype.kind not in "iu":  # missing or odd line numbers: leave their order to pandas
        keys = df[["source", "line"]].iloc[pos].reset_index(drop=True)
        return pos[keys.sort_values(["source", "line"], kind="stable").index.to_numpy()[:limit]]
    code, uniques = pd.factorize(df["source"].to_numpy(object)[pos])
    # each source's place in sorted order, a missing one (code -1) last
    rank = np.append(np.argsort(np.argsort(uniques, kind="stable")), len(uniques))
    lo = int(line.min())
    key = rank[code] * (int(line.max()) - lo + 1) + (line - lo)
    cut = np.partition(key, limit - 1)[limit - 1]
    cand = np.flatnonzero(key <= cut)
    return pos[cand[np.argsort(key[cand], kind="stable")[:limit]]]


def first_rows(parts: Rows, limit: int = MAX_REFS) -> pd.DataFrame:
    """The rows ``refs`` cites from the concatenation of ``parts``: the first ``limit`` of each part in (source,
    line) order, concatenated (the first ``limit`` of the whole are among them, in the same order)."""
    tops = []
    for df, mask in parts:
        pos = np.flatnonzero(mask)
        tops.append(df.iloc[_first_positions(df, pos, limit) if len(pos) > limit else pos])
    return pd.concat(tops) if len(tops) > 1 else tops[0]


def rows_finding(kind: str, summary: str, parts: Rows, location: Location | None = None,
                 attrs: dict[str, str | int | float | bool | None] | None = None) -> Finding:
    """``finding(kind, summary, pd.concat([df[mask] for df, mask in parts]), location, attrs)``."""
    n = sum(int(np.count_nonzero(mask)) for _, mask in parts)
    ev = refs(first_rows(parts), kind)
    f = finding(kind, summary, None, location, attrs, evidence=ev)
    return f.model_copy(update={"count": n}) if n else f


def part_hosts(parts: Rows) -> list[str]:
    """The distinct known hosts of the rows, sorted."""
    hosts: set[str] = set()
    for df, mask in parts:
        distinct = pd.unique(df["host"].to_numpy(object)[mask])
        hosts.update(distinct[~pd.isna(distinct)].tolist())
    return sorted(hosts)


def _net_lines(ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Masks over NcclChannel: NET lines, NET/IB lines, NET/Socket lines (once per run)."""
    got = ctx.cache.get("nccl.net_lines")
    if got is None:
        ch = ctx.frame("NcclChannel")
        if ch.empty:
            net = ib = sock = np.zeros(len(ch), dtype=bool)
        else:
            net = ch["transport"].to_numpy(object) == "NET"
            kind = ch["net"].to_numpy(object)
            ib, sock = net & (kind == "IB"), net & (kind == "Socket")
        for mask in (net, ib, sock):
            mask.flags.writeable = False  # shared by every caller
        got = ctx.cache["nccl.net_lines"] = (net, ib, sock)
    return got  # type: ignore[return-value]


# beyond the fabric and container facts the context extractor reads off the report: the NIC or RDMA itself named
_HCA_SAID = re.compile(r"\b(?:RDMA|ConnectX(?:-\d)?|mlx5_?\w*|GPUDirect|GDR|HCA)\b", re.I)
_RDMA_TABLES = ("IbPort", "DevNetMap", "Mlx5Event", "GidEntry", "PortCounter", "FabricNode")


def _rdma_expected(ctx: Context) -> bool:
    """Whether anything shows RDMA hardware the job could have used: an HCA port or RDMA device in any capture, a
    communication setting of NCCL's IB transport (or one that turns it off), the report naming InfiniBand/RoCE/an
    HCA, or a container (which hides the host's HCAs unless they are passed in). Sockets are a fallback only where
    there was something to fall back from."""
    if any(not ctx.frame(t).empty for t in _RDMA_TABLES):
        return True
    init = ctx.frame("NcclNetInit")
    if not init.empty and (init["net"].astype(str) == "IB").any():
        return True
    env = ctx.frame("EnvSetting")
    if not env.empty:
        names = env["name"].astype(str)
        if (names.str.startswith("NCCL_IB_") & ~names.isin(["NCCL_IB_DISABLE"])).any() or \
                names.isin(["NCCL_IB_DISABLE", "NCCL_NET"]).any():
            return True  # IB settings, or the transport turned off on purpose: the setting is the question
    hits = ctx.frame("MessageHit")
    if not hits.empty and hits["kind"].astype(str).str.startswith("container_").any():
        return True  # inside a container, an HCA the host has is hidden unless passed in: absence shows nothing
    if not ctx.frame("ContainerFact").empty:
        return True  # a Kubernetes or Compose spec of the job's containers: the same
    sym = symptom_rows(ctx)
    if sym.empty:
        return False
    text = sym["text"].astype(str)
    said = [_HCA_SAID, *fact_patterns("context_fabric", fabric=("ib", "roce", "efa")), *fact_patterns("context_container")]
    return any(bool(text.str.contains(rx).any()) for rx in said)


def _one_host(hosts: pd.Series) -> str | None:
    hs = sorted(set(hosts.dropna().astype(str).tolist()))
    return hs[0] if len(hs) == 1 else None


@extractor(reads=("ContainerFact", "DevNetMap", "EnvSetting", "FabricNode", "FreeText", "GidEntry", "IbPort",
                  "MessageHit", "Mlx5Event", "NcclChannel", "NcclCommInfo", "NcclNetInit", "NcclNetNoDevice",
                  "NcclPluginNote", "NcclUsingNetwork", "PortCounter"),
           emits=("nccl_ib_no_device", "nccl_net_ib", "nccl_net_socket", "socket_only_network", "verbs_unavailable"))
def network_choice(ctx: Context) -> list[Finding]:
    """Which NET transport carries inter-node traffic: IB/RoCE or Socket."""
    out: list[Finding] = []
    ch = ctx.frame("NcclChannel")
    net, ch_ib, ch_sock = _net_lines(ctx)
    init = ctx.frame("NcclNetInit")
    using = ctx.frame("NcclUsingNetwork")
    # the rows as masks (a 4,096-host job has 131k NET/IB channel lines, which the findings count and cite 8 of)
    sock: Rows = []
    ib: Rows = []
    if ch_sock.any():
        sock.append((ch, ch_sock))
    if ch_ib.any():
        ib.append((ch, ch_ib))
    n_channels = int(np.count_nonzero(ch_sock))
    if not using.empty:
        used = using["net"].to_numpy(object)
        if (used == "Socket").any():
            sock.append((using, used == "Socket"))
        if (used == "IB").any():
            ib.append((using, used == "IB"))
    if not sock and not init.empty and not ib:
        # Only the NET init lines: NET/Socket as the data network when no NET/IB init succeeded.
        kind = init["net"].to_numpy(object)
        if (kind == "Socket").any() and not (kind == "IB").any():
            sock.append((init, kind == "Socket"))
    comm = ctx.frame("NcclCommInfo")
    single_node = not comm.empty and int(comm["nnodes"].max()) == 1
    if sock and not single_node:  # a single-node job never touches the network
        hosts = part_hosts(sock)
        out.append(rows_finding(
            "nccl_net_socket",
            f"NCCL carries inter-node traffic over NET/Socket (TCP) on {hosts_label(hosts)}.",
            sock, Location(host=hosts[0] if len(hosts) == 1 else None),
            {"hosts": len(hosts), "channels": n_channels},
        ))
        if not ib and not _rdma_expected(ctx):
            out.append(rows_finding(
                "socket_only_network",
                "Nothing in the bundle or the report shows an RDMA NIC (no HCA port, no NET/IB line on any host, no "
                "NCCL_IB_ setting, no InfiniBand/RoCE named): TCP may be all this cluster has, not a fallback.",
                sock, Location(host=hosts[0] if len(hosts) == 1 else None), {"hosts": len(hosts)},
            ))
    if ib:
        hosts = part_hosts(ib)
        gdr = bool(ch["gdr"][net].any()) if net.any() else False
        out.append(rows_finding(
            "nccl_net_ib",
            f"NCCL uses NET/IB (verbs) on {hosts_label(hosts)}.",
            ib, attrs={"hosts": len(hosts), "gdr_any": gdr},
        ))
    plug = ctx.frame("NcclPluginNote")
    if not plug.empty:
        verbs = plug[plug["category"] == "verbs_unavailable"]
        if not verbs.empty:
            out.append(finding(
                "verbs_unavailable",
                f"NCCL could not load or open the verbs library/devices on {hosts_label(list(verbs['host'].dropna()))}:"
                " no RDMA from inside this process.",
                verbs, Location(host=_one_host(verbs["host"])),
            ))
    nodev = ctx.frame("NcclNetNoDevice")
    if not nodev.empty:
        out.append(finding(
            "nccl_ib_no_device",
            f"NCCL found no IB/RoCE device on {hosts_label(list(nodev['host'].dropna()))}.",
            nodev, Location(host=_one_host(nodev["host"])), {"hosts": int(nodev["host"].nunique())},
        ))
    return out


@extractor(reads=("NcclChannel", "NcclGdrPath", "NcclGdrStatus", "NcclRingsConnected"),
           emits=("gdr_absent", "gdr_disabled_msg", "gdr_in_use", "rings_gdr_off"))
def gdr_usage(ctx: Context) -> list[Finding]:
    """GPUDirect RDMA: per host, do the NET/IB channels carry /GDRDMA?"""
    out: list[Finding] = []
    ch = ctx.frame("NcclChannel")
    _, ib, _ = _net_lines(ctx)
    if ib.any():
        # per host (a missing one too): does any of its NET/IB lines carry GDRDMA, from the distinct hosts
        code, hosts = pd.factorize(ch["host"].to_numpy(object)[ib], use_na_sentinel=False)
        gdr = ch["gdr"][ib].fillna(False).to_numpy(bool)
        with_gdr = np.zeros(len(hosts), dtype=bool)
        with_gdr[code[gdr]] = True
        no_gdr_hosts = sorted(str(h) for h in hosts[~with_gdr])
        gdr_hosts = sorted(str(h) for h in hosts[with_gdr])
        if no_gdr_hosts:
            rows = ib.copy()
            named = set(no_gdr_hosts)  # by name: the rows of a missing host are not among them
            rows[ib] = np.array([not pd.isna(h) and str(h) in named for h in hosts], dtype=bool)[code]
            n = int(np.count_nonzero(rows))
            out.append(rows_finding(
                "gdr_absent",
                f"{n} inter-node NET/IB channel line(s) on {hosts_label(no_gdr_hosts)} show no /GDRDMA: "
                "NCCL stages network traffic through host memory.",
                [(ch, rows)], Location(host=no_gdr_hosts[0] if len(no_gdr_hosts) == 1 else None),
                {"hosts": len(no_gdr_hosts), "channels": n, "all_hosts": not gdr_hosts},
            ))
        if gdr_hosts and not no_gdr_hosts:
            rows = ib.copy()
            rows[ib] = gdr
            out.append(rows_finding(
                "gdr_in_use",
                f"NCCL channel lines show GDRDMA on every host with inter-node channels ({hosts_label(gdr_hosts)}).",
                [(ch, rows)], attrs={"hosts": len(gdr_hosts)},
            ))
    st = ctx.frame("NcclGdrStatus")
    if not st.empty:
        dis = st[~st["enabled"]]
        if not dis.empty:
            out.append(finding(
                "gdr_disabled_msg",
                f"NCCL reports GPU Direct RDMA Disabled for {', '.join(sorted(set(dis['device'])))}.",
                dis, Location(host=_one_host(dis["host"])), {"hcas": int(dis["device"].nunique())},
            ))
    path = ctx.frame("NcclGdrPath")
    if not path.empty:
        dis = path[~path["enabled"]]
        if not dis.empty:
            out.append(finding(
                "gdr_disabled_msg",
                f"NCCL reports GPU Direct RDMA Disabled for {dis['gpu'].nunique()} GPU/HCA pair(s): the GPU-NIC PCIe"
                f" distance exceeds NCCL_NET_GDR_LEVEL ({int(dis['distance'].iloc[0])} > {int(dis['limit'].iloc[0])}).",
                dis, Location(host=_one_host(dis["host"])), {"pairs": len(dis), "by_distance": True},
            ))
    rings = ctx.frame("NcclRingsConnected")
    if not rings.empty and "gdr" in rings:
        g0 = rings[rings["gdr"] == 0]
        if not g0.empty and rings[rings["gdr"] == 1].empty:
            out.append(finding(
                "rings_gdr_off",
                "NCCL connected its rings with GDR 0 ('use ring PXN .. GDR 0').",
                g0, Location(host=_one_host(g0["host"])), {"lines": len(g0)},
            ))
    return out


COMPLETION = re.compile(
    r"completion (?:from peer (?P<peer>\S+?),? )?with (?:error |status=)(?:[A-Z_]+\()?(?P<st>\d+)"
    r"(?:.*?\bhca (?P<hca>[\w.\-]+))?(?:.*?localGid (?P<lgid>[0-9a-fA-F:.]+))?",
    re.I,
)
_STATUS = {
    "12": "IBV_WC_RETRY_EXC_ERR (transport retry counter exceeded)",
    "13": "IBV_WC_RNR_RETRY_EXC_ERR (receiver not ready)",
    "5": "IBV_WC_WR_FLUSH_ERR (queue pair already in error)",
    "4": "IBV_WC_LOC_PROT_ERR (local protection error)",
    "10": "IBV_WC_REM_ACCESS_ERR (remote access error)",
    "9": "IBV_WC_REM_INV_REQ_ERR (remote invalid request)",
    "1": "IBV_WC_LOC_LEN_ERR (local length error)",
}


@extractor(reads=("CudaError", "FreeText", "IbPort", "KernelEvent", "MessageHit", "Mlx5Event", "NcclNetInit",
                  "NcclWarn", "PeermemEvent", "PgError", "ToolError", "WatchdogTimeout"),
           emits=("ib_completion_error", "roce_link_local_gid"))
def ib_completion_errors(ctx: Context) -> list[Finding]:
    """NCCL 'Got completion ... with error N' (older) / 'with status=N ... hca mlx5_x' (2.19+):
    one finding per (host, HCA, status); a link-local local GID on RoCE is reported on its own."""
    msgs = ctx.messages
    if msgs.empty:
        return []
    ext = message_extract(ctx, COMPLETION)
    hit = primary(msgs[ext["st"].notna()]).copy()
    if hit.empty:
        return []
    for col in ("st", "peer", "hca", "lgid"):
        hit[col] = ext.loc[hit.index, col]
    link_layer = _host_link_layers(ctx)
    said_roce: bool | None = None
    out = []
    for (host, hca, status), grp in hit.groupby([hit["host"].fillna(""), hit["hca"].fillna(""), "st"], sort=True):
        ll = link_layer.get(host) or link_layer.get("*")
        if ll is None:  # no device list or port dump for this host: the report may say the fabric is RoCE
            if said_roce is None:
                said_roce = roce_fabric(ctx)
            ll = "RoCE" if said_roce else None
        peers = sorted({str(p) for p in grp["peer"].dropna()})
        out.append(finding(
            "ib_completion_error",
            f"{len(grp)} NCCL work completion(s) with error {status} — {_STATUS.get(status, 'verbs error')}"
            + (f" on {host}" if host else "") + (f" {hca}" if hca else "")
            + (f", peers {', '.join(peers[:3])}" if peers else "") + ".",
            grp, Location(host=host or None, device=hca or None),
            {"status": int(status), "link_layer": ll, "roce": ll == "RoCE", "peers": len(peers)},
        ))
    ll_hits = hit[hit["lgid"].fillna("").str.lower().str.startswith("fe80")]
    if not ll_hits.empty:
        # an unroutable GID loses every packet, so the requester runs out of retries (error 12, 13 for RNR); any
        # other status (a flush after the peer's error, a length or access error) means the packets reached the peer
        unreachable = bool(ll_hits["st"].astype(str).isin(["12", "13"]).any())
        out.append(finding(
            "roce_link_local_gid",
            f"{len(ll_hits)} failed completion(s) name a link-local local GID ({ll_hits['lgid'].iloc[0]}): the queue pairs"
            " use the RoCE v1 / IPv6 link-local GID, which does not route between subnets"
            + ("." if unreachable else
               ", but none of them ran out of retries (error 12): the packets reached the peer."),
            ll_hits, Location(host=_one_host(ll_hits["host"])), {"lines": len(ll_hits), "unreachable": unreachable},
        ))
    return out


def nccl_link_layer(link_layers: list[str]) -> str:
    """'RoCE' or 'IB' for one host from the link layers of the HCAs NCCL lists (``NET/IB : Using [0]mlx5_0:1/IB
    ...``): the majority's, since a DGX lists eight IB HCAs and one RoCE port (storage, management) and its job
    runs over InfiniBand."""
    return "RoCE" if 2 * link_layers.count("RoCE") > len(link_layers) else "IB"


def _host_link_layers(ctx: Context) -> dict[str, str]:
    """host -> 'RoCE'/'IB' from NCCL's NET/IB device list; '*' when all hosts agree (built once per run)."""
    cached = ctx.cache.get("nccl.host_link_layers")
    if cached is not None:
        return dict(cached)  # type: ignore[call-overload]
    init = ctx.frame("NcclNetInit")
    res: dict[str, str] = {}
    if not init.empty:
        for host, lls in zip(init["host"].fillna("").tolist(), init["link_layers"].tolist(), strict=True):
            vals = [x for x in lls if x]
            if vals:
                res[host] = nccl_link_layer(vals)
    ports = ctx.frame("IbPort")
    if not ports.empty and "link_layer" in ports:
        per_host: dict[str, set[object]] = {}
        for host, ll, known in zip(ports["host"].fillna("").tolist(), ports["link_layer"].tolist(),
                                   ports["link_layer"].notna().tolist(), strict=True):
            seen = per_host.setdefault(host, set())
            if known:
                seen.add(ll)
        for host in sorted(per_host):
            if host not in res:
                lls = per_host[host]
                if lls == {"Ethernet"}:
                    res[host] = "RoCE"
                elif "InfiniBand" in lls:
                    res[host] = "IB"
    kinds = set(res.values())
    if len(kinds) == 1:
        res["*"] = kinds.pop()
    ctx.cache["nccl.host_link_layers"] = res
    return dict(res)


_QP_FAIL = re.compile(r"ibv_modify_qp failed|Unable to modify QP|ibv_create_ah failed|ncclIbRtrQp|QP .*? to RTR", re.I)


@extractor(reads=("CudaError", "EnvSetting", "FreeText", "GidEntry", "IbPort", "KernelEvent", "MessageHit",
                  "Mlx5Event", "NcclNetInit", "NcclWarn", "PeermemEvent", "PgError", "ToolError", "WatchdogTimeout"),
           emits=("gid_index_bad", "gid_index_ok", "gid_index_set", "gid_index_unset", "link_layer_ib",
                  "qp_setup_failed", "roce_in_use"))
def roce_gid(ctx: Context) -> list[Finding]:
    """RoCE in use, and what the GID index configuration looks like."""
    out: list[Finding] = []
    lls = _host_link_layers(ctx)
    roce_hosts = sorted(h for h, v in lls.items() if v == "RoCE" and h != "*")
    env = ctx.frame("EnvSetting")
    gid = env[env["name"] == "NCCL_IB_GID_INDEX"] if not env.empty else env
    msgs = ctx.messages
    qp = msgs[message_mask(ctx, _QP_FAIL)] if not msgs.empty else msgs
    if not qp.empty:
        out.append(finding(
            "qp_setup_failed",
            f"NCCL failed to bring a queue pair up ({len(qp)} line(s)): the path to the peer's GID/LID is not usable.",
            qp, Location(host=_one_host(qp["host"])),
            {"roce": bool(roce_hosts) or lls.get("*") == "RoCE"},
        ))
    if not roce_hosts and lls.get("*") != "RoCE":
        if lls and set(v for k, v in lls.items() if k != "*") == {"IB"}:
            init = ctx.frame("NcclNetInit")
            out.append(finding(
                "link_layer_ib",
                "NCCL's HCAs are InfiniBand (not RoCE): GIDs are not used for routing.",
                init if not init.empty else ctx.frame("IbPort").head(4),
            ))
            return out
        if gid.empty or not ctx.frame("GidEntry").empty or not roce_fabric(ctx):
            return out  # (a pin and a GID table without NCCL's device list: the gid_table extractor judges the pin)
        # no NCCL device list, port dump or GID table, but the report says RoCE and the job pins a GID index
    src = ctx.frame("NcclNetInit")
    out.append(finding(
        "roce_in_use",
        f"NCCL runs over RoCE on {hosts_label(roce_hosts) or 'the job hosts'}.",
        src[["RoCE" in t for t in src["link_layers"].tolist()]] if not src.empty else None,
        attrs={"hosts": len(roce_hosts)},
    ))
    gids = ctx.frame("GidEntry")
    if gid.empty:
        env_known = ctx.has("EnvSetting")
        out.append(finding(
            "gid_index_unset",
            "NCCL_IB_GID_INDEX is not set for a RoCE job: NCCL picks a GID by itself (older releases use index 0,"
            " the link-local RoCE v1 GID)." + ("" if env_known else " (no environment dump was given)"),
            None, attrs={"env_collected": env_known},
            evidence=refs(src, "gid_index_unset", 2) if not src.empty else [],
        ))
    else:
        val = str(gid.iloc[-1]["value"]).strip()
        bad = False
        why = ""
        init = ctx.frame("NcclNetInit")
        used: set[str] = set()
        if not init.empty:
            for devs in init["devices"]:
                used.update(devs)
        if not gids.empty and used:
            gids = gids[gids["device"].isin(used)]
        verified = not gids.empty
        if verified:
            sel = gids[gids["index"].astype(str) == val]
            if sel.empty:
                bad, why = True, f"no GID exists at index {val}"
            else:
                g = str(sel.iloc[0]["gid"]).lower()
                t = str(sel.iloc[0]["gid_type"] or "")
                if g.startswith("fe80") or "v1" in t.lower():
                    bad, why = True, f"index {val} is {'link-local ' if g.startswith('fe80') else ''}{t or 'RoCE v1'} ({g})"
        elif val == "0":
            bad, why = True, "index 0 is the link-local RoCE v1 GID on mlx5"
        if bad:
            out.append(finding(
                "gid_index_bad",
                f"NCCL_IB_GID_INDEX={val}, but {why}: not routable across subnets.",
                gid, attrs={"value": val},
            ))
        elif verified:
            out.append(finding(
                "gid_index_ok",
                f"NCCL_IB_GID_INDEX={val} points at a routable RoCE v2 GID in the HCAs' GID table.",
                gid, attrs={"value": val},
            ))
        else:
            out.append(finding(
                "gid_index_set",
                f"NCCL_IB_GID_INDEX={val} is set (no GID table was given to verify it).",
                gid, attrs={"value": val},
            ))
    return out


_SOCK_FAIL = re.compile(
    r"socketPollConnect|Connection refused|No route to host|socketStartConnect|Bootstrap : no socket interface found"
    r"|no socket interface found|Net : Connect to .* failed|bootstrap.*(?:timeout|failed)|Call to connect returned",
    re.I,
)


@extractor(reads=("CudaError", "EnvSetting", "FreeText", "KernelEvent", "MessageHit", "Mlx5Event", "NcclBootstrap",
                  "NcclNetInit", "NcclWarn", "PeermemEvent", "PgError", "ToolError", "WatchdogTimeout"),
           emits=("bootstrap_no_interface", "oob_virtual_interface", "socket_connect_failed", "socket_ifname_set"))
def bootstrap_interface(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    msgs = ctx.messages
    if not msgs.empty:
        noif = msgs[message_mask(ctx, r"no socket interface found|Bootstrap : no socket", re.I)]
        if not noif.empty:
            out.append(finding(
                "bootstrap_no_interface",
                "NCCL found no usable socket interface for bootstrap (NCCL_SOCKET_IFNAME matches nothing).",
                noif, Location(host=_one_host(noif["host"])),
            ))
        fail = msgs[message_mask(ctx, _SOCK_FAIL)]
        fail = fail.drop(noif.index, errors="ignore") if not noif.empty else fail
        if not fail.empty:
            ips = fail["message"].str.extract(r"(\d+\.\d+\.\d+\.\d+)")[0].dropna()
            out.append(finding(
                "socket_connect_failed",
                f"{len(fail)} NCCL socket connect failure(s)"
                + (f" to {', '.join(sorted(set(ips))[:3])}" if not ips.empty else "") + ".",
                fail, Location(host=_one_host(fail["host"])), {"lines": len(fail)},
            ))
    # bootstrap interfaces (the OOB one, and NET/Socket's own device list that names the data interface too)
    boots = []
    for name, col_if, col_ip in (("NcclNetInit", "oob_if", "oob_ip"), ("NcclBootstrap", "interface", "ip")):
        df = ctx.frame(name)
        if not df.empty:
            boots.append(df[[col_if, col_ip, "source", "line", "text", "host"]].rename(columns={col_if: "ifname",
                                                                                               col_ip: "ip"}))
        if name == "NcclNetInit" and not df.empty:
            s = df[df["net"] == "Socket"]
            if not s.empty:
                boots.append(pd.DataFrame({
                    "ifname": s["devices"].map(lambda t: t[0] if t else None), "ip": None,
                    "source": s["source"], "line": s["line"], "text": s["text"], "host": s["host"],
                }))
    # the rows naming a virtual interface (by name, or by a docker/loopback address), in the order above
    virts = [d[d["ifname"].notna().to_numpy()
               & (distinct_mask(d["ifname"], lambda v: _VIRTUAL_IF.match(str(v)) is not None)
                  | distinct_mask(d["ip"], lambda v: str(v).startswith(("172.17.", "127."))))] for d in boots]
    if virts:
        virt = pd.concat(virts, ignore_index=True)
        if not virt.empty:
            ifs = sorted(set(virt["ifname"].astype(str)))
            out.append(finding(
                "oob_virtual_interface",
                f"NCCL bootstraps over {', '.join(ifs)}, a host-local/virtual interface other hosts cannot reach.",
                virt, Location(host=_one_host(virt["host"])), {"interfaces": len(ifs)},
            ))
    env = ctx.frame("EnvSetting")
    if not env.empty:
        ifn = env[env["name"] == "NCCL_SOCKET_IFNAME"]
        if not ifn.empty:
            out.append(finding(
                "socket_ifname_set",
                f"NCCL_SOCKET_IFNAME={ifn.iloc[-1]['value']}.", ifn, attrs={"value": str(ifn.iloc[-1]["value"])},
            ))
    return out


@extractor(reads=("EnvSetting",),
           emits=("nccl_ib_disabled_env",))
def nccl_config(ctx: Context) -> list[Finding]:
    """Settings that force NCCL off the RDMA path."""
    env = ctx.frame("EnvSetting")
    if env.empty:
        return []
    out = []
    env = env[env["name"].isin(["NCCL_IB_DISABLE", "NCCL_NET"])]
    off = env[((env["name"] == "NCCL_IB_DISABLE") & (env["value"].astype(str).str.strip() == "1"))
              | ((env["name"] == "NCCL_NET") & (env["value"].astype(str).str.strip("'\" ").str.lower() == "socket"))]
    if not off.empty:
        names = sorted({f"{n}={v}" for n, v in zip(off["name"], off["value"], strict=True)})
        from diagnose.evidence.extractors.stack import WORKAROUND

        sym = off[off["origin"] == "symptom"]
        # "works with NCCL_IB_DISABLE=1": the failing run used IB, and the setting is what avoids the failure
        workaround = bool(len(sym) == len(off) and sym["text"].astype(str).str.contains(WORKAROUND).any())
        out.append(finding(
            "nccl_ib_disabled_env",
            f"The job sets {', '.join(names)}: NCCL is told not to use IB/RoCE." if not workaround else
            f"The report says {', '.join(names)} avoids the failure: the failing run used the RDMA path.",
            off, Location(host=_one_host(off["host"])), {"workaround": workaround},
        ))
    return out


# NCCL's device and interface lists: one '^' (exclude) and/or '=' (exact names) prefix for the whole list, then
# names (with ':port' for HCAs) separated by commas (src/misc/utils.cc parseStringList / matchIfList; env.html)
_DEVICE_LISTS = ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_NET_DEVICES")


def _list_defects(value: str) -> list[str]:
    """What in a device list NCCL does not read the way it reads: a prefix repeated on a later entry (it becomes
    part of a name that matches nothing), blanks inside a name, empty entries."""
    body = value.lstrip("^").lstrip("=")
    out = []
    for i, item in enumerate(body.split(",")):
        if i and item[:1] in ("^", "="):
            out.append(f"'{item}' repeats the list's prefix ('^'/'=' apply once, to the whole list): NCCL reads it as"
                       " a device named so, which matches nothing")
        elif item != item.strip():
            out.append(f"'{item}' holds blanks, which NCCL keeps in the name")
        elif not item and value.strip():
            out.append("an empty entry")
    return out


@extractor(reads=("EnvSetting",),
           emits=("nccl_device_list_malformed",))
def device_list_syntax(ctx: Context) -> list[Finding]:
    """NCCL_IB_HCA / NCCL_SOCKET_IFNAME written so that NCCL reads something else than meant
    (``^=mlx5_8,^=mlx5_14`` excludes mlx5_8 only)."""
    env = ctx.frame("EnvSetting")
    if env.empty:
        return []
    out = []
    for name in _DEVICE_LISTS:
        rows = env[env["name"] == name]
        if rows.empty:
            continue
        value = str(rows.iloc[-1]["value"]).strip().strip("'\"")
        defects = _list_defects(value)
        if defects:
            out.append(finding(
                "nccl_device_list_malformed",
                f"{name}={value}: {'; '.join(defects[:2])}.", rows.tail(1),
                attrs={"name": name, "defects": len(defects), "exclude": value.startswith("^")}))
    return out


@extractor(reads=("EnvSetting", "IbPort"),
           emits=("ib_hca_not_present",))
def ib_hca_vs_hardware(ctx: Context) -> list[Finding]:
    """NCCL_IB_HCA against the HCAs the hosts really have: a name that matches no device."""
    env = ctx.frame("EnvSetting")
    ports = ctx.frame("IbPort")
    if env.empty or ports.empty:
        return []
    hca = env[env["name"] == "NCCL_IB_HCA"]
    if hca.empty:
        return []
    value = str(hca.iloc[-1]["value"]).strip().strip("'\"")
    exclude = value.startswith("^")
    exact = value.lstrip("^").startswith("=")
    names = [v.split(":")[0].lstrip("=^") for v in value.lstrip("^=").split(",") if v.strip()]
    present = set(ports["device"].astype(str).tolist())
    missing = [n for n in names if n and not any(d == n or (not exact and d.startswith(n)) for d in present)]
    if exclude or not missing:
        return []
    return [finding(
        "ib_hca_not_present",
        f"NCCL_IB_HCA={value} names {', '.join(missing)}, which no host in the bundle has "
        f"(HCAs seen: {', '.join(sorted(present)[:8])}).",
        hca.tail(1), attrs={"missing": len(missing), "listed": len(names)},
    )]
