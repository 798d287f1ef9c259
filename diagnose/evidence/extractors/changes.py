"""Configuration changes and dated runs: what changed between a good run and a bad one.

- ``busbw_regressed_since_run``: a dated nccl-tests run whose busbw, at the largest message size it shares with an
  earlier run of the same collective at the same node count, is below that earlier run's (attrs ``ratio`` = later /
  earlier, ``good_when``, ``bad_when``, ``size_bytes``, ``nodes``, ``collective``). How large a drop counts is the
  rules' threshold.
- ``fabric_config_changed``: one per changed setting (a ``diff -u`` / ``git log -p`` record, or an option the SM
  re-read after it was already up: ``Loading Cached Option:<key> = <value>`` after a ``SUBNET UP``), with ``area``
  (``ar``, ``qos``, ``partitions``, ``routing``, ``mtu``, ``env``, ``other``), ``key``, ``old``, ``new``, ``when``
  and, when the change is dated between two dated runs of one test of which the later is slower, ``between_runs:
  true`` with ``run_drop`` (the later run's busbw / the earlier's). Evidence: the ``-`` and ``+`` lines.
"""

from __future__ import annotations

import re
from typing import TypedDict, cast

import pandas as pd

from diagnose.evidence.context import Context, finding, sval, val
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import EvidenceRef, Finding, Location
from diagnose.parsers._dates import order_key

_AR = re.compile(r"^(?:routing_engine|ar_\w*|\w*adaptive_routing\w*|NCCL_IB_ADAPTIVE_ROUTING|NCCL_IB_AR_THRESHOLD)$", re.I)
_QOS = re.compile(r"^(?:qos\w*|\w*sl2vl\w*|\w*vlarb\w*|NCCL_IB_SL|NCCL_IB_TC|NCCL_IB_FIFO_TC|UCX_IB_SL)$", re.I)
_PART = re.compile(r"^(?:NCCL_IB_PKEY|partition_config_file|part_enforce|allow_both_pkeys|no_partition_enforcement)$",
                   re.I)
_ROUTING = re.compile(r"^(?:lmc|lmc_esp0|\w*routing\w*|root_guid_file|cn_guid_file|io_guid_file|guid_routing_order\w*"
                      r"|lash_start_vl|\w*ucast_cache|port_shifting|scatter_ports|max_reverse_hops|hop_weights_file"
                      r"|port_search_ordering_file|lid_matrix_\w*|lfts_file|connect_roots|do_mesh_analysis"
                      r"|ids_guid_file|avoid_throttled_links|dor_hyper\w*|torus_config)$", re.I)
_MTU = re.compile(r"mtu", re.I)
_PART_MTU = re.compile(r"\bmtu\s*=\s*(\d+)", re.I)
_SM_OPTION = re.compile(r"Loading Cached Option:\s*(?P<k>\S+?)\s*=\s*(?P<v>.*?)\s*$")
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                        "Dec"), start=1)}


def area_of(key: str, file: str | None, old: str | None, new: str | None) -> str:
    """Which family of causes a changed setting touches."""
    name = (file or "").rsplit("/", 1)[-1].lower()
    if _AR.match(key):
        return "ar"
    if _MTU.search(key):
        return "mtu"
    if "partition" in name:
        om, nm = _PART_MTU.search(old or ""), _PART_MTU.search(new or "")
        if (om and nm and om.group(1) != nm.group(1)) and (old or "").replace(om.group(0), "") == (new or "").replace(
                nm.group(0), ""):
            return "mtu"
        return "partitions"
    if _QOS.match(key) or "qos-policy" in name or "qos_policy" in name:
        return "qos"
    if _PART.match(key):
        return "partitions"
    if _ROUTING.match(key):
        return "routing"
    if key.upper().startswith("NCCL_"):
        return "env"
    return "other"


def _runs(ctx: Context) -> pd.DataFrame:
    """One row per dated nccl-tests run: source, run_index, collective, nodes, when (datetime), iso, busbw by size."""
    runs = ctx.frame("NcclTestsRun")
    rows = ctx.frame("NcclTestsRow")
    if runs.empty or rows.empty or "when" not in runs:
        return pd.DataFrame()
    runs = runs[runs["when"].notna()]
    if runs.empty:
        return pd.DataFrame()
    ranks = ctx.frame("NcclTestsRank")
    nodes: dict[tuple[str, int], int] = {}
    if not ranks.empty:
        rk = ranks[ranks["host"].notna()]
        nodes = {(str(s), int(i)): int(n) for (s, i), n in rk.groupby(["source", "run_index"])["host"].nunique().items()}
    bw = rows.assign(bw=rows[["oop_busbw", "ip_busbw"]].max(axis=1))
    bw = bw[bw["bw"].notna()].groupby(["source", "run_index", "size_bytes"])["bw"].max()
    by_run: dict[tuple[str, int], dict[int, float]] = {}
    for (s, i, size), b in bw.items():
        by_run.setdefault((str(s), int(i)), {})[int(size)] = float(b)
    out = []
    for r in runs.itertuples(index=False):
        key = (str(r.source), int(r.run_index))
        sizes = by_run.get(key)
        when = order_key(str(r.when))
        if not sizes or when is None:
            continue
        out.append({"source": key[0], "run_index": key[1], "collective": sval(r.collective) or "?",
                    "nodes": nodes.get(key), "when": when, "iso": str(r.when), "sizes": sizes, "line": int(r.line),
                    "text": str(r.text)})
    return pd.DataFrame(out)


