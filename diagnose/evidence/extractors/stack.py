"""The GPU-side communication stack: versions across ranks, NCCL transport overrides, NVLink health and
GPU clock events.

* versions: NCCL per process (``NCCL version 2.21.5+cuda12.4``), NCCL's own ``Mismatched NCCL version detected``
  WARN, GPU driver and its CUDA version per host (nvidia-smi), CUDA errors 35/803/804 (driver too old), net-plugin
  API fallbacks;
* intra-node paths: NCCL environment overrides (P2P/SHM/NVLS/ALGO/PROTO/CollNet) and the transports the channel
  lines actually show between GPUs of one host;
* NVLink: per-GPU inactive links (``nvidia-smi nvlink -s``), link error counters (``nvlink -e``), uneven ``NV#``
  cells in ``nvidia-smi topo -m`` and DCGM NVLink incidents;
* clocks: HW/thermal/power-brake clock event reasons (``nvidia-smi -q``), GPU temperatures against their peers
  and DCGM thermal/power incidents, tied to the NCCL rank on that GPU when the logs allow it.

Every finding aggregates per host or per GPU; healthy data gives at most one summary finding per topic.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd

from diagnose.evidence.context import Context, finding, hosts_label, primary, refs, sval
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.nccl import distinct_extract, message_mask
from diagnose.models.diagnosis import Finding, Location

# ----------------------------------------------------------------------------------------------- helpers

_VER = re.compile(r"^(?P<base>\d+\.\d+\.\d+)(?:[-.]\d+)?(?:\+cuda(?P<cuda>\d+\.\d+))?")
_MISMATCH = re.compile(
    r"Mismatched NCCL version detected\s*:\s*rank (?P<r1>\d+) version (?P<v1>\d+) rank (?P<r2>\d+) version (?P<v2>\d+)"
)
_TRUNCATED = re.compile(r"Message truncated : received (?P<got>\d+) bytes instead of (?P<want>\d+)")
_ECHO_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)")
_DRIVER_TOO_OLD = re.compile(
    r"driver version is insufficient for CUDA runtime version|unsupported display driver\s*/\s*cuda driver combination"
    r"|cudaErrorInsufficientDriver|cudaErrorSystemDriverMismatch|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"
    r"|forward compatibility was attempted on non supported HW|cudaErrorCompatNotSupportedOnDevice"
    r"|CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE|\b(?:CUDA )?error (?:35|803|804)\b",
    re.I,
)
_PLUGIN_FALLBACK = re.compile(r"(?:Failed to find|Could not find:?)\s+nccl(?P<kind>Net|CollNet)Plugin_v(?P<want>\d+)")
_PLUGIN_LOADED = re.compile(r"Loaded (?:net|coll) plugin (?P<name>.+?) \(v(?P<v>\d+)\)")


def _hk(df: pd.DataFrame) -> pd.Series:
    """Host key: the host, else '' (one unknown host)."""
    return df["host"].fillna("").astype(str) if "host" in df else pd.Series([""] * len(df), index=df.index)


def _one(values: object) -> str | None:
    vs = sorted({str(v) for v in values if v})  # type: ignore[attr-defined]
    return vs[0] if len(vs) == 1 else None


def _code_to_version(code: int) -> str:
    """NCCL_VERSION_CODE -> 'x.y.z' (2.9+: x*10000 + y*100 + z; older: x*1000 + y*100 + z)."""
    if code >= 10000:
        return f"{code // 10000}.{(code % 10000) // 100}.{code % 100}"
    return f"{code // 1000}.{(code % 1000) // 100}.{code % 100}"


def _vtuple(v: str | None) -> tuple[int, ...]:
    if not v:
        return ()
    return tuple(int(x) for x in re.findall(r"\d+", v))


@functools.lru_cache(maxsize=4096)  # a job repeats the same few busIds on every host
def _busid_to_pci(b: object) -> str | None:
    """NCCL's busId (``2a000``, ``0000:2a:00.0``) -> ``dddd:bb:dd``."""
    s = sval(b)
    if not s:
        return None
    s = s.strip().lower()
    m = re.match(r"^(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.[0-7])?$", s)
    if m:
        return f"{(m.group(1) or '0').rjust(4, '0')[-4:]}:{m.group(2).rjust(2, '0')}:{m.group(3).rjust(2, '0')}"
    if re.fullmatch(r"[0-9a-f]+", s) and len(s) >= 4:
        h = s.rjust(9, "0")
        return f"{h[:-5].rjust(4, '0')[-4:]}:{h[-5:-3]}:{h[-3:-1]}"
    return None


def _rank_map(ctx: Context) -> pd.DataFrame:
    """NCCL ranks: comm, rank, host, pid, pci of the GPU (from the ``Init START/COMPLETE`` lines).

    Built once per run (several extractors use it); callers must not modify the frame.
    """
    cached = ctx.cache.get("stack.rank_map")
    if cached is not None:
        return cached  # type: ignore[return-value]
    ir = ctx.frame("NcclInitRank")
    if ir.empty:
        d = pd.DataFrame(columns=["comm_id", "rank", "host", "pid", "pci"])
    else:
        d = ir[["comm_id", "rank", "host", "pid", "bus_id"]].drop_duplicates(["comm_id", "rank", "host", "pid"]).copy()
        d["host"] = d["host"].fillna("").astype(str)
        d["pci"] = d["bus_id"].map(_busid_to_pci)
        d = d.drop(columns=["bus_id"])
    ctx.cache["stack.rank_map"] = d
    return d


_NVLINK_PRODUCT = re.compile(r"SXM|HBM3|H100 NVL|H200|B200|B300|GB200|GB300|GH200", re.I)
_NVSWITCH_PRODUCT = re.compile(r"SXM|HBM3|H200|B200|B300", re.I)


def _gpu_products(ctx: Context) -> pd.DataFrame:
    """host, pci, index, name, uuid of every GPU the bundle shows (nvidia-smi, nvidia-smi -q, nccl-tests).

    Built once per run (every GPU label looks it up); callers must not modify the frame.
    """
    cached = ctx.cache.get("stack.gpu_products")
    if cached is None:
        cached = ctx.cache["stack.gpu_products"] = _collect_gpu_products(ctx)
    return cached  # type: ignore[return-value]


