"""Record types and helpers shared by several parsers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import Record

# Environment variables that shape the communication stack. Anything else in an env dump is noise.
ENV_PREFIXES: tuple[str, ...] = (
    "NCCL_",
    "TORCH_NCCL_",
    "TORCH_DISTRIBUTED_",
    "CUDA_",
    "UCX_",
    "OMPI_MCA_",
    "FI_",
    "SHARP_",
    "HCOLL_",
    "NVSHMEM_",
)

ENV_NAME_RE = re.compile(r"\b((?:" + "|".join(p.rstrip("_") for p in ENV_PREFIXES) + r")_[A-Z0-9_]+)")


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvSetting(Record):
    """An environment variable the job ran with.

    ``origin`` is where it was seen: ``env_dump`` (``env``/``printenv`` output), ``export``
    (a shell ``export`` line), ``launch_arg`` (``mpirun -x``, ``srun --export``, a ``VAR=value cmd``
    prefix), ``nccl_log`` (NCCL's own ``... set by environment to ...`` line) or ``symptom``.
    """

    name: str
    value: str
    origin: str


def is_comm_env(name: str) -> bool:
    return name.startswith(ENV_PREFIXES)