def _compare(good: dict[int, float], bad: dict[int, float]) -> tuple[int, float, float] | None:
    common = sorted(set(good) & set(bad))
    if not common:
        return None
    size = common[-1]
    g, b = good[size], bad[size]
    if g <= 0:
        return None
    return size, g, b


class _Pair(TypedDict):
    """An (earlier, later) pair of runs (rows of ``_runs``) compared at their largest common message size."""

    good: pd.Series
    bad: pd.Series
    size: int
    good_bw: float
    bad_bw: float
    ratio: float


class _Change(TypedDict):
    """One changed setting: a diff record (``ConfigChange``) or an option the running SM re-read."""

    file: str | None
    key: str
    old: str | None
    new: str | None
    when: str | None
    commit: str | None
    author: str | None
    subject: str | None
    host: str | None
    style: str
    ev: list[EvidenceRef]
    how: str


def _pairs(runs: pd.DataFrame) -> list[_Pair]:
    """(earlier, later) run pairs of one collective and node count with the later slower."""
    out: list[_Pair] = []
    if runs.empty:
        return out
    for (_coll, _nodes), grp in runs.groupby(["collective", runs["nodes"].fillna(-1)], sort=True):
        g = grp.sort_values(["when", "source", "run_index"]).reset_index(drop=True)
        for j in range(1, len(g)):
            for i in range(j):
                if g.loc[i, "when"] >= g.loc[j, "when"]:
                    continue
                cmp = _compare(g.loc[i, "sizes"], g.loc[j, "sizes"])
                if cmp is None or cmp[2] >= cmp[1]:
                    continue
                out.append({"good": g.loc[i], "bad": g.loc[j], "size": cmp[0], "good_bw": cmp[1], "bad_bw": cmp[2],
                            "ratio": round(cmp[2] / cmp[1], 3)})
    return out


def _run_ref(run: pd.Series, kind: str) -> EvidenceRef:
    return EvidenceRef(file=str(run["source"]), line=int(run["line"]), text=str(run["text"]), finding=kind)


def _day(iso: str) -> str:
    return iso.replace("T", " ")[:16]


@extractor(reads=("NcclTestsRank", "NcclTestsRow", "NcclTestsRun"),
           emits=("busbw_regressed_since_run",))