def _collect_gpu_products(ctx: Context) -> pd.DataFrame:
    parts = []
    gs = ctx.frame("GpuSummary")
    if not gs.empty:
        parts.append(pd.DataFrame({"host": _hk(gs), "pci": gs["bus_id"], "index": gs["index"], "name": gs["name"],
                                   "uuid": None}))
    gi = ctx.frame("GpuInfo")
    if not gi.empty:
        # nvidia-smi lists GPUs in PCI bus order, which is also the order of its indices
        g = gi.sort_values(["source", "line"])
        idx = g.groupby([_hk(g), g["source"]]).cumcount()
        parts.append(pd.DataFrame({"host": _hk(g), "pci": g["pci"], "index": idx, "name": g["product"],
                                   "uuid": g["uuid"]}))
    nt = ctx.frame("NcclTestsRank")
    if not nt.empty and "bus" in nt:
        parts.append(pd.DataFrame({"host": _hk(nt), "pci": nt["bus"], "index": nt["device"], "name": nt["gpu_name"],
                                   "uuid": None}))
    if not parts:
        return pd.DataFrame(columns=["host", "pci", "index", "name", "uuid"])
    return pd.concat(parts, ignore_index=True)


def _fabric(ctx: Context) -> dict[str, tuple[bool, bool]]:
    """host -> (NVLink seen, NVSwitch seen); key '*' when the evidence names no host."""
    out: dict[str, tuple[bool, bool]] = {}

    def mark(h: str, nvl: bool, nvs: bool) -> None:
        a, b = out.get(h or "*", (False, False))
        out[h or "*"] = (a or nvl, b or nvs)

    # one vectorised pass per source (a job's evidence can hold these tables for thousands of hosts)
    te = ctx.frame("TopoEntry")
    if not te.empty:
        gg = te[te["row"].str.startswith("GPU") & te["col"].str.startswith("GPU") & (te["row"] != te["col"])]
        if not gg.empty:
            g = pd.DataFrame({"h": _hk(gg).astype(str).to_numpy(), "nv": gg["relation"].str.match(r"^NV\d+$").to_numpy(),
                              "row": gg["row"].to_numpy(), "col": gg["col"].to_numpy()})
            per = g.groupby("h", sort=True).agg(any_nv=("nv", "any"), all_nv=("nv", "all"))
            gpus = pd.concat([g[["h", "row"]].rename(columns={"row": "gpu"}), g[["h", "col"]].rename(columns={"col": "gpu"})])
            per["gpus"] = gpus.groupby("h")["gpu"].nunique()
            for h, all_nv, n in zip(per.index[per["any_nv"]], per["all_nv"][per["any_nv"]], per["gpus"][per["any_nv"]],
                                    strict=True):
                mark(str(h), True, bool(all_nv) and int(n) >= 8)
    ns = ctx.frame("NvlinkStatus")
    if not ns.empty:
        per = pd.DataFrame({"h": _hk(ns).astype(str).to_numpy(), "active": ns["active"].astype(bool).to_numpy(),
                            "gpu": ns["gpu"].to_numpy()}).groupby("h", sort=True).agg(
            active=("active", "any"), gpus=("gpu", "nunique"))
        for h, n in zip(per.index[per["active"]], per["gpus"][per["active"]], strict=True):
            mark(str(h), True, int(n) >= 8)
    fm = ctx.frame("FmEvent")
    if not fm.empty:
        for h in set(_hk(fm)):
            mark(str(h), True, True)
    prod = _gpu_products(ctx)
    if not prod.empty:
        names = prod["name"].astype(object).where(prod["name"].notna(), "").astype(str)
        per = pd.DataFrame({"h": prod["host"].astype(str).to_numpy(),
                            "nvl": names.str.contains(_NVLINK_PRODUCT).to_numpy(),
                            "nvs": names.str.contains(_NVSWITCH_PRODUCT).to_numpy(),
                            "pci": prod["pci"].to_numpy(), "index": prod["index"].to_numpy()}).groupby("h", sort=True).agg(
            nvl=("nvl", "any"), nvs=("nvs", "any"), pci=("pci", "nunique"), index=("index", "nunique"))
        per = per[per["nvl"]]
        for h, nvs, n_pci, n_index in zip(per.index.tolist(), per["nvs"].tolist(), per["pci"].tolist(),
                                          per["index"].tolist(), strict=True):
            mark(str(h), True, bool(nvs) and max(int(n_pci), int(n_index)) >= 8)
    return out


def _fabric_of(fab: dict[str, tuple[bool, bool]], host: str) -> tuple[bool, bool]:
    if host in fab:
        return fab[host]
    if "*" in fab:
        return fab["*"]
    vals = list(fab.values())
    if vals and all(v == vals[0] for v in vals):
        return vals[0]
    return False, False


def _gpu_label(ctx: Context, host: str, index: int | None = None, uuid: str | None = None) -> str | None:
    """The PCI address of GPU ``index``/``uuid`` on ``host`` when nvidia-smi shows it, else ``GPU<index>``."""
    prod = _gpu_products(ctx)
    if not prod.empty:
        on = prod[prod["host"] == host] if (prod["host"] == host).any() else prod[prod["host"] == ""]
        if uuid:
            hit = on[on["uuid"] == uuid]["pci"].dropna()
            if not hit.empty:
                return str(hit.iloc[0])
        if index is not None:
            idx = pd.to_numeric(on["index"], errors="coerce")
            hit = on[idx == int(index)]["pci"].dropna()
            if not hit.empty:
                return str(hit.iloc[0])
    return f"GPU{index}" if index is not None else None


def _dcgm_gpu(ctx: Context, host: str | None, ents: list[str]) -> str | None:
    """DCGM's entity ``GPU3`` as the PCI address nvidia-smi gives GPU 3, when exactly one GPU is named."""
    gpus = [e for e in ents if re.fullmatch(r"GPU\d+", e)]
    if len(ents) != 1 or len(gpus) != 1:
        return None
    return _gpu_label(ctx, host or "", int(gpus[0][3:]))


# ----------------------------------------------------------------------------------------------- versions


