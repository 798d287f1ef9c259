"""Shared fixtures for the service tests (other service test modules may use them).

- ``pg_server``: a throw-away PostgreSQL 15 cluster (initdb as ``nobody`` when run as root), skipped with the
  reason when no postgres binaries are found; ``store_url`` / ``store`` are parametrized over SQLite and it.
- ``service``: a factory starting the real app under uvicorn on a free 127.0.0.1 port:
  ``svc = service(alertmanager_token="t", start_worker=False)`` -> ``svc.base_url``, ``svc.store``,
  ``svc.settings``, ``svc.worker``, ``svc.app``; stopped at the end of the test.
- ``recorder``: a tiny HTTP server counting the POSTs it receives (a post-back target).
- ``make``: ``worker, store = make(**settings)``, the worker without HTTP (tests drive ``run_once``).

``diagnose.service.bench.alertmanager_payload(i, host=..., status=...)`` makes a documented Alertmanager body.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from diagnose.service.bench import ServerThread, free_socket


# -- PostgreSQL --------------------------------------------------------------------------------------------
def _pg_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(d) / "pg_ctl").exists() and (Path(d) / "initdb").exists():
            return Path(d)
    return None


@dataclass
class PgServer:
    base_url: str  # without a database name
    admin_url: str

    def new_database(self) -> str:
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return f"{self.base_url}/{name}"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    bindir = _pg_bin()
    if bindir is None:
        if os.environ.get("DIAGNOSE_REQUIRE_REAL_SERVERS") == "1":  # CI installs PostgreSQL: missing is a failure
            pytest.fail("DIAGNOSE_REQUIRE_REAL_SERVERS=1 but no PostgreSQL server binaries found")
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) found on PATH or under /usr/lib/postgresql")
    tmp = Path(tempfile.mkdtemp(prefix="diagnose-pg-"))
    data, sock_dir = tmp / "data", tmp / "sock"
    sock_dir.mkdir()
    as_root = os.geteuid() == 0
    if as_root:  # initdb refuses to run as root: the cluster belongs to nobody
        shutil.chown(tmp, "nobody")
        shutil.chown(sock_dir, "nobody")
    port = free_socket()
    port_no = port.getsockname()[1]
    port.close()

    def run(cmd: str) -> subprocess.CompletedProcess[str]:
        argv = ["su", "nobody", "-s", "/bin/sh", "-c", cmd] if as_root else ["/bin/sh", "-c", cmd]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    r = run(f"{bindir}/initdb -D {data} -U postgres -A trust --no-sync -E UTF8")
    if r.returncode != 0:
        pytest.skip(f"initdb failed: {r.stderr.strip()[-300:]}")
    opts = f"-k {sock_dir} -p {port_no} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    r = run(f"{bindir}/pg_ctl -D {data} -o '{opts}' -l {tmp}/pg.log -w -t 60 start")
    if r.returncode != 0:
        log = (tmp / "pg.log").read_text() if (tmp / "pg.log").exists() else ""
        pytest.skip(f"postgres did not start: {r.stderr.strip()[-300:]} {log[-300:]}")
    try:
        base = f"postgresql://postgres@127.0.0.1:{port_no}"
        yield PgServer(base, f"{base}/postgres")
    finally:
        run(f"{bindir}/pg_ctl -D {data} -m immediate -w stop")
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'diagnose.db'}"
    return request.getfixturevalue("pg_server").new_database()


@pytest.fixture
def store(store_url: str) -> Iterator[Any]:
    from diagnose.service.store import open_store

    s = open_store(store_url)
    yield s
    s.close()


# -- the worker without HTTP ---------------------------------------------------------------------------------
@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., tuple[Any, Any]]]:
    """``worker, store = make(**settings)``: a Worker over a SQLite store in ``tmp_path/data`` (the bundle store
    ``tmp_path/bundles``), not started; its store is closed at the end of the test."""
    from diagnose.service.settings import Settings
    from diagnose.service.store import open_store
    from diagnose.service.worker import Worker

    opened: list[Any] = []

    def build(**overrides: Any) -> tuple[Any, Any]:
        overrides.setdefault("data_dir", tmp_path / "data")
        overrides.setdefault("bundles", tmp_path / "bundles")
        settings = Settings(_env_file=None, **overrides)  # type: ignore[call-arg]
        store = open_store(settings.store_url())
        opened.append(store)
        return Worker(settings, store), store

    yield build
    for s in opened:
        s.close()


# -- the service over HTTP ----------------------------------------------------------------------------------
@dataclass
class RunningService:
    base_url: str
    app: Any
    server: ServerThread

    @property
    def store(self) -> Any:
        return self.app.state.store

    @property
    def settings(self) -> Any:
        return self.app.state.settings

    @property
    def worker(self) -> Any:
        return self.app.state.worker


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Callable[..., RunningService]]:
    started: list[RunningService] = []

    def start(start_worker: bool = False, **overrides: Any) -> RunningService:
        from diagnose.service.app import create_app
        from diagnose.service.settings import Settings

        overrides.setdefault("data_dir", tmp_path / f"data{len(started)}")
        overrides.setdefault("bundles", tmp_path / "bundles")
        settings = Settings(_env_file=None, **overrides)  # type: ignore[call-arg]
        app = create_app(settings, start_worker=start_worker)
        srv = ServerThread(app).start()
        svc = RunningService(srv.base_url, app, srv)
        started.append(svc)
        return svc

    yield start
    for svc in started:
        svc.server.stop()


# -- a post-back target --------------------------------------------------------------------------------------
@dataclass
class Recorder:
    url: str
    posts: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self) -> list[Any]:
        with self.lock:
            return [p["json"] for p in self.posts]


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n)
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = None
            with rec.lock:
                rec.posts.append({"path": self.path, "json": body, "headers": dict(self.headers)})
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"ok": true}')

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.url = f"http://127.0.0.1:{srv.server_address[1]}/diagnoses"
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield rec
    srv.shutdown()
    srv.server_close()
