"""Records shared by the job-shape parsers (``slurm``, ``launch``) and the NCCL RAS parser (``nccl_ras``).

Conventions (other stages rely on them):

* host lists are expanded with :func:`diagnose.hostlist.expand_hostlist` and kept in the order the tool printed;
* Slurm's "unset" spellings (``(null)``, ``None``, ``N/A``, ``Unknown``, empty) become ``None`` / ``()``;
* job and node states are kept as Slurm prints them (``NODE_FAIL``, ``CANCELLED by 2166``, ``DOWN+DRAIN``, ``IDLE*``);
  squeue's short codes (``R``, ``PD``, ``NF`` ...) are expanded to the long names;
* NCCL communicator hashes are ``0x`` + 16 lowercase hex digits whatever the source printed (the text report prints
  ``%016lx`` without ``0x``, the JSON report ``0x%lx`` without zero padding), so they join with NCCL INFO logs;
* a RAS rank/process that the report names without a rank number (job-level ``Process <pid> on node <ip> managing
  GPU <g>`` lines, monitor events) has ``rank=None``; ``Record.host`` holds the node as printed (an IP address).
"""

from __future__ import annotations

from dataclasses import dataclass

from diagnose.models.records import Record


@dataclass(frozen=True, slots=True, kw_only=True)
class JobInfo(Record):
    """One job (or job step) from ``scontrol show job``, ``sacct`` or ``squeue``, cited at its first line."""

    job_id: str
    name: str | None
    state: str | None  # RUNNING, FAILED, TIMEOUT, NODE_FAIL, CANCELLED ...
    exit_code: str | None  # '0:0', '1:0', '0:9'
    reason: str | None
    nodes: tuple[str, ...]  # NodeList expanded
    num_nodes: int | None
    num_tasks: int | None
    batch_host: str | None
    start_time: str | None
    end_time: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeInfo(Record):
    """One node of ``scontrol show node`` (``Record.host`` is left to the bundle hint; ``node`` is the NodeName)."""

    node: str
    state: str | None  # IDLE, DOWN+DRAIN, MIXED ...
    reason: str | None
    gres: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchSpec(Record):
    """One launch command line, ``#SBATCH`` directive set or hostfile.

    ``launcher`` is ``mpirun`` (also mpiexec/orterun/prterun), ``srun``, ``torchrun`` (also
    ``python -m torch.distributed.run|launch``), ``sbatch`` (``#SBATCH`` directives, ``sbatch``/``salloc`` command
    lines) or ``hostfile``.
    """

    launcher: str
    hosts: tuple[str, ...]  # in order: -H/--host entries, hostfile lines, --nodelist expanded
    slots_per_host: int | None  # 8 from 'gpu-a01:8', 'slots=8', -N/-npernode/-ppn, --ntasks-per-node, --nproc_per_node
    nprocs: int | None  # -np / -n / --ntasks / nnodes*nproc_per_node
    nnodes: int | None
    rdzv_endpoint: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RasRank(Record):
    """A rank or process the NCCL RAS report names (status report text/JSON, monitor events).

    ``Record.host`` is the node (as printed, usually an IP). ``status`` is what the report says about it:
    ``missing``, ``dead``, ``not responding`` (JSON ``unresponsive``), ``running``, ``init in progress``,
    ``status FINALIZE``, ``launched up to operation 641 (AllGather)``, ``async error: Remote process error``,
    a monitor event name (``PEER_DEAD``) ... ``collective_counts`` is filled from the JSON report only.
    """

    rank: int | None
    comm: str | None  # communicator hash, 0x + 16 hex digits
    gpu: int | None  # CUDA device index as printed
    pid: int | None
    status: str | None
    collective_counts: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RasSummary(Record):
    """A job-wide line of the RAS report: versions, job summary counts, communicator groups, error/warning entries.

    Keys: ``nccl_version``, ``cuda_compiled_version``, ``cuda_runtime_version``, ``cuda_driver_version``, ``timestamp``,
    ``nodes``, ``processes_per_node``, ``gpus_per_process``, ``processes``, ``gpus``, ``layout.nodes`` /
    ``layout.processes`` (inconsistent job layouts, one per row), ``outlier_node``, ``collection_time_sec``,
    ``communicators_count``, ``communicators`` (``none collected``), ``group.<g>.<column>`` (comms, nodes_per_comm,
    ranks_per_node, ranks_per_comm, ranks_in_group, status, errors), ``error.<KIND>`` / ``warning.<KIND>`` for job-wide
    entries (INCOMPLETE, DEAD, TIMEOUT), ``error.<KIND>.<comm hash>`` / ``warning.<KIND>.<comm hash>`` for communicator
    entries (value: the entry's detail lines joined with ``; ``), ``comm.<hash>.<field>`` (JSON: size, ranks_count,
    missing_ranks_count, secondary_hash), ``timeouts_count``, ``monitor`` (monitor mode banner).
    """

    key: str
    value: str


def norm_comm_hash(value: str | None) -> str | None:
    """``cf264af53edbe986`` / ``0x2fda2edc54faea7`` -> ``0x`` + 16 lowercase hex digits; None when not hex."""
    if not value:
        return None
    v = value.strip().lower()
    if v.startswith("0x"):
        v = v[2:]
    if not v or len(v) > 16 or any(c not in "0123456789abcdef" for c in v):
        return None
    return "0x" + v.rjust(16, "0")
