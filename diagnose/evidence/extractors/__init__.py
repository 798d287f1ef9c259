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
    """Every registered extractor, sorted by qualified name (deterministic order).

    Modules in this package are discovered, so adding an extractor is adding a module.
    """
    import importlib
    import pkgutil

    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    return sorted(set(_REGISTRY), key=lambda t: t[0])
