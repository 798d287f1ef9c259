"""What the RoCE GID tables say: per host and HCA port, which entries exist and which of them route.

A GID table comes from ``show_gids``, ``ibv_devinfo -v`` (``GID[ i]:`` lines) or a ``/sys/class/infiniband``
capture (``gids/<i>`` with ``gid_attrs/types/<i>``), all as :class:`~diagnose.parsers._ib.GidEntry` rows; the
``default gid`` that ``ibstatus`` prints is one entry, not a table, and is left out. Each port's table is read the
way NCCL's ``ncclIbGetGidIndex`` (``src/transport/net_ib``, 2.21+) reads it: an entry's family is IPv4 for an
IPv4-mapped GID (``::ffff:a.b.c.d``), IPv6 otherwise; a GID is usable when it is configured (not all-zero, not a
bare ``fe80::``) and not link-local (``fe80::/64``); a missing index is an unconfigured entry.

The facts the ``roce_gid`` extractor (``extractors/nccl.py``) does not state:

* ``gid_table_sparse``: tables that start above index 0 or have holes. In Kubernetes pods whose RoCE netdev is a
  macvlan or an SR-IOV VF, the pod sees only its own entries (indexes 4-7, 6-9, 12-13); NCCL before 2.26 reads the
  RoCE type of the unconfigured entries and fails (``read failed in ncclIbRoceGetVersionNum: Invalid argument``) or
  hangs, releases before 2.21 use index 0 by default, and the ``NCCL_IB_GID_INDEX=3`` of most recipes points at
  nothing.
* ``gid_table_link_local_only``: RoCE ports whose table holds only ``fe80::`` entries (the netdev has no IP
  address): nothing NCCL can pick crosses a router. ``gid_table_empty``: a ``show_gids`` that found no GID at all.
* ``gid_index_differs``: the routable RoCE v2 entry sits at different indexes on the hosts or HCAs of one job, so
  no single ``NCCL_IB_GID_INDEX`` fits them all.
* ``gid_index_partial``: the configured ``NCCL_IB_GID_INDEX`` is a routable v2 entry in some tables and absent,
  link-local or v1 in others (``roce_gid`` judges the index by the first table that has it). When ``roce_gid``
  cannot judge the setting at all (no NCCL log or port dump says the job is on RoCE, the GID table alone does), this
  extractor gives its verdict, ``gid_index_bad`` or ``gid_index_ok``, over every table.
* ``gid_auto_choice``: with ``NCCL_IB_GID_INDEX`` unset on NCCL 2.21+ (a version says so, or an automatic-selection
  setting ``NCCL_IB_ROCE_VERSION_NUM`` / ``NCCL_IB_ADDR_FAMILY`` / ``NCCL_IB_ADDR_RANGE`` is set), the index NCCL's
  own search ends on in each table, and whether that entry routes.
* ``gid_table_ok``: every table read in full starts at 0, has no holes and holds a routable RoCE v2 IPv4 entry at
  the same index.

``failure`` in the attributes: the bundle or the report holds a RoCE GID/QP failure (``ncclIbRoceGetVersionNum``,
``ibv_modify_qp`` / ``ibv_create_ah`` failures, completion error 12); ``exercised``: that, or a GID-selection
setting. A table a paste cut off (:class:`~diagnose.parsers.show_gids.GidTable` without ``n_gids_found``) is not read
for what it lacks past the cut.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field
from functools import cached_property

import pandas as pd

from diagnose.evidence.context import Context, finding, hosts_label, refs
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.messages import hit_frame
from diagnose.evidence.extractors.nccl import message_mask, nccl_link_layer
from diagnose.models.diagnosis import EvidenceRef, Finding, Location

_SETTINGS = ("NCCL_IB_GID_INDEX", "NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE")
_FAILURE = re.compile(
    r"ncclIbRoceGetVersionNum|ibv_modify_qp failed|Unable to modify QP|ibv_create_ah\S* failed|ibv_create_ah\("
    r"|ncclIbRtrQp|completion (?:from peer \S+ )?with (?:error |status=)12\b|status=12\b"
    r"|transport retry counter exceeded|RETRY_EXC_ERR", re.I)
_FAILURE_KINDS = frozenset({"qp_modify_failed", "qp_setup_failed", "gid_index_bad", "roce_link_local_gid"})
_NCCL_VERSION = re.compile(r"\bNCCL(?:[ _-]?version)?[ :v]*(?P<v>2\.\d{1,2}\.\d{1,2})\b", re.I)
_AUTO_SINCE = (2, 21, 0)  # NCCL_IB_GID_INDEX defaults to -1 (search the table) from 2.21.5 (git log -S)
_SPARSE_FIXED = (2, 26, 0)  # ncclIbRoceGetVersionNum tolerates EINVAL (unmapped entries in a container) from 2.26.2


@dataclass
class _Entry:
    index: int
    value: int  # the GID as a 128-bit integer
    kind: str  # "ipv4" (IPv4-mapped), "link_local" (fe80::/64), "ipv6"
    ver: int | str | None  # 1, 2, "ib", None (type not printed)
    row: int  # index of its GidEntry row


@dataclass
class _Port:
    host: str
    device: str
    port: int
    source: str  # the file, which stands for the host when none is named
    entries: dict[int, _Entry] = field(default_factory=dict)
    partial: bool = False  # the paste was cut inside this port's table
    ib: bool = False

    @property
    def machine(self) -> str:
        """The host, or the file when no host is named (two hostless pastes are two machines)."""
        return self.host or f"<{self.source}>"

    @property
    def indices(self) -> list[int]:
        return sorted(self.entries)

    @property
    def starts_above_zero(self) -> bool:
        return bool(self.entries) and min(self.entries) > 0

    @property
    def holes(self) -> bool:
        if self.partial or not self.entries:
            return False
        ix = self.indices
        return len(ix) != ix[-1] - ix[0] + 1

    def routable_v2(self, kind: str | None = None) -> list[int]:
        return [i for i, e in sorted(self.entries.items())
                if e.ver == 2 and e.kind != "link_local" and (kind is None or e.kind == kind)]

    @cached_property
    def preferred(self) -> int | None:
        """The routable RoCE v2 entry an operator would pin: the first IPv4 one, else the first global IPv6 one."""
        v4 = self.routable_v2("ipv4")
        if v4:
            return v4[0]
        v6 = self.routable_v2("ipv6")
        return v6[0] if v6 else None

    @property
    def link_local_only(self) -> bool:
        return bool(self.entries) and all(e.kind == "link_local" for e in self.entries.values())

    def first_rows(self) -> list[int]:
        return [self.entries[self.indices[0]].row] if self.entries else []


def _norm(gid: object) -> int | None:
    """The GID as a 128-bit integer (the eight-group form tools print, or a compressed IPv6 one)."""
    g = str(gid).strip()
    if len(g) == 39 and g.count(":") == 7:
        try:
            return int(g.replace(":", ""), 16)
        except ValueError:
            return None
    try:
        return int(ipaddress.IPv6Address(g))
    except ValueError:
        return None


def _kind(v: int) -> str:
    if v >> 32 == 0xFFFF:
        return "ipv4"
    if v >> 64 == 0xFE80 << 48:
        return "link_local"
    return "ipv6"


def _ver(t: object) -> int | str | None:
    s = str(t or "").strip().lower()
    if not s or s in ("none", "nan"):
        return None
    if s == "ib":
        return "ib"
    if "v2" in s:
        return 2
    if "v1" in s:
        return 1
    return None


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".")[:3])


def _ports(ctx: Context, gids: pd.DataFrame) -> list[_Port]:
    ib_devs: set[tuple[str, str]] = set()
    eth_devs: set[tuple[str, str]] = set()
    ports_df = ctx.frame("IbPort")
    if not ports_df.empty and "link_layer" in ports_df:
        for h, d, ll in zip(ports_df["host"].fillna(""), ports_df["device"], ports_df["link_layer"], strict=True):
            if ll == "InfiniBand":
                ib_devs.add((str(h), str(d)))
            elif ll == "Ethernet":
                eth_devs.add((str(h), str(d)))
    cut: set[tuple[str, str, str, int]] = set()
    tables = ctx.frame("GidTable")
    if not tables.empty:
        for s, h, d, p in zip(tables["source"], tables["host"].fillna(""), tables["cut_device"], tables["cut_port"],
                              strict=True):
            if isinstance(d, str) and d:
                cut.add((str(s), str(h), d, int(p)))
    out: dict[tuple[str, str, int], _Port] = {}  # (host or <file>, device, port)
    cols = [gids[c].tolist() for c in ("source", "host", "device", "port", "index", "gid", "gid_type")]
    vers: dict[object, int | str | None] = {}
    for i, (src, h, d, p, idx, g, t) in enumerate(zip(*cols, strict=True)):
        h = h if isinstance(h, str) else ""
        d = d if isinstance(d, str) else ""
        v = _norm(g)
        if v is None or v == 0 or v == 0xFE80 << 112:
            continue  # unconfigured (all-zero, or a bare fe80::)
        key = (str(h) or f"<{src}>", str(d), int(p))
        port = out.get(key)
        if port is None:
            port = out[key] = _Port(host=str(h), device=key[1], port=key[2], source=str(src))
        ver = vers[t] if t in vers else vers.setdefault(t, _ver(t))
        port.entries.setdefault(int(idx), _Entry(int(idx), v, _kind(v), ver, i))
        if (str(src), str(h), key[1], key[2]) in cut:
            port.partial = True
    for port in out.values():
        port_vers = {e.ver for e in port.entries.values()}
        hd = (port.host, port.device)
        port.ib = hd in ib_devs or (port_vers == {"ib"} and hd not in eth_devs)
    return [out[k] for k in sorted(out)]


def _used_devices(ctx: Context, env: dict[str, tuple[str, pd.DataFrame]]) -> set[str] | None:
    """The HCAs NCCL uses (its NET/IB device list, or NCCL_IB_HCA without ``^``); None when unknown."""
    used: set[str] = set()
    init = ctx.frame("NcclNetInit")
    if not init.empty and "devices" in init:
        for devs in init["devices"]:
            used.update(str(d) for d in devs)
    if used:
        return used
    hca = env.get("NCCL_IB_HCA")
    if hca and not hca[0].startswith("^"):
        names = {x.split(":")[0].strip("= ") for x in hca[0].split(",")}
        return {n for n in names if n} or None
    return None


def _settings(ctx: Context) -> dict[str, tuple[str, pd.DataFrame]]:
    env = ctx.frame("EnvSetting")
    out: dict[str, tuple[str, pd.DataFrame]] = {}
    if env.empty:
        return out
    for name in (*_SETTINGS, "NCCL_IB_HCA"):
        rows = env[env["name"] == name]
        if not rows.empty:
            out[name] = (str(rows.iloc[-1]["value"]).strip(), rows)
    return out


def _failure(ctx: Context) -> pd.DataFrame:
    """Lines of a RoCE GID / queue-pair failure: NCCL's and the catalog's messages, the report's words."""
    parts = []
    msgs = ctx.messages
    if not msgs.empty:
        parts.append(msgs[message_mask(ctx, _FAILURE)][["source", "line", "text", "host"]])
    for kind in (*sorted(_FAILURE_KINDS), "ib_completion_error"):
        hits = hit_frame(ctx, kind)
        if hits.empty:
            continue
        if kind == "ib_completion_error":
            hits = hits[[str(json.loads(str(a)).get("status") or json.loads(str(a)).get("status2")) == "12"
                         for a in hits["attrs"]]]
        parts.append(hits[["source", "line", "text", "host"]])
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=["source", "line", "text", "host"])
    return pd.concat(parts, ignore_index=True).drop_duplicates(["source", "line"])


