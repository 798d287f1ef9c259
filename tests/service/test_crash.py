"""Exactly-once under a crash: ``diagnose serve`` is SIGKILLed while a request is mid-way, started again on the
same store, and every accepted request ends ``done`` with one incident and one post-back each.

The worker is slowed with ``DIAGNOSE_TEST_STEP_DELAY_S`` (a sleep after every step) so the kill lands while a
request is being processed, and long before its post-back: the process is killed right after a post-back was
recorded and the next request was claimed, which leaves that request ``processing`` under a lease held by a
dead process.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from diagnose.service.bench import alertmanager_payload, free_socket
from diagnose.service.store import open_store

N = 4
TOKEN = "crash-test-token"
ROOT = Path(__file__).resolve().parents[2]


def _serve(tmp: Path, recorder_url: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIAGNOSE_")}
    env.update({"DIAGNOSE_DATA_DIR": str(tmp / "data"), "DIAGNOSE_ALERTMANAGER_TOKEN": TOKEN,
                "DIAGNOSE_POST_URL": recorder_url, "DIAGNOSE_TEST_STEP_DELAY_S": "0.25",
                "DIAGNOSE_BUNDLES": str(tmp / "bundles"), "PYTHONPATH": str(ROOT)})
    log = tmp / f"serve-{port}.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "diagnose.interfaces.cli", "--log-format", "json",
                                 "--log-level", "info", "serve", "--host",
                                 "127.0.0.1", "--port", str(port)], cwd=tmp, env=env, stdout=subprocess.DEVNULL,
                                stderr=err)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return proc, base, log
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "diagnose serve did not come up"
        time.sleep(0.1)


def _wait(cond: Any, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_killed_service_resumes_and_processes_every_request_exactly_once(tmp_path: Path, recorder: Any) -> None:
    proc, base, _ = _serve(tmp_path, recorder.url)
    store = None
    try:
        ids = []
        for i in range(N):
            r = httpx.post(f"{base}/hooks/alertmanager", json=alertmanager_payload(i, host=f"gpu-c{i:03d}"),
                           headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
            assert r.status_code == 202
            ids.append(r.json()["request_id"])
        store = open_store(f"sqlite:///{tmp_path / 'data' / 'diagnose.db'}")

        def mid_way() -> bool:  # one post-back recorded, and the next request claimed (not yet posted)
            c = store.counts()
            return len(recorder.posts) >= 1 and c["requests"].get("processing", 0) == 1

        _wait(mid_way, "a request in processing after a first post-back")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        before = {r.id: r for r in store.list_requests()}
        interrupted = [rid for rid, r in before.items() if r.status == "processing"]
        assert len(interrupted) == 1 and before[interrupted[0]].attempts == 1
        assert any(r.status == "pending" for r in before.values())

        proc, base, log = _serve(tmp_path, recorder.url)
        _wait(lambda: all(store.get_request(i).status == "done" for i in ids)
              and store.counts()["deliveries_pending"] == 0, "every request done after the restart")

        after = {r.id: r for r in store.list_requests()}
        assert after[interrupted[0]].attempts == 2  # claimed again at the restart
        incidents = store.list_incidents(limit=100)
        # (no bundle for these hosts: each is diagnosed from its alert's text and waits for evidence)
        assert len(incidents) == N and all(i.status == "waiting_for_evidence" and i.diagnosis for i in incidents)
        posts = collections.Counter(b["incident_id"] for b in recorder.bodies())
        assert posts == {i.id: 1 for i in incidents}
        for inc in incidents:
            assert [(d.target, d.ok) for d in store.list_deliveries(inc.id)] == [("post_url", True)]
        # a clean stop: SIGTERM lets the worker finish its step and the app shut down (uvicorn then re-raises
        # the signal, so the exit status says SIGTERM)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) in (0, -signal.SIGTERM)
        text = log.read_text()
        assert '"event": "worker_stopped"' in text and '"event": "service_stopped"' in text
        assert TOKEN not in text  # the secret is never logged
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if store is not None:
            store.close()
