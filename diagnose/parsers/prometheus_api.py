"""Prometheus HTTP API query results (``/api/v1/query_range``, ``/api/v1/query``): the ``node_infiniband_*`` series.

Shape (https://prometheus.io/docs/prometheus/latest/querying/api/#expression-queries, "Range queries" and
"Expression query result formats")::

    {"status": "success",
     "data": {"resultType": "matrix",
              "result": [{"metric": {"__name__": "node_infiniband_symbol_error_total", "device": "mlx5_0",
                                     "instance": "gpu-a003:9100", "job": "node", "port": "1"},
                          "values": [[1711461446.781, "1234"], [1711461476.781, "1300"]]}]}}

An instant query answers ``"resultType": "vector"`` with one ``"value": [ts, "v"]`` per series; a failed one
``{"status": "error", "errorType": "bad_data", "error": "..."}`` (reported as a problem). Sample values are
strings (``"1.8527668e+07"``, ``"NaN"``); timestamps are Unix seconds with a fraction.

The metric names are node_exporter's (``collector/infiniband_linux.go``) and are read with the same tables as
the text-exposition parser :mod:`diagnose.parsers.node_exporter` (imported, not copied): PMA counters become
:class:`~diagnose.parsers.perfquery.PortCounter` (canonical name, ``extended=True``; the data counters, exported
in octets, back in 4-octet words: ``in_words``), the mlx5 hw-counter
metrics :class:`~diagnose.parsers._host.RdmaHwCounter` (kernel spelling), ``state_id`` /
``physical_state_id`` / ``rate_bytes_per_second`` one :class:`~diagnose.parsers._ib.IbPort` per port (the
last sample: the port's state at the end of the window; firmware and HCA type from ``node_infiniband_info``).
Other metrics are ignored. A series whose ``__name__`` is missing (the query applied a function such as
``rate()``) holds no counter values and is reported as a problem.

Counter series are counters sampled over time, so each sample is a snapshot: the records carry
``snapshot`` 0, 1, ... and the sample's ``timestamp``, and the link extractor turns the first-to-last increase
into a delta, a rate and a bit-error rate exactly as for two ``perfquery`` runs. Flat stretches add nothing
to a delta, so only the first sample, every sample whose value differs from the previous one (increments and
resets) and the last sample are kept: a flat series costs two records, whatever the window and step.

Lines: ``line`` is the line of the sample in the file; :func:`pretty` writes one series' labels on one line
and one sample per line so these lines are meaningful (a response kept on one line, as ``curl`` saves it,
puts everything on line 1). A sample line alone names no metric, so ``text`` is the sample written the way the
text exposition shows it: ``node_infiniband_symbol_error_total{device="mlx5_0",port="1"} 1300 @1711461476.781``.
The host comes from the ``host``/``hostname``/``node``/``nodename``/``instance`` label (``instance`` without
its port), else from the bundle's hint.

A truncated response keeps every series that was complete before the cut and reports the truncation.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from diagnose.models.counters import canonical_counter
from diagnose.models.records import ParseResult, Record, clip

# the node_exporter metric tables and label helpers, shared with the text-exposition parser
from diagnose.parsers._host import RdmaHwCounter
from diagnose.parsers._ib import IbPort
from diagnose.parsers.base import guarded_parse
from diagnose.parsers.node_exporter import (
    HW_METRICS,
    LEGACY_METRICS,
    METRIC_PREFIX,
    PHYS_STATE_IDS,
    STATE_IDS,
    host_of,
    in_words,
    metric_number,
)
from diagnose.parsers.perfquery import PortCounter

FORMAT = "prometheus_api"

_RESULT_RE = re.compile(r'(?<!\\)"result"\s*:\s*\[')
_RESULT_TYPE_RE = re.compile(r'(?<!\\)"resultType"\s*:\s*"(?P<t>[a-z]+)"')
_METRIC_KEY_RE = re.compile(r'(?<!\\)"metric"\s*:')
# one sample: `[1711461446.781, "1234"` (a label value cannot produce this: its quotes would be escaped)
_SAMPLE_RE = re.compile(r'\[\s*-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\s*,\s*"')
_GAUGES = ("state_id", "physical_state_id", "rate_bytes_per_second")


def sniff(head: str) -> int:
    s = head.lstrip()
    if not s.startswith("{") or '"status"' not in s:
        return 0
    if _RESULT_TYPE_RE.search(s) and _RESULT_RE.search(s):
        return 95 if '"node_infiniband_' in s else 70
    if re.search(r'"status"\s*:\s*"error"', s) and '"errorType"' in s:
        return 60
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


# ------------------------------------------------------------------------------------------------ writing


def pretty(doc: Mapping[str, Any]) -> str:
    """The response as JSON with one series' labels per line and one sample per line.

    The service writes query results this way so that the file:line of a piece of evidence points at the
    sample it cites. Only whitespace differs from the response Prometheus sent: ``json.loads`` gives the same
    object back.
    """
    data = doc.get("data")
    if not isinstance(data, Mapping) or not isinstance(data.get("result"), list):
        return json.dumps(doc, indent=2) + "\n"
    out = ["{"]
    top = [k for k in doc if k != "data"]
    for k in top:
        out.append(f"  {json.dumps(k)}: {json.dumps(doc[k])},")
    out.append('  "data": {')
    for k in data:
        if k != "result":
            out.append(f"    {json.dumps(k)}: {json.dumps(data[k])},")
    out.append('    "result": [')
    result = data["result"]
    for i, series in enumerate(result):
        out.append("      {")
        keys = list(series) if isinstance(series, Mapping) else []
        for j, k in enumerate(keys):
            sep = "," if j < len(keys) - 1 else ""
            v = series[k]
            if k in ("values", "histograms") and isinstance(v, list) and v:
                out.append(f"        {json.dumps(k)}: [")
                out.extend(f"          {json.dumps(s)}{',' if n < len(v) - 1 else ''}" for n, s in enumerate(v))
                out.append(f"        ]{sep}")
            else:
                out.append(f"        {json.dumps(k)}: {json.dumps(v)}{sep}")
        out.append("      }" + ("," if i < len(result) - 1 else ""))
    out.append("    ]")
    out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------ reading


@dataclass
class _Series:
    metric: dict[str, str]
    samples: list[Any]
    start: int  # offset of the series object in the text
    end: int
    metric_line: int
    sample_lines: list[int] = field(default_factory=list)


@dataclass
class _Port:
    host: str | None
    device: str
    port: int
    gauges: dict[str, tuple[int, str, float]] = field(default_factory=dict)


class _Lines:
    """Offset -> 1-based line number, by bisection over the newline offsets."""

    def __init__(self, text: str) -> None:
        self._nl = [m.start() for m in re.finditer("\n", text)]

    def at(self, offset: int) -> int:
        return bisect.bisect_left(self._nl, offset) + 1


def _iter_series(text: str, pos: int, lines: _Lines, problems: list[str]) -> list[_Series]:
    """Decode the objects of the ``result`` array one by one from ``pos`` (just after its ``[``).

    One object at a time, so that a response cut in the middle keeps the series before the cut.
    """
    dec = json.JSONDecoder()
    out: list[_Series] = []
    n = len(text)
    while True:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n:
            problems.append(f"truncated: the result array is not closed (after {len(out)} complete series)")
            return out
        if text[pos] == "]":
            return out
        try:
            obj, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            problems.append(f"truncated: series {len(out) + 1} (from line {lines.at(pos)}) is cut: {exc.msg}")
            return out
        if not isinstance(obj, dict):
            problems.append(f"line {lines.at(pos)}: a result entry is not an object")
            pos = end
            continue
        samples = obj.get("values")
        if samples is None and "value" in obj:
            samples = [obj["value"]]
        raw_metric = obj.get("metric")
        metric: dict[Any, Any] = raw_metric if isinstance(raw_metric, dict) else {}
        mm = _METRIC_KEY_RE.search(text, pos, end)
        s = _Series(metric={str(k): str(v) for k, v in metric.items()},
                    samples=samples if isinstance(samples, list) else [], start=pos, end=end,
                    metric_line=lines.at(mm.start() if mm else pos))
        starts = [m.start() for m in _SAMPLE_RE.finditer(text, pos, end)]
        if len(starts) == len(s.samples):
            s.sample_lines = [lines.at(o) for o in starts]
        else:  # unusual content (a label value shaped like a sample): cite the series' labels instead
            s.sample_lines = [s.metric_line] * len(s.samples)
        out.append(s)
        pos = end


def _iso(ts: object) -> str | None:
    try:
        t = float(ts)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not math.isfinite(t):
        return None
    try:
        return datetime.fromtimestamp(t, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def _exposition(name: str, labels: Mapping[str, str], value: str, ts: object) -> str:
    """A sample written the way the text exposition shows it, with the query timestamp after ``@``."""
    lab = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return clip(f"{name}{{{lab}}} {value} @{ts}")


def _kept(samples: list[tuple[int, Any, int | float]]) -> list[tuple[int, Any, int | float]]:
    """First sample, every change of value, last sample: what a delta across snapshots needs."""
    out: list[tuple[int, Any, int | float]] = []
    prev: object = None
    for i, item in enumerate(samples):
        if i == 0 or item[2] != prev or i == len(samples) - 1:
            out.append(item)
        prev = item[2]
    return out


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    lines = _Lines(text)
    doc: Any = None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    if isinstance(doc, dict):
        if doc.get("status") == "error":
            problems.append(f"Prometheus answered an error: {doc.get('errorType') or '?'}: {doc.get('error') or ''}".rstrip())
            return
        for w in doc.get("warnings") or []:
            problems.append(f"Prometheus warning: {w}")
        raw_data = doc.get("data")
        data: dict[Any, Any] = raw_data if isinstance(raw_data, dict) else {}
        rtype = data.get("resultType")
    else:
        m = _RESULT_TYPE_RE.search(text)
        rtype = m.group("t") if m else None
    if rtype not in ("matrix", "vector"):
        if rtype in ("scalar", "string"):
            problems.append(f"resultType {rtype} holds no series")
        elif doc is None and not _RESULT_RE.search(text):
            problems.append("not a Prometheus query result: no result array")
        elif rtype is None:
            problems.append("no resultType: not a Prometheus query result")
        return
    m = _RESULT_RE.search(text)
    if m is None:
        problems.append("no result array")
        return
    series = _iter_series(text, m.end(), lines, problems)
    if doc is None and not any(p.startswith("truncated") for p in problems):
        problems.append("truncated: the response is not complete JSON after its result array")

    ports: dict[tuple[str | None, str, int], _Port] = {}
    info: dict[tuple[str | None, str], dict[str, str]] = {}
    pmas: list[tuple[bool, PortCounter]] = []
    nameless = 0
    for s in series:
        full = s.metric.get("__name__")
        if not full:
            nameless += 1
            continue
        if not full.startswith(METRIC_PREFIX):
            continue
        name = full[len(METRIC_PREFIX):]
        rec_host = host_of(s.metric) or host
        device = s.metric.get("device")
        if name == "info":
            if device:
                info.setdefault((rec_host, device), s.metric)
            continue
        port_s = s.metric.get("port")
        if not device or port_s is None or not port_s.isdigit():
            continue
        port_no = int(port_s)
        samples: list[tuple[int, Any, int | float]] = []  # (line, raw sample, value)
        for ln, raw in zip(s.sample_lines, s.samples, strict=True):
            if not isinstance(raw, list) or len(raw) != 2:
                problems.append(f"line {ln}: a sample is not [timestamp, value]")
                continue
            value = metric_number(str(raw[1]))
            if value is None:
                if str(raw[1]) not in ("NaN", "+Inf", "-Inf"):
                    problems.append(f"line {ln}: unparseable value {raw[1]!r} for {full}")
                continue
            samples.append((ln, raw, value))
        if not samples:
            continue
        if name in _GAUGES:
            p = ports.setdefault((rec_host, device, port_no), _Port(rec_host, device, port_no))
            ln, raw, value = samples[-1]
            p.gauges[name] = (ln, _exposition(full, s.metric, str(raw[1]), raw[0]), float(value))
            continue
        bad = [v for _, _, v in samples if not isinstance(v, int) or v < 0]
        if bad:
            problems.append(f"line {s.metric_line}: non-integer counter value {bad[0]!r} for {full}"
                            " (a rate or other function, not the raw counter)")
            continue
        hw = HW_METRICS.get(name)
        if hw is not None:
            for ln, raw, value in _kept(samples):
                records.append(RdmaHwCounter(
                    source=source, line=ln, text=_exposition(full, s.metric, str(raw[1]), raw[0]), host=rec_host,
                    device=device, port=port_no, counter=hw, value=int(value),
                ))
            continue
        legacy = name in LEGACY_METRICS
        canon = LEGACY_METRICS.get(name) or canonical_counter(name)
        if canon is None:
            continue
        for snap, (ln, raw, value) in enumerate(_kept(samples)):
            pmas.append((legacy, PortCounter(
                source=source, line=ln, text=_exposition(full, s.metric, str(raw[1]), raw[0]), host=rec_host,
                lid=None, guid=None, port=port_no, counter=canon, value=in_words(name, int(value)), extended=True,
                snapshot=snap, timestamp=_iso(raw[0]), device=device,
            )))

    # legacy_* (kernels < 4.5 counters_ext) only where the modern metric is missing, as in the text parser
    modern = {(pc.host, pc.device, pc.port, pc.counter) for legacy, pc in pmas if not legacy}
    records.extend(pc for legacy, pc in pmas if not (legacy and (pc.host, pc.device, pc.port, pc.counter) in modern))

    for (rec_host, device, port_no), p in ports.items():
        g = p.gauges
        dev_info = info.get((rec_host, device)) or {}
        state_id = int(g["state_id"][2]) if "state_id" in g else None
        phys_id = int(g["physical_state_id"][2]) if "physical_state_id" in g else None
        rate = None
        if "rate_bytes_per_second" in g:
            bps = g["rate_bytes_per_second"][2]
            rate = round(bps * 8 / 1e9, 3) if math.isfinite(bps) and bps > 0 else None
        at = g.get("state_id") or g.get("physical_state_id") or g["rate_bytes_per_second"]
        records.append(IbPort(
            source=source, line=at[0], text=at[1], host=rec_host, device=device, port=port_no,
            state=STATE_IDS.get(state_id) if state_id is not None else None,
            phys_state=PHYS_STATE_IDS.get(phys_id) if phys_id is not None else None,
            rate_gbps=rate, width=None, speed=None, link_layer=None, lid=None, sm_lid=None, port_guid=None,
            node_guid=None, ca_type=dev_info.get("hca_type") or None,
            firmware=dev_info.get("firmware_version") or None,
        ))
    if nameless:
        problems.append(f"{nameless} series without __name__ (the query applied a function or aggregation): "
                        "only raw node_infiniband_* series hold counter values")
