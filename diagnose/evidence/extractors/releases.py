"""Known-bad releases: a version the evidence shows that falls in a documented defect's range (``rules/_releases``).

The versions come from everything that states one: NCCL's own banner (``NCCL version 2.19.3+cuda12.2``), package
lists and tool banners (the catalog's ``component_version`` hits), and what the reporter wrote, in the symptom, a
report file or a command line (``with NCCL 2.19.x``, ``nccl version 2.19.1 2.19.3``, ``LD_PRELOAD=/opt/nccl2.19.1/
libnccl.so.2``). A release is affected unless the job sets one of the entry's ``avoided_by`` settings; whether
the failure on hand is one the defect shows as (``fails_as`` against the reported symptom kinds and the evidence's
watchdog timeouts) is an attribute the rule weighs: a hang on a release known to hang is worth more than the
release alone.
"""

from __future__ import annotations

import json
import re

import pandas as pd

from diagnose.catalog.releases import KnownRelease, default_releases, vtuple
from diagnose.evidence.context import Context, finding
from diagnose.evidence.extractors import extractor
from diagnose.evidence.extractors.context import symptom_rows
from diagnose.evidence.extractors.messages import hit_frame
from diagnose.models.diagnosis import Finding, Location
from diagnose.symptoms import classify

_COLS = ["source", "line", "text", "host", "component", "version"]
# "NCCL 2.19.x", "nccl version 2.19.1 2.19.3 2.19.4", "NCCL v2.18.1", "nccl2.19.1/libnccl.so.2", "NCCL-2.8.3"
_STATED = re.compile(
    r"(?<![\w.-])(?P<comp>nccl|aws-ofi-nccl|pytorch|torch)(?![\w-]*tests)[ _/-]?(?:version[: ]\s*|release\s+|v(?=\d))?"
    r"(?P<vers>\d+\.\d+(?:\.\d+|\.x)?(?:(?:\s*,\s*|\s+|\s*(?:and|or|/|&)\s*)v?\d+\.\d+(?:\.\d+|\.x)?)*)(?![\w.])",
    re.IGNORECASE)
_ONE = re.compile(r"\d+\.\d+(?:\.\d+|\.x)?", re.IGNORECASE)
_WRONG = re.compile(r"\bNaN\b|wrong (?:result|answer|value)|garbage|corrupt|mismatch(?:es|ed)? in (?:the )?result|"
                    r"all zeros|incorrect (?:result|output|value)", re.IGNORECASE)


def _stated(rows: pd.DataFrame) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    if rows.empty:
        return out
    texts = rows["text"].astype(str)
    hit = texts.str.contains(r"(?i)nccl|torch")
    for src, ln, text, host in zip(rows.loc[hit, "source"], rows.loc[hit, "line"], texts[hit],
                                   rows.loc[hit, "host"], strict=True):
        for m in _STATED.finditer(text):
            comp = m.group("comp").lower().replace("pytorch", "torch")
            for v in _ONE.findall(m.group("vers")):
                out.append({"source": src, "line": ln, "text": text, "host": host, "component": comp,
                            "version": v.lower()})
    return out


def sightings(ctx: Context) -> pd.DataFrame:
    """Every (component, version) the evidence states, with the line that states it."""
    parts: list[pd.DataFrame] = []
    nv = ctx.frame("NcclVersion")
    if not nv.empty:
        parts.append(nv.assign(component="nccl")[_COLS])
    hits = hit_frame(ctx, "component_version")
    if not hits.empty:
        attrs = [json.loads(str(a)) for a in hits["attrs"]]
        parts.append(hits.assign(component=[str(a.get("component") or "") for a in attrs],
                                 version=[str(a.get("version") or "") for a in attrs])[_COLS])
    said = _stated(symptom_rows(ctx))
    said += _stated(ctx.frame("EnvSetting"))  # the lines that set them: an LD_PRELOAD=/opt/nccl2.19.1/... path
    if said:
        parts.append(pd.DataFrame(said, columns=_COLS))
    if not parts:
        return pd.DataFrame(columns=_COLS)
    df = pd.concat(parts, ignore_index=True)
    df = df[df["version"].astype(str).str.len() > 0]
    return df.drop_duplicates(["source", "line", "component", "version"]).reset_index(drop=True)


def _avoided(ctx: Context, entry: KnownRelease) -> bool:
    if not entry.avoided_by:
        return False
    env = ctx.frame("EnvSetting")
    if env.empty:
        return False
    for name, value in entry.avoided_by.items():
        vals = env.loc[env["name"] == name, "value"].astype(str).str.strip().str.strip("\"'")
        if (vals == value).any():
            return True
    return False