def _nccl_version(ctx: Context) -> str | None:
    """The oldest NCCL release the evidence or the report names (its init banner, a version line, the symptom)."""
    found: list[str] = []
    nv = ctx.frame("NcclVersion")
    if not nv.empty:
        for v in nv["version"].astype(str):
            m = re.match(r"(\d+\.\d+\.\d+)", v)
            if m:
                found.append(m.group(1))
    msgs = ctx.messages
    if not msgs.empty:
        for t in msgs[message_mask(ctx, _NCCL_VERSION)]["message"].astype(str):
            found += [m.group("v") for m in _NCCL_VERSION.finditer(t)]
    hits = hit_frame(ctx, "component_version")
    if not hits.empty:
        for a in hits["attrs"]:
            d = json.loads(str(a))
            if d.get("component") == "nccl" and re.match(r"\d+\.\d+\.\d+", str(d.get("version", ""))):
                found.append(re.match(r"\d+\.\d+\.\d+", str(d["version"])).group(0))  # type: ignore[union-attr]
    return min(found, key=_vtuple) if found else None


def _nccl_sees_roce(ctx: Context) -> bool:
    """Whether ``roce_gid`` (extractors/nccl.py) judges NCCL_IB_GID_INDEX: NCCL's device list says RoCE, or some
    host's HCA ports are all Ethernet."""
    init = ctx.frame("NcclNetInit")
    if not init.empty and any(vals and nccl_link_layer(vals) == "RoCE"
                              for vals in ([x for x in lls if x] for lls in init["link_layers"].tolist())):
        return True
    ports = ctx.frame("IbPort")
    if ports.empty or "link_layer" not in ports:
        return False
    seen: dict[str, set[str]] = {}
    for h, ll in zip(ports["host"].fillna(""), ports["link_layer"], strict=True):
        if isinstance(ll, str):
            seen.setdefault(str(h), set()).add(ll)
    return any(v == {"Ethernet"} for v in seen.values())