@extractor(reads=("CudaError", "FreeText", "GpuInfo", "GpuSummary", "KernelEvent", "MessageHit", "Mlx5Event",
                  "NcclInitRank", "NcclPluginNote", "NcclVersion", "NcclWarn", "PeermemEvent", "PgError", "ToolError",
                  "WatchdogTimeout"),
           emits=("comm_stack_versions", "cuda_driver_too_old", "driver_cuda_older_than_nccl",
                  "gpu_driver_versions_differ", "nccl_bootstrap_size_mismatch", "nccl_version_mismatch_warn",
                  "nccl_versions_differ", "net_plugin_api_fallback"))
def stack_versions(ctx: Context) -> list[Finding]:
    """NCCL / driver / CUDA versions per host and whether they fit together."""
    out: list[Finding] = []
    ranks = _rank_map(ctx)

    # NCCL version per process: the INFO line (every process at INFO since 2.19, rank 0 otherwise) and
    # PyTorch's echo of its own NCCL version in DistBackendError texts.
    parts = []
    nv = ctx.frame("NcclVersion")
    if not nv.empty:
        d = nv[["source", "line", "text", "host", "pid", "version"]].copy()
        parts.append(d)
    msgs = ctx.messages
    if not msgs.empty:
        echo = msgs[msgs["origin"] == "pytorch"]
        if not echo.empty:
            ext = echo["message"].str.extract(_ECHO_VERSION)
            e = echo[ext["v"].notna()].copy()
            if not e.empty:
                e["version"] = ext.loc[e.index, "v"]
                e["pid"] = None
                parts.append(e[["source", "line", "text", "host", "pid", "version"]])
    vers = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    nccl_cuda: dict[str, str] = {}
    nccl_single: str | None = None
    n_nccl = 0
    nccl_hosts = 0
    if not vers.empty:
        ext = distinct_extract(vers["version"].astype(str), _VER)
        vers = vers[ext["base"].notna()].copy()
        vers["base"] = ext.loc[vers.index, "base"]
        vers["cuda"] = ext.loc[vers.index, "cuda"]
        vers["hk"] = _hk(vers)
        n_nccl = vers["base"].nunique()
        nccl_hosts = vers["hk"].nunique()
        nccl_single = _one(vers["base"])
        # per host, the CUDA of its first version line that names one
        first_cuda = vers["cuda"].dropna().groupby(vers["hk"]).first()
        nccl_cuda = {str(h): str(cu) for h, cu in first_cuda.items()}
        if n_nccl > 1:
            by_ver = vers.groupby("base")["hk"].agg(lambda s: sorted(set(s)))
            counts = vers.groupby("base")["hk"].nunique().sort_values(kind="stable")
            minority = str(counts.index[0])
            # a tie (one host each, half the ranks each) names no culprit
            odd_hosts = by_ver[minority] if counts.iloc[0] < counts.iloc[1] else []
            same_comm = False
            if not ranks.empty and "pid" in vers:
                j = vers.dropna(subset=["pid"]).merge(ranks, left_on=["hk", "pid"], right_on=["host", "pid"])
                if not j.empty:
                    same_comm = bool((j.groupby("comm_id")["base"].nunique() > 1).any())
            rows = vers.sort_values(["source", "line"]).drop_duplicates(["hk", "base"])
            versions = ", ".join(sorted(set(vers["base"]), key=_vtuple))
            out.append(finding(
                "nccl_versions_differ",
                f"Processes of this job load different NCCL versions ({versions})"
                + (f": {minority} only on {hosts_label(odd_hosts)}" if odd_hosts and odd_hosts[0] else "")
                + (", inside one communicator" if same_comm else "") + ".",
                rows, Location(host=odd_hosts[0] if len(odd_hosts) == 1 and odd_hosts[0] else None),
                {"versions": versions, "n_versions": n_nccl, "hosts": nccl_hosts, "same_comm": same_comm,
                 "minority": minority if odd_hosts else None},
            ))

    # NCCL's own check (init.cc): every rank compares its version with every peer's
    if not msgs.empty:
        hit = primary(msgs[message_mask(ctx, "Mismatched NCCL version detected")])
        if not hit.empty:
            ext = hit["message"].str.extract(_MISMATCH)
            rank_ver: dict[int, int] = {}
            for r1, v1, r2, v2 in ext.dropna().itertuples(index=False):
                rank_ver[int(r1)] = int(v1)
                rank_ver[int(r2)] = int(v2)
            codes = sorted(set(rank_ver.values()))
            odd_host = None
            if len(codes) > 1:
                cnt = pd.Series(list(rank_ver.values())).value_counts()
                odd = int(cnt.index[-1]) if cnt.iloc[-1] < cnt.iloc[0] else None
                if odd is not None and not ranks.empty:
                    odd_ranks = [r for r, v in rank_ver.items() if v == odd]
                    oh = sorted(set(ranks[ranks["rank"].isin(odd_ranks)]["host"]) - {""})
                    odd_host = oh[0] if len(oh) == 1 else None
            vtxt = " vs ".join(_code_to_version(c) for c in codes)
            out.append(finding(
                "nccl_version_mismatch_warn",
                f"NCCL refused to build the communicator: 'Mismatched NCCL version detected' ({len(hit)} line(s)"
                + (f", {vtxt}" if vtxt else "") + ").",
                hit, Location(host=odd_host or _one(hit["host"].dropna())),
                {"versions": vtxt or None, "lines": len(hit)},
            ))
        tr = primary(msgs[message_mask(ctx, "Message truncated : received")])
        if not tr.empty:
            ext = tr["message"].str.extract(_TRUNCATED)
            out.append(finding(
                "nccl_bootstrap_size_mismatch",
                f"NCCL's bootstrap received a larger message than it expected ({len(tr)} line(s), e.g. "
                f"{ext['got'].iloc[0]} bytes instead of {ext['want'].iloc[0]}): the ranks disagree on a structure size.",
                tr, Location(host=_one(tr["host"].dropna())),
                {"lines": len(tr), "received": int(ext["got"].iloc[0]) if pd.notna(ext["got"].iloc[0]) else None,
                 "expected": int(ext["want"].iloc[0]) if pd.notna(ext["want"].iloc[0]) else None},
            ))
        bad = primary(msgs[message_mask(ctx, _DRIVER_TOO_OLD)])
        if not bad.empty:
            out.append(finding(
                "cuda_driver_too_old",
                f"CUDA reports a driver too old for the CUDA runtime in use ({len(bad)} line(s)): "
                f"{str(bad.iloc[0]['message']).strip()[:100]}",
                bad, Location(host=_one(bad["host"].dropna())), {"lines": len(bad)},
            ))

    # GPU driver per host (nvidia-smi and nvidia-smi -q)
    dparts = []
    for name in ("GpuSummary", "GpuInfo"):
        df = ctx.frame(name)
        if not df.empty:
            dparts.append(df[["source", "line", "text", "host", "driver_version", "cuda_version"]])
    drv = pd.concat(dparts, ignore_index=True) if dparts else pd.DataFrame()
    driver_single: str | None = None
    n_drv = 0
    drv_hosts = 0
    drv_cuda: dict[str, str] = {}
    if not drv.empty:
        drv = drv[drv["driver_version"].notna()].copy()
    if not drv.empty:
        drv["hk"] = _hk(drv)
        n_drv = drv["driver_version"].nunique()
        drv_hosts = drv["hk"].nunique()
        driver_single = _one(drv["driver_version"])
        first_cuda = drv["cuda_version"].dropna().groupby(drv["hk"]).first()
        drv_cuda = {str(h): str(cu) for h, cu in first_cuda.items()}
        if n_drv > 1:
            per = drv.groupby("driver_version")["hk"].agg(lambda s: sorted(set(s)))
            counts = drv.groupby("driver_version")["hk"].nunique().sort_values(kind="stable")
            minority = str(counts.index[0])
            odd_hosts = per[minority] if counts.iloc[0] < counts.iloc[1] else []
            branches = {str(v).split(".")[0] for v in drv["driver_version"]}
            rows = drv.sort_values(["source", "line"]).drop_duplicates(["hk", "driver_version"])
            versions = ", ".join(sorted(set(drv["driver_version"]), key=_vtuple))
            out.append(finding(
                "gpu_driver_versions_differ",
                f"Hosts run different GPU drivers ({versions})"
                + (f": {minority} only on {hosts_label(odd_hosts)}" if odd_hosts and odd_hosts[0] else "")
                + (" (different driver branches)" if len(branches) > 1 else " (same branch, different releases)") + ".",
                rows, Location(host=odd_hosts[0] if len(odd_hosts) == 1 and odd_hosts[0] else None),
                {"versions": versions, "n_versions": n_drv, "branches_differ": len(branches) > 1,
                 "hosts": drv_hosts, "minority": minority if odd_hosts else None},
            ))

    # driver's CUDA version (nvidia-smi 'CUDA Version') below the CUDA NCCL was built with
    if nccl_cuda and drv_cuda:
        fallback = drv_cuda.get("") or _one(drv_cuda.values())
        for h, ncu in sorted(nccl_cuda.items()):
            dcu = drv_cuda.get(h) or fallback
            if not dcu:
                continue
            if _vtuple(dcu) < _vtuple(ncu):
                major_gap = _vtuple(dcu)[:1] < _vtuple(ncu)[:1]
                ev = vers[(vers["hk"] == h) & (vers["cuda"] == ncu)].head(1)
                dv = drv[(drv["hk"] == h) | (drv["hk"] == "")].head(1) if not drv.empty else drv
                out.append(finding(
                    "driver_cuda_older_than_nccl",
                    f"NCCL{' on ' + h if h else ''} was built for CUDA {ncu} but the driver supports CUDA {dcu}"
                    + (" (older major version: not supported)" if major_gap else
                       " (minor-version compatibility: runs, without features newer drivers add)") + ".",
                    None, Location(host=h or None),
                    {"nccl_cuda": ncu, "driver_cuda": dcu, "major_gap": major_gap},
                    evidence=refs(ev, "driver_cuda_older_than_nccl", 1) + refs(dv, "driver_cuda_older_than_nccl", 1),
                ))

    # net plugin built for an older plugin API than this NCCL looks for
    pl = ctx.frame("NcclPluginNote")
    if not pl.empty:
        fb = pl[distinct_extract(pl["message"].astype(str), _PLUGIN_FALLBACK)["want"].notna()]
        if not fb.empty:
            want = fb["message"].str.extract(_PLUGIN_FALLBACK)["want"].dropna().astype(int)
            loaded = distinct_extract(pl["message"].astype(str), _PLUGIN_LOADED)
            lv = loaded["v"].dropna().astype(int)
            out.append(finding(
                "net_plugin_api_fallback",
                f"The NCCL net plugin does not implement the plugin API v{int(want.max())} this NCCL looks for"
                + (f"; NCCL fell back to v{int(lv.min())}" if not lv.empty else "") + ".",
                fb, Location(host=_one(fb["host"].dropna())),
                {"wanted": int(want.max()), "loaded": int(lv.min()) if not lv.empty else None},
            ))

    if n_nccl or n_drv:
        drv_branch = int(driver_single.split(".")[0]) if driver_single and driver_single.split(".")[0].isdigit() else None
        ev = (vers.sort_values(["source", "line"]).drop_duplicates("hk").head(2) if n_nccl else pd.DataFrame())
        ev2 = (drv.sort_values(["source", "line"]).drop_duplicates("hk").head(2) if n_drv else pd.DataFrame())
        out.append(finding(
            "comm_stack_versions",
            "Versions seen: "
            + (f"NCCL {nccl_single} on {nccl_hosts} host(s)" if nccl_single else
               (f"{n_nccl} NCCL versions" if n_nccl else "no NCCL version line"))
            + "; " + (f"GPU driver {driver_single} on {drv_hosts} host(s)" if driver_single else
                      (f"{n_drv} GPU driver versions" if n_drv else "no GPU driver version")) + ".",
            None, attrs={"nccl": nccl_single, "nccl_versions": n_nccl, "nccl_hosts": nccl_hosts,
                         "driver": driver_single, "driver_branch": drv_branch, "driver_versions": n_drv,
                         "driver_hosts": drv_hosts},
            evidence=refs(ev, "comm_stack_versions", 2) + refs(ev2, "comm_stack_versions", 2),
        ))
    return out


