"""The message catalog: every known failure or configuration message, as data (``rules/_messages/*.yaml``).

One entry per message: an id, the literal text that must appear in a line (the prefilter), a regex that reads the
line, the finding kind and attributes a hit yields, where the string comes from (the NCCL / PyTorch / CUDA / driver
/ rdma-core / UCX / libfabric source file or the vendor doc), and example lines that the pattern must match (checked
by ``diagnose rules lint`` and the tests). Every line of every file, and the symptom text, is matched against the
catalog (:mod:`diagnose.evidence.scan`), so a known message counts wherever it appears.

A named group of the pattern becomes an attribute of the finding (digits become ints); groups named like a
:class:`~diagnose.models.diagnosis.Location` field (host, device, port, rank, gpu, peer) place it too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from diagnose.catalog.entries import load_entries
from diagnose.catalog.locate import catalog_root

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MESSAGES_DIR = "_messages"
Scalar = str | int | float | bool


class MessageEntry(BaseModel):
    """One known message (closed schema)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9_]+\.[a-z0-9_.]+$")
    literal: list[str] = Field(min_length=1, description="case-sensitive substrings; a line holding one is read")
    pattern: str = Field(min_length=3)
    ignore_case: bool = False
    finding: str = Field(pattern=r"^[a-z0-9_]+$")
    attrs: dict[str, Scalar] = Field(default_factory=dict)
    says: str = Field(min_length=8, description="one sentence: what the message means")
    source: str = Field(min_length=8, description="the source file or document the string comes from")
    examples: list[str] = Field(min_length=1, description="real lines the pattern matches")
    not_examples: list[str] = Field(default_factory=list, description="lines it must not match")
    within: list[str] = Field(default_factory=list, description=(
        "the line counts only in a file that also holds one of these (a systemctl 'Active:' line is Fabric "
        "Manager's only in a paste that names nvidia-fabricmanager)"))

    @field_validator("literal")
    @classmethod
    def _literals(cls, v: list[str]) -> list[str]:
        for lit in v:
            if len(lit) < 4 or not any(c.isalpha() for c in lit):
                raise ValueError(f"literal {lit!r} is shorter than 4 characters or has no letter: it would select"
                                 " too many lines of a large log")
        return v

    @model_validator(mode="after")
    def _compiles(self) -> MessageEntry:
        try:
            rx = re.compile(self.pattern, re.I if self.ignore_case else 0)
        except re.error as exc:
            raise ValueError(f"pattern does not compile: {exc}") from exc
        for ex in self.examples:
            if not any(lit in ex for lit in self.literal):
                raise ValueError(f"example holds none of the literals: {ex!r}")
            if not rx.search(ex):
                raise ValueError(f"pattern does not match its example: {ex!r}")
        for ex in self.not_examples:
            if any(lit in ex for lit in self.literal) and rx.search(ex):
                raise ValueError(f"pattern matches a line it must not: {ex!r}")
        return self


@dataclass
class MessageCatalog:
    entries: list[MessageEntry] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def kinds(self) -> set[str]:
        return {e.finding for e in self.entries}


def load_messages(root: Path | None = None) -> MessageCatalog:
    """Every entry under ``<catalog root>/rules/_messages``; errors collected as ``file: message``."""
    entries, errors = load_entries((root or catalog_root()) / "rules" / MESSAGES_DIR, MESSAGES_DIR, "messages",
                                   MessageEntry)
    return MessageCatalog(entries=entries, errors=errors)


@lru_cache(maxsize=4)
def default_messages(root: str | None = None) -> MessageCatalog:
    """The shipped catalog, loaded once per process (entries with errors are left out and logged)."""
    cat = load_messages(Path(root) if root else None)
    if cat.errors:
        import structlog

        log = structlog.get_logger("diagnose.catalog")
        for err in cat.errors:
            log.error("message_catalog_error", error=err)
    return cat


__all__ = ["MessageCatalog", "MessageEntry", "default_messages", "load_messages"]
