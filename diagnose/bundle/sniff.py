"""Recognise a file's format by its content. File names are a tie-breaking hint only."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

from diagnose.parsers import registry
from diagnose.parsers.base import SNIFF_THRESHOLD, capabilities

HEAD_CHARS = 64 * 1024

_NAME_HINTS: dict[str, tuple[str, ...]] = {
    "ibstat": ("ibstat",),
    "ibstatus": ("ibstatus",),
    "ibv_devinfo": ("devinfo",),
    "perfquery": ("perfquery", "pq"),
    "dmesg": ("dmesg", "kern", "messages", "syslog"),
    "nccl_log": ("nccl",),
    "ibnetdiscover": ("ibnetdiscover", ".topo", "topology"),
    "nccl_tests": ("perf", "nccl-tests", "nccl_tests", "all_reduce", "allreduce"),
    "df": ("df", "shm"),
    "ulimit": ("ulimit", "limits"),
    "env": ("env", "sbatch", "launch", ".sh"),
    "pytorch_log": ("rank", "train", "torch"),
    "lsmod": ("lsmod", "modules"),
    "fabric_manager_log": ("fabricmanager", "fabric-manager", "fabric_manager"),
    "launch": ("hostfile", "hosts", "machinefile", ".slurm", ".sbatch"),
    "slurm": ("scontrol", "sacct", "squeue"),
    "nccl_ras": ("ncclras", "ras"),
    "nccl_conf": ("nccl.conf", "nccl_conf"),
}


@dataclass(frozen=True)
class Sniffed:
    formats: tuple[str, ...]  # primary first; more than one only for mixable line logs
    scores: dict[str, int]
    stopped: float | None = None  # sniffing was stopped at this time limit, in seconds (the file is not parsed)


def _score(mod: object, head: str) -> int:
    try:
        return int(mod.sniff(head))  # type: ignore[attr-defined]
    except Exception:
        return 0


@lru_cache(maxsize=4096)
def _hinted(lname: str) -> tuple[ModuleType, ...]:
    """The parser modules, in registry order, whose name hints the lower-case base name ``lname`` holds: worked
    out once per distinct name (a large bundle names thousands of per-host files alike)."""
    return tuple(m for m in registry() if any(h in lname for h in _NAME_HINTS.get(m.FORMAT, ())))


def _named_sure(head: str, lname: str) -> Sniffed | None:
    """The short way for a file whose name hints at a format and whose content that format's sniffer fully
    recognizes (the top score, which no other format can beat): a 4,096-host bundle has thousands of
    per-host ``ibstat.txt`` / ``dmesg.txt`` files, and asking all ~50 sniffers about each costs more than
    parsing them. The content still decides: a misnamed file fails the hinted sniffer and gets the full
    round."""
    hinted = _hinted(lname)
    for mod in hinted:
        s = _score(mod, head) + 5
        if s < 100:
            continue
        if not capabilities(mod).mixable:
            return Sniffed((mod.FORMAT,), {mod.FORMAT: s})
        scores = {mod.FORMAT: s}
        for other in registry():  # a mixable log can interleave other line-oriented logs: ask only those
            if other is not mod and getattr(other, "MIXABLE", False):
                o = _score(other, head)
                if o > 0:
                    scores[other.FORMAT] = o + (5 if other in hinted else 0)
        claimed = sorted(((v, f) for f, v in scores.items() if v >= SNIFF_THRESHOLD), key=lambda t: (-t[0], t[1]))
        if claimed[0][1] != mod.FORMAT:
            return None  # another log claims it as strongly: take the full round
        return Sniffed(tuple(f for _, f in claimed), scores)
    return None


def sniff_file(path: str, text: str, *, shortcut: bool = True) -> Sniffed:
    head = text[:HEAD_CHARS]
    if len(text) > HEAD_CHARS:
        head += "\n" + text[-HEAD_CHARS // 4:]
    lname = path.lower().rsplit("/", 1)[-1]
    sure = _named_sure(head, lname) if shortcut else None
    if sure is not None:
        return sure
    scores: dict[str, int] = {}
    hinted = _hinted(lname)
    for mod in registry():
        if capabilities(mod).binary and not hasattr(mod, "sniff"):
            continue  # binary-only formats are offered raw bytes, not text
        try:
            s = int(mod.sniff(head))
        except Exception:
            s = 0
        if s <= 0:
            continue
        if mod in hinted:
            s += 5
        scores[mod.FORMAT] = s
    claimed = sorted(
        ((s, f) for f, s in scores.items() if s >= SNIFF_THRESHOLD), key=lambda t: (-t[0], t[1])
    )
    if not claimed:
        return Sniffed((), scores)
    primary = claimed[0][1]
    mixable = {m.FORMAT for m in registry() if capabilities(m).mixable}
    formats = [primary]
    if primary in mixable:
        formats += [f for _, f in claimed[1:] if f in mixable]
    return Sniffed(tuple(formats), scores)
