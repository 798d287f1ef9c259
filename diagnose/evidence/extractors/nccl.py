"""What NCCL's own log says about the transport it chose."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from diagnose.evidence.context import Context, finding, hosts_label, primary, refs
from diagnose.evidence.extractors import extractor
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
        mask = _broadcast_test(*_distinct_messages(ctx), lambda t: rx.search(t) is not None)  # type: ignore[arg-type]
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


def _one_host(hosts: pd.Series) -> str | None:
    hs = sorted(set(hosts.dropna().astype(str).tolist()))
    return hs[0] if len(hs) == 1 else None


@extractor
def network_choice(ctx: Context) -> list[Finding]:
    """Which NET transport carries inter-node traffic: IB/RoCE or Socket."""
    out: list[Finding] = []
    ch = ctx.frame("NcclChannel")
    net_ch = ch[ch["transport"] == "NET"] if not ch.empty else ch
    init = ctx.frame("NcclNetInit")
    using = ctx.frame("NcclUsingNetwork")
    sock_parts = []
    ib_parts = []
    if not net_ch.empty:
        sock_parts.append(net_ch[net_ch["net"] == "Socket"])
        ib_parts.append(net_ch[net_ch["net"] == "IB"])
    if not using.empty:
        sock_parts.append(using[using["net"] == "Socket"])
        ib_parts.append(using[using["net"] == "IB"])
    sock = pd.concat([p for p in sock_parts if not p.empty]) if any(not p.empty for p in sock_parts) else pd.DataFrame()
    ib = pd.concat([p for p in ib_parts if not p.empty]) if any(not p.empty for p in ib_parts) else pd.DataFrame()
    if sock.empty and not init.empty and ib.empty:
        # Only the NET init lines: NET/Socket as the data network when no NET/IB init succeeded.
        s = init[init["net"] == "Socket"]
        if not s.empty and init[init["net"] == "IB"].empty:
            sock = s
    comm = ctx.frame("NcclCommInfo")
    single_node = not comm.empty and int(comm["nnodes"].max()) == 1
    if not sock.empty and not single_node:  # a single-node job never touches the network
        hosts = sorted(set(sock["host"].dropna().tolist()))
        out.append(finding(
            "nccl_net_socket",
            f"NCCL carries inter-node traffic over NET/Socket (TCP) on {hosts_label(hosts)}.",
            sock, Location(host=_one_host(sock["host"])),
            {"hosts": len(hosts), "channels": int((sock.get("transport") == "NET").sum()) if "transport" in sock else 0},
        ))
    if not ib.empty:
        hosts = sorted(set(ib["host"].dropna().tolist()))
        gdr = bool(net_ch["gdr"].any()) if not net_ch.empty else False
        out.append(finding(
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


@extractor
def gdr_usage(ctx: Context) -> list[Finding]:
    """GPUDirect RDMA: per host, do the NET/IB channels carry /GDRDMA?"""
    out: list[Finding] = []
    ch = ctx.frame("NcclChannel")
    if not ch.empty:
        net = ch[(ch["transport"] == "NET") & (ch["net"] == "IB")]
        if not net.empty:
            per_host = net.groupby("host", dropna=False)["gdr"].agg(["any", "size"])
            no_gdr_hosts = sorted(str(h) for h in per_host.index[~per_host["any"]])
            gdr_hosts = sorted(str(h) for h in per_host.index[per_host["any"]])
            if no_gdr_hosts:
                rows = net[net["host"].isin(no_gdr_hosts)]
                out.append(finding(
                    "gdr_absent",
                    f"{len(rows)} inter-node NET/IB channel line(s) on {hosts_label(no_gdr_hosts)} show no /GDRDMA: "
                    "NCCL stages network traffic through host memory.",
                    rows, Location(host=no_gdr_hosts[0] if len(no_gdr_hosts) == 1 else None),
                    {"hosts": len(no_gdr_hosts), "channels": len(rows), "all_hosts": not gdr_hosts},
                ))
            if gdr_hosts and not no_gdr_hosts:
                rows = net[net["gdr"]]
                out.append(finding(
                    "gdr_in_use",
                    f"NCCL channel lines show GDRDMA on every host with inter-node channels ({hosts_label(gdr_hosts)}).",
                    rows, attrs={"hosts": len(gdr_hosts)},
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


_COMPLETION = re.compile(
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
}


@extractor
def ib_completion_errors(ctx: Context) -> list[Finding]:
    """NCCL 'Got completion ... with error N' (older) / 'with status=N ... hca mlx5_x' (2.19+):
    one finding per (host, HCA, status); a link-local local GID on RoCE is reported on its own."""
    msgs = ctx.messages
    if msgs.empty:
        return []
    ext = message_extract(ctx, _COMPLETION)
    hit = primary(msgs[ext["st"].notna()]).copy()
    if hit.empty:
        return []
    for col in ("st", "peer", "hca", "lgid"):
        hit[col] = ext.loc[hit.index, col]
    link_layer = _host_link_layers(ctx)
    out = []
    for (host, hca, status), grp in hit.groupby([hit["host"].fillna(""), hit["hca"].fillna(""), "st"], sort=True):
        ll = link_layer.get(host) or link_layer.get("*")
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
        out.append(finding(
            "roce_link_local_gid",
            f"{len(ll_hits)} failed completion(s) name a link-local local GID ({ll_hits['lgid'].iloc[0]}): the queue pairs"
            " use the RoCE v1 / IPv6 link-local GID, which does not route between subnets.",
            ll_hits, Location(host=_one_host(ll_hits["host"])), {"lines": len(ll_hits)},
        ))
    return out


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
                res[host] = "RoCE" if "RoCE" in vals else "IB"
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


@extractor
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


@extractor
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


@extractor
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
        out.append(finding(
            "nccl_ib_disabled_env",
            f"The job sets {', '.join(names)}: NCCL is told not to use IB/RoCE.",
            off, Location(host=_one_host(off["host"])),
        ))
    return out


@extractor
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
