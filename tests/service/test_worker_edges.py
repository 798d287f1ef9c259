"""The worker at its edges: bundle paths named in payloads are used (inside the store only), hostile store bundles
go through the loader's limits, one triage runs at a time, and SIGTERM stops a service stuck mid-triage without
leaving its temporary files behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from diagnose.service.bench import alertmanager_payload, free_socket
from diagnose.service.hooks import HOOKS, PayloadError
from diagnose.service.settings import Settings
from diagnose.service.store import open_store

from .test_worker import accept

ROOT = Path(__file__).resolve().parents[2]
RISING = ROOT / "fixtures" / "link" / "bad_cable" / "positive-symbol-errors-rising"
TOKEN = "worker-edges-token"


def _alert(i: int, host: str, bundle: str | None = None) -> dict[str, Any]:
    p = alertmanager_payload(i, host=host)
    if bundle is not None:
        p["alerts"][0]["annotations"]["bundle"] = bundle
    return p


def test_a_bundle_named_in_the_alert_is_diagnosed_from_the_store(make: Any, tmp_path: Path) -> None:
    shutil.copytree(RISING, tmp_path / "bundles" / "uploads" / "case-17")
    worker, store = make()
    accept(store, _alert(1, "gpu-z999", bundle="uploads/case-17"), now=time.time())  # no store entry matches the host
    worker.run_until_idle()
    (inc,) = store.list_incidents()
    assert inc.status == "diagnosed" and inc.top_cause() == "link.bad_cable"
    notes = store.incident_extras(inc.id)["evidence_notes"]
    assert "bundle store: uploads/case-17 (named in the payload)" in notes
    assert "no bundle for host gpu-z999 in the bundle store" in notes


@pytest.mark.parametrize("ref", [".", "./", "../bundles", "/etc", "uploads/../..", "a\\..\\b"])
def test_a_bundle_ref_naming_the_store_or_leaving_it_is_refused_at_the_door(ref: str) -> None:
    with pytest.raises(PayloadError, match="bundle"):
        HOOKS["alertmanager"].normalize(_alert(1, "gpu-a003", bundle=ref), Settings(_env_file=None))


def test_the_evidence_stage_never_takes_the_whole_store_or_a_name_it_cannot_resolve(tmp_path: Path) -> None:
    from datetime import datetime, timezone

    from diagnose.service.evidence import collect
    from diagnose.service.models import IncidentRecord

    (tmp_path / "bundles" / "gpu-a003").mkdir(parents=True)
    now = datetime.now(timezone.utc)
    inc = IncidentRecord(id=1, source="cli", external_id="x", title="t", created_at=now, updated_at=now)
    settings = Settings(_env_file=None, data_dir=tmp_path / "d", bundles=tmp_path / "bundles")
    ev = collect(settings, inc, tmp_path / "w", bundle_refs=[".", "./", "gpu-a003/..", "x\x00y", "n" * 5000])
    assert ev.paths == []
    assert sum("is the whole store: rejected" in n for n in ev.notes) == 2
    assert sum("leads outside the bundle store: rejected" in n for n in ev.notes) == 2
    assert any("cannot be resolved" in n for n in ev.notes)


def test_a_store_bundle_with_a_fifo_and_a_zip_bomb_is_diagnosed_within_the_loaders_limits(
        make: Any, tmp_path: Path) -> None:
    case = tmp_path / "bundles" / "gpu-a003"
    shutil.copytree(RISING, case)
    os.mkfifo(case / "stuck.log")  # a read would block the worker forever
    (case / "hang.txt").symlink_to(case / "stuck.log")
    with zipfile.ZipFile(case / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("zeros.log", b"\0" * (40 << 20))  # 40 MiB of zeros, ~1000:1
    worker, store = make()
    rid = accept(store, _alert(1, "gpu-a003"), now=time.time())
    worker.run_until_idle()
    assert store.get_request(rid).status == "done"
    (inc,) = store.list_incidents()
    assert inc.status == "diagnosed" and inc.top_cause() == "link.bad_cable"
    problems = {f["path"]: f["problem"] for f in inc.diagnosis["files"] if f["problem"]}
    assert problems["stuck.log"] == "a FIFO, not read"
    assert problems["bomb.zip/zeros.log"].startswith("compression ratio")
    assert "beyond the 100:1 limit" in problems["bomb.zip/zeros.log"]
    assert any("hang.txt" in p for p in problems)  # the symlink to the FIFO is listed too, not followed


def test_a_store_entry_that_is_a_fifo_behind_an_archive_name_does_not_block_the_worker(make: Any,
                                                                                      tmp_path: Path) -> None:
    store_dir = tmp_path / "bundles"
    store_dir.mkdir()
    (store_dir / ".uploads").mkdir()
    os.mkfifo(store_dir / ".uploads" / "pipe")
    (store_dir / "gpu-a004.tar.gz").symlink_to(store_dir / ".uploads" / "pipe")  # inside the store, a FIFO
    os.mkfifo(store_dir / "gpu-a005.tar.gz")
    worker, store = make()
    rids = [accept(store, _alert(i, host), now=time.time()) for i, host in ((1, "gpu-a004"), (2, "gpu-a005"))]
    worker.run_until_idle()
    assert [store.get_request(r).status for r in rids] == ["done", "done"]
    assert {i.status for i in store.list_incidents()} == {"waiting_for_evidence"}


class _SpyLock:
    """The worker's triage lock, counting who holds it and who waits for it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cond = threading.Condition()
        self.asking = 0

    def __enter__(self) -> None:
        with self.cond:
            self.asking += 1
            self.cond.notify_all()
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        with self.cond:
            self.asking -= 1
        self.lock.release()


