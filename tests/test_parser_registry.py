"""Every parser module loads: the registry skips a module that fails to import (so one broken parser cannot take
the others down), which must never hide a parser on a supported Python."""

from __future__ import annotations

import pkgutil

from diagnose import parsers


def test_every_parser_module_is_in_the_registry() -> None:
    public = {i.name for i in pkgutil.iter_modules(parsers.__path__) if not i.name.startswith("_") and i.name != "base"}
    loaded = {m.__name__.rsplit(".", 1)[-1] for m in parsers.registry()}
    assert public - loaded == set()
