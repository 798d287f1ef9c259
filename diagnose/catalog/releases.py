"""Known-bad releases, as data (``rules/_releases/*.yaml``): a release of a communication-stack component with a
documented defect, the failures it shows as, the setting that avoids it, and where that is written down.

An expert who reads "hangs at init with NCCL 2.19.3" thinks of the 2.19 cuMem deadlock before any fabric fault:
the release and the failure together are evidence. Each entry names a ``component`` (the ``component`` attribute
of the version statements, see ``rules/_messages/versions.yaml``: ``nccl``, ``torch``, ``aws-ofi-nccl``...),
the affected releases (``from`` inclusive, ``before`` exclusive, compared number by number), the symptom kinds it
fails as (:func:`diagnose.symptoms.classify`), an optional environment setting that avoids it (``avoided_by``:
a job that sets it is not affected), the release that fixed it and its source (release notes or the maintainers'
word in an issue thread). ``diagnose rules lint`` checks the files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from diagnose.catalog.entries import load_entries
from diagnose.catalog.locate import catalog_root

RELEASES_DIR = "_releases"
_VERSION = re.compile(r"^\d+(?:\.\d+){0,3}$")
FAILS_AS = ("collective_timeout", "collective_slow", "init_failure", "connection_error", "gpu_error", "process_crash",
            "wrong_results")


def vtuple(v: str) -> tuple[int, ...]:
    """``2.19.3`` -> (2, 19, 3); the leading numbers of ``2.19.3+cuda12.2`` / ``2.19.3-1``."""
    m = re.match(r"v?(\d+(?:\.\d+)*)", v.strip())
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


class KnownRelease(BaseModel):
    """One documented defect of a range of releases (closed schema)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str = Field(pattern=r"^[a-z0-9_-]+\.[a-z0-9_.-]+$")
    component: str = Field(pattern=r"^[a-z0-9_-]+$")
    from_: str = Field(alias="from", description="first affected release (inclusive)")
    before: str | None = Field(default=None, description=(
        "first release not affected (exclusive); absent while no release has fixed it (as of the source)"))
    fails_as: list[str] = Field(min_length=1)
    avoided_by: dict[str, str] = Field(default_factory=dict, description=(
        "environment settings each of which avoids the defect (a job that sets one is not affected)"))
    fixed_in: str | None = None
    shows_as: list[str] = Field(default_factory=list, description=(
        "phrases of the failure's own messages (case-insensitive, in any line a catalog message matched): when"
        " given, the failure matches the defect only if one of them is in the evidence"))
    exposes: str | None = Field(default=None, pattern=r"^[a-z0-9_]+\.[a-z0-9_]+$", description=(
        "a cause id (docs/taxonomy) when the release changed behaviour so that a latent misconfiguration now fails:"
        " the fix is that configuration, not the version (NCCL 2.20 stopped clamping the QP MTU to the smaller of"
        " the two ends, so hosts with different MTUs fail)"))
    says: str = Field(min_length=16, description="one sentence: the defect and how it shows")
    workaround: str | None = None
    source: str = Field(min_length=12, description="release notes or the maintainers' word (a URL)")

    @field_validator("from_", "before", "fixed_in")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        if v is not None and not _VERSION.match(v):
            raise ValueError(f"not a release number: {v!r}")
        return v

    @field_validator("fails_as")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        bad = [k for k in v if k not in FAILS_AS]
        if bad:
            raise ValueError(f"unknown symptom kinds {bad}; known: {list(FAILS_AS)}")
        return v

    @model_validator(mode="after")
    def _range(self) -> KnownRelease:
        if self.before is not None and vtuple(self.from_) >= vtuple(self.before):
            raise ValueError(f"empty range: from {self.from_} is not before {self.before}")
        return self

    def covers(self, version: str) -> bool:
        """Whether ``version`` is affected. A release stated without its patch number (``2.19``, ``2.19.x``) is
        affected only when the whole minor series is."""
        v = vtuple(version)
        if not v:
            return False
        lo = vtuple(self.from_)
        hi = vtuple(self.before) if self.before is not None else (1 << 30,)
        if len(v) == 2 or version.strip().lower().endswith(".x"):
            series_lo, series_hi = v[:2] + (0,), (v[0], v[1] + 1, 0)
            return _pad(lo) <= _pad(series_lo) and _pad(series_hi) <= _pad(hi)
        return _pad(lo) <= _pad(v) < _pad(hi)


def _pad(t: tuple[int, ...]) -> tuple[int, ...]:
    return (t + (0, 0, 0, 0))[:4]


@dataclass
class ReleaseTable:
    entries: list[KnownRelease] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def affected(self, component: str, version: str) -> list[KnownRelease]:
        return [e for e in self.entries if e.component == component and e.covers(version)]


def load_releases(root: Path | None = None) -> ReleaseTable:
    """Every entry under ``<catalog root>/rules/_releases``; errors collected as ``file: message``."""
    entries, errors = load_entries((root or catalog_root()) / "rules" / RELEASES_DIR, RELEASES_DIR, "releases",
                                   KnownRelease)
    return ReleaseTable(entries=entries, errors=errors)


@lru_cache(maxsize=4)
def default_releases(root: str | None = None) -> ReleaseTable:
    """The shipped table, loaded once per process (entries with errors are left out and logged)."""
    table = load_releases(Path(root) if root else None)
    if table.errors:
        import structlog

        log = structlog.get_logger("diagnose.catalog")
        for err in table.errors:
            log.error("release_table_error", error=err)
    return table