def _rows(gids: pd.DataFrame, rows: list[int]) -> pd.DataFrame:
    return gids.iloc[sorted(set(rows))]


def _ev(gids: pd.DataFrame, rows: list[int], kind: str, extra: pd.DataFrame | None = None,
        limit: int = 8) -> list[EvidenceRef]:
    ev = refs(_rows(gids, rows), kind, limit)
    if extra is not None and not extra.empty:
        ev += refs(extra, kind, 2)
    return ev


def _describe(items: list[tuple[_Port, str]], limit: int = 6) -> str:
    """``host-a: mlx5_0 7, mlx5_1 7; host-b: mlx5_0 3`` (a note after each HCA when given)."""
    groups: dict[str, list[str]] = {}
    for p, note in items[:limit]:
        dev = (p.device or "HCA") + (f" port {p.port}" if p.port != 1 else "")
        groups.setdefault(p.host, []).append(f"{dev} {note}".strip())
    text = "; ".join(f"{h}: {', '.join(ds)}" if h else ", ".join(ds) for h, ds in groups.items())
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _where(ports: list[_Port]) -> Location:
    hosts = {p.host for p in ports if p.host}
    devs = {p.device for p in ports if p.device}
    return Location(host=next(iter(hosts)) if len(hosts) == 1 else None,
                    device=next(iter(devs)) if len(devs) == 1 and len(ports) == 1 else None)


