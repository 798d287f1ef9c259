"""Evidence for one incident: bundles from the bundle store, and Prometheus series for its hosts and window.

An alert or a ticket names hosts, a job, ports, a time; the diagnosis needs tool output. Two sources are
searched, and every decision is written to ``EvidenceSet.notes`` so the on-call engineer sees what the
diagnosis rests on and what was missing:

**The bundle store** (``settings.bundle_root()``, ``$DIAGNOSE_BUNDLES``) is a folder of per-job and per-host
bundles, folders or archives (``.tar.gz``, ``.tgz``, ``.tar``, ``.tar.xz``, ``.tar.bz2``, ``.zip``) named
after what they hold::

    $DIAGNOSE_BUNDLES/
      4412/                    job id (also job-4412, job_4412, slurm-4412)
        gpu-a003/ gpu-a004/    per-host subfolders of the job are used with it
        nccl.log
      gpu-a007/                a host, by its full or short name
      gpu-a009.tar.gz

Top-level entries are matched in this order: the incident's ``job_id``; each host by its exact name, then by
its short name (``gpu-a003.cluster.local`` -> ``gpu-a003``, and a folder named with the domain matches the
short name); then the labels ``node``, ``host``, ``instance`` (port stripped) and ``job_id``. Names compare
case-insensitively. A job folder is used whole: the other hosts of the job hold the other ends of its
connections. ``bundle_refs`` named in a payload are paths relative to the store; each is resolved (symlinks
included) and rejected when it leads outside the store, as are top-level entries that are symlinks leading
outside. ``http(s)`` attachment URLs are **not downloaded**: the service fetches no URL that a payload names
(an authenticated payload can still name an internal address, and ticket attachments need the tracker's
credentials); the note tells the engineer to copy the bundle into the store.

**Prometheus** (when ``settings.prometheus_url`` is set): one ``/api/v1/query_range`` per host
(https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries) over the window ``starts_at - 15 min
.. ends_at`` (or now; at most 7 days), at ``settings.prometheus_step_s`` (coarser when the window would need
more than 1,000 points per series), for node_exporter's InfiniBand metrics (``collector/infiniband_linux.go``: PMA error
counters, transmit wait and data, port state and rate, HCA info, mlx5 hw counters). The series are selected by
the ``instance`` label (``gpu-a003:9100``, with or without a domain) or by a ``host``/``hostname``/``node``/
``nodename`` label that relabeling set. Each response is written, pretty-printed one sample per line, to
``<workdir>/prometheus/prometheus_<host>.json`` and the folder is returned as evidence, so the series are
kept with the incident and parsed by :mod:`diagnose.parsers.prometheus_api` like any bundle file. Network
errors, HTTP errors and Prometheus errors become notes, never exceptions. Credentials in the URL
(``https://user:pass@prometheus``) are used but never written to notes or logs.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import structlog

from diagnose.parsers import prometheus_api
from diagnose.parsers.node_exporter import HOST_LABELS, HW_METRICS, METRIC_PREFIX
from diagnose.service.models import IncidentRecord
from diagnose.service.settings import Settings

log = structlog.get_logger("diagnose.service.evidence")

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".zip")
JOB_PREFIXES = ("", "job-", "job_", "slurm-", "slurm_")
LABEL_KEYS = ("node", "host", "instance", "job_id")

PROMETHEUS_DIR = "prometheus"
LOOKBACK = timedelta(minutes=15)  # before the alert started: the counters' baseline
MAX_WINDOW = timedelta(days=7)
# points per series at most (Prometheus refuses more than 11,000): a long incident gets a coarser step, since
# counter deltas need the ends of the window and the changes, not every scrape, and the kept files stay small
MAX_POINTS = 1_000
TIMEOUT_S = 15.0
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
MAX_HOSTS = 64
MAX_REFS = 32  # bundle paths named by one payload that are looked up

# node_exporter InfiniBand metrics (without the node_infiniband_ prefix) asked for, as the infiniband collector
# names them (prometheus/node_exporter collector/infiniband_linux.go); the mlx5 hw-counter metrics come from
# the parser's own table.
PROMETHEUS_METRICS: tuple[str, ...] = (
    "symbol_error_total",
    "link_error_recovery_total",
    "link_downed_total",
    "local_link_integrity_errors_total",
    "excessive_buffer_overrun_errors_total",
    "port_errors_received_total",
    "port_receive_remote_physical_errors_total",
    "port_receive_switch_relay_errors_total",
    "port_discards_transmitted_total",
    "port_constraint_errors_received_total",
    "port_constraint_errors_transmitted_total",
    "vl15_dropped_total",
    "port_transmit_wait_total",
    "port_data_transmitted_bytes_total",
    "info",
    "state_id",
    "physical_state_id",
    "rate_bytes_per_second",
    *sorted(HW_METRICS),
)

_HOSTNAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,252})$")
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass
class EvidenceSet:
    """What :func:`collect` found: paths to hand to ``triage`` and notes for the people reading the result."""

    paths: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def collect(settings: Settings, incident: IncidentRecord, workdir: Path, *,
            bundle_refs: Sequence[str] = ()) -> EvidenceSet:
    """Gather the incident's evidence from the bundle store and Prometheus; never raises for missing evidence.

    ``bundle_refs`` are the paths or URLs the payload named (``IncidentDraft.bundle_refs``); an
    ``IncidentRecord`` that carries a ``bundle_refs`` field is read too. Query results are written under
    ``workdir`` (created when missing); results of an earlier run in the same workdir are replaced.
    """
    out = EvidenceSet()
    refs = list(dict.fromkeys([*bundle_refs, *(getattr(incident, "bundle_refs", None) or [])]))
    out.paths.extend(_from_store(settings, incident, refs, out.notes))
    if settings.prometheus_url:
        prom = _from_prometheus(settings, incident, workdir, out.notes)
        if prom is not None:
            out.paths.append(prom)
    else:
        out.notes.append("Prometheus not configured (DIAGNOSE_PROMETHEUS_URL): no port counters queried")
    if not out.paths:
        out.notes.append("no evidence found: the diagnosis can only use the alert text")
    log.info("evidence_collected", incident=incident.id, paths=len(out.paths), notes=len(out.notes))
    return out


# ---------------------------------------------------------------------------------------------- names


def short_name(host: str) -> str:
    """``gpu-a003.cluster.local`` -> ``gpu-a003``; IP addresses stay whole."""
    return host if _IPV4.match(host) else host.split(".", 1)[0]


def strip_port(instance: str) -> str:
    """``gpu-a003:9100`` -> ``gpu-a003``, ``[fe80::1]:9100`` -> ``fe80::1``."""
    v = instance.strip()
    if v.startswith("["):
        return v[1:].split("]", 1)[0]
    return re.sub(r":\d+$", "", v) if v.count(":") <= 1 else v


def incident_hosts(incident: IncidentRecord) -> list[str]:
    """The hosts an incident names: its hosts, its ports' hosts, then the node/host/instance labels."""
    names = [*incident.hosts, *(p.host for p in incident.ports if p.host)]
    for k in ("node", "host", "instance"):
        v = incident.labels.get(k)
        if v:
            names.append(strip_port(v) if k == "instance" else v.strip())
    seen: dict[str, str] = {}
    for n in names:
        if n and n.casefold() not in seen:
            seen[n.casefold()] = n
    return list(seen.values())