def test_one_triage_at_a_time_whatever_the_worker_threads(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import diagnose.service.worker as worker_mod

    worker, store = make(worker_threads=2)
    spy = _SpyLock()
    worker._triage_lock = spy  # type: ignore[assignment]
    running = 0
    most = 0
    release = threading.Event()
    real = worker_mod.triage_incident

    def slow(*args: Any, **kw: Any) -> Any:
        nonlocal running, most
        with spy.cond:
            running += 1
            most = max(most, running)
            spy.cond.notify_all()
        release.wait(120)
        with spy.cond:
            running -= 1
        return real(*args, **kw)

    monkeypatch.setattr(worker_mod, "triage_incident", slow)
    for i in range(2):
        accept(store, _alert(i, f"gpu-b00{i}"), now=time.time())
    worker.start()
    try:
        with spy.cond:  # both threads at the lock: one in the triage, the other waiting for it
            assert spy.cond.wait_for(lambda: spy.asking == 2 and running >= 1, timeout=120), \
                "the second triage never waited"
            assert running == 1
        assert worker.triage_running()
        release.set()
        deadline = time.monotonic() + 120
        while {r.status for r in store.list_requests()} != {"done"}:
            assert time.monotonic() < deadline, [r.status for r in store.list_requests()]
            time.sleep(0.05)
    finally:
        release.set()
        worker.stop()
    assert most == 1


STUCK = """
import sys, tempfile, threading
import diagnose.service.worker as w

def stuck(*args, **kwargs):  # a triage blocked mid-way, holding a second-process results folder
    tempfile.mkdtemp(prefix="diagnose-parts-")
    print("TRIAGE-STUCK", flush=True)
    threading.Event().wait()

w.triage_incident = stuck
from diagnose.interfaces.cli import main
sys.argv = ["diagnose", "--log-format", "json", "serve", "--host", "127.0.0.1", "--port", sys.argv[1]]
main()
"""


def test_sigterm_stops_a_service_stuck_in_a_triage_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    tmp = tmp_path / "systmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIAGNOSE_")}
    env.update({"DIAGNOSE_DATA_DIR": str(tmp_path / "data"), "DIAGNOSE_ALERTMANAGER_TOKEN": TOKEN,
                "DIAGNOSE_BUNDLES": str(tmp_path / "bundles"), "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp),
                "DIAGNOSE_SHUTDOWN_GRACE_S": "1"})
    script = tmp_path / "stuck.py"
    script.write_text(textwrap.dedent(STUCK))
    proc = subprocess.Popen([sys.executable, str(script), str(port)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "diagnose serve did not come up"
            time.sleep(0.1)
        r = httpx.post(f"{base}/hooks/alertmanager", json=alertmanager_payload(1),
                       headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        assert r.status_code == 202
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"TRIAGE-STUCK"
        parts = list((tmp_path / "data" / "tmp").rglob("diagnose-parts-*"))
        assert len(parts) == 1  # the stuck triage's folder, in the service's own temporary folder
        assert httpx.get(f"{base}/healthz", timeout=30).json()["triage_running"] is True
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)  # a safety net: the grace is 1 s here (5 s by default)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    err = proc.stderr.read().decode() if proc.stderr else ""
    # uvicorn ends a graceful shutdown by re-raising the signal it caught (older releases exit 0)
    assert code in (0, -signal.SIGTERM), err[-2000:]
    assert '"worker_stop_timeout"' in err and "Application shutdown complete." in err
    assert not parts[0].exists() and not list(tmp.iterdir())
    # the request it was working on stays claimed by a process that is gone: the next start takes it over
    store = open_store(f"sqlite:///{tmp_path / 'data' / 'diagnose.db'}")
    try:
        assert [x.status for x in store.list_requests()] == ["processing"]
    finally:
        store.close()


def test_temporary_folders_of_dead_processes_are_removed_at_start_and_the_own_one_at_stop(make: Any,
                                                                                         tmp_path: Path) -> None:
    import tempfile

    before = tempfile.tempdir
    base = tmp_path / "data" / "tmp"
    left = base / "999999999" / "diagnose-parts-x1"  # a pid no process has: a kill -9 left it
    left.mkdir(parents=True)
    live = base / str(os.getppid())  # a running process's folder is not touched
    live.mkdir()
    worker, _store = make()
    worker.start()
    try:
        own = base / str(os.getpid())
        assert own.is_dir() and tempfile.gettempdir() == str(own)
        assert not left.parent.exists() and live.is_dir()
    finally:
        worker.stop()
    assert not own.exists() and tempfile.tempdir == before
