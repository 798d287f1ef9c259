"""The one-thread process where the service triages a large bundle (diagnose/runtime/isolated.py): the same
diagnosis as a triage here, a process that dies is an error of that call only, and the next call gets a new one."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from diagnose.render import render_json
from diagnose.runtime.isolated import OneThread, ProcessLost
from diagnose.service import worker

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BUNDLE = FIXTURES / "link/bad_cable/positive-fattree64-hca-end"

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")


def _pid_and_threads() -> tuple[int, int]:
    return os.getpid(), threading.active_count()


def _dies() -> None:
    os._exit(3)


def test_a_call_runs_in_another_process_with_one_thread_and_a_dead_process_is_replaced() -> None:
    one = OneThread(preload=())
    try:
        pid, threads = one.run(_pid_and_threads)
        assert pid != os.getpid() and threads == 1  # where the parallel executor may fork
        assert one.run(_pid_and_threads)[0] == pid  # reused
        with pytest.raises(ProcessLost):
            one.run(_dies)
        again, _ = one.run(_pid_and_threads)
        assert again not in (pid, os.getpid())
    finally:
        one.close()


def test_the_service_triages_a_large_bundle_there_with_the_diagnosis_of_a_triage_here(monkeypatch, catalog) -> None:  # type: ignore[no-untyped-def]
    here = worker.triage_here([str(BUNDLE)], "AllReduce slow", "hook", catalog)
    calls: list[str] = []
    real = worker._ONE_THREAD.run

    def spy(fn, *args):  # type: ignore[no-untyped-def]
        calls.append(fn.__name__)
        return real(fn, *args)

    monkeypatch.setattr(worker, "PROCESS_MIN_BYTES", 1)
    monkeypatch.setattr(worker._ONE_THREAD, "run", spy)
    there = worker.triage_incident([BUNDLE], "AllReduce slow", "hook", catalog)
    assert calls == ["triage_here"]
    assert render_json(there) == render_json(here)
    monkeypatch.setattr(worker, "PROCESS_MIN_BYTES", 1 << 40)
    assert render_json(worker.triage_incident([BUNDLE], "AllReduce slow", "hook", catalog)) == render_json(here)
    assert calls == ["triage_here"]  # a small bundle stays in this process