# ------------------------------------------------------------------------------------------ bundle store


def _entry_key(p: Path) -> str | None:
    """The name a store entry is matched by: a folder's name, an archive's name without its suffix."""
    name = p.name
    if name.startswith("."):
        return None
    if p.is_dir():
        return name.casefold()
    low = name.casefold()
    for suf in ARCHIVE_SUFFIXES:
        if low.endswith(suf) and len(low) > len(suf):
            return low[: -len(suf)]
    return None


def _index(root: Path, real_root: Path, notes: list[str]) -> dict[str, list[Path]]:
    idx: dict[str, list[Path]] = {}
    try:
        entries = sorted(root.iterdir())
    except OSError as exc:
        notes.append(f"bundle store {root} cannot be listed: {exc.strerror or exc}")
        return idx
    for p in entries:
        key = _entry_key(p)
        if key is None:
            continue
        if p.is_symlink() and not _inside(p, real_root):
            notes.append(f"bundle store entry {p.name} is a symlink leading outside the store: not used")
            continue
        idx.setdefault(key, []).append(p)
    return idx


def _inside(p: Path, real_root: Path) -> bool:
    try:
        return p.resolve().is_relative_to(real_root)
    except (OSError, RuntimeError):  # a symlink loop
        return False


def _host_keys(host: str) -> list[str]:
    full = host.casefold()
    short = short_name(full)
    return list(dict.fromkeys([full, short]))


