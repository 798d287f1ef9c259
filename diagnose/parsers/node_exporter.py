"""Prometheus node_exporter text exposition: the ``node_infiniband_*`` metrics.

Shape (prometheus/node_exporter ``collector/infiniband_linux.go``, fixture ``collector/fixtures/e2e-output.txt``)::

    # HELP node_infiniband_link_downed_total Number of times the link failed to recover ...
    # TYPE node_infiniband_link_downed_total counter
    node_infiniband_link_downed_total{device="mlx4_0",port="1"} 0
    node_infiniband_port_data_received_bytes_total{device="mlx4_0",port="1"} 1.8527668e+07
    node_infiniband_info{board_id="SM_1141000001000",device="mlx4_0",firmware_version="2.31.5050",hca_type="MT4099"} 1
    node_infiniband_state_id{device="mlx4_0",port="1"} 4

Only ``node_infiniband_`` lines are read; every other metric is ignored (the file is claimed only when such
lines exist). Emits :class:`~diagnose.parsers.perfquery.PortCounter` per PMA counter sample (canonical name via
:func:`~diagnose.models.counters.canonical_counter`, ``extended=True`` as the values are the sysfs 64-bit
counters), :class:`~diagnose.parsers._host.RdmaHwCounter` for the mlx5 hw-counter metrics that newer
node_exporter versions export (mapped back to the kernel ``hw_counters`` names, e.g.
``np_cnp_packets_sent_total`` -> ``np_cnp_sent``) and one :class:`~diagnose.parsers._ib.IbPort` per
(device, port) that has ``state_id`` / ``physical_state_id`` / ``rate_bytes_per_second`` samples
(firmware / HCA type from ``node_infiniband_info``).

Units: ``port_data_{received,transmitted}_bytes_total`` are **octets** (procfs multiplies the sysfs
``port_{rcv,xmit}_data`` counts of 4-octet words by 4, ``sysfs/class_infiniband.go``): they are divided by 4 back
into words, the unit of PortRcvData/PortXmitData in perfquery and sysfs, so that every source of the counter table
means the same by them (the evidence line still shows the value as exported). ``legacy_*``
metrics (kernels < 4.5 ``counters_ext``) are used only when the non-legacy metric is missing for that port.

A ``host``/``instance``/``hostname``/``node`` label (``instance="gpu01:9100"`` -> ``gpu01``) names the host.
Repeated samples of the same series (several scrapes in one file) get ``snapshot`` 0, 1, ...; a sample's
millisecond timestamp, else the last ``date`` line, sets ``timestamp``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation

from diagnose.models.counters import canonical_counter
from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import RdmaHwCounter, shell_prompt, timestamp_line
from diagnose.parsers._ib import IbPort
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse
from diagnose.parsers.perfquery import PortCounter

FORMAT = "prometheus_infiniband"

METRIC_PREFIX = "node_infiniband_"
_SAMPLE_RE = re.compile(
    r"^\s*(?P<name>[A-Za-z_:][\w:]*)\s*(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+(?P<ts>-?\d+))?\s*$"
)
_LABEL_RE = re.compile(r'\s*(?P<k>[A-Za-z_]\w*)\s*=\s*"(?P<v>(?:[^"\\]|\\.)*)"\s*,?')
_SNIFF_RE = re.compile(r"^(?:#\s*(?:HELP|TYPE)\s+)?node_infiniband_\w+", re.MULTILINE)

# node_exporter hw-counter metric -> kernel hw_counters name (collector/infiniband_linux.go pushCounter table;
# note upstream maps roce_slow_restart_used_total to RoceSlowRestart and roce_slow_restart_total to
# RoceSlowRestartTrans).
HW_METRICS: dict[str, str] = {
    "duplicate_requests_packets_total": "duplicate_request",
    "implied_nak_seq_errors_total": "implied_nak_seq_err",
    "local_ack_timeout_errors_total": "local_ack_timeout_err",
    "np_cnp_packets_sent_total": "np_cnp_sent",
    "np_ecn_marked_roce_packets_received_total": "np_ecn_marked_roce_packets",
    "out_of_buffer_drops_total": "out_of_buffer",
    "out_of_sequence_packets_received_total": "out_of_sequence",
    "packet_sequence_errors_total": "packet_seq_err",
    "req_cqes_errors_total": "req_cqe_error",
    "req_cqes_flush_errors_total": "req_cqe_flush_error",
    "req_remote_access_errors_total": "req_remote_access_errors",
    "req_remote_invalid_request_errors_total": "req_remote_invalid_request",
    "resp_cqes_errors_total": "resp_cqe_error",
    "resp_cqes_flush_errors_total": "resp_cqe_flush_error",
    "resp_local_length_errors_total": "resp_local_length_error",
    "resp_remote_access_errors_total": "resp_remote_access_errors",
    "rnr_nak_retry_packets_received_total": "rnr_nak_retry_err",
    "roce_adp_retransmits_total": "roce_adp_retrans",
    "roce_adp_retransmits_timeout_total": "roce_adp_retrans_to",
    "roce_slow_restart_used_total": "roce_slow_restart",
    "roce_slow_restart_cnps_total": "roce_slow_restart_cnps",
    "roce_slow_restart_total": "roce_slow_restart_trans",
    "rp_cnp_packets_handled_total": "rp_cnp_handled",
    "rp_cnp_ignored_packets_received_total": "rp_cnp_ignored",
    "rx_atomic_requests_total": "rx_atomic_requests",
    "rx_dct_connect_requests_total": "rx_dct_connect",
    "rx_icrc_encapsulated_errors_total": "rx_icrc_encapsulated",
    "rx_read_requests_total": "rx_read_requests",
    "rx_write_requests_total": "rx_write_requests",
}
LEGACY_METRICS: dict[str, str] = {
    "legacy_data_received_bytes_total": "port_rcv_data",
    "legacy_data_transmitted_bytes_total": "port_xmit_data",
    "legacy_packets_received_total": "port_rcv_packets",
    "legacy_packets_transmitted_total": "port_xmit_packets",
    "legacy_unicast_packets_received_total": "unicast_rcv_packets",
    "legacy_unicast_packets_transmitted_total": "unicast_xmit_packets",
    "legacy_multicast_packets_received_total": "multicast_rcv_packets",
    "legacy_multicast_packets_transmitted_total": "multicast_xmit_packets",
}
# node_exporter's data metrics (without the node_infiniband_ prefix): octets, where PMA counts 4-octet words
_OCTETS = frozenset({"port_data_received_bytes_total", "port_data_transmitted_bytes_total",
                     "legacy_data_received_bytes_total", "legacy_data_transmitted_bytes_total"})
STATE_IDS = {1: "Down", 2: "Init", 3: "Armed", 4: "Active", 5: "ActiveDefer"}
PHYS_STATE_IDS = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "PhyTest",
}
HOST_LABELS = ("host", "hostname", "node", "nodename", "instance")


def sniff(head: str) -> int:
    head = head.replace("\r\n", "\n")
    hits = len(_SNIFF_RE.findall(head))
    if hits >= 3:
        return 95
    if hits >= 1:
        return 60
    return 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


@dataclass
class _Port:
    device: str
    port: int
    host: str | None
    line: int
    text: str
    gauges: dict[str, tuple[int, str, float]] = field(default_factory=dict)


def _labels(raw: str | None) -> dict[str, str] | None:
    if not raw or not raw.strip():
        return {}
    out: dict[str, str] = {}
    pos = 0
    raw = raw.strip()
    while pos < len(raw):
        m = _LABEL_RE.match(raw, pos)
        if not m:
            return None
        out[m.group("k")] = m.group("v").replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pos = m.end()
    return out


def metric_number(raw: str) -> float | int | None:
    """Exact int for integral values (counters beyond 2**53 stay exact), float otherwise; None for NaN/Inf."""
    try:
        d = Decimal(raw)
    except InvalidOperation:
        return None
    if not d.is_finite():
        return None
    if d == d.to_integral_value():
        return int(d)
    return float(d)


def in_words(metric: str, value: int) -> int:
    """The value of node_exporter's ``metric`` (its name less the ``node_infiniband_`` prefix) as perfquery and sysfs
    count it: the data metrics, exported in octets, in 4-octet words again (exact, unless the exposition's float had
    rounded the octets: then within one word); any other metric (one already named as sysfs names its counter
    included) as it is."""
    return value // 4 if metric in _OCTETS else value


def host_of(labels: dict[str, str]) -> str | None:
    for k in HOST_LABELS:
        v = labels.get(k)
        if v:
            if k == "instance":
                v = re.sub(r":\d+$", "", v.strip())
                v = v.strip("[]")
            return v or None
    return None


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    date_ts: str | None = None
    ports: dict[tuple[str | None, str, int], _Port] = {}
    info: dict[tuple[str | None, str], dict[str, str]] = {}
    seen: dict[tuple[str | None, str, int, str], int] = {}
    pmas: list[tuple[bool, PortCounter]] = []
    last_bad: tuple[int, str] | None = None

    for n, line in iter_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        last_bad = None
        if stripped.startswith("#"):
            ts = timestamp_line(line)
            if ts is not None:
                date_ts = ts
            continue
        p = shell_prompt(line)
        if p is not None:
            if p[0]:
                cur_host = p[0]
            continue
        ts = timestamp_line(line)
        if ts is not None:
            date_ts = ts
            continue
        if not stripped.startswith(METRIC_PREFIX):
            continue
        m = _SAMPLE_RE.match(line)
        if not m:
            last_bad = (n, stripped)
            continue
        labels = _labels(m.group("labels"))
        if labels is None:
            problems.append(f"line {n}: unparseable labels in {stripped[:80]!r}")
            continue
        value = metric_number(m.group("value"))
        if value is None:
            if m.group("value") not in ("NaN", "+Inf", "-Inf", "Nan", "nan"):
                problems.append(f"line {n}: unparseable value {m.group('value')!r}")
            continue
        name = m.group("name")[len(METRIC_PREFIX) :]
        rec_host = host_of(labels) or cur_host
        ts_ms = m.group("ts")
        timestamp = date_ts
        if ts_ms is not None:
            try:
                timestamp = datetime.fromtimestamp(int(ts_ms) / 1000, tz=timezone.utc).isoformat()
            except (OverflowError, ValueError, OSError):
                timestamp = date_ts
        device = labels.get("device")
        if name == "info":
            if device:
                info.setdefault((rec_host, device), labels)
            continue
        port_s = labels.get("port")
        if not device or port_s is None or not port_s.isdigit():
            continue
        port_no = int(port_s)
        if name in ("state_id", "physical_state_id", "rate_bytes_per_second"):
            key = (rec_host, device, port_no)
            port = ports.get(key)
            if port is None:
                port = ports[key] = _Port(device=device, port=port_no, host=rec_host, line=n, text=line)
            port.gauges.setdefault(name, (n, line, float(value)))
            continue
        if not isinstance(value, int) or value < 0:
            problems.append(f"line {n}: non-integer counter value {m.group('value')!r} for {name}")
            continue
        hw = HW_METRICS.get(name)
        if hw is not None:
            records.append(
                RdmaHwCounter(
                    source=source,
                    line=n,
                    text=clip(line),
                    host=rec_host,
                    device=device,
                    port=port_no,
                    counter=hw,
                    value=value,
                )
            )
            continue
        legacy = name in LEGACY_METRICS
        canon = LEGACY_METRICS.get(name) or canonical_counter(name)
        if canon is None:
            continue
        value = in_words(name, value)
        skey = (rec_host, device, port_no, canon + ("#legacy" if legacy else ""))
        snap = seen.get(skey, 0)
        seen[skey] = snap + 1
        pmas.append(
            (
                legacy,
                PortCounter(
                    source=source,
                    line=n,
                    text=clip(line),
                    host=rec_host,
                    lid=None,
                    guid=None,
                    port=port_no,
                    counter=canon,
                    value=value,
                    extended=True,
                    snapshot=snap,
                    timestamp=timestamp,
                    device=device,
                ),
            )
        )

    modern = {(pc.host, pc.device, pc.port, pc.counter) for legacy, pc in pmas if not legacy}
    for legacy, pc in pmas:
        if legacy and (pc.host, pc.device, pc.port, pc.counter) in modern:
            continue
        records.append(pc)

    for (rec_host, device, port_no), port in ports.items():
        g = port.gauges
        dev_info = info.get((rec_host, device)) or {}
        state_id = int(g["state_id"][2]) if "state_id" in g else None
        phys_id = int(g["physical_state_id"][2]) if "physical_state_id" in g else None
        rate = None
        if "rate_bytes_per_second" in g:
            bps = g["rate_bytes_per_second"][2]
            rate = round(bps * 8 / 1e9, 3) if math.isfinite(bps) and bps > 0 else None
        at, at_text = (g["state_id"][0], g["state_id"][1]) if "state_id" in g else (port.line, port.text)
        records.append(
            IbPort(
                source=source,
                line=at,
                text=clip(at_text),
                host=rec_host,
                device=device,
                port=port_no,
                state=STATE_IDS.get(state_id) if state_id is not None else None,
                phys_state=PHYS_STATE_IDS.get(phys_id) if phys_id is not None else None,
                rate_gbps=rate,
                width=None,
                speed=None,
                link_layer=None,
                lid=None,
                sm_lid=None,
                port_guid=None,
                node_guid=None,
                ca_type=dev_info.get("hca_type") or None,
                firmware=dev_info.get("firmware_version") or None,
            )
        )

    if last_bad is not None:
        problems.append(f"truncated: exposition ends early (line {last_bad[0]}: {last_bad[1][:80]!r})")