# ------------------------------------------------------------------------------------ NCCL's own search (2.21+)

def _match(e: _Entry | None, af: int, net: ipaddress.IPv4Network | ipaddress.IPv6Network | None) -> bool:
    if net is None:
        return True
    v = e.value if e is not None else 0
    if af == 4:
        return (v & 0xFFFFFFFF) >> (32 - net.prefixlen) == int(net.network_address) >> (32 - net.prefixlen)
    return v >> (128 - net.prefixlen) == int(net.network_address) >> (128 - net.prefixlen)


def _auto_pick(port: _Port, af: int, ver: int, net: ipaddress.IPv4Network | ipaddress.IPv6Network | None) -> int:
    """The index ``ncclIbGetGidIndex`` ends on with NCCL_IB_GID_INDEX unset (``ncclUpdateGidIndex``, NCCL 2.21+):
    start at 0, and for each later index take it when its family is the wanted one and the current one's is not, or
    when it is usable, of the wanted family and subnet, and of the wanted RoCE version where the current one differs
    in version or is not usable. A missing index is an unconfigured (all-zero) entry."""
    def fam(e: _Entry | None) -> int:
        return 4 if e is not None and e.kind == "ipv4" else 6

    def usable(e: _Entry | None) -> bool:
        return e is not None and e.kind != "link_local"

    cur = 0
    for cand in range(1, max(port.entries, default=0) + 1):
        g, c = port.entries.get(cur), port.entries.get(cand)
        if fam(c) != fam(g) and fam(c) == af and _match(c, af, net):
            cur = cand
        elif fam(c) == af and usable(c) and _match(c, af, net):
            vg = g.ver if g is not None else None
            assert c is not None
            if (vg != c.ver or not usable(g)) and c.ver == ver:
                cur = cand
    return cur