def _lookup_host(idx: dict[str, list[Path]], host: str) -> list[Path]:
    for k in _host_keys(host):
        if k in idx:
            return idx[k]
    short = short_name(host.casefold())
    # a folder named with the domain (gpu-a003.cluster.local/) for a host named without it
    return [p for k, ps in sorted(idx.items()) if not _IPV4.match(k) and short_name(k) == short for p in ps]


def _children_keys(folder: Path) -> set[str]:
    if not folder.is_dir():
        return set()
    try:
        return {k for c in folder.iterdir() if (k := _entry_key(c))}
    except OSError:
        return set()


def _from_store(settings: Settings, incident: IncidentRecord, refs: Iterable[str], notes: list[str]) -> list[Path]:
    root = settings.bundle_root()
    hosts = incident_hosts(incident)
    urls = [r for r in refs if _URL.match(r.strip())]
    paths = [r for r in refs if not _URL.match(r.strip())]
    for u in urls:
        shown = _redact(u.strip())
        if u.strip().lower().startswith(("http://", "https://")):
            notes.append(f"attachment {shown} not downloaded (the service fetches no URL named in a payload): "
                         f"copy the bundle into the bundle store as <job-or-host>/")
        else:
            notes.append(f"bundle ref {shown} is not a path in the bundle store: not used")
    if not root.is_dir():
        notes.append(f"bundle store {root} does not exist: no bundles searched")
        return []
    real_root = root.resolve()
    idx = _index(root, real_root, notes)
    found: list[Path] = []

    def add(p: Path, why: str) -> None:
        rp = p.resolve()
        if any(rp == q or rp.is_relative_to(q) for q in found):
            return
        found.append(rp)
        shown = rp.relative_to(real_root).as_posix() if rp.is_relative_to(real_root) else p.name
        notes.append(f"bundle store: {shown} ({why})")
        log.info("bundle_matched", path=str(rp), why=why)

    job_dirs: list[Path] = []
    job = (incident.job_id or "").strip()
    if job:
        hits = [p for pre in JOB_PREFIXES for p in idx.get((pre + job).casefold(), [])]
        for p in hits:
            add(p, f"job {job}")
            job_dirs.append(p)
        if not hits:
            notes.append(f"no bundle for job {job} in the bundle store")
    for h in hosts:
        hits = _lookup_host(idx, h)
        for p in hits:
            add(p, f"host {h}")
        if hits:
            continue
        if any(set(_host_keys(h)) & _children_keys(d) for d in job_dirs):
            notes.append(f"host {h}: its files are in the job's bundle")
            continue
        notes.append(f"no bundle for host {h} in the bundle store")
    for k in LABEL_KEYS:
        v = (incident.labels.get(k) or "").strip()
        if not v:
            continue
        v = strip_port(v) if k == "instance" else v
        if k in ("node", "host", "instance") and v.casefold() in {h.casefold() for h in hosts}:
            continue  # already searched as a host
        for p in idx.get(v.casefold(), []):
            add(p, f"label {k}={v}")
    if len(paths) > MAX_REFS:
        notes.append(f"{len(paths)} bundle refs named: only the first {MAX_REFS} used")
        paths = paths[:MAX_REFS]
    for ref in paths:
        target = _resolve_ref(root, real_root, ref, notes)
        if target is not None:
            add(target, "named in the payload")
    return found