# ----------------------------------------------------------------------------------------------- transport overrides

WORKAROUND = re.compile(
    r"\b(?:avoids?|avoided|work[- ]?arounds?|fix(?:es|ed)?|helps?|goes away|went away|resolv\w*|makes? it work"
    r"|works? (?:with|when|if|after)|otherwise|temporar\w*|no longer hangs?|stops? hanging"
    r"|it (?:works|runs|passes|completes)|(?:results|output) (?:are |is )?correct)\b",
    re.I,
)


def _override_effect(name: str, value: str) -> str | None:
    v = value.strip().strip("'\"").strip()
    up = v.upper()
    if name == "NCCL_P2P_DISABLE" and v == "1":
        return "p2p_off"
    if name == "NCCL_P2P_LEVEL" and up in ("LOC", "0"):
        return "p2p_off"
    if name == "NCCL_SHM_DISABLE" and v == "1":
        return "shm_off"
    if name == "NCCL_NVLS_ENABLE" and v == "0":
        return "nvls_off"
    if name == "NCCL_ALGO" and v:
        return "algo_forced"
    if name == "NCCL_PROTO" and v:
        return "proto_forced"
    if name in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS") and v.isdigit() and int(v) <= 8:
        return "channels_capped"
    if name == "NCCL_COLLNET_ENABLE" and v == "1":
        return "collnet_on"
    return None


