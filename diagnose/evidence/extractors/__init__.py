"""Vectorised extractors: frames in, a small set of findings out.

An extractor is a function ``(ctx: Context) -> list[Finding]`` registered with :func:`extractor`.
Extractors measure and classify; thresholds that decide a cause live in the rules.
"""

from __future__ import annotations

from collections.abc import Callable

from diagnose.evidence.context import Context
from diagnose.models.diagnosis import Finding

Extractor = Callable[[Context], list[Finding]]
_REGISTRY: list[tuple[str, Extractor]] = []


def extractor(fn: Extractor) -> Extractor:
    _REGISTRY.append((f"{fn.__module__}.{fn.__name__}", fn))
    return fn


def all_extractors() -> list[tuple[str, Extractor]]:
    from diagnose.evidence.extractors import app, bandwidth, gpu, host, links, nccl  # noqa: F401

    return sorted(_REGISTRY, key=lambda t: t[0])
