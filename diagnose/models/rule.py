"""RuleSpec: the closed schema of one cause's rule file (``rules/<domain>/<name>.yaml``)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from diagnose.models.diagnosis import SymptomKind

Weight = Literal["strong", "moderate", "weak"]
Scalar = str | int | float | bool
OPS = ("eq", "ne", "gt", "gte", "lt", "lte", "in")
ID_RE = re.compile(r"^(?:site\.)?[a-z]+\.[a-z0-9_]+$")  # a site's own rules: site.<domain>.<name>
SITE_PREFIX = "site."
RESERVED_FIELDS = {"id", "sid", "fid", "kind", "$s"}


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Threshold(_Closed):
    """A named, tunable number with its provenance."""

    default: float
    unit: str
    source: str = Field(min_length=8, description="where the number comes from (spec, vendor doc, measurement)")
    description: str = ""

    @field_validator("default")
    @classmethod
    def _plain(cls, v: float) -> float:
        if v != 0 and not (1e-4 <= abs(v) < 1e15):
            raise ValueError(
                f"{v!r} is outside 1e-4..1e15: the rule engine compares plain decimals only; "
                "compare a log10 or a scaled attribute instead"
            )
        return v


class Clause(_Closed):
    """Matches findings of one kind whose attributes satisfy ``where``.

    ``where`` maps an attribute to a value (equality) or to ``{op: value}`` with op in
    eq/ne/gt/gte/lt/lte/in. A value written ``$name`` is the rule's threshold ``name``.
    """

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    finding: str = Field(pattern=r"^[a-z0-9_]+$")
    where: dict[str, Scalar | dict[str, Scalar | list[Scalar]]] = Field(default_factory=dict)
    weight: Weight
    says: str = Field(default="", description="one sentence: what this evidence means for the cause")

    @field_validator("where")
    @classmethod
    def _ops(cls, v: dict[str, object]) -> dict[str, object]:
        for attr, cond in v.items():
            if attr in RESERVED_FIELDS:
                raise ValueError(f"'{attr}' is reserved and cannot be matched on")
            if isinstance(cond, dict):
                if len(cond) != 1 or next(iter(cond)) not in OPS:
                    raise ValueError(f"condition on '{attr}' must be one of {OPS}, got {list(cond)}")
                op, val = next(iter(cond.items()))
                if op == "in" and not isinstance(val, list):
                    raise ValueError(f"'in' on '{attr}' needs a list")
        return v


class AgainstClause(Clause):
    why: str = Field(min_length=8, description="the sentence shown when this evidence rules the cause out")


class ExpectClause(_Closed):
    """Evidence that should be there if the cause were real: its absence counts against the cause,
    but only when one of ``if_formats`` was collected (absence of what was never collected proves nothing)."""

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    finding: str = Field(pattern=r"^[a-z0-9_]+$")
    where: dict[str, Scalar | dict[str, Scalar | list[Scalar]]] = Field(default_factory=dict)
    if_formats: list[str] = Field(min_length=1)
    weight: Weight
    why: str = Field(min_length=8)


class EvidenceSpec(_Closed):
    supports: list[Clause] = Field(min_length=1)
    against: list[AgainstClause] = Field(default_factory=list)
    expects: list[ExpectClause] = Field(default_factory=list)


class Collect(_Closed):
    formats: list[str] = Field(min_length=1, description="formats that would decide; asked for when none is present")
    command: str = Field(min_length=4)


class Confirm(_Closed):
    """When the cause may be called confirmed (beyond its score)."""

    min_strong: int = 1
    or_min_moderate: int = 2
    min_score: float = 0.6


class RuleSpec(_Closed):
    id: str
    title: str = Field(min_length=10)
    severity: Literal["critical", "high", "medium", "low"]
    status: Literal["experimental", "stable"]
    description: str = Field(min_length=20)
    explains: list[SymptomKind] = Field(min_length=1)
    prior: float = Field(default=0.05, gt=0.0, lt=0.5)
    thresholds: dict[str, Threshold] = Field(default_factory=dict)
    evidence: EvidenceSpec
    confirm: Confirm = Field(default_factory=Confirm)
    collect: list[Collect] = Field(default_factory=list)
    false_positives: list[str] = Field(default_factory=list)
    references: list[str] = Field(min_length=1)
    playbook: str

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not ID_RE.match(v):
            raise ValueError(f"id '{v}' must look like 'domain.name', or 'site.domain.name' for a site's own rule"
                             " (lowercase, digits, underscores)")
        return v

    @model_validator(mode="after")
    def _refs(self) -> RuleSpec:
        names: set[str] = set()
        clauses: list[Clause | ExpectClause] = [*self.evidence.supports, *self.evidence.against,
                                                *self.evidence.expects]
        for c in clauses:
            if c.id in names:
                raise ValueError(f"clause id '{c.id}' is used twice")
            names.add(c.id)
            for cond in c.where.values():
                vals = cond.values() if isinstance(cond, dict) else [cond]
                for v in vals:
                    for item in v if isinstance(v, list) else [v]:
                        if isinstance(item, str) and item.startswith("$") and item[1:] not in self.thresholds:
                            raise ValueError(f"clause '{c.id}' uses undefined threshold '{item}'")
        domain, name = self.id.removeprefix(SITE_PREFIX).split(".", 1)
        if self.playbook != f"playbooks/{domain}/{name}.md":
            raise ValueError(f"playbook must be 'playbooks/{domain}/{name}.md'")
        return self