def _resolve_ref(root: Path, real_root: Path, ref: str, notes: list[str]) -> Path | None:
    """A payload's bundle path, only when it stays inside the store once symlinks are resolved."""
    r = ref.strip()
    if not r:
        return None
    shown = repr(r[:120] + ("..." if len(r) > 120 else ""))
    if r.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:[\\/]", r):
        notes.append(f"bundle ref {shown} is an absolute path: only paths relative to the bundle store are used")
        return None
    if "\x00" in r or ".." in Path(r).parts:
        notes.append(f"bundle ref {shown} leads outside the bundle store: rejected")
        log.warning("bundle_ref_rejected", ref=r[:200])
        return None
    try:
        p = (root / r).resolve()
        exists = p.exists()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a name too long
        notes.append(f"bundle ref {shown} cannot be resolved: not used")
        return None
    if p == real_root or not p.is_relative_to(real_root):
        notes.append(f"bundle ref {shown} {'is the whole store' if p == real_root else 'leads outside the bundle store'}"
                     ": rejected")
        log.warning("bundle_ref_rejected", ref=r[:200])
        return None
    if not exists:
        notes.append(f"bundle ref {shown} not found in the bundle store")
        return None
    return p


# -------------------------------------------------------------------------------------------- Prometheus


def _redact(url: str) -> str:
    """The URL without user:password, for notes and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _host_regex(host: str) -> str:
    """RE2 for a host's label values: its short name, optionally with a domain (``instance`` adds a port)."""
    if _IPV4.match(host):
        return host.replace(".", r"\.")
    return re.escape(short_name(host)).replace(r"\-", "-") + r"(?:\.[^:]*)?"


def promql(host: str) -> str:
    """The PromQL selecting the host's InfiniBand series, by ``instance`` or by a host label.

    Plain selectors joined with ``or`` keep ``__name__``, which the parser needs to know each series' metric.
    Backtick strings take the regex as is (PromQL processes no escapes in them).
    """
    names = f"{METRIC_PREFIX}(?:{'|'.join(re.escape(m) for m in PROMETHEUS_METRICS)})"
    h = _host_regex(host)
    sels = [f'{{__name__=~`{names}`,instance=~`{h}(?::[0-9]+)?`}}']
    sels += [f'{{__name__=~`{names}`,{k}=~`{h}`}}' for k in HOST_LABELS if k != "instance"]
    return " or ".join(sels)


def window(incident: IncidentRecord, now: datetime | None = None) -> tuple[datetime, datetime, list[str]]:
    """(start, end, notes): ``starts_at`` (else the incident's creation) minus 15 min, to ``ends_at`` or now."""
    notes: list[str] = []
    now = now or datetime.now(timezone.utc)
    began = _utc(incident.starts_at or incident.created_at)
    end = _utc(incident.ends_at) if incident.ends_at else now
    if end > now:
        end = now
    if end <= began:
        notes.append("the incident ends before it starts: the window runs to now")
        end = now
    start = began - LOOKBACK
    if end - start > MAX_WINDOW:
        start = end - MAX_WINDOW
        notes.append(f"window longer than {MAX_WINDOW.days} days: only the last {MAX_WINDOW.days} days are queried")
    return start, end, notes


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def _file_name(host: str) -> str:
    return "prometheus_" + re.sub(r"[^A-Za-z0-9._-]", "_", host) + ".json"


