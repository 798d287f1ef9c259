"""What extractors see: the frames, the formats present, and helpers to cite evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from diagnose.evidence import vocabulary
from diagnose.evidence.frames import message_frame
from diagnose.models.diagnosis import EvidenceRef, Finding, Location

if TYPE_CHECKING:
    from diagnose.evidence.counters import CounterTable
    from diagnose.topology import Fabric

MAX_REFS = 8
# the frames each view of the context is built from (Context.fabric, .counters, .messages): an extractor that reads a
# view declares these among its reads (tests/test_extractor_declarations.py holds the builders and extractors to it)
VIEW_READS = {
    "fabric": frozenset({"FabricLink", "FabricNode", "FabricPortState", "IbPort"}),
    "counters": frozenset({"PortCounter", "PortCounterWide"}),
    "messages": frozenset({"CudaError", "FreeText", "KernelEvent", "MessageHit", "Mlx5Event", "NcclWarn", "PeermemEvent",
                           "PgError", "ToolError", "WatchdogTimeout"}),
}


@dataclass
class Context:
    frames: dict[str, pd.DataFrame]
    formats: set[str]
    thresholds: dict[str, float] = field(default_factory=dict)
    _messages: pd.DataFrame | None = None
    _fabric: object = None
    _fabric_built: bool = False
    _counters: object = None
    cache: dict[str, object] = field(default_factory=dict)  # per-run results several extractors share

    def frame(self, name: str) -> pd.DataFrame:
        df = self.frames.get(name)
        return df if df is not None else pd.DataFrame()

    def has(self, name: str) -> bool:
        df = self.frames.get(name)
        return df is not None and not df.empty

    @property
    def fabric(self) -> Fabric | None:
        """The fabric graph when the bundle holds a topology source, else None (built once)."""
        if not self._fabric_built:
            from diagnose.topology import build_fabric

            self._fabric = build_fabric(self.frames)
            self._fabric_built = True
        return self._fabric  # type: ignore[return-value]

    @property
    def counters(self) -> CounterTable:
        """Port-counter series of every counter source, built once per run (see evidence/counters.py)."""
        if self._counters is None:
            from diagnose.evidence.counters import build_counter_table

            self._counters = build_counter_table(self.frames)
        return self._counters  # type: ignore[return-value]

    def use_counters(self, table: CounterTable) -> None:
        """Read ``table`` as the counter table: built elsewhere from this run's counter rows (a forked process
        builds it while this one finishes the parse, see :mod:`diagnose.runtime.forked`)."""
        self._counters = table

    @property
    def messages(self) -> pd.DataFrame:
        if self._messages is None:
            self._messages = message_frame(self.frames)
        return self._messages


def val(v: object) -> object:
    """A pandas cell as a plain Python value: NaN/NA/NaT become None, numpy scalars become Python ones."""
    if v is None:
        return None
    try:
        if pd.isna(v):  # type: ignore[arg-type]
            return None
    except (TypeError, ValueError):
        return v
    return v.item() if hasattr(v, "item") else v


def sval(v: object) -> str | None:
    v = val(v)
    return None if v is None else str(v)


def primary(df: pd.DataFrame) -> pd.DataFrame:
    """Drop framework echoes of a message when the primary source line is there.

    PyTorch repeats NCCL's last error inside its own exception text; when NCCL's WARN (or the kernel's
    line) is present, the echo would double-count the same event.
    """
    if df.empty or "origin" not in df:
        return df
    first_hand = df[df["origin"] != "pytorch"]
    return first_hand if not first_hand.empty else df


def refs(df: pd.DataFrame, kind: str, limit: int = MAX_REFS) -> list[EvidenceRef]:
    """Evidence references for the first ``limit`` rows of ``df`` in file/line order."""
    if df.empty:
        return []
    rows = df.sort_values(["source", "line"], kind="stable").head(limit)
    return [
        EvidenceRef(file=str(s), line=int(ln), text=str(t), finding=kind)
        for s, ln, t in zip(rows["source"], rows["line"], rows["text"], strict=True)
    ]


UNDECLARED: set[str] = set()  # what was emitted outside the vocabulary (the tests fail on any)


def _undeclared(bad: list[str]) -> None:
    new = [b for b in bad if b not in UNDECLARED]
    if new:
        UNDECLARED.update(new)
        import structlog

        structlog.get_logger("diagnose.evidence").warning("finding_undeclared", problems=new)


def finding(
    kind: str,
    summary: str,
    df: pd.DataFrame | None = None,
    location: Location | None = None,
    attrs: dict[str, str | int | float | bool | None] | None = None,
    evidence: list[EvidenceRef] | None = None,
) -> Finding:
    bad = vocabulary.problems(kind, attrs)
    if bad:
        _undeclared(bad)
    ev = evidence if evidence is not None else (refs(df, kind) if df is not None else [])
    count = len(df) if df is not None and not df.empty else max(1, len(ev))
    return Finding(
        id="",
        kind=kind,
        summary=summary,
        location=location or Location(),
        attrs=attrs or {},
        evidence=ev,
        count=count,
    )


def hosts_label(hosts: list[str], limit: int = 4) -> str:
    hs = sorted({h for h in hosts if h})
    if len(hs) <= limit:
        return ", ".join(hs)
    return ", ".join(hs[:limit]) + f" and {len(hs) - limit} more"