def _auto_choice(ports: list[_Port], env: dict[str, tuple[str, pd.DataFrame]], gids: pd.DataFrame,
                 version: str | None) -> Finding | None:
    chosen = {k: env[k] for k in ("NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE") if k in env}
    if not chosen and not (version and _vtuple(version) >= _AUTO_SINCE):
        return None  # older releases use index 0 unless told (the roce_gid extractor's gid_index_unset)
    try:
        ver = int(chosen["NCCL_IB_ROCE_VERSION_NUM"][0]) if "NCCL_IB_ROCE_VERSION_NUM" in chosen else 2
    except ValueError:
        ver = 2
    af = 6 if chosen.get("NCCL_IB_ADDR_FAMILY", ("AF_INET", None))[0].upper() == "AF_INET6" else 4
    net = None
    if "NCCL_IB_ADDR_RANGE" in chosen:
        try:
            net = ipaddress.ip_network(chosen["NCCL_IB_ADDR_RANGE"][0], strict=False)
        except ValueError:
            net = None
        if net is not None and net.version != af:
            net = None
    picks: list[tuple[_Port, str]] = []
    judged: list[_Port] = []
    bad: list[_Port] = []
    rows: list[int] = []
    for p in ports:
        idx = _auto_pick(p, af, ver, net)
        e = p.entries.get(idx)
        ok = e is not None and e.kind != "link_local" and (e.kind == "ipv4") == (af == 4) and e.ver in (ver, None)
        picks.append((p, f"{idx}{' so far (cut)' if p.partial else ''}"))
        if e is not None:
            rows.append(e.row)
        if p.partial and not ok:
            continue  # a cut table's search goes on past the paste (from a routable entry it only moves to another)
        judged.append(p)
        if not ok:
            bad.append(p)
    if not judged:
        return None
    sparse = any(p.starts_above_zero for p in ports)
    said = ", ".join(f"{k}={v[0]}" for k, v in chosen.items()) or f"NCCL {version}, no GID setting"
    if bad:
        summary = (f"With NCCL_IB_GID_INDEX unset ({said}), NCCL's own GID search ends on an entry that does not"
                   f" route on {_describe([(p, '') for p in bad])}; it picks {_describe(picks)}.")
    else:
        summary = (f"With NCCL_IB_GID_INDEX unset ({said}), NCCL's own GID search picks a routable RoCE v{ver}"
                   f" {'IPv4' if af == 4 else 'IPv6'} entry in every table ({_describe(picks)})"
                   + (", but the tables are sparse: NCCL before 2.26 also reads the unconfigured entries" if sparse
                      else "") + ".")
    ev = refs(_rows(gids, rows), "gid_auto_choice", 6)
    for _, df in chosen.values():
        ev += refs(df, "gid_auto_choice", 1)
    return finding("gid_auto_choice", summary, None, _where(bad or ports),
                   {"routable": not bad, "sparse": sparse, "tables": len(judged), "unroutable": len(bad),
                    "settings": said}, evidence=ev)


# ----------------------------------------------------------------------------------------------- the extractor

def _fits(e: _Entry | None) -> bool:
    return e is not None and e.kind != "link_local" and e.ver in (2, None)


def _why(e: _Entry | None, val: str) -> str:
    if e is None:
        return f"no entry at index {val}"
    if e.kind == "link_local":
        return f"index {val} is link-local"
    return f"index {val} is RoCE v1"


@extractor(reads=("CudaError", "EnvSetting", "FreeText", "GidEntry", "GidTable", "IbPort", "KernelEvent",
                  "MessageHit", "Mlx5Event", "NcclNetInit", "NcclVersion", "NcclWarn", "PeermemEvent", "PgError",
                  "ToolError", "WatchdogTimeout"),
           emits=("gid_auto_choice", "gid_index_bad", "gid_index_differs", "gid_index_ok", "gid_index_partial",
                  "gid_table_empty", "gid_table_link_local_only", "gid_table_ok", "gid_table_sparse"))
