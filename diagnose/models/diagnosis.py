"""The Diagnosis model: the one output every renderer (CLI, JSON, markdown, hook, chat) speaks."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

SCHEMA_VERSION: Literal[1] = 1

SymptomKind = Literal[
    "collective_slow",
    "collective_timeout",
    "init_failure",
    "connection_error",
    "gpu_error",
    "link_errors",
    "process_crash",
    "unknown",
]

Confidence = Literal["high", "medium", "low"]
Verdict = Literal["confirmed", "inconclusive", "ruled_out"]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Location(_Closed):
    """The most specific place the evidence supports. Unknown parts stay None."""

    host: str | None = None
    device: str | None = None
    port: int | None = None
    peer: str | None = None
    rank: int | None = None
    gpu: str | None = None

    def is_empty(self) -> bool:
        return all(v is None for v in self.model_dump().values())

    def label(self) -> str:
        parts: list[str] = []
        if self.host:
            parts.append(self.host)
        if self.device:
            parts.append(self.device + (f" port {self.port}" if self.port is not None else ""))
        elif self.port is not None:
            parts.append(f"port {self.port}")
        if self.gpu:
            parts.append(f"GPU {self.gpu}")
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        label = "/".join(parts) if parts else "-"
        if self.peer:
            label += f" <-> {self.peer}"
        return label


class Symptom(_Closed):
    kind: SymptomKind
    text: str
    source: str = Field(description="'cli', 'hook', 'chat' or the evidence file:line it was found in")


class EvidenceRef(_Closed):
    file: str
    line: int
    text: str
    finding: str


class Finding(_Closed):
    """A fact distilled from bulk evidence by an extractor; the unit the rule engine reasons over."""

    id: str
    kind: str
    summary: str
    location: Location = Field(default_factory=Location)
    attrs: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    evidence: list[EvidenceRef] = Field(default_factory=list)
    count: int = 1


class CauseResult(_Closed):
    id: str
    title: str
    score: float = Field(ge=0.0, le=1.0)
    confidence: Confidence
    verdict: Verdict
    summary: str
    location: Location = Field(default_factory=Location)
    evidence: list[EvidenceRef]
    against: list[EvidenceRef] = Field(default_factory=list)
    playbook: str


class RuledOut(_Closed):
    id: str
    why: str


class MissingEvidence(_Closed):
    would_decide: list[str]
    collect: str


class FileEntry(_Closed):
    path: str
    format: str
    records: int
    problem: str | None = None


class ThresholdSetting(_Closed):
    value: float
    default: float
    origin: str  # the file or variable that set it


class RunSettings(_Closed):
    """What a diagnosis ran with when a site changed it: thresholds set away from their defaults (``<cause
    id>.<name>``) and the site rule packs loaded. Absent when the built-in catalog ran as shipped."""

    thresholds: dict[str, ThresholdSetting] = Field(default_factory=dict)
    rule_packs: list[str] = Field(default_factory=list)


class Diagnosis(_Closed):
    schema_version: Literal[1] = SCHEMA_VERSION
    settings: RunSettings | None = None  # left out of the output when None (the catalog as shipped)
    symptoms: list[Symptom]
    causes: list[CauseResult]
    ruled_out: list[RuledOut]
    missing_evidence: list[MissingEvidence]
    files: list[FileEntry]

    @model_serializer(mode="wrap")
    def _drop_default_settings(self, handler: Any) -> Any:
        out = handler(self)
        if isinstance(out, dict) and out.get("settings") is None:
            out.pop("settings", None)
        return out
