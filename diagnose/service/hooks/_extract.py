"""Shared pieces of the hook normalizers: the two error types, payload access, time parsing, and the extraction
of hosts, HCA devices, ports and job ids from alert labels and free text.

Why one module: every source (Alertmanager labels, a PagerDuty title, a Jira description, a GitHub issue body, a
ServiceNow-like record) names the same things in the same few ways, and the diagnosis is only as good as the
evidence the service can find for them. Labels are authoritative; free text is read with conservative patterns
so that a ticket saying "gpu-a003/mlx5_2 port 1 flaps during job 4412" yields host ``gpu-a003``, device
``mlx5_2``, port 1 and job ``4412``, while prose words, versions and URLs are left alone.

Host lists in Slurm notation (``gpu-a[001-004]``) are expanded with :mod:`diagnose.hostlist`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import PurePosixPath
from typing import Any

from diagnose.hostlist import HostlistError, expand_hostlist
from diagnose.service.models import PortRef

MAX_HOSTS = 4096
"""Most hosts one payload may name (after hostlist expansion): a whole large job, not a runaway range."""

MAX_SCAN_CHARS = 200_000
"""Free text searched for hosts/devices/jobs: what a person wrote, not a pasted multi-megabyte log."""

MAX_FIELD_CHARS = 20_000
"""Free text kept per field (a ticket body can be a pasted log of megabytes; the symptom needs the gist)."""


class AuthError(Exception):
    """The request is not authenticated: unsigned, bad signature or token, stale, or the source is not configured.

    ``str()`` is a short reason safe to return to the caller (it never contains a secret). The service answers 401.
    """


class PayloadError(Exception):
    """The (authenticated) payload is malformed or of a shape this hook does not know.

    ``str()`` is the reason shown to the caller; the service answers 422.
    """


# --------------------------------------------------------------------------------------------------- payload access


def require_mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` as an object, or PayloadError naming ``where`` (e.g. ``alerts[2].labels``)."""
    if not isinstance(value, Mapping):
        raise PayloadError(f"{where}: expected an object, got {_kind(value)}")
    return value


def require_str(value: Any, where: str) -> str:
    """A non-empty string (numbers are accepted and converted: ids are often sent as either)."""
    if isinstance(value, bool) or value is None:
        raise PayloadError(f"{where}: expected a non-empty string, got {_kind(value)}")
    if isinstance(value, (int, float)):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise PayloadError(f"{where}: expected a non-empty string, got {_kind(value)}")
    return value.strip()


def optional_str(value: Any, where: str) -> str:
    """A string or nothing (``""``); numbers are converted; anything else is a PayloadError."""
    if value is None:
        return ""
    if isinstance(value, bool):
        raise PayloadError(f"{where}: expected a string, got {_kind(value)}")
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        raise PayloadError(f"{where}: expected a string, got {_kind(value)}")
    return value


def str_labels(value: Any, where: str) -> dict[str, str]:
    """A flat ``{str: str}`` label set (Alertmanager labels and annotations are always strings)."""
    if value is None:
        return {}
    mapping = require_mapping(value, where)
    out: dict[str, str] = {}
    for k, v in mapping.items():
        if isinstance(v, (dict, list)) or v is None:
            raise PayloadError(f"{where}.{k}: expected a string, got {_kind(v)}")
        out[str(k)] = str(v)
    return out


def get_path(obj: Any, dotted: str) -> tuple[bool, Any]:
    """Follow ``a.b.0.c`` through objects and lists; ``(False, None)`` when any step is missing."""
    cur = obj
    for part in dotted.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return False, None
    return True, cur