def gid_table(ctx: Context) -> list[Finding]:
    gids = ctx.frame("GidEntry")
    tables = ctx.frame("GidTable")
    if gids.empty and tables.empty:
        return []
    if not gids.empty:
        # ibstatus prints the port's default GID (index 0) only: one entry, not a table
        gids = gids[~gids["text"].astype(str).str.contains("default gid", case=False, regex=False)]
        gids = gids.sort_values(["source", "line"], kind="stable").reset_index(drop=True)
    out: list[Finding] = []
    env = _settings(ctx)
    fail = _failure(ctx)
    failure = not fail.empty
    version = _nccl_version(ctx)
    fixed = bool(version and _vtuple(version) >= _SPARSE_FIXED)

    if not tables.empty:
        empty = tables[(tables["rows"] == 0) & tables["found"].notna()]
        if not empty.empty:
            hosts = sorted({str(h) for h in empty["host"].dropna()})
            out.append(finding(
                "gid_table_empty",
                f"show_gids found no GID at all{' on ' + hosts_label(hosts) if hosts else ''} (n_gids_found=0): no"
                " RoCE netdev with an address is visible there, so no queue pair has a GID to use.",
                empty, Location(host=hosts[0] if len(hosts) == 1 else None),
                {"hosts": len(hosts), "failure": failure}))
    if gids.empty:
        return out
    ports = [p for p in _ports(ctx, gids) if not p.ib]
    used = _used_devices(ctx, env)
    if used:
        in_use = [p for p in ports if p.device in used or not p.device]
        ports = in_use or ports
    if not ports:
        return out

    # the configured NCCL_IB_GID_INDEX against every table: which fit, which do not
    gid_index = env.get("NCCL_IB_GID_INDEX")
    if gid_index is not None and gid_index[0] == "-1":
        gid_index = None  # -1 is NCCL's own default: search the table
    idx: int | None = None
    fits: list[_Port] = []
    misses: list[_Port] = []
    if gid_index is not None and gid_index[0].isdigit():
        idx = int(gid_index[0])
        fits = [p for p in ports if _fits(p.entries.get(idx))]
        # a cut table says nothing of the indexes past the paste
        misses = [p for p in ports if not _fits(p.entries.get(idx))
                  and not (p.partial and idx not in p.entries and idx > max(p.entries, default=-1))]
    # a GID setting steers NCCL into the table, unless it pins an index that fits every table
    exercised = failure or (any(k in env for k in _SETTINGS) and not (fits and not misses))

    # tables that start above index 0 or have holes
    sparse = [p for p in ports if p.starts_above_zero or p.holes]
    if sparse:
        above = [p for p in sparse if p.starts_above_zero]
        first = min(p.indices[0] for p in sparse)
        desc = _describe([(p, f"{','.join(map(str, p.indices))}{' (cut)' if p.partial else ''}") for p in sparse], 4)
        v2 = sorted({i for p in sparse for i in p.routable_v2()})
        shape = ("start above index 0" if len(above) == len(sparse)
                 else "start above index 0 or have holes" if above else "have holes")
        out.append(finding(
            "gid_table_sparse",
            f"{len(sparse)} GID table(s) {shape} ({desc}"
            + (f"; routable RoCE v2 at {','.join(map(str, v2))}" if v2 else "") + "): what a pod's macvlan/SR-IOV"
            " netdev gives. Index 0 and a fixed NCCL_IB_GID_INDEX=3 point at unconfigured entries, and NCCL before"
            " 2.26 fails or hangs reading their RoCE type" + (f" (NCCL {version})" if version else "") + ".",
            None, _where(sparse),
            {"starts_above_zero": bool(above), "holes": any(p.holes for p in sparse), "first_index": first,
             "tables": len(sparse), "failure": failure, "exercised": exercised, "nccl_fixed_sparse": fixed,
             "nccl_version": version,
             "routable_v2": ",".join(map(str, v2)) or None},
            evidence=_ev(gids, [r for p in sparse for r in p.first_rows()], "gid_table_sparse", fail)))

    # RoCE ports with nothing but link-local entries (a netdev without an IP address)
    ll = [p for p in ports if p.link_local_only and not p.partial]
    if ll:
        for machine in sorted({p.machine for p in ll}):
            mine = [p for p in ll if p.machine == machine]
            every = [p for p in ports if p.machine == machine and not p.partial]
            out.append(finding(
                "gid_table_link_local_only",
                f"{_describe([(p, '') for p in mine], 4)}: the GID table holds only link-local fe80:: entries (no"
                " IPv4-mapped or global IPv6 GID, so the netdev has no address): no GID of it routes between"
                " subnets.",
                None, _where(mine),
                {"tables": len(mine), "all_tables": len(mine) == len(every), "failure": failure,
                 "exercised": exercised},
                evidence=_ev(gids, [e.row for p in mine for e in p.entries.values()], "gid_table_link_local_only",
                             fail)))

    # the routable v2 entry at different indexes across the hosts / HCAs of the job
    pref = {(p.machine, p.device, p.port): p.preferred for p in ports if p.preferred is not None}
    if len(set(pref.values())) > 1:
        by_idx: dict[int, list[_Port]] = {}
        for p in ports:
            if p.preferred is not None:
                by_idx.setdefault(p.preferred, []).append(p)
        hosts_per = {i: {p.machine for p in ps} for i, ps in by_idx.items()}
        across_hosts = len({frozenset(h) for h in hosts_per.values()}) > 1 and all(hosts_per.values())
        desc = "; ".join(f"{i} on {_describe([(p, '') for p in ps], 3)}" for i, ps in sorted(by_idx.items()))
        rows = [p.entries[i].row for i, ps in by_idx.items() for p in ps[:2]]
        out.append(finding(
            "gid_index_differs",
            f"The routable RoCE v2 GID is at different indexes across the job's GID tables ({desc}): no single"
            " NCCL_IB_GID_INDEX fits them all" + (f" (it is set to {gid_index[0]})" if gid_index else "") + ".",
            None, Location(),
            {"indices": ",".join(map(str, sorted(by_idx))), "across_hosts": across_hosts, "tables": len(pref),
             "pinned": gid_index is not None},
            evidence=_ev(gids, rows, "gid_index_differs", gid_index[1] if gid_index else None)))

    # the configured NCCL_IB_GID_INDEX against every table
    if gid_index is not None:
        val = gid_index[0]
        if idx is not None:
            rows = ([p.entries[idx].row for p in ports if idx in p.entries]
                    or [r for p in misses for r in p.first_rows()])
            if fits and misses:
                out.append(finding(
                    "gid_index_partial",
                    f"NCCL_IB_GID_INDEX={val} is a routable RoCE v2 GID on {_describe([(p, '') for p in fits], 3)},"
                    f" but not on {_describe([(p, '(' + _why(p.entries.get(idx), val) + ')') for p in misses], 3)}.",
                    None, _where(misses),
                    {"value": val, "fits": len(fits), "misses": len(misses)},
                    evidence=_ev(gids, rows, "gid_index_partial", gid_index[1])))
            elif not _nccl_sees_roce(ctx):
                if misses:
                    out.append(finding(
                        "gid_index_bad",
                        f"NCCL_IB_GID_INDEX={val}, but in the GID table {_why(misses[0].entries.get(idx), val)} on"
                        f" {_describe([(p, '') for p in misses], 4)}: not a routable RoCE v2 GID.",
                        None, _where(misses), {"value": val, "tables": len(misses), "from_table": True},
                        evidence=_ev(gids, rows, "gid_index_bad", gid_index[1])))
                elif fits:
                    out.append(finding(
                        "gid_index_ok",
                        f"NCCL_IB_GID_INDEX={val} is a routable RoCE v2 GID in every GID table given"
                        f" ({len(fits)} table(s)).",
                        None, _where(fits), {"value": val, "tables": len(fits), "from_table": True},
                        evidence=_ev(gids, rows, "gid_index_ok", gid_index[1])))
    else:
        auto = _auto_choice(ports, env, gids, version)
        if auto is not None:
            out.append(auto)

    # tables that give nothing to fault: complete, from 0, no holes, the same routable v2 IPv4 index everywhere
    whole = [p for p in ports if not p.partial]
    if whole and not sparse and not ll and len(whole) == len(ports):
        v4 = {next(iter(p.routable_v2("ipv4")), None) for p in whole}  # each table's first, or None
        i = next(iter(v4))  # whole is not empty
        if len(v4) == 1 and i is not None:
            hosts = sorted({p.host for p in whole if p.host})
            out.append(finding(
                "gid_table_ok",
                f"{len(whole)} GID table(s){' on ' + hosts_label(hosts) if hosts else ''} start at 0, have no holes"
                f" and hold a routable RoCE v2 IPv4 GID at index {i} on every HCA.",
                None, _where(whole),
                {"index": i, "tables": len(whole), "failure": failure},
                evidence=_ev(gids, [p.entries[i].row for p in whole], "gid_table_ok", limit=4)))
    return out