def run_regression(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    best: dict[tuple[str, int], _Pair] = {}
    for p in _pairs(_runs(ctx)):
        bad = p["bad"]
        k = (str(bad["source"]), int(bad["run_index"]))
        if k not in best or float(p["ratio"]) < float(best[k]["ratio"]):
            best[k] = p
    for k in sorted(best):
        p = best[k]
        good, bad = p["good"], p["bad"]
        nodes = cast("int | float | None", val(bad["nodes"]))  # _runs' node count: int, or a float column with NaN
        out.append(finding(
            "busbw_regressed_since_run",
            f"nccl-tests {bad['collective']} on {nodes or '?'} node(s) at {p['size']} B: {p['bad_bw']:g} GB/s busbw"
            f" on {_day(str(bad['iso']))}, {float(p['ratio']):.0%} of the {p['good_bw']:g} GB/s of the run on"
            f" {_day(str(good['iso']))}.",
            evidence=[_run_ref(good, "busbw_regressed_since_run"), _run_ref(bad, "busbw_regressed_since_run")],
            attrs={"ratio": p["ratio"], "good_when": str(good["iso"]), "bad_when": str(bad["iso"]),
                   "size_bytes": p["size"], "nodes": nodes, "collective": str(bad["collective"]),
                   "good_busbw": p["good_bw"], "bad_busbw": p["bad_bw"]},
        ))
    return out


def _changes(ctx: Context, year: int | None) -> list[_Change]:
    out: list[_Change] = []
    cc = ctx.frame("ConfigChange")
    for r in cc.itertuples(index=False) if not cc.empty else ():
        ev = []
        if val(r.old_line) is not None and int(r.old_line) != int(r.line):
            ev.append(EvidenceRef(file=str(r.source), line=int(r.old_line), text=str(r.old_text),
                                  finding="fabric_config_changed"))
        ev.append(EvidenceRef(file=str(r.source), line=int(r.line), text=str(r.text), finding="fabric_config_changed"))
        out.append({"file": sval(r.file), "key": str(r.key), "old": sval(r.old), "new": sval(r.new),
                    "when": sval(r.when), "commit": sval(r.commit), "author": sval(r.author),
                    "subject": sval(r.subject), "host": sval(r.host), "style": str(r.style), "ev": ev, "how": "diff"})
    sm = ctx.frame("SmEvent")
    if not sm.empty and (sm["category"] == "config_option").any():
        for _src, grp in sm.sort_values(["source", "line"]).groupby("source", sort=True):
            ups = grp[grp["category"] == "subnet_up"]
            if ups.empty:
                continue
            first_up = int(ups["line"].min())
            opts = grp[(grp["category"] == "config_option") & (grp["line"] > first_up)]
            for r in opts.itertuples(index=False):
                m = _SM_OPTION.search(str(r.message))
                if not m:
                    continue
                out.append({"file": "opensm.conf", "key": m["k"], "old": None, "new": m["v"],
                            "when": _sm_when(str(r.timestamp), year), "commit": None, "author": None, "subject": None,
                            "host": sval(r.host), "style": "opensm",
                            "ev": [EvidenceRef(file=str(r.source), line=int(r.line), text=str(r.text),
                                               finding="fabric_config_changed")], "how": "sm_reread"})
    return out


def _sm_when(ts: str, year: int | None) -> str | None:
    """The OpenSM log's ``Oct  6 14:05:01[.usec]`` (no year) with the year of the runs it is compared with."""
    m = re.match(r"(?P<mon>[A-Z][a-z]{2})\s+(?P<d>\d{1,2})\s+(?P<t>\d{2}:\d{2}:\d{2})", ts)
    if not m or year is None or m["mon"] not in _MONTHS:
        return None
    return f"{year:04d}-{_MONTHS[m['mon']]:02d}-{int(m['d']):02d}T{m['t']}"


def _quote(v: str | None) -> str:
    return "(unset)" if v is None else f"'{v}'"


@extractor(fabric=True,
           reads=("ConfigChange", "FabricLink", "FabricNode", "FabricPortState", "IbPort", "NcclTestsRank",
                  "NcclTestsRow", "NcclTestsRun", "SmEvent", "SmInfo"),
           emits=("fabric_config_changed",))
def config_changes(ctx: Context) -> list[Finding]:
    if not ctx.has("ConfigChange") and not ctx.has("SmEvent"):
        return []
    runs = _runs(ctx)
    year = int(max(runs["when"]).year) if not runs.empty else None
    pairs = _pairs(runs)
    out: list[Finding] = []
    sm_where: list[Location] = []

    def _sm_place() -> Location:
        """A fabric setting changed in a file kept outside any host folder (a config repository's log): it acts
        where the SM runs, so the change is placed at the SM node when the bundle names it."""
        if not sm_where:
            from diagnose.evidence.extractors.fabric_state import sm_location

            named = ctx.fabric is not None or ctx.has("SmInfo") or ctx.has("IbPort")  # a source that can name the SM
            sm_where.append(sm_location(ctx) if named else Location())
        return sm_where[0]

    for c in _changes(ctx, year):
        key, old, new = str(c["key"]), c["old"], c["new"]
        area = area_of(key, c["file"], old, new)
        when_dt = order_key(c["when"])
        hit: _Pair | None = None
        if when_dt is not None:
            inside = [p for p in pairs if p["good"]["when"] < when_dt < p["bad"]["when"]]
            if inside:
                hit = min(inside, key=lambda p: (float(p["ratio"]), str(p["bad"]["iso"])))
        where = f"{c['file']}: " if c["file"] else ""
        who = ""
        if c["commit"]:
            who = f" (commit {str(c['commit'])[:10]}" + (f" by {c['author']}" if c["author"] else "") + (
                f", \"{c['subject']}\"" if c["subject"] else "") + ")"
        elif c["how"] == "sm_reread":
            who = " (re-read by the running SM)"
        if old is not None and new is not None:
            what = f"{key} changed from {_quote(old)} to {_quote(new)}"
        elif new is not None:
            what = f"{key} set to {_quote(new)}"
        else:
            what = f"{key} {_quote(old)} removed"
        when_s = f" on {_day(str(c['when']))}" if c["when"] else " (undated)"
        between = ""
        attrs: dict[str, str | int | float | bool | None] = {
            "area": area, "key": key, "old": old, "new": new, "when": c["when"], "file": c["file"],
            "commit": c["commit"], "between_runs": hit is not None, "run_drop": None, "source_kind": c["how"]}
        ev = list(c["ev"])
        if hit is not None:
            g, b = hit["good"], hit["bad"]
            between = (f", between the {b['collective']} run of {_day(str(g['iso']))} ({hit['good_bw']:g} GB/s busbw)"
                       f" and the one of {_day(str(b['iso']))} ({hit['bad_bw']:g} GB/s, {float(hit['ratio']):.0%})")
            attrs.update({"run_drop": hit["ratio"], "good_when": str(g["iso"]), "bad_when": str(b["iso"])})
            ev += [_run_ref(g, "fabric_config_changed"), _run_ref(b, "fabric_config_changed")]
        out.append(finding(
            "fabric_config_changed",
            f"{where}{what}{when_s}{who}{between}.",
            location=Location(host=c["host"]) if c["host"] or area == "env" else _sm_place(),
            attrs=attrs, evidence=ev,
        ))
    return out
