"""Records and helpers shared by the host-side tool parsers.

Parsers: ``sysfs_ib`` (``/sys/class/infiniband`` captures), ``node_exporter`` (``node_infiniband_*``
Prometheus text), ``ethtool`` (``ethtool -S``), ``mlxlink``, ``ibdev2netdev``, ``rdma_statistic``
(``rdma statistic show``) and ``lspci`` (``lspci -vvv``).

Port counters from these sources are :class:`~diagnose.parsers.perfquery.PortCounter` records and port
states are :class:`~diagnose.parsers._ib.IbPort` / :class:`~diagnose.parsers._ib.GidEntry`; the records below
are the host-side evidence no IB tool prints.

Normalisation rules:

* ``RdmaHwCounter.counter`` keeps the kernel's spelling (``hw_counters/<name>`` file name, the name
  ``rdma statistic`` prints); node_exporter's renamed metrics are mapped back to it.
* ``NicStat.counter`` is the ``ethtool -S`` name as printed (``rx_prio3_pause``, ``rxq0: rx_bytes``).
* PCI addresses are ``dddd:bb:dd.f`` lower case; a missing domain becomes ``0000``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import Record
from diagnose.parsers._lines import prompt

# --------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True, kw_only=True)
class RdmaHwCounter(Record):
    """One RDMA provider counter (sysfs ``hw_counters/*``, ``rdma statistic``, node_exporter hw metrics).

    mlx5 names: ``out_of_sequence``, ``packet_seq_err``, ``np_cnp_sent``, ``rp_cnp_handled``,
    ``np_ecn_marked_roce_packets``, ``local_ack_timeout_err``, ``rnr_nak_retry_err``, ``implied_nak_seq_err``,
    ``duplicate_request``, ``req_cqe_error``, ``resp_cqe_error`` ... Cumulative since driver load.
    ``port`` is None for device-wide counters (``rdma statistic`` ``link mlx5_0/-``, sysfs ``hw_counters``
    directly under the device).
    """

    device: str
    port: int | None
    counter: str
    value: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NicStat(Record):
    """One ``ethtool -S <netdev>`` counter (mlx5: ``rx_prio3_pause``, ``tx_prio3_pause_duration``,
    ``rx_discards_phy``, ``rx_out_of_buffer``, ``rx_pcs_symbol_err_phy``, ``rx_corrected_bits_phy``,
    ``link_down_events_phy``, ``rx_crc_errors_phy`` ...).

    ``netdev`` comes from the ``ethtool -S <if>`` command echo or a ``# <if>`` header when the capture
    has one, else None.
    """

    netdev: str | None
    counter: str
    value: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DevNetMap(Record):
    """An RDMA device port and its network interface (``ibdev2netdev``: ``mlx5_0 port 1 ==> ens1np0 (Up)``;
    also sysfs ``gid_attrs/ndevs/0``). ``up`` is None when the source does not say."""

    device: str
    port: int
    netdev: str
    up: bool | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MlxlinkInfo(Record):
    """One ``mlxlink -d <dev> [-c -e -m]`` run, cited at the run's first line (its command echo when present).

    ``device`` is what ``-d`` got (``mlx5_0``, a PCI address normalised to ``dddd:bb:dd.f``, or an MST
    device path such as ``/dev/mst/mt4129_pciconf0``), None without a command echo. BERs are floats
    (``15E-255`` -> 1.5e-254, i.e. effectively zero). ``symbol_errors`` is ``Symbol Errors`` when printed
    (IB links), else ``Effective Physical Errors``. ``rx_power``/``tx_power``/``eye_grades`` are the per-lane
    values as printed (comma separated, threshold range included when mlxlink prints one); ``N/A`` -> None.
    """

    device: str | None
    state: str | None
    physical_state: str | None
    speed: str | None
    width: str | None
    fec: str | None
    effective_ber: float | None
    raw_ber: float | None
    effective_errors: int | None
    symbol_errors: int | None
    link_down_counter: int | None
    link_error_recovery_counter: int | None
    status_opcode: int | None
    recommendation: str | None
    temperature_c: float | None
    rx_power: str | None
    tx_power: str | None
    eye_grades: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PcieLink(Record):
    """One ``lspci -vvv`` device: link capability vs status and ACS control, cited at the device header.

    ``downgraded`` is True when LnkSta says ``(downgraded)`` on speed or width, or the status speed/width is
    below the capability. GPUs and NICs legitimately train down to a lower speed when idle (power saving),
    so a downgraded *speed* on an idle device is not a fault by itself. ``acs_enabled`` lists the ``ACSCtl``
    flags printed with ``+`` (enabled ACS redirect on a switch port between a GPU and a NIC breaks
    GPUDirect P2P). ``max_read_req`` is DevCtl ``MaxReadReq`` in bytes. Capability fields are None when the
    capture does not show them (plain ``lspci``, or ``-vvv`` run without root: ``Capabilities: <access
    denied>``).
    """

    bdf: str
    device_class: str
    name: str
    cap_speed_gts: float | None
    cap_width: int | None
    sta_speed_gts: float | None
    sta_width: int | None
    downgraded: bool
    acs_enabled: tuple[str, ...]
    max_read_req: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AcsControl(Record):
    """An ``ACSCtl:`` line outside any device block: the output of ``lspci -vvv | grep ACSCtl`` (the check the NCCL
    troubleshooting guide gives). ``enabled`` lists the flags printed with ``+``; the device is not known."""

    enabled: tuple[str, ...]


# --------------------------------------------------------------------------------------------- helpers

_BDF_RE = re.compile(r"^(?:(?P<dom>[0-9A-Fa-f]{4,8}):)?(?P<bus>[0-9A-Fa-f]{2}):(?P<dev>[0-9A-Fa-f]{2})\.(?P<fn>[0-7])$")


def norm_bdf(value: str | None) -> str | None:
    """``1a:00.0`` -> ``0000:1a:00.0``; ``0000:1A:00.0`` -> ``0000:1a:00.0``; None when not a PCI address."""
    if not value:
        return None
    m = _BDF_RE.match(value.strip())
    if not m:
        return None
    dom = (m.group("dom") or "0000").lower()
    if len(dom) < 4:
        dom = dom.rjust(4, "0")
    return f"{dom}:{m.group('bus').lower()}:{m.group('dev').lower()}.{m.group('fn')}"


_DOW = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_TS_RES = (
    re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2}| ?[A-Z]{2,5})?)?$"),
    re.compile(
        rf"^{_DOW}\s+{_MON}\s+\d{{1,2}}\s+\d{{2}}:\d{{2}}:\d{{2}}(?:\s+[A-Z]{{2,5}}|\s+[+-]\d{{4}})?\s+\d{{4}}$"
    ),
    re.compile(
        rf"^{_DOW},?\s+\d{{1,2}}\s+{_MON}\s+\d{{4}}\s+\d{{1,2}}:\d{{2}}:\d{{2}}(?:\s+[AP]M)?(?:\s+[A-Z]{{2,5}})?$"
    ),
)


def timestamp_line(line: str) -> str | None:
    """The line itself when it is ``date`` / ``date -Is`` output (optionally after ``#``), else None."""
    s = line.strip()
    if s.startswith("#"):
        s = s[1:].strip()
    if not s or len(s) > 64:
        return None
    for rx in _TS_RES:
        if rx.match(s):
            return s
    return None


_UINT_RE = re.compile(r"^\d+$")


def to_uint(value: str | None) -> int | None:
    """A non-negative decimal integer, or None (``N/A``, empty, garbage)."""
    if value is None:
        return None
    v = value.strip()
    return int(v) if _UINT_RE.match(v) else None


_LEAD_PARENS = re.compile(r"^\s*\((?:[^()]|\([^()]*\))*\)\s*")


def shell_prompt(line: str) -> tuple[str | None, str] | None:
    """:func:`diagnose.parsers._lines.prompt`, also accepting nested conda/venv prefixes such as
    ``((sglang-0.5.9) ) [user@host ~]$ cmd`` (seen in real captures)."""
    p = prompt(line)
    if p is not None or not line.lstrip().startswith("("):
        return p
    rest = line
    for _ in range(3):
        m = _LEAD_PARENS.match(rest)
        if not m:
            break
        rest = rest[m.end() :]
        p = prompt(rest)
        if p is not None:
            return p
    return None


# a root shell's prompt ('# mpirun --allow-run-as-root -np 2 ...'): in a paste with no script around it (no
# shebang, no #SBATCH, no uncommented launch) a '#' before a launcher with options is the prompt, not a comment
_ROOT_PROMPT_LAUNCH = re.compile(
    r"^#[ \t]+(?=(?:sudo\s+)?(?:[A-Za-z_]\w*=\S*\s+)*(?:\S*/)?(?:mpirun|mpiexec|orterun|prterun|srun|torchrun)\s+-)",
    re.M)
_SCRIPT_SIGNS = re.compile(r"^#!|^#SBATCH|^[ \t]*(?!#)[^\n]*\b(?:mpirun|mpiexec|srun|torchrun)\s", re.M)


def root_prompts(text: str) -> str:
    """``text`` with the root prompts of a pasted session made ``$`` prompts (line count unchanged)."""
    if "#" not in text or not _ROOT_PROMPT_LAUNCH.search(text) or _SCRIPT_SIGNS.search(text):
        return text
    return _ROOT_PROMPT_LAUNCH.sub("$ ", text)
