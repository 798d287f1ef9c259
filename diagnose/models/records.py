"""Typed evidence records produced by the parsers.

Records are frozen, slotted dataclasses rather than pydantic models: a large bundle yields
hundreds of thousands of them and they are built in tight parser loops. Every record carries
the bundle-relative ``source`` path, the 1-based ``line`` it came from and the raw ``text`` of
that line (clipped), so any finding built on it can cite file:line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TEXT_CLIP = 240


def clip(text: str) -> str:
    """Clip a raw line for storage in a record (evidence is shown, never reparsed)."""
    text = text.rstrip("\r\n")
    return text if len(text) <= TEXT_CLIP else text[: TEXT_CLIP - 1] + "\u2026"


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """Base of every parsed record."""

    source: str
    line: int
    text: str
    host: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ParseResult:
    """What a parser returns for one file."""

    format: str
    records: list[Record] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