def _from_prometheus(settings: Settings, incident: IncidentRecord, workdir: Path, notes: list[str]) -> Path | None:
    base = (settings.prometheus_url or "").rstrip("/")
    shown = _redact(base)
    hosts = []
    for h in incident_hosts(incident):
        if _HOSTNAME.match(h):
            hosts.append(h)
        else:
            notes.append(f"Prometheus: {h!r} is not a host name: not queried")
    if not hosts:
        notes.append("Prometheus: the incident names no host: nothing queried")
        return None
    if len(hosts) > MAX_HOSTS:
        notes.append(f"Prometheus: {len(hosts)} hosts named, only the first {MAX_HOSTS} queried")
        hosts = hosts[:MAX_HOSTS]
    start, end, wnotes = window(incident)
    notes.extend(f"Prometheus: {n}" for n in wnotes)
    span = (end - start).total_seconds()
    step = max(int(settings.prometheus_step_s), 1, math.ceil(span / MAX_POINTS))
    out_dir = workdir / PROMETHEUS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("prometheus_*.json"):
        old.unlink()  # an earlier attempt's results: this run's window replaces them
    written = 0
    seen_by: dict[tuple[tuple[str, str], ...], str] = {}
    span_txt = f"{start.isoformat(timespec='seconds')} .. {end.isoformat(timespec='seconds')}, step {step} s"
    with httpx.Client(timeout=TIMEOUT_S, follow_redirects=True) as client:
        for h in hosts:
            params = {"query": promql(h), "start": f"{start.timestamp():.3f}", "end": f"{end.timestamp():.3f}",
                      "step": str(step), "timeout": f"{max(1, int(TIMEOUT_S))}s"}
            t0 = time.monotonic()
            try:
                doc, err = _query(client, f"{base}/api/v1/query_range", params)
            except httpx.HTTPError as exc:
                notes.append(f"Prometheus at {shown} not reachable ({type(exc).__name__}: {_redact(str(exc))}): "
                             "no port counters from Prometheus")
                log.warning("prometheus_unreachable", url=shown, error=type(exc).__name__)
                break
            log.info("prometheus_query", url=shown, host=h, seconds=round(time.monotonic() - t0, 3),
                     ok=err is None)
            if err is not None or doc is None:
                notes.append(f"Prometheus query for host {h} failed: {err}")
                continue
            for w in doc.get("warnings") or []:
                notes.append(f"Prometheus warning for host {h}: {w}")
            result = (doc.get("data") or {}).get("result") or []
            if not result:
                notes.append(f"Prometheus has no node_infiniband series for host {h} ({span_txt}): is node_exporter's "
                             "infiniband collector enabled, and does the instance or host label name the host?")
                continue
            # two names of one host (host="gpu-a003" and instance="10.0.0.3:9100" both in the alert) select the
            # same series: each series is kept once, with the first name that found it
            fresh = [r for r in result if _series_id(r) not in seen_by]
            if not fresh:
                notes.append(f"Prometheus: the series for {h} are those already kept for {seen_by[_series_id(result[0])]}")
                continue
            for r in fresh:
                seen_by[_series_id(r)] = h
            result = fresh
            doc = {**doc, "data": {**doc["data"], "result": fresh}}
            path = out_dir / _file_name(h)
            path.write_text(prometheus_api.pretty(doc), encoding="utf-8")
            written += 1
            notes.append(f"Prometheus: {len(result)} series for host {h} ({span_txt}) in "
                         f"{PROMETHEUS_DIR}/{path.name}")
    return out_dir if written else None


def _series_id(series: object) -> tuple[tuple[str, str], ...]:
    metric = series.get("metric") if isinstance(series, dict) else None
    return tuple(sorted((str(k), str(v)) for k, v in (metric or {}).items()))


def _query(client: httpx.Client, url: str, params: dict[str, str]) -> tuple[dict | None, str | None]:
    """(response, None) on success, else (None, reason). Transport errors propagate (the caller stops)."""
    # POST with a form body (documented for both query endpoints): the selector list outgrows URL limits
    with client.stream("POST", url, data=params) as resp:
        chunks: list[bytes] = []
        size = 0
        for chunk in resp.iter_bytes():
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                return None, f"response larger than {MAX_RESPONSE_BYTES / 1048576:g} MiB: not kept"
            chunks.append(chunk)
        body = b"".join(chunks)
        status = resp.status_code
    try:
        doc = json.loads(body)
    except ValueError:
        snippet = body[:120].decode("utf-8", errors="replace").strip()
        return None, f"HTTP {status}, not a Prometheus API response ({snippet!r})"
    if not isinstance(doc, dict):
        return None, f"HTTP {status}, not a Prometheus API response"
    if doc.get("status") != "success":
        return None, f"HTTP {status} {doc.get('errorType') or 'error'}: {doc.get('error') or 'no reason given'}"
    if status != 200:
        return None, f"HTTP {status}"
    if (doc.get("data") or {}).get("resultType") != "matrix":
        return None, f"unexpected resultType {(doc.get('data') or {}).get('resultType')!r}"
    return doc, None