def clip(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying so, so nobody mistakes a cut body for the whole."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not kept]"


def join_text(*parts: str | None) -> str:
    """Non-empty parts, stripped, one per line, duplicates dropped (summary and description often repeat)."""
    out: list[str] = []
    for p in parts:
        p = (p or "").strip()
        if p and p not in out:
            out.append(p)
    return "\n".join(out)


def stable_hash(obj: Any) -> str:
    """A short, stable id for an object (sorted-key JSON, SHA-256): the fallback dedup key when a source sends none."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def dedupe(items: Iterable[str]) -> list[str]:
    """Order-preserving de-duplication."""
    seen: set[str] = set()
    out: list[str] = []
    for it in items:
        if it and it not in seen:
            seen.add(it)
            out.append(it)
    return out


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    return names.get(type(value), type(value).__name__)


# --------------------------------------------------------------------------------------------------------- time

_FRACTION = re.compile(r"(\.\d{1,6})\d*")
_OFFSET_NO_COLON = re.compile(r"([+-]\d{2})(\d{2})$")


def parse_time(value: Any, where: str) -> datetime | None:
    """An RFC 3339 / ISO 8601 time (or epoch seconds or milliseconds) as an aware UTC-based datetime.

    Accepts what the sources send: Alertmanager's nanosecond fractions (``...26.739266876+02:00``), Jira's offset
    without a colon (``2009-12-16T23:46:10.612-0600``), ``Z``, a space separator, and epoch numbers (Jira's
    ``timestamp`` is in milliseconds). A time without an offset is taken as UTC. Alertmanager's zero time
    ``0001-01-01T00:00:00Z`` means "no end" and maps to None, as does an empty value. The string is normalized
    first because Python 3.10's ``fromisoformat`` accepts neither ``Z``, nor more than 6 fraction digits, nor an
    offset without a colon.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise PayloadError(f"{where}: expected a time, got a boolean")
    if isinstance(value, (int, float)) or (isinstance(value, str) and re.fullmatch(r"\d{9,14}(\.\d+)?", value)):
        num = float(value)
        if num > 1e11:  # milliseconds
            num /= 1000.0
        try:
            return datetime.fromtimestamp(num, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise PayloadError(f"{where}: epoch time out of range: {value!r:.40}") from None
    if not isinstance(value, str):
        raise PayloadError(f"{where}: expected a time, got {_kind(value)}")
    s = value.strip()
    if s[:4] == "0001":
        return None
    s = s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s
    s = _FRACTION.sub(lambda m: m.group(1).ljust(7, "0"), s, count=1)
    s = _OFFSET_NO_COLON.sub(r"\1:\2", s) if re.search(r"T|\s", s) else s
    try:
        parsed = datetime.fromisoformat(s)
    except ValueError:
        raise PayloadError(f"{where}: not an RFC 3339 time: {value[:64]!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


# -------------------------------------------------------------------------------------------------- bundle refs

_URL = re.compile(r"^https?://[^\s/]+", re.IGNORECASE)


def check_bundle_ref(ref: Any, where: str, *, allow_url: bool = False) -> str:
    """A bundle reference named by a payload: a path *relative* to the bundle store or, with ``allow_url``, an
    http(s) URL (Jira attachment links, which Jira itself generates and signs).

    The path is only recorded here; the evidence stage resolves it inside the bundle store and refuses anything that
    escapes it. It is refused here too, early and with a clear reason: absolute paths, ``~``, drive letters,
    backslashes and any ``..`` segment (PayloadError). URLs are refused everywhere else, so that a line in a ticket
    cannot make the service fetch an arbitrary address.
    """
    s = require_str(ref, where)
    if _URL.match(s) and allow_url:
        return s
    if "://" in s:
        raise PayloadError(f"{where}: a bundle reference must be a path relative to the bundle store, not a URL")
    if "\x00" in s or "\\" in s:
        raise PayloadError(f"{where}: a bundle path may not contain backslashes or NUL")
    if s.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", s):
        raise PayloadError(f"{where}: a bundle path must be relative to the bundle store, not absolute: {s[:80]!r}")
    parts = PurePosixPath(s).parts
    if ".." in parts:
        raise PayloadError(f"{where}: a bundle path may not contain '..': {s[:80]!r}")
    if not parts:  # "." or "./": the whole store is no one's bundle
        raise PayloadError(f"{where}: a bundle path must name an entry of the bundle store, not the store: {s[:80]!r}")
    return str(PurePosixPath(*parts))


# ------------------------------------------------------------------------------------------------- hosts (labels)


def host_from_instance(instance: str) -> str:
    """The host of a Prometheus ``instance`` label: ``gpu-a003:9100`` -> ``gpu-a003``, ``[fe80::1]:9100`` ->
    ``fe80::1``, ``https://gpu-a003.example.org/metrics`` -> ``gpu-a003.example.org``; a bare name is kept."""
    s = instance.strip()
    if "://" in s:
        s = s.split("://", 1)[1]
        s = s.split("/", 1)[0].split("@")[-1]
    if s.startswith("["):
        end = s.find("]")
        return s[1:end] if end > 0 else s.strip("[]")
    if s.count(":") == 1:
        host, _, port = s.partition(":")
        if port.isdigit():
            return host
    return s


def expand_hosts(value: str, where: str) -> list[str]:
    """A host label value that may be a Slurm hostlist (``gpu-a[001-004],gpu-b7``); PayloadError when malformed."""
    try:
        hosts = expand_hostlist(value, limit=MAX_HOSTS)
    except HostlistError as exc:
        raise PayloadError(f"{where}: {exc}") from None
    return [host_from_instance(h) for h in hosts]


# --------------------------------------------------------------------------------------------------- free text

_DEVICE = (
    r"(?:mlx[45]_\d+|ibp\d+s\d+(?:f\d+)?(?:np\d+)?|ib\d+|bnxt_re\d+|irdma\d+|hfi1_\d+|qedr\d+|efa_\d+|erdma_\d+"
    r"|rocep\d+s\d+(?:f\d+)?|en[ops]\d+(?:s\d+)?(?:f\d+)?np\d+)"
)
"""RDMA device and port-level netdev names: ``mlx5_0`` (ConnectX; node_exporter's infiniband ``device`` label),
``ibp12s0`` (IPoIB, predictable naming), ``ib0``, ``bnxt_re0``, ``irdma0``, ``hfi1_0``, ``qedr0``, ``efa_0``,
``erdma_0``, ``rocep65s0f0`` and RoCE netdevs with a physical-port suffix (``enp65s0f0np0``)."""

_DEVICE_RE = re.compile(rf"(?<![\w-]){_DEVICE}(?![\w-])")
# Every quantifier below is bounded (a host-name label is at most 63 characters, RFC 1035) and separators are short
# runs of blanks: the patterns stay linear on hostile input such as megabytes of spaces or "x[1-2]" repeated.
_HOST_TOKEN = r"[A-Za-z][A-Za-z0-9_-]{0,62}(?:\.[A-Za-z0-9_-]{1,63}){0,6}(?:\[[0-9,-]{1,64}\][A-Za-z0-9_-]{0,63}){0,3}"
_NO_TOKEN_BEFORE = r"(?<![\w./@\\\]-])"
_PORT_SEP = r"(?:[ \t]{0,3}[:/][ \t]{0,3}|[ \t]{0,3},?[ \t]{0,3}\(?port[ \t]{0,3}[=:#]?[ \t]{0,3})"
# "gpu-a003/mlx5_2 port 1", "gpu-a003 mlx5_2:1", "gpu-a003:mlx5_2" (diagnose's own location labels use host/dev)
_HOST_DEVICE_RE = re.compile(
    rf"{_NO_TOKEN_BEFORE}(?P<host>{_HOST_TOKEN})(?:[ \t]{{0,3}}[/:][ \t]{{0,3}}|[ \t]{{1,3}})(?P<dev>{_DEVICE})"
    rf"(?![\w-])(?:{_PORT_SEP}(?P<port>\d{{1,3}})\b)?",
    re.IGNORECASE,
)
_DEVICE_PORT_RE = re.compile(rf"(?<![\w-])(?P<dev>{_DEVICE}){_PORT_SEP}(?P<port>\d{{1,3}})\b", re.IGNORECASE)
_PORT_RE = re.compile(r"\bport[ \t]{0,3}[=:#]?[ \t]{0,3}(\d{1,3})\b", re.IGNORECASE)
_KEYED_HOSTS_RE = re.compile(
    r"\b(?:host(?:name)?s?|nodes?|node_?list|instance|exported_instance|server)[ \t]{0,3}[=:][ \t]{0,3}"
    r"(?P<val>[A-Za-z0-9][^\s;'\"()<>]{0,4096})",
    re.IGNORECASE,
)
_PHRASE_HOST_RE = re.compile(
    rf"\b(?:on|from|hosts?|nodes?|servers?|machines?)[ \t]{{1,3}}(?P<val>{_HOST_TOKEN})(?![\w-])", re.IGNORECASE
)
_BARE_HOST_RE = re.compile(rf"{_NO_TOKEN_BEFORE}(?P<val>{_HOST_TOKEN})(?![\w-])")
_JOB_RE = re.compile(
    r"\b(?:slurm[_ ]?)?job(?:[_ ]?id)?(?:[ \t]{0,3}[=:#-][ \t]{0,3}|[ \t]{1,3})(?:#[ \t]?)?"
    r"(?P<job>\d{1,20}(?:_\d{1,10})?)\b",
    re.IGNORECASE,
)
_BUNDLE_RE = re.compile(r"\bbundle[ \t]{0,3}[=:][ \t]{0,3}(?P<ref>[^\s'\"<>]{1,1024})", re.IGNORECASE)

# Words that look like host names to a pattern but never are one in these texts.
_NOT_HOST_FIRST = re.compile(
    r"^(?:v\d+|utf|x86|sha|md5|crc\d*|cuda|nccl|rccl|rfc|iso|cve|ipv[46]|pcie|gen\d|roce|rocev\d|ib|hdr|ndr|edr|fdr"
    r"|qdr|xdr|tcp|udp|http|https|rdma|mlx\d|connectx|cx\d|linux|kernel|ubuntu|rhel|centos|debian|python\d*|torch"
    r"|e2e|ecc|dcgm|xid|mtu|qp|pkey|mpi|ompi|ucx|nvidia|nvlink|nvswitch|sm|lid|gid|guid)$",
    re.IGNORECASE,
)
_NOT_HOST_WHOLE = re.compile(
    r"^(?:gpu|cpu|rank|port|lane|link|ch|channel|ring|tree|xid|numa|socket|gen|job|slot|rail|vl|sl)[-_]?\d+$",
    re.IGNORECASE,
)


@dataclass
class Extracted:
    """What free text (or a label set) says about where and what: merged into an IncidentDraft."""

    hosts: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    ports: list[PortRef] = field(default_factory=list)
    job_id: str | None = None
    bundle_refs: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """What was seen but not taken (an unsafe ``bundle=`` in free text): shown in the draft's text."""

    def merge(self, other: Extracted) -> Extracted:
        """``self`` first (labels are authoritative), then what ``other`` adds."""
        ports = list(self.ports)
        for p in other.ports:
            if p not in ports:
                ports.append(p)
        return Extracted(
            hosts=dedupe([*self.hosts, *other.hosts])[:MAX_HOSTS],
            devices=dedupe([*self.devices, *other.devices]),
            ports=ports,
            job_id=self.job_id or other.job_id,
            bundle_refs=dedupe([*self.bundle_refs, *other.bundle_refs]),
            problems=dedupe([*self.problems, *other.problems]),
        )

    def note(self) -> str:
        """The problems as one line for the draft text ("" when none)."""
        return "Note: " + "; ".join(self.problems) if self.problems else ""


def _is_hostish(token: str, *, keyed: bool) -> bool:
    if not token or len(token) > 253 or not token[0].isalpha() or _DEVICE_RE.fullmatch(token):
        return False  # 253: the longest DNS name (RFC 1035)
    if "[" in token:
        return True
    if _NOT_HOST_WHOLE.match(token):
        return False
    first = re.split(r"[-.]", token, maxsplit=1)[0]
    if _NOT_HOST_FIRST.match(first):
        return False
    if keyed:
        return True
    # prose: a cluster host name has a digit and a hyphen ("gpu-a003", "dgx-h100-042"); "node17" needs "on"/"host"
    return any(c.isdigit() for c in token) and "-" in token


def _hosts_in(token: str, *, keyed: bool) -> list[str]:
    token = token.rstrip(".,;:)-")
    if not _is_hostish(token, keyed=keyed):
        return []
    try:
        names = expand_hostlist(token, limit=MAX_HOSTS)
    except HostlistError:
        return []  # free text: a malformed range is just not a host list
    out: list[str] = []
    for n in names:
        n = host_from_instance(n).rstrip(".-")
        if _is_hostish(n, keyed=True):
            out.append(n)
    return out


def extract_text(text: str) -> Extracted:
    """Hosts, devices, ports, the first job id and ``bundle=`` references named in free text.

    Patterns, in order of trust: ``host=``/``node=``/``NodeList=``/``instance=`` values (Slurm host lists expanded),
    ``host/device port N`` and ``host device:N`` (diagnose's own location format), ``on|host|node X``, then bare
    hyphenated names with a digit (``gpu-a003``) and bracketed host lists anywhere. Devices: see ``_DEVICE``.
    Job ids: ``job 4412``, ``job_id=4412``, ``JobId=4412`` (Slurm), ``slurm_job_id: 4412``, array ids
    ``4412_7``. ``bundle=<path>`` is checked with :func:`check_bundle_ref`; one that is absolute, escapes with
    ``..`` or is a URL is not kept and is reported in ``problems`` instead (labels and mapped fields, which a
    system sets, are refused outright with a PayloadError).
    """
    text = (text or "")[:MAX_SCAN_CHARS]
    located: list[tuple[int, list[str]]] = []  # (offset, hosts): hosts are reported in the order the text names them
    for m in _KEYED_HOSTS_RE.finditer(text):
        located.append((m.start("val"), _hosts_in(m.group("val"), keyed=True)))
    ports: list[PortRef] = []
    devices: list[str] = []
    for m in _HOST_DEVICE_RE.finditer(text):
        if not any(c.isdigit() for c in m.group("host")):
            continue  # "errors on mlx5_0": a word before a device is not a host unless it looks like one
        found = _hosts_in(m.group("host"), keyed=True)
        if not found:
            continue
        located.append((m.start("host"), found))
        dev = m.group("dev")
        devices.append(dev)
        port = int(m.group("port")) if m.group("port") else None
        ref = PortRef(host=found[0] if len(found) == 1 else None, device=dev, port=port)
        if ref not in ports:
            ports.append(ref)
    for m in _PHRASE_HOST_RE.finditer(text):
        val = m.group("val")
        if any(c.isdigit() for c in val):
            located.append((m.start("val"), _hosts_in(val, keyed=True)))
    for m in _BARE_HOST_RE.finditer(text):
        located.append((m.start("val"), _hosts_in(m.group("val"), keyed=False)))
    located.sort(key=lambda item: item[0])
    hosts = dedupe(h for _, found in located for h in found)[:MAX_HOSTS]

    for m in _DEVICE_RE.finditer(text):
        devices.append(m.group(0))
    devices = dedupe(devices)
    sole_host = hosts[0] if len(hosts) == 1 else None
    port_spans: list[tuple[int, int]] = []
    for m in _DEVICE_PORT_RE.finditer(text):
        port_spans.append(m.span())
        dev, port = m.group("dev"), int(m.group("port"))
        if any(p.device == dev and p.port == port for p in ports):
            continue
        portless = next((p for p in ports if p.device == dev and p.port is None), None)
        if portless is not None:  # "gpu-a003 mlx5_2" seen first, its port written further on
            ports.remove(portless)
        ports.append(PortRef(host=portless.host if portless else sole_host, device=dev, port=port))
    for m in _PORT_RE.finditer(text):
        if any(a <= m.start() < b for a, b in port_spans) or int(m.group(1)) == 0 or int(m.group(1)) > 255:
            continue
        port = int(m.group(1))
        if any(p.port == port for p in ports):
            continue
        ports.append(PortRef(host=sole_host, device=devices[0] if len(devices) == 1 else None, port=port))

    job = _JOB_RE.search(text)
    bundles: list[str] = []
    problems: list[str] = []
    for m in _BUNDLE_RE.finditer(text):
        try:
            bundles.append(check_bundle_ref(m.group("ref").rstrip(".,;)"), "bundle reference in the text"))
        except PayloadError as exc:  # prose is not refused for one bad mention: the reference is dropped, visibly
            problems.append(f"ignored {exc}")
    return Extracted(hosts=hosts, devices=devices, ports=ports, job_id=job.group("job") if job else None,
                     bundle_refs=dedupe(bundles), problems=dedupe(problems))


HOST_LABELS = ("node", "host", "hostname", "instance", "exported_instance")
"""Label names that carry the host, in order of preference (``instance`` is stripped of ``:port``)."""
JOB_LABELS = ("job_id", "slurm_job_id", "jobid")
"""Label names that carry the batch job id (Prometheus' own ``job`` label is the scrape job, never a batch job)."""
BUNDLE_LABELS = ("bundle",)


def extract_labels(labels: Mapping[str, str], where: str) -> Extracted:
    """Hosts (``node``, ``host``, ``hostname``, ``instance`` without ``:port``, ``exported_instance``), device
    (``device``, as node_exporter's infiniband collector labels it: ``mlx5_0``), port (``port``), job id
    (``job_id``, ``slurm_job_id``, ``jobid``) and ``bundle`` from a label set."""
    hosts: list[str] = []
    for name in HOST_LABELS:
        val = (labels.get(name) or "").strip()
        if not val:
            continue
        if name in ("instance", "exported_instance"):  # one scrape target: "host:port", "[v6]:port", a URL
            hosts.append(host_from_instance(val))
        else:
            hosts += expand_hosts(val, f"{where}.{name}")
    hosts = dedupe(hosts)
    device = (labels.get("device") or "").strip()
    devices = [device] if device else []
    port_s = (labels.get("port") or "").strip()
    port = int(port_s) if port_s.isdigit() and int(port_s) <= 65535 else None
    ports = [PortRef(host=hosts[0] if hosts else None, device=device or None, port=port)] if (device or port) else []
    job = next((labels[k].strip() for k in JOB_LABELS if (labels.get(k) or "").strip()), None)
    bundles = [check_bundle_ref(labels[k], f"{where}.{k}") for k in BUNDLE_LABELS if labels.get(k)]
    return Extracted(hosts=hosts, devices=devices, ports=ports, job_id=job, bundle_refs=bundles)


def key_value_tags(tags: Iterable[str]) -> dict[str, str]:
    """Ticket labels written as ``key:value`` or ``key=value`` (``host:gpu-a003``) as a label dict."""
    out: dict[str, str] = {}
    for t in tags:
        m = re.fullmatch(r"([A-Za-z][\w.-]*)[:=](.+)", t.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out
