"""Record types and helpers shared by several parsers."""

from __future__ import annotations

import re
import sys
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
    prefix), ``sbatch`` (an ``#SBATCH --export=`` directive), ``modulefile`` (Lmod/Tcl ``setenv``),
    ``nccl_conf`` (``/etc/nccl.conf``, ``~/.nccl.conf``), ``container_spec`` (a Kubernetes ``env:`` entry,
    docker-compose ``environment:``), ``nccl_log`` (NCCL's own ``... set by environment to ...`` line) or
    ``symptom``. A variable seen in several places keeps one record per place; the frame orders them by
    :data:`ORIGIN_PRECEDENCE` so its last row is the job's effective value.
    """

    name: str
    value: str
    origin: str


# Which of several settings of one variable the job ran with, lowest first (a stable sort keeps file order within a
# rank, so the last row of a name is its effective value, as the extractors read it). NCCL reads its config file only
# for variables the environment does not set (NCCL src/misc/param.cc, NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf);
# a modulefile sets the environment the job script starts from; the script's own exports and #SBATCH --export, and
# an env dump taken in the job, reflect what the job started with; launch arguments (mpirun -x, srun --export, a
# VAR=value prefix) override those for the launched ranks; NCCL's own "set by environment" line is what it used; a
# setting the report states comes last, as before. Origins not listed rank with the env dump.
ORIGIN_PRECEDENCE: dict[str, int] = {
    "nccl_conf": 0,
    "modulefile": 1,
    "container_spec": 2,
    "env_dump": 3,
    "export": 3,
    "sbatch": 3,
    "launch_arg": 4,
    "nccl_log": 5,
    "symptom": 6,
}


def effective_order(df):  # type: ignore[no-untyped-def]
    """``df`` (an EnvSetting frame) stably sorted by :data:`ORIGIN_PRECEDENCE`: a name's last row is its effective
    value. Unchanged (the same object) when it is already in that order."""
    if df is None or df.empty or "origin" not in df:
        return df
    rank = df["origin"].map(ORIGIN_PRECEDENCE).fillna(3)
    if rank.is_monotonic_increasing:
        return df
    return df.iloc[rank.to_numpy().argsort(kind="stable")].reset_index(drop=True)


def is_comm_env(name: str) -> bool:
    return name.startswith(ENV_PREFIXES)


_POSSESSIVE = re.compile(r"(?<!\\)([*+?}])\+")


def possessive(pattern: str) -> str:
    """``pattern`` with its possessive quantifiers (``*+``, ``++``, ``?+``, ``{m,n}+``: Python 3.11's ``re``) on
    3.11 and later; on 3.10 the plain greedy ones, which give the same matches for the patterns that use this (each
    possessive run is followed by a character it cannot take), only with backtracking. Not for patterns with a
    ``*``, ``+``, ``?`` or ``}`` followed by ``+`` inside a character class."""
    return pattern if sys.version_info >= (3, 11) else _POSSESSIVE.sub(r"\1", pattern)