# "both versions fail", "the same with 2.18 and 2.19": the versions were compared and did not matter
_SAME_ACROSS = re.compile(
    r"\b(?:both|all|every|either|any|each) (?:of (?:the|these|them) )?(?:\w+ )?(?:versions?|releases?)\b[^.;]{0,40}?"
    r"\b(?:fail|hang|crash|show|have|give|behave)|\b(?:same|no difference|identical)\b[^.;]{0,30}?\b(?:with|on|for|in|across)"
    r" (?:\w+ )?(?:both|all|every|each|either)\b|(?:regardless|independent) of (?:the )?(?:\w+ )?(?:version|release)",
    re.IGNORECASE)


@extractor(reads=("FreeText",),
           emits=("release_compared",))
def release_compared(ctx: Context) -> list[Finding]:
    """The report names two or more releases of one component (``drops from 24 GB/s with NCCL 2.19.4 to 18 GB/s with
    2.20.5``, ``works with torch 1.13, hangs with 2.0``): the reporter ran both and saw the failure follow the
    release, unless they say it did not (``both versions hang``)."""
    rows = symptom_rows(ctx)
    said = _stated(rows)
    if not said:
        return []
    text = " ".join(rows["text"].astype(str).tolist())
    if _SAME_ACROSS.search(text):
        return []
    df = pd.DataFrame(said, columns=_COLS)
    out = []
    for comp, grp in df.groupby("component", sort=True):
        versions = sorted({str(v) for v in grp["version"] if not str(v).endswith(".x")}, key=vtuple)
        if len(versions) < 2 or len({vtuple(v)[:3] for v in versions}) < 2:
            continue
        out.append(finding(
            "release_compared",
            f"The report compares {comp} releases {', '.join(versions[:4])}: the failure follows the release.",
            grp.drop_duplicates(["source", "line"]).head(2), attrs={"component": str(comp), "versions": len(versions)}))
    return out


def _shown(ctx: Context, entry: KnownRelease) -> bool:
    """Whether the evidence carries one of the defect's own messages (always, for an entry that names none)."""
    if not entry.shows_as:
        return True
    hits = ctx.frame("MessageHit")
    if hits.empty:
        return False
    texts = hits["text"].astype(str).str.lower()
    return any(texts.str.contains(p.lower(), regex=False).any() for p in entry.shows_as)


def _failure_kinds(ctx: Context) -> set[str]:
    text = " ".join(symptom_rows(ctx)["text"].astype(str).tolist())
    kinds = set(classify(text))
    if _WRONG.search(text):
        kinds.add("wrong_results")
    if not ctx.frame("WatchdogTimeout").empty:
        kinds.add("collective_timeout")
    return kinds


@extractor(reads=("EnvSetting", "FreeText", "MessageHit", "NcclVersion", "WatchdogTimeout"),
           emits=("known_bad_release", "release_exposes_fault"))
def known_releases(ctx: Context) -> list[Finding]:
    table = default_releases()
    if not table.entries:
        return []
    seen = sightings(ctx)
    if seen.empty:
        return []
    kinds: set[str] | None = None
    out: list[Finding] = []
    for entry in table.entries:
        rows = seen[seen["component"] == entry.component]
        if rows.empty:
            continue
        rows = rows[[entry.covers(str(v)) for v in rows["version"]]]
        if rows.empty or _avoided(ctx, entry):
            continue
        if kinds is None:
            kinds = _failure_kinds(ctx)
        match = bool(kinds & set(entry.fails_as)) and _shown(ctx, entry)
        versions = sorted({str(v) for v in rows["version"]}, key=vtuple)
        hosts = sorted({str(h) for h in rows["host"].dropna() if str(h)})
        fix = f" Fixed in {entry.fixed_in}." if entry.fixed_in else ""
        work = f" Workaround: {entry.workaround}." if entry.workaround else ""
        attrs: dict[str, str | int | float | bool | None] = {
            "component": entry.component, "version": versions[0], "release": entry.id, "fails_match": match,
            "fixed_in": entry.fixed_in}
        if entry.exposes:
            # the release is sound; it makes a misconfiguration fail that earlier releases tolerated
            out.append(finding(
                "release_exposes_fault",
                f"{entry.component} {', '.join(versions)} changed behaviour: {entry.says}{work}"
                f" ({entry.source.split(' ')[0]})",
                rows, Location(host=hosts[0] if len(hosts) == 1 else None), {**attrs, "cause": entry.exposes}))
            continue
        out.append(finding(
            "known_bad_release",
            f"{entry.component} {', '.join(versions)} is a release with a documented defect: {entry.says}{fix}{work}"
            f" ({entry.source.split(' ')[0]})",
            rows, Location(host=hosts[0] if len(hosts) == 1 else None), attrs,
        ))
    return out