_EFFECT_TEXT = {
    "p2p_off": "GPU peer-to-peer (NVLink/PCIe P2P) is disabled: intra-node traffic goes through host memory",
    "shm_off": "the shared-memory transport is disabled: what SHM carried goes over the network",
    "nvls_off": "NVLink SHARP (NVLS) is disabled",
    "algo_forced": "the collective algorithm is forced",
    "proto_forced": "the protocol is forced",
    "channels_capped": "the channel count is capped",
    "collnet_on": "CollNet/SHARP in-network reduction is forced on",
}


def _intranode_net(ch: pd.DataFrame, hk: pd.Series, ranks: pd.DataFrame) -> np.ndarray:
    """Per NcclChannel row: is it a NET line between two ranks of the same host (intra-node traffic too)?

    The process (host, pid) of a line belongs to the communicator of its first init line, and rank ``r`` of that
    communicator runs on the host of the first init line of (communicator, r): the line is intra-node when its
    remote end runs on the line's own host. A missing pid names no process, a communicator None has no ranks.

    Joined on integer codes: a 4,096-host job has 131k NET lines, and two dict lookups per line took 0.15 s.
    """
    out = np.zeros(len(ch), dtype=bool)
    net = np.flatnonzero(ch["transport"].to_numpy(object) == "NET")
    if not len(net):
        return out
    # the remote end of a line: the first rank of a '[receive]' line, the second one otherwise
    peer = ch["peer"].to_numpy()
    remote = np.where(ch["direction"].to_numpy(object) == "receive", ch["rank"].to_numpy(), peer) \
        if "direction" in ch else peer
    n = len(ranks)

    def codes(of_ranks: np.ndarray, of_lines: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Codes common to the ranks' and the lines' values (-1: missing), and how many values there are."""
        c, uniques = pd.factorize(np.concatenate([of_ranks, of_lines]))
        return c[:n].astype(np.int64), c[n:].astype(np.int64), len(uniques)

    rh, lh, _ = codes(ranks["host"].to_numpy(object), hk.to_numpy(object)[net])
    rp, lp, n_pids = codes(ranks["pid"].to_numpy(), ch["pid"].to_numpy()[net])
    rr, lr, n_ranks = codes(ranks["rank"].to_numpy(), remote[net])
    comm = ranks["comm_id"].to_numpy(object)
    rc = pd.factorize(comm, use_na_sentinel=False)[0].astype(np.int64)
    rc[[c is None for c in comm]] = -1

    def lookup(keys: np.ndarray, known: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
        """values[first row with keys == query] (among the ``known`` rows), -1 when there is none."""
        keys, values = keys[known], values[known]
        first = ~pd.Index(keys).duplicated(keep="first")
        at = pd.Index(keys[first]).get_indexer(query)
        return np.append(values[first], -1)[at]  # at -1 (no such key) -> the -1 appended

    # the line's process -> its communicator -> the host of the remote rank in it
    line_comm = lookup(rh * n_pids + rp, rp >= 0, rc, lh * n_pids + lp)
    line_comm[lp < 0] = -1
    remote_host = lookup(rc * n_ranks + rr, (rc >= 0) & (rr >= 0), rh, line_comm * n_ranks + lr)
    out[net] = (line_comm >= 0) & (lr >= 0) & (remote_host == lh)
    return out

@extractor(reads=("EnvSetting", "FmEvent", "GpuInfo", "GpuSummary", "NcclChannel", "NcclInitRank", "NcclTestsRank",
                  "NvlinkStatus", "TopoEntry"),
           emits=("intranode_p2p", "intranode_without_p2p", "nccl_transport_override"))
def transport_overrides(ctx: Context) -> list[Finding]:
    """NCCL environment overrides that force a slower or failing intra-node/collective path."""
    env = ctx.frame("EnvSetting")
    out: list[Finding] = []
    fab_cache: list[dict[str, tuple[bool, bool]]] = []

    def fab() -> dict[str, tuple[bool, bool]]:
        """The NVLink picture, built only when a finding needs it."""
        if not fab_cache:
            fab_cache.append(_fabric(ctx))
        return fab_cache[0]

    if not env.empty:
        # every process prints the same few settings: classify each distinct (name, value) once, by their codes
        # (32k settings of a 4,096-host job: a tuple and a dict lookup per row took 20 ms)
        names, values = env["name"].to_numpy(object), env["value"].to_numpy(object)
        name_code, _ = pd.factorize(names)
        value_code, value_uniques = pd.factorize(values)
        pair = name_code.astype(np.int64) * (len(value_uniques) + 1) + value_code + 1  # name missing -> < 0
        _, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
        effects = np.array([_override_effect(names[i], str(values[i])) if name_code[i] >= 0
                            and str(names[i]).startswith("NCCL_") else None for i in first.tolist()], dtype=object)
        row_effect = effects[inverse.ravel()]
        has_effect = np.array([x is not None for x in effects], dtype=bool)[inverse.ravel()]
        e = env[has_effect]
        if not e.empty:
            e = e.assign(effect=row_effect[has_effect], val=e["value"].astype(str).str.strip().str.strip("'\""))
            for (name, val), grp in e.groupby(["name", "val"], sort=True):
                effect = str(grp["effect"].iloc[0])
                sym = grp[grp["origin"] == "symptom"]
                reported_workaround = bool(sym["text"].astype(str).str.contains(WORKAROUND).any())
                symptom_only = bool((grp["origin"] == "symptom").all())
                hosts = sorted({str(h) for h in grp["host"].dropna()})
                nvl, nvs = (False, False)
                for h in hosts or [""]:
                    a, b = _fabric_of(fab(), h)
                    nvl, nvs = nvl or a, nvs or b
                out.append(finding(
                    "nccl_transport_override",
                    f"{name}={val}: {_EFFECT_TEXT[effect]}"
                    + (" (the report says it avoids the failure, so the failing run did not have it)"
                       if reported_workaround else "") + ".",
                    grp, Location(host=hosts[0] if len(hosts) == 1 else None),
                    {"name": str(name), "value": str(val), "effect": effect, "workaround": reported_workaround,
                     "symptom_only": symptom_only, "nvlink": nvl, "nvswitch": nvs},
                ))

    # transports NCCL chose between GPUs of one host
    ch = ctx.frame("NcclChannel")
    if not ch.empty:
        hk = _hk(ch)
        keep = ch["transport"].isin(["P2P", "SHM"]).to_numpy(copy=True)
        ranks = _rank_map(ctx)
        if not ranks.empty:
            keep |= _intranode_net(ch, hk, ranks)
        if keep.any():
            # per host: does any of its lines use P2P (from the few distinct hosts, not a groupby of 29k lines)
            p2p = ch["transport"].to_numpy(object) == "P2P"
            hosts = hk.to_numpy(object)
            with_p2p = set(pd.unique(hosts[p2p]))
            kept_hosts = sorted(pd.unique(hosts[keep]))
            p2p_hosts = [h for h in kept_hosts if h in with_p2p]
            slow_hosts = [h for h in kept_hosts if h not in with_p2p]
            if slow_hosts:
                c = ch[keep].assign(hk=hk[keep])
                rows = c[c["hk"].isin(slow_hosts)]
                nvl = any(_fabric_of(fab(), h)[0] for h in slow_hosts)
                kinds = sorted(set(rows["transport"]))
                out.append(finding(
                    "intranode_without_p2p",
                    f"NCCL connects GPUs inside {hosts_label(slow_hosts) or 'the node'} via "
                    f"{'/'.join(kinds)} only ({len(rows)} channel line(s)), never P2P"
                    + (", although the GPUs are NVLink-connected" if nvl else "") + ".",
                    rows, Location(host=slow_hosts[0] if len(slow_hosts) == 1 and slow_hosts[0] else None),
                    {"hosts": len(slow_hosts), "channels": len(rows), "shm": int((rows["transport"] == "SHM").sum()),
                     "net": int((rows["transport"] == "NET").sum()), "nvlink": nvl},
                ))
            if p2p_hosts and not slow_hosts:
                rows = ch.iloc[np.flatnonzero(p2p)[:2]]
                out.append(finding(
                    "intranode_p2p",
                    f"NCCL connects GPUs inside each host via P2P ({rows['via'].iloc[0]}) on {hosts_label(p2p_hosts)}.",
                    rows, attrs={"hosts": len(p2p_hosts), "channels": int(p2p.sum())},
                ))
    return out


# ----------------------------------------------------------------------------------------------- NVLink

def _counter_class(name: str) -> str | None:
    n = name.lower()
    if "replay" in n:
        return "replay"
    if "recovery" in n and "successful" not in n:
        return "recovery"
    if "crc" in n:
        return "crc"
    if re.search(r"malformed|overrun|rx errors|remote errors|general errors|integrity|symbol errors|effective errors", n):
        return "other"
    return None


@extractor(reads=("DcgmResult", "GpuInfo", "GpuSummary", "NcclTestsRank", "NvlinkErrorCounter", "NvlinkStatus",
                  "TopoEntry"),
           emits=("dcgm_nvlink_incident", "nvlink_counters_clean", "nvlink_error_counters", "nvlink_links_inactive",
                  "nvlink_status_uniform", "nvlink_topo_fewer_links"))
def nvlink_health(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    ns = ctx.frame("NvlinkStatus")
    if not ns.empty:
        s = ns.copy()
        s["hk"] = _hk(s)
        per = s.groupby(["hk", "gpu"]).agg(active=("active", "sum"), total=("active", "size"),
                                           uuid=("gpu_uuid", "first")).reset_index()
        degraded = []
        for h, grp in per.groupby("hk", sort=True):
            best = int(grp["active"].max())
            # only links nvidia-smi reports inactive count: a GPU listing fewer links, all up, is a paste cut short
            low = grp[(grp["active"] < best) & (grp["total"] > grp["active"])]
            # a GPU with fewer active links than its peers on the same board (design-inactive links, e.g. on
            # PCIe NVL cards, are the same on every GPU and never show up here)
            for _, r in low.iterrows():
                degraded.append((str(h), r, best, len(grp) - len(low)))
        for h, r, best, n_full in degraded:
            rows = s[(s["hk"] == h) & (s["gpu"] == r["gpu"]) & ~s["active"]]
            gpu = _gpu_label(ctx, h, int(r["gpu"]), sval(r["uuid"]))
            out.append(finding(
                "nvlink_links_inactive",
                f"GPU {int(r['gpu'])}{' (' + gpu + ')' if gpu and not gpu.startswith('GPU') else ''}"
                f"{' on ' + h if h else ''} has {int(r['total'] - r['active'])} inactive NVLink(s): "
                f"{int(r['active'])} of {int(r['total'])} up, its peers have {best}.",
                rows, Location(host=h or None, gpu=gpu),
                {"gpu_index": int(r["gpu"]), "inactive": int(r["total"] - r["active"]), "active": int(r["active"]),
                 "expected": best, "peers_full": n_full},
            ))
        if not degraded:
            links = per["active"].max()
            out.append(finding(
                "nvlink_status_uniform",
                f"nvidia-smi nvlink -s: every GPU ({len(per)}) has the same number of active NVLinks ({int(links)}).",
                s.drop_duplicates(["hk", "gpu"]).head(2), attrs={"gpus": len(per), "links_per_gpu": int(links)},
            ))

    ec = ctx.frame("NvlinkErrorCounter")
    if not ec.empty:
        e = ec.copy()
        e["hk"] = _hk(e)
        e["cls"] = e["counter"].astype(str).map(_counter_class)
        e = e[e["cls"].notna()]
        bad = e[e["value"] > 0]
        if bad.empty and not e.empty:
            out.append(finding(
                "nvlink_counters_clean",
                f"nvidia-smi nvlink -e: every NVLink error counter is zero ({e['gpu'].nunique()} GPU(s)).",
                e.head(2), attrs={"gpus": int(e.groupby(["hk", "gpu"]).ngroups)},
            ))
        for (h, g), grp in bad.groupby(["hk", "gpu"], sort=True):
            sums = grp.groupby("cls")["value"].sum()
            gpu = _gpu_label(ctx, str(h), int(g))
            links = sorted({int(x) for x in grp["link"]})
            out.append(finding(
                "nvlink_error_counters",
                f"GPU {int(g)}{' on ' + str(h) if h else ''}: NVLink error counters on link(s) "
                f"{', '.join(map(str, links[:6]))}: "
                + ", ".join(f"{k} {int(v)}" for k, v in sums.items()) + ".",
                grp.sort_values("value", ascending=False), Location(host=str(h) or None, gpu=gpu),
                {"gpu_index": int(g), "links": len(links), "replay": int(sums.get("replay", 0)),
                 "recovery": int(sums.get("recovery", 0)), "crc": int(sums.get("crc", 0)),
                 "other": int(sums.get("other", 0)), "replay_recovery": int(sums.get("replay", 0) + sums.get("recovery", 0))},
            ))

    te = ctx.frame("TopoEntry")
    if not te.empty:
        gg = te[te["row"].str.match(r"^GPU\d+$") & te["col"].str.match(r"^GPU\d+$") & (te["row"] != te["col"])].copy()
        if not gg.empty:
            gg["hk"] = _hk(gg)
            gg["a"] = [min(r, c, key=lambda x: int(x[3:])) for r, c in zip(gg["row"], gg["col"], strict=True)]
            gg["b"] = [max(r, c, key=lambda x: int(x[3:])) for r, c in zip(gg["row"], gg["col"], strict=True)]
            gg["n"] = gg["relation"].str.extract(r"^NV(\d+)$")[0].astype(float).fillna(0).astype(int)
            for h, grp in gg.groupby("hk", sort=True):
                pairs = grp.sort_values(["source", "line"]).drop_duplicates(["a", "b"])
                if len(pairs) < 3 or (pairs["n"] > 0).mean() < 0.75:
                    continue
                mode = int(pairs["n"].mode().max())
                low = pairs[pairs["n"] < mode]
                if low.empty or (pairs["n"] == mode).mean() < 0.7:
                    continue
                common = set(low["a"]) | set(low["b"])
                for _, r in low.iterrows():
                    common &= {r["a"], r["b"]}
                if len(common) != 1:
                    continue
                g = common.pop()
                rows = grp[(grp["row"] == g) & (grp["n"] < mode)]
                gpu = _gpu_label(ctx, str(h), int(g[3:]))
                out.append(finding(
                    "nvlink_topo_fewer_links",
                    f"nvidia-smi topo -m{' on ' + str(h) if h else ''}: {g} reaches its peers over "
                    f"{'/'.join(sorted(set(low['relation'])))} where every other pair has NV{mode}.",
                    rows, Location(host=str(h) or None, gpu=gpu),
                    {"gpu_index": int(g[3:]), "pairs": len(low), "min_links": int(low["n"].min()), "expected": mode},
                ))

    dc = ctx.frame("DcgmResult")
    if not dc.empty:
        bad = dc[dc["test"].astype(str).str.contains("nvlink", case=False)
                 & dc["result"].isin(["Warning", "Failure", "Fail", "Warn", "Error"])]
        if not bad.empty:
            ents = sorted({str(x) for x in bad["gpus"].dropna()})
            host = _one(bad["host"].dropna())
            out.append(finding(
                "dcgm_nvlink_incident",
                f"DCGM reports an NVLink {'/'.join(sorted(set(bad['result'])))} for {', '.join(ents) or 'a GPU'}"
                + (f": {str(bad['detail'].dropna().iloc[0]).rstrip('.')[:120]}" if bad["detail"].notna().any() else "") + ".",
                bad, Location(host=host, gpu=_dcgm_gpu(ctx, host, ents)),
                {"results": len(bad), "failure": bool(bad["result"].isin(["Failure", "Fail", "Error"]).any())},
            ))
    return out


# ----------------------------------------------------------------------------------------------- clocks

_HW_REASONS = {"hw slowdown", "hw thermal slowdown", "hw power brake slowdown"}
_SW_THERMAL = {"sw thermal slowdown"}
_DCGM_CLOCK = re.compile(r"thermal violation|power violation|clocks? event due to|clock throttling due to", re.I)


def _gpu_rank(ctx: Context) -> dict[tuple[str, str], list[int]]:
    """(host, pci) -> NCCL ranks on that GPU, from the init lines and the nccl-tests device list.

    Built on first use (only a throttled or hot GPU needs it), once per run.
    """
    cached = ctx.cache.get("stack.gpu_rank")
    if cached is not None:
        return cached  # type: ignore[return-value]
    m: dict[tuple[str, str], set[int]] = {}
    ranks = _rank_map(ctx)
    for h, pci, r in zip(ranks["host"].tolist(), ranks["pci"].tolist(), ranks["rank"].tolist(), strict=True):
        if pci:
            m.setdefault((str(h), str(pci)), set()).add(int(r))
    nt = ctx.frame("NcclTestsRank")
    if not nt.empty and "bus" in nt:
        bus = nt["bus"]
        for h, pci, known, r in zip(_hk(nt).tolist(), bus.tolist(), bus.notna().tolist(), nt["rank"].tolist(),
                                    strict=True):
            if known and str(pci):  # sval(pci), without its per-value NA check
                m.setdefault((str(h), str(pci)), set()).add(int(r))
    res = ctx.cache["stack.gpu_rank"] = {k: sorted(v) for k, v in m.items()}
    return res


@extractor(reads=("DcgmResult", "DesyncReport", "GpuInfo", "GpuSummary", "NcclInitRank", "NcclTestsRank"),
           emits=("dcgm_clock_event", "gpu_clocks_throttled", "gpu_clocks_unthrottled", "gpu_temperature_outlier",
                  "throttled_gpu_lagging_rank"))
def clock_events(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    gi = ctx.frame("GpuInfo")
    throttled_ranks: dict[int, tuple[str, str]] = {}
    if not gi.empty:
        g = gi.copy()
        g["hk"] = _hk(g)
        low = g["throttle_active"].map(lambda t: {str(x).lower() for x in (t or ())})
        g["hw"] = low.map(lambda s: bool(s & _HW_REASONS))
        g["sw_thermal"] = low.map(lambda s: bool(s & _SW_THERMAL))
        g["thermal"] = low.map(lambda s: "hw thermal slowdown" in s or "sw thermal slowdown" in s)
        g["brake"] = low.map(lambda s: "hw power brake slowdown" in s)
        hit = g[g["hw"] | g["sw_thermal"]]
        for h, grp in hit.groupby("hk", sort=True):
            on_host = g[g["hk"] == h]
            pcis = sorted(set(grp["pci"]))
            reasons = sorted({str(x) for t in grp["throttle_active"] for x in t
                              if str(x).lower() in _HW_REASONS | _SW_THERMAL})
            ranks = sorted({r for p in pcis for r in _gpu_rank(ctx).get((str(h), p), [])})
            for r in ranks:
                throttled_ranks[r] = (str(h), pcis[0])
            temps = grp["temperature_c"].dropna()
            out.append(finding(
                "gpu_clocks_throttled",
                f"{len(grp)} of {len(on_host)} GPU(s){' on ' + str(h) if h else ''} ({', '.join(pcis[:4])}"
                f"{'...' if len(pcis) > 4 else ''}) report active clock event reasons: {', '.join(reasons)}"
                + (f"; rank(s) {', '.join(map(str, ranks[:6]))} run there" if ranks else "") + ".",
                grp, Location(host=str(h) or None, gpu=pcis[0] if len(pcis) == 1 else None,
                              rank=ranks[0] if len(ranks) == 1 else None),
                {"gpus": len(grp), "gpus_on_host": len(on_host), "peers_clean": len(grp) < len(on_host),
                 "hw": bool(grp["hw"].any()), "sw_thermal": bool(grp["sw_thermal"].any()),
                 "thermal": bool(grp["thermal"].any()), "power_brake": bool(grp["brake"].any()),
                 "reasons": ", ".join(reasons), "max_temp_c": float(temps.max()) if not temps.empty else None},
            ))
        if hit.empty:
            out.append(finding(
                "gpu_clocks_unthrottled",
                f"nvidia-smi -q: none of {len(g)} GPU(s) reports an HW slowdown, power-brake or thermal clock event.",
                g.head(2), attrs={"gpus": len(g)},
            ))

    # temperature against the other GPUs of the same host
    tparts = []
    for name, col in (("GpuInfo", "pci"), ("GpuSummary", "bus_id")):
        df = ctx.frame(name)
        if not df.empty and df["temperature_c"].notna().any():
            tparts.append(pd.DataFrame({"source": df["source"], "line": df["line"], "text": df["text"],
                                        "host": df["host"], "pci": df[col], "temp": df["temperature_c"]}))
    if tparts:
        t = pd.concat(tparts, ignore_index=True).dropna(subset=["temp"])
        t["hk"] = _hk(t)
        t = t.sort_values(["source", "line"]).drop_duplicates(["hk", "pci"], keep="last")
        for h, grp in t.groupby("hk", sort=True):
            if len(grp) < 3:
                continue
            top = grp.loc[grp["temp"].idxmax()]
            med = float(grp[grp.index != top.name]["temp"].median())
            delta = float(top["temp"]) - med
            if delta < 5:  # sensor spread between neighbours, not a finding
                continue
            ranks = _gpu_rank(ctx).get((str(h), str(top["pci"])), [])
            out.append(finding(
                "gpu_temperature_outlier",
                f"GPU {top['pci']}{' on ' + str(h) if h else ''} runs at {top['temp']:g} C, {delta:g} C above the "
                f"median of its {len(grp) - 1} peers ({med:g} C).",
                pd.DataFrame([top]), Location(host=str(h) or None, gpu=str(top["pci"]),
                                              rank=ranks[0] if len(ranks) == 1 else None),
                {"temperature_c": float(top["temp"]), "peer_median_c": med, "delta_c": delta},
            ))

    dc = ctx.frame("DcgmResult")
    if not dc.empty:
        notpass = ~dc["result"].isin(["Pass", "Healthy", "Skip", "Not Run"])
        sys_hit = dc["test"].astype(str).str.contains(r"thermal|power", case=False) & notpass
        txt_hit = dc["detail"].fillna("").astype(str).str.contains(_DCGM_CLOCK)
        bad = dc[sys_hit | txt_hit]
        if not bad.empty:
            blob = " ".join(bad["test"].astype(str)) + " " + " ".join(bad["detail"].fillna("").astype(str))
            ents = sorted({str(x) for x in bad["gpus"].dropna()})
            host = _one(bad["host"].dropna())
            out.append(finding(
                "dcgm_clock_event",
                f"DCGM reports {'thermal' if re.search('thermal', blob, re.I) else 'power'} clock events for "
                f"{', '.join(ents) or 'a GPU'}" + (f": {str(bad['detail'].dropna().iloc[0]).rstrip('.')[:110]}"
                                                    if bad["detail"].notna().any() else "") + ".",
                bad, Location(host=host, gpu=_dcgm_gpu(ctx, host, ents)),
                {"thermal": bool(re.search("thermal", blob, re.I)), "power": bool(re.search("power", blob, re.I)),
                 "gpus": len(ents)},
            ))

    # the rank PyTorch names as lagging runs on a throttled GPU
    ds = ctx.frame("DesyncReport")
    if throttled_ranks and not ds.empty:
        lag = sorted({int(r) for tup in ds["lagging_ranks"] for r in tup})
        both = [r for r in lag if r in throttled_ranks]
        if both:
            h, pci = throttled_ranks[both[0]]
            out.append(finding(
                "throttled_gpu_lagging_rank",
                f"Rank {both[0]}, which PyTorch names as lagging, runs on the throttled GPU {pci}"
                f"{' of ' + h if h else ''}.",
                ds, Location(host=h or None, gpu=pci, rank=both[0]), {"rank": both[0]},
            ))
    return out
