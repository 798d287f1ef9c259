"""The hostile corpus, built once per run (scaled down: a few MB that hit the same limits as GBs at the defaults)."""

from __future__ import annotations

import faulthandler
import functools
import sys
from collections.abc import Iterator

import pytest

from diagnose.bundle import LoadLimits, hostile


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, hostile.Case]:
    return {c.name: c for c in hostile.build(tmp_path_factory.mktemp("hostile") / "corpus", hostile.SMALL)}


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's limits scaled as the corpus is (its own options, such as --max-file-size, still apply)."""
    import diagnose.interfaces.cli as cli
    import diagnose.pipeline as pipeline

    scaled = functools.partial(LoadLimits, **hostile.SMALL_LIMITS)
    monkeypatch.setattr(cli, "LoadLimits", scaled)
    monkeypatch.setattr(pipeline, "LoadLimits", scaled)


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """A safety net only: a case that hangs (a FIFO opened) ends the run with every thread's stack, not never."""
    faulthandler.dump_traceback_later(300, exit=True, file=sys.__stderr__)
    yield
    faulthandler.cancel_dump_traceback_later()


