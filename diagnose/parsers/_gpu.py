"""Records and helpers shared by the GPU-side parsers (nvidia-smi, nvidia-smi -q / topo / nvlink, dcgmi, NCCL topology
XML, PyTorch flight recorder).

Normalisation rules (other stages rely on them):

* PCI addresses are ``dddd:bb:dd`` in lowercase hex: the last 4 hex digits of the domain, bus and device, the
  function dropped. ``nvidia-smi`` prints ``00000000:3B:00.0``, the kernel's NVRM Xid lines ``PCI:0000:3b:00``, NCCL
  ``0000:3b:00.0``; all become ``0000:3b:00`` (see :func:`norm_pci`).
* GPU-side tool errors (``NVIDIA-SMI has failed ...``, ``Unable to determine the device handle ...``) are reported as
  :class:`~diagnose.parsers._ib.ToolError` records with ``tool`` set to the program name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import Record
from diagnose.parsers._lines import prompt

# --------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuInfo(Record):
    """One GPU block of ``nvidia-smi -q``, cited at its ``GPU 00000000:19:00.0`` line."""

    pci: str
    product: str | None
    serial: str | None
    uuid: str | None
    driver_version: str | None
    cuda_version: str | None
    pcie_gen_max: int | None
    pcie_gen_current: int | None
    pcie_width_max: int | None
    pcie_width_current: int | None
    replays: int | None
    throttle_active: tuple[str, ...]
    ecc_uncorrected_volatile: int | None
    remap_pending: bool | None
    remap_failure: bool | None
    remap_uncorrectable: int | None
    fabric_state: str | None
    fabric_status: str | None
    temperature_c: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSummary(Record):
    """One GPU row of the default ``nvidia-smi`` table (cited at the row's first line).

    ``ecc_uncorrected`` is the ``Volatile Uncorr. ECC`` column; ``err_fields`` names the columns that printed
    ``ERR!`` (``fan``, ``temperature``, ``perf``, ``power``, ``power_cap``, ``memory``, ``utilization``, ``ecc``,
    ``persistence``, ``bus_id``...), which nvidia-smi shows when NVML could not read the value.
    """

    index: int
    name: str | None
    bus_id: str | None
    temperature_c: float | None
    power_w: float | None
    power_cap_w: float | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_pct: int | None
    driver_version: str | None
    cuda_version: str | None
    ecc_uncorrected: int | None = None
    err_fields: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopoEntry(Record):
    """One cell of ``nvidia-smi topo -m``: row device vs column device (``X``, ``NV18``, ``PIX``, ``PXB``, ``PHB``,
    ``NODE``, ``SYS``; older drivers print ``SOC`` for ``SYS``)."""

    row: str
    col: str
    relation: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TopoDevice(Record):
    """One row of ``nvidia-smi topo -m``: its trailing affinity columns and, for NICs, the ``NIC Legend`` name."""

    name: str
    device: str | None
    cpu_affinity: str | None
    numa_affinity: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NvlinkStatus(Record):
    """One ``Link n: <speed>`` line of ``nvidia-smi nvlink -s`` (``speed_gbs`` None when ``<inactive>``)."""

    gpu: int
    gpu_uuid: str | None
    link: int
    speed_gbs: float | None
    active: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class NvlinkErrorCounter(Record):
    """One ``Link n: <counter>: <value>`` line of ``nvidia-smi nvlink -e`` (counter name as printed)."""

    gpu: int
    link: int
    counter: str
    value: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DcgmResult(Record):
    """One result of ``dcgmi diag`` (a test row, or one ``Pass - GPUs: ...`` / ``Fail - GPU: 0`` group of it) or one
    item of ``dcgmi health -c`` (``Overall Health`` and each ``<system>`` incident of an entity).

    ``result`` is ``Pass``/``Fail``/``Warn``/``Skip``/``Not Run`` for diag, ``Healthy``/``Warning``/``Failure`` for
    health. ``gpus`` is ``All`` or ``GPU0,GPU3`` (health: the entity, e.g. ``GPU1``/``NvSwitch0``/``ConnectX0``).
    ``kind`` is ``diag`` or ``health``.
    """

    test: str
    result: str
    gpus: str | None
    detail: str | None
    kind: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTopoNode(Record):
    """One element of an NCCL topology XML (``NCCL_TOPO_DUMP_FILE``/``NCCL_TOPO_FILE``) or graph XML
    (``NCCL_GRAPH_DUMP_FILE``).

    ``kind`` is the element name: ``cpu``, ``pci``, ``gpu``, ``nic``, ``net``, ``nvlink``, ``c2c``, ``pcilink``
    (system files) or ``graph``, ``gpu``, ``net`` (graph files; ``channel`` elements are not emitted, their gpu/net
    children carry ``graph_id`` and ``channel`` = 0-based channel index, in ring order by ``line``).
    ``parent_busid`` is the busid of the nearest enclosing ``<pci>``.
    """

    kind: str
    attrs: tuple[tuple[str, str], ...]
    parent_busid: str | None
    graph_id: str | None = None
    channel: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlightRecorderEntry(Record):
    """One collective/p2p entry of a PyTorch flight-recorder dump (one file per rank).

    ``pg_id`` is the dump's per-process ``pg_id`` (as a string); ``pg_name``/``pg_desc`` come from the entry's
    ``process_group`` tuple ``(name, desc)``. Join ranks on ``(pg_name, collective_seq_id)`` (the key the
    ``fr_trace`` analyzer uses). ``rank`` comes from the file name (``<prefix><rank>``). For pickle dumps ``line`` is
    the 1-based position of the entry in ``entries``.
    """

    rank: int | None
    pg_id: str | None
    pg_desc: str | None
    collective_seq_id: int | None
    p2p_seq_id: int | None
    op: str | None
    state: str | None
    input_sizes: str | None
    time_created_ns: int | None
    timeout_ms: int | None
    pg_name: str | None = None
    record_id: int | None = None
    time_discovered_started_ns: int | None = None
    time_discovered_completed_ns: int | None = None
    retired: bool | None = None
    is_p2p: bool | None = None
    duration_ms: float | None = None
    frame: str | None = None
    version: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlightRecorderPg(Record):
    """One process group of a flight-recorder dump: ``pg_config`` (name, desc, ranks) joined with ``pg_status``
    (last enqueued/started/completed collective sequence id; -1 = none) for the dumping ``rank``."""

    rank: int | None
    pg_id: str | None
    pg_name: str | None
    pg_desc: str | None
    ranks: str | None
    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None
    version: str | None


# --------------------------------------------------------------------------------------------- helpers

_PCI_RE = re.compile(
    r"^(?:PCI:)?(?:(?P<dom>[0-9A-Fa-f]{1,8}):)?(?P<bus>[0-9A-Fa-f]{1,2}):(?P<dev>[0-9A-Fa-f]{1,2})(?:\.[0-7])?$"
)


def norm_pci(value: str | None) -> str | None:
    """``00000000:3B:00.0`` / ``0000:3b:00.0`` / ``PCI:0000:3b:00`` / ``3b:00.0`` -> ``0000:3b:00``; None otherwise."""
    if not value:
        return None
    m = _PCI_RE.match(value.strip())
    if not m:
        return None
    dom = (m.group("dom") or "0").lower().rjust(4, "0")[-4:]
    return f"{dom}:{m.group('bus').lower().rjust(2, '0')}:{m.group('dev').lower().rjust(2, '0')}"


def na(value: str | None) -> str | None:
    """Strip; ``N/A``, ``[N/A]``, ``[Not Supported]``, ``Unknown Error`` and empty become None."""
    if value is None:
        return None
    v = value.strip()
    if not v or v.upper() in ("N/A", "[N/A]", "NA", "[NOT SUPPORTED]", "NOT SUPPORTED", "UNKNOWN ERROR", "ERR!"):
        return None
    return v


def lead_int(value: str | None) -> int | None:
    """The leading integer of ``'16x'``, ``'81559 MiB'``, ``'0 %'``; None for N/A or no digits."""
    v = na(value)
    if v is None:
        return None
    m = re.match(r"[+-]?\d+", v)
    return int(m.group(0)) if m else None


def lead_float(value: str | None) -> float | None:
    v = na(value)
    if v is None:
        return None
    m = re.match(r"[+-]?\d+(?:\.\d+)?", v)
    return float(m.group(0)) if m else None


def yes_no(value: str | None) -> bool | None:
    v = na(value)
    if v is None:
        return None
    low = v.lower()
    if low in ("yes", "true", "active", "enabled"):
        return True
    if low in ("no", "false", "not active", "disabled"):
        return False
    return None


# `[user@host dir]$ cmd` anywhere on the line (a `((venv) )` prefix or similar before it), or `user@host:~$ cmd`
_LOOSE_PROMPT_RE = re.compile(
    r"(?:^|\s)\[(?P<u>[\w.-]+)@(?P<h>[A-Za-z0-9][\w.-]*)(?:\s+[^\]]*)?\]\s*[$#%]\s?(?P<cmd>.*)$"
)
_CMD_ECHO_RE = re.compile(r"^\s*[$#>]\s*(?P<cmd>\S.*)$")


def shell_line(line: str) -> tuple[str | None, str] | None:
    """(host or None, command) for a shell prompt or ``$ cmd`` echo line; None otherwise."""
    p = prompt(line)
    if p is not None:
        return p
    m = _LOOSE_PROMPT_RE.search(line)
    if m:
        return m.group("h"), m.group("cmd").strip()
    m = _CMD_ECHO_RE.match(line)
    if m:
        return None, m.group("cmd").strip()
    return None


_SMI_ERROR_RE = re.compile(
    r"^\s*(?:"
    r"NVIDIA-SMI has failed because.*"
    r"|No devices were found\s*"
    r"|Unable to determine the device handle for.*"
    r"|Failed to initialize NVML:.*"
    r"|Unable to load the NVIDIA Management Library.*"
    r"|GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]: (?:GPU is lost|Detected Critical Xid Error).*"
    r")$"
)


def smi_error(line: str) -> str | None:
    """The stripped line when it is an nvidia-smi / NVML error message."""
    if _SMI_ERROR_RE.match(line):
        return line.strip()
    return None
