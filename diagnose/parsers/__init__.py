"""Pure parsers, one module per tool, discovered at import time.

Every public module in this package that defines ``FORMAT``, ``sniff`` and ``parse`` (see
:mod:`diagnose.parsers.base`) is a parser. Modules whose name starts with ``_`` are helpers.
Discovery order is the sorted module name, so sniffing ties break deterministically.

A parser that sets ``MIXABLE = True`` reads a line-oriented log that real captures interleave
with other line-oriented logs (a job's stdout holds NCCL INFO lines, a PyTorch watchdog error and
an nccl-tests table at once); every mixable parser that claims such a file runs on it.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

from diagnose.parsers.base import capabilities


@lru_cache(maxsize=1)
def registry() -> tuple[ModuleType, ...]:
    mods: list[ModuleType] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name == "base":
            continue
        try:
            mod = importlib.import_module(f"{__name__}.{info.name}")
        except Exception as exc:  # noqa: BLE001 - one broken parser module must not take the others down
            import structlog

            structlog.get_logger("diagnose.parsers").error("parser_import_failed", module=info.name, error=repr(exc))
            continue
        if all(hasattr(mod, a) for a in ("FORMAT", "sniff", "parse")) or (
            capabilities(mod).binary and all(hasattr(mod, a) for a in ("FORMAT", "sniff_bytes", "parse_bytes"))
        ):
            mods.append(mod)
    return tuple(mods)


def by_format(fmt: str) -> ModuleType:
    for mod in registry():
        if mod.FORMAT == fmt:
            return mod
    raise KeyError(fmt)


def formats() -> list[str]:
    return [m.FORMAT for m in registry()]
