"""The service's durable state: one SQL schema on SQLite (stdlib) or PostgreSQL (psycopg 3).

Why SQL and not a queue: every inbound request is written *before* it is acknowledged, the worker claims it
with a lease, and the last state change (diagnosis stored + request done) is one transaction. A process killed
at any point therefore leaves either a ``pending`` request or a ``processing`` one whose lease runs out, and the
next start claims it again; the UNIQUE keys make the re-run idempotent (no second incident, no second alert
counted). Post-backs follow the transactional-outbox pattern: the final transaction marks the incident's
delivery ``pending``; the delivery outcome is recorded right after the POSTs, so a restart never re-posts a
delivery that was already recorded.

Tables (schema version :data:`SCHEMA_VERSION`):

- ``requests``: every accepted or rejected hook request (401 and 413 are never stored), its queue state
  (``pending`` -> ``processing`` -> ``done``/``failed``; ``rejected`` and ``duplicate`` are final on arrival).
  ``UNIQUE(source, dedup_key)`` is the dedup: a repeat of the same alert state is stored as ``duplicate`` with
  a NULL key and ``duplicate_of`` naming the first.
- ``incidents``: :class:`~diagnose.service.models.IncidentRecord` fields, ``UNIQUE(source, external_id)``.
- ``incident_alerts``: every alert (source, external_id) that joined an incident, ``UNIQUE(source, external_id)``;
  an alert storm behind one leaf switch is one incident with ``alert_count`` members.
- ``deliveries``: post-back outcomes. ``feedback``: :class:`~diagnose.service.models.FeedbackRecord` rows.
- ``schema_version``: one row; :func:`open_store` creates or migrates.

Times are stored as UTC epoch seconds (``DOUBLE PRECISION``) so that queue comparisons are plain numbers on both
backends; alert start/end times keep their ISO-8601 text.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import structlog

from diagnose.service.models import FeedbackRecord, IncidentDraft, IncidentRecord, PortRef

log = structlog.get_logger("diagnose.service.store")

SCHEMA_VERSION = 2
ACTIVE_STATES = ("firing", "open")
ENDED_STATES = ("resolved", "closed")
# an incident in one of these states is (re)diagnosed when its owning alert fires again
RETRIAGE_STATUSES = ("open", "diagnosing", "failed", "waiting_for_evidence")


def diagnosed_status(diagnosis: dict[str, Any]) -> str:
    """``diagnosed``, or ``waiting_for_evidence`` when no file of evidence was recognised (an alert for a host with
    no bundle yet): the diagnosis then holds what the symptom supports and the evidence to collect, and the incident
    is diagnosed again when its alert fires again."""
    return "diagnosed" if any((f or {}).get("records") for f in diagnosis.get("files") or []) else "waiting_for_evidence"
BUSY_TIMEOUT_MS = 10_000

# {pk} and {skip_locked} are filled per backend; everything else is the same SQL on both
_SCHEMA_V1 = [
    """CREATE TABLE IF NOT EXISTS requests (
        id {pk},
        source TEXT NOT NULL,
        dedup_key TEXT,
        duplicate_of BIGINT,
        received_at DOUBLE PRECISION NOT NULL,
        headers TEXT NOT NULL DEFAULT '{{}}',
        body TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at DOUBLE PRECISION NOT NULL,
        lease_until DOUBLE PRECISION,
        claim_token TEXT,
        error TEXT,
        finished_at DOUBLE PRECISION,
        UNIQUE (source, dedup_key)
    )""",
    "CREATE INDEX IF NOT EXISTS requests_queue ON requests (status, next_attempt_at)",
    """CREATE TABLE IF NOT EXISTS incidents (
        id {pk},
        source TEXT NOT NULL,
        external_id TEXT NOT NULL,
        title TEXT NOT NULL,
        text TEXT NOT NULL DEFAULT '',
        hosts TEXT NOT NULL DEFAULT '[]',
        devices TEXT NOT NULL DEFAULT '[]',
        ports TEXT NOT NULL DEFAULT '[]',
        job_id TEXT,
        starts_at TEXT,
        ends_at TEXT,
        labels TEXT NOT NULL DEFAULT '{{}}',
        bundle_refs TEXT NOT NULL DEFAULT '[]',
        reply_to TEXT NOT NULL DEFAULT '{{}}',
        status TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        last_alert_at DOUBLE PRECISION NOT NULL,
        diagnosis TEXT,
        evidence_notes TEXT NOT NULL DEFAULT '[]',
        error TEXT,
        group_key TEXT,
        alert_count INTEGER NOT NULL DEFAULT 1,
        request_id BIGINT,
        delivery_state TEXT NOT NULL DEFAULT 'none',
        delivery_lease_until DOUBLE PRECISION,
        delivery_owner TEXT,
        UNIQUE (source, external_id)
    )""",
    "CREATE INDEX IF NOT EXISTS incidents_group ON incidents (group_key, last_alert_at)",
    "CREATE INDEX IF NOT EXISTS incidents_delivery ON incidents (delivery_state)",
    """CREATE TABLE IF NOT EXISTS incident_alerts (
        id {pk},
        incident_id BIGINT NOT NULL REFERENCES incidents (id),
        source TEXT NOT NULL,
        external_id TEXT NOT NULL,
        state TEXT NOT NULL,
        added_at DOUBLE PRECISION NOT NULL,
        UNIQUE (source, external_id)
    )""",
    """CREATE TABLE IF NOT EXISTS deliveries (
        id {pk},
        incident_id BIGINT NOT NULL REFERENCES incidents (id),
        target TEXT NOT NULL,
        ok INTEGER NOT NULL,
        status_code INTEGER,
        attempts INTEGER NOT NULL DEFAULT 1,
        error TEXT,
        at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS deliveries_incident ON deliveries (incident_id)",
    """CREATE TABLE IF NOT EXISTS feedback (
        id {pk},
        incident_id BIGINT NOT NULL,
        verdict TEXT NOT NULL,
        cause TEXT,
        actual TEXT,
        username TEXT NOT NULL DEFAULT '',
        platform TEXT NOT NULL DEFAULT '',
        created_at DOUBLE PRECISION NOT NULL
    )""",
]
# version 2: the copies of a duplicate are counted on its one ``duplicate`` row (``replays``, ``last_received_at``),
# and the copies of a rejected body on its first ``rejected`` row
_SCHEMA_V2 = [
    "ALTER TABLE requests ADD COLUMN replays INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE requests ADD COLUMN last_received_at DOUBLE PRECISION",
    "CREATE INDEX IF NOT EXISTS requests_duplicate_of ON requests (duplicate_of)",
    # a rejected body sent again (a sender retrying what will never be accepted) is counted on its first row
    "ALTER TABLE requests ADD COLUMN body_digest TEXT",
    "CREATE INDEX IF NOT EXISTS requests_rejected_digest ON requests (source, body_digest)",
]
# version -> statements that bring a store from version-1 to version
MIGRATIONS: dict[int, list[str]] = {1: _SCHEMA_V1, 2: _SCHEMA_V2}

_REQUEST_COLS = ("id, source, dedup_key, duplicate_of, received_at, headers, body, status, attempts, next_attempt_at, "
                 "lease_until, claim_token, error, finished_at, replays, last_received_at")


HOSTNAME = socket.gethostname()


def _owner() -> str:
    """Who holds a lease: this host and process (computed per call: a forked server has another pid)."""
    return f"{HOSTNAME}:{os.getpid()}"


def _dead_owner(token: str | None, prefix: str) -> bool:
    """True when ``token`` (host:pid[:...]) names a process of this host that is gone."""
    if not token or not token.startswith(prefix):
        return False
    pid_s = token[len(prefix):].split(":", 1)[0]
    if not pid_s.isdigit():
        return False
    pid = int(pid_s)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by another user
        return False
    return False


class StoreError(Exception):
    """The store cannot be opened or used (bad URL, newer schema, unreachable server)."""


class StoreUnavailable(StoreError):
    """The store cannot make a write durable now: answer 503 (the sender retries), never 202.

    ``state`` is what ``/healthz`` reports: ``gone`` (the SQLite file was deleted), ``replaced`` (another file is
    at its path), ``unwritable`` (no write permission, a read-only file system), ``full`` (disk or database full),
    ``busy`` (locked past the busy timeout), ``io_error``, ``unreachable`` (PostgreSQL), ``queue_full``.
    """

    def __init__(self, state: str, detail: str) -> None:
        super().__init__(detail)
        self.state = state
        self.detail = detail


class QueueFull(StoreUnavailable):
    """More requests are waiting than ``max_queue`` allows: 503 with ``Retry-After``; nothing was stored."""

    def __init__(self, depth: int, limit: int) -> None:
        super().__init__("queue_full", f"{depth} requests are waiting (limit {limit}): retry later")
        self.depth = depth
        self.limit = limit


def _write_failure(exc: BaseException) -> StoreUnavailable | None:
    """The :class:`StoreUnavailable` a database error means, or None for an error that is not about the store's
    ability to write (a constraint, a bug)."""
    import errno

    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return StoreUnavailable("full", "no space left on the store's device")
    if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return StoreUnavailable("unwritable", f"the store cannot be written: {exc.strerror or exc}")
    if isinstance(exc, sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError:
        msg = str(exc)
        low = msg.lower()
        if "disk is full" in low or "database or disk is full" in low:
            return StoreUnavailable("full", f"the store's disk or database is full ({msg})")
        if "readonly" in low or "read-only" in low:
            return StoreUnavailable("unwritable", f"the store is read-only ({msg})")
        if "locked" in low or "busy" in low:
            return StoreUnavailable("busy", f"the store is locked by another process ({msg})")
        if "disk i/o" in low or "unable to open" in low or "malformed" in low or "not a database" in low:
            return StoreUnavailable("io_error", f"the store's file cannot be used ({msg})")
        return None
    try:
        import psycopg
    except ModuleNotFoundError:  # pragma: no cover - the postgres extra is not installed
        return None
    if isinstance(exc, psycopg.errors.DiskFull):
        return StoreUnavailable("full", "the PostgreSQL server's disk is full")
    if isinstance(exc, psycopg.OperationalError):
        return StoreUnavailable("unreachable", f"the PostgreSQL store is unreachable: {redact(str(exc))[:300]}")
    return None


@dataclass(frozen=True)
class StoredRequest:
    """One row of ``requests`` as the worker and ``GET /requests`` see it (headers without secrets)."""

    id: int
    source: str
    dedup_key: str | None
    duplicate_of: int | None
    received_at: float
    headers: dict[str, str]
    body: str
    status: str
    attempts: int
    next_attempt_at: float
    lease_until: float | None
    claim_token: str | None
    error: str | None
    finished_at: float | None
    replays: int = 0
    last_received_at: float | None = None

    def as_json(self, body_limit: int | None = None) -> dict[str, Any]:
        body = self.body if body_limit is None or len(self.body) <= body_limit else self.body[:body_limit] + "..."
        return {"id": self.id, "source": self.source, "dedup_key": self.dedup_key, "duplicate_of": self.duplicate_of,
                "received_at": _iso(self.received_at), "status": self.status, "attempts": self.attempts,
                "next_attempt_at": _iso(self.next_attempt_at), "error": self.error,
                "finished_at": _iso(self.finished_at) if self.finished_at else None,
                "replays": self.replays, "last_received_at": _iso(self.last_received_at),
                "headers": self.headers, "body": body}


@dataclass(frozen=True)
class Accepted:
    """What :meth:`SqlStore.accept_request` did: a new queued request, or the first one it duplicates."""

    request_id: int
    duplicate: bool


@dataclass(frozen=True)
class UpsertResult:
    """The incident a draft landed in, and whether the worker must diagnose it now."""

    incident: IncidentRecord
    created: bool
    grouped: bool
    needs_triage: bool
    resolved: bool


@dataclass(frozen=True)
class DeliveryRow:
    incident_id: int
    target: str
    ok: bool
    status_code: int | None
    attempts: int
    error: str | None
    at: float

    def as_json(self) -> dict[str, Any]:
        return {"target": self.target, "ok": self.ok, "status_code": self.status_code, "attempts": self.attempts,
                "error": self.error, "at": _iso(self.at)}


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def _now(now: float | None) -> float:
    return time.time() if now is None else now


def _merge(old: Sequence[Any], new: Sequence[Any]) -> list[Any]:
    out = list(old)
    for x in new:
        if x not in out:
            out.append(x)
    return out


class _Tx:
    """A cursor-like view of one transaction; SQL is written with ``?`` placeholders on both backends."""

    def __init__(self, conn: Any, pg: bool, reconnect: Any = None) -> None:
        self._conn = conn
        self._pg = pg
        self._reconnect = reconnect  # autocommit reads only: a connection the server cut is replaced once

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        if self._pg:
            import psycopg

            try:
                cur = self._conn.execute(sql.replace("?", "%s"), tuple(params))
            except psycopg.OperationalError:
                if self._reconnect is None:
                    raise
                self._conn, self._reconnect = self._reconnect(self._conn), None
                cur = self._conn.execute(sql.replace("?", "%s"), tuple(params))
            return list(cur.fetchall()) if cur.description else []
        cur = self._conn.execute(sql, tuple(params))
        return [dict(r) for r in cur.fetchall()] if cur.description else []

    def one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        r = self.rows(sql, params)
        return r[0] if r else None

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute a statement; returns the affected row count."""
        if self._pg:
            return int(self._conn.execute(sql.replace("?", "%s"), tuple(params)).rowcount)
        return int(self._conn.execute(sql, tuple(params)).rowcount)


class SqlStore:
    """The :class:`~diagnose.service.models.Store` protocol plus the queue the app and the worker use.

    Safe from several threads: each thread gets its own connection (SQLite connections and psycopg connections
    are not shared), and every multi-statement change runs in one transaction (``BEGIN IMMEDIATE`` on SQLite, so
    writers queue on the database lock instead of failing; row locks and ``SKIP LOCKED`` on PostgreSQL).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        if url.startswith("sqlite:///"):
            self.backend = "sqlite"
            path = url[len("sqlite:///"):]
            if not path or path == ":memory:":
                raise StoreError("an in-memory SQLite store is not shared between threads: give a file path")
            self._path: Path | None = Path(path)
            self._path.parent.mkdir(parents=True, exist_ok=True)
        elif url.startswith(("postgresql://", "postgres://")):
            self.backend = "postgresql"
            self._path = None
        else:
            raise StoreError(f"unsupported store URL (use sqlite:///path.db or postgresql://...): {redact(url)}")
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closed = False
        # the SQLite files as opened: (path, our own descriptor on the same file); before every acknowledgement
        # the path must still name that file (an unlinked or replaced database would take acknowledged requests
        # with it at the next start)
        self._pinned: list[tuple[Path, int]] = []
        self._lost: StoreUnavailable | None = None  # the database file is gone or replaced: refused until restart
        self._failed_write: StoreUnavailable | None = None  # the last write failed (disk full...), none since worked
        if self._path is not None:
            self._adopt_rescue()

    # -- connections -------------------------------------------------------------------------------------
    @property
    def _pg(self) -> bool:
        return self.backend == "postgresql"

    def _connect(self) -> Any:
        conn: Any  # a psycopg or a sqlite3 connection
        if self._pg:
            import psycopg
            from psycopg.rows import dict_row

            try:
                conn = psycopg.connect(self.url, autocommit=True, row_factory=dict_row, connect_timeout=10)
            except psycopg.OperationalError as exc:
                raise StoreUnavailable("unreachable", f"cannot connect to {redact(self.url)}: {exc}") from exc
        else:
            assert self._path is not None
            # once the file is opened, a new connection never creates another one at its path (a deleted database
            # must not come back empty under a running service)
            target: Any = f"file:{quote(str(self._path))}?mode=rw" if self._pinned else self._path
            try:
                conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                       check_same_thread=False, uri=bool(self._pinned))
                conn.row_factory = sqlite3.Row
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")  # an acknowledged request survives a power cut
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA foreign_keys=ON")
            except sqlite3.Error as exc:
                if not self._pinned:
                    raise
                raise StoreUnavailable("gone" if not self._path.exists() else "io_error",
                                       f"the store's file {self._path} cannot be opened: {exc}") from exc
        with self._lock:
            self._all.append(conn)
        return conn

    def _conn(self) -> Any:
        if self._closed:
            raise StoreError("the store is closed")
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._pg and (conn.closed or conn.broken):
            self._drop(conn)
            conn = None
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def _drop(self, conn: Any) -> None:
        with self._lock:
            if conn in self._all:
                self._all.remove(conn)
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - a broken connection may fail to close; it is gone either way
            pass
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None

    @contextmanager
    def _tx(self) -> Iterator[_Tx]:
        """One write transaction on this thread's connection; rolled back on any exception."""
        conn = self._conn()
        if self._pg:
            import psycopg

            try:
                with conn.transaction():
                    yield _Tx(conn, True)
            except psycopg.OperationalError as exc:
                self._drop(conn)  # the next call reconnects
                failure = _write_failure(exc)
                if failure is None:
                    raise
                if failure.state == "full":
                    self._failed_write = failure
                raise failure from exc
            self._failed_write = None
            return
        # writers of this process queue on a lock (first come, first served) instead of on SQLite's busy
        # handler, which sleeps and polls; other processes still meet busy_timeout
        with self._write_lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield _Tx(conn, False)
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except (sqlite3.Error, OSError) as exc:
                failure = _write_failure(exc)
                if failure is None:
                    raise
                if failure.state != "busy":
                    self._failed_write = failure
                raise failure from exc
        self._failed_write = None

    # -- durability --------------------------------------------------------------------------------------
    def _rescue_path(self) -> Path:
        assert self._path is not None
        return self._path.with_name(self._path.name + ".rescued")

    def _adopt_rescue(self) -> None:
        """A copy saved from a database file deleted under a running service (:meth:`_rescue`) becomes the store
        again when nothing else took its place; the WAL files left beside the deleted one belong to it, not to the
        copy, and are moved aside first."""
        assert self._path is not None
        rescued = self._rescue_path()
        if not rescued.exists():
            return
        if self._path.exists():
            log.error("store_rescue_not_adopted", rescued=str(rescued), path=str(self._path),
                      detail="a database file exists at the store's path: compare them by hand")
            return
        stamp = int(time.time())
        for suffix in ("-wal", "-shm"):
            stale = self._path.with_name(self._path.name + suffix)
            if stale.exists():
                stale.rename(stale.with_name(f"{stale.name}.stale-{stamp}"))
        rescued.rename(self._path)
        log.warning("store_rescued", path=str(self._path),
                    detail="the database file had been deleted while the service ran; its saved copy is used")

    def _pin(self) -> None:
        """Remember the database file (and its WAL) as opened, for :meth:`check_durable`."""
        if self._path is None or self._pinned:
            return
        for p in (self._path, self._path.with_name(self._path.name + "-wal")):
            try:
                fd = os.open(p, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                continue  # no WAL file yet: the database file alone is checked
            self._pinned.append((p, fd))

    def _unpin(self) -> None:
        pinned, self._pinned = self._pinned, []
        for _p, fd in pinned:
            try:
                os.close(fd)
            except OSError:
                pass

    def _file_state(self) -> StoreUnavailable | None:
        """Why the SQLite files at the store's path are no longer the ones it writes to, or cannot be written."""
        for p, fd in self._pinned:
            opened = os.fstat(fd)
            try:
                now = os.stat(p)
            except FileNotFoundError:
                return StoreUnavailable("gone", f"the store's file {p} was deleted while the service ran: "
                                                "requests are refused until it restarts")
            except OSError as exc:
                return StoreUnavailable("io_error", f"the store's file {p} cannot be checked: {exc.strerror or exc}")
            if (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino):
                return StoreUnavailable("replaced", f"the store's file {p} was replaced by another file while the "
                                                    "service ran: requests are refused until it restarts")
        if self._path is not None and self._pinned:
            folder = self._path.parent
            try:
                ro = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
            except OSError:
                ro = False
            if ro or not os.access(self._path, os.W_OK) or not os.access(folder, os.W_OK):
                return StoreUnavailable("unwritable", f"the store's file {self._path} or its folder is not writable")
        return None

    def check_durable(self) -> None:
        """Raise :class:`StoreUnavailable` unless a write committed now would survive a restart.

        SQLite: the path still names the file this store opened (same device and inode, for the database and its
        WAL), and it and its folder are writable. PostgreSQL: a commit only returns once the server has it, so the
        write itself is the check (a broken connection raises ``unreachable``). The first time the file is found
        gone, what the open connections still see of it is saved beside it (``<name>.rescued``), and becomes the
        store again at the next start.
        """
        if self._lost is not None:
            raise self._lost
        if self._pg:
            return
        problem = self._file_state()
        if problem is None:
            return
        if problem.state in ("gone", "replaced"):
            self._lost = problem
            self._rescue()
        raise problem

    def _rescue(self) -> None:
        """Copy the database the open connections still see (deleted or replaced at its path) to
        ``<name>.rescued``, so what was acknowledged before is not lost with it."""
        if self._path is None:
            return
        target = self._rescue_path()
        tmp = target.with_name(target.name + ".tmp")
        src = getattr(self._local, "conn", None)
        if src is None:
            with self._lock:
                src = self._all[0] if self._all else None
        if src is None:
            log.error("store_rescue_failed", path=str(target), error="no open connection to the lost file")
            return
        try:
            with self._write_lock:
                dst = sqlite3.connect(tmp)
                try:
                    src.backup(dst)
                finally:
                    dst.close()
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except (sqlite3.Error, OSError) as exc:
            log.error("store_rescue_failed", path=str(target), error=f"{exc.__class__.__name__}: {exc}")
            return
        log.error("store_file_lost", state=self._lost.state if self._lost else None, path=str(self._path),
                  rescued=str(target))

    def health(self) -> tuple[str, str | None]:
        """``("ok", None)`` or (state, detail) as :class:`StoreUnavailable` names them (``/healthz``)."""
        if not self.ping():
            return "unreachable", "the store does not answer"
        try:
            self.check_durable()
        except StoreUnavailable as exc:
            return exc.state, exc.detail
        failed = self._failed_write
        if failed is not None:
            try:  # a committed write that needs room: does the store take requests again?
                with self._tx() as tx:
                    if self._pg:
                        tx.run("UPDATE schema_version SET version = version")
                    else:  # 64 KiB of new pages (a request's worth), freed again in the same transaction
                        tx.run("INSERT INTO schema_version (version) VALUES (randomblob(65536))")
                        tx.run("DELETE FROM schema_version WHERE typeof(version) = 'blob'")
            except StoreUnavailable as exc:
                return exc.state, exc.detail
        return "ok", None

    def _read(self) -> _Tx:
        """Autocommit reads (each statement sees committed data)."""
        return _Tx(self._conn(), self._pg, self._reconnect if self._pg else None)

    def _reconnect(self, broken: Any) -> Any:
        self._drop(broken)
        return self._conn()

    def close(self) -> None:
        """Close every thread's connection (the app's shutdown; a closed store refuses further use).

        When the database file was deleted under the store, its latest state is saved first (``<name>.rescued``)
        and, once the connections are closed, put back at the store's path if nothing else is there.
        """
        if self._lost is not None and not self._closed:
            self._rescue()
        self._closed = True
        with self._lock:
            conns, self._all = self._all, []
        for c in conns:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass
        self._unpin()
        if self._lost is not None and self._path is not None and self._rescue_path().exists():
            if not self._path.exists():
                self._adopt_rescue()
            else:
                kept = self._rescue_path().with_name(f"{self._rescue_path().name}-{int(time.time())}")
                self._rescue_path().rename(kept)
                log.error("store_rescue_kept", path=str(kept), store=str(self._path),
                          detail="another database file took the store's place: compare them by hand")

    def ping(self) -> bool:
        """True when the database answers (``/healthz``)."""
        try:
            return self._read().one("SELECT 1 AS ok") is not None
        except Exception as exc:  # noqa: BLE001 - health checks report, they do not raise
            log.warning("store_unreachable", error=str(exc))
            conn = getattr(self._local, "conn", None)
            if conn is not None and self._pg:
                self._drop(conn)
            return False

    # -- schema ------------------------------------------------------------------------------------------
    def migrate(self) -> int:
        """Create the schema or bring it to :data:`SCHEMA_VERSION`; returns the version found before."""
        fill = {"pk": "BIGSERIAL PRIMARY KEY" if self._pg else "INTEGER PRIMARY KEY AUTOINCREMENT"}
        with self._tx() as tx:
            if self._pg:  # several processes may start at once: one migrates, the others wait
                tx.run("SELECT pg_advisory_xact_lock(764231)")
            tx.run("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = tx.one("SELECT version FROM schema_version")
            found = int(row["version"]) if row else 0
            if found > SCHEMA_VERSION:
                raise StoreError(f"the store has schema version {found}, newer than this diagnose "
                                 f"understands ({SCHEMA_VERSION}): upgrade diagnose")
            for v in range(found + 1, SCHEMA_VERSION + 1):
                for stmt in MIGRATIONS[v]:
                    tx.run(stmt.format(**fill))
            if row is None:
                tx.run("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif found != SCHEMA_VERSION:
                tx.run("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
        if found != SCHEMA_VERSION:
            log.info("store_migrated", backend=self.backend, from_version=found, to_version=SCHEMA_VERSION)
        self._pin()
        return found

    def schema_version(self) -> int:
        row = self._read().one("SELECT version FROM schema_version")
        return int(row["version"]) if row else 0

    # -- requests ----------------------------------------------------------------------------------------
    @contextmanager
    def _ack_tx(self) -> Iterator[_Tx]:
        """A write whose success is acknowledged to a sender: the store is checked durable before and after the
        commit (:meth:`check_durable`), so an answer is never given for a row on a file that is gone."""
        self.check_durable()
        with self._tx() as tx:
            yield tx
        self.check_durable()

    def accept_request(self, source: str, dedup_key: str | None, headers: dict[str, str], body: str,
                       now: float | None = None, max_queue: int = 0) -> Accepted:
        """Store a valid request as ``pending`` (before it is acknowledged), or count it as a copy of the first one.

        Two identical requests racing each other are decided by the UNIQUE key, not by a prior SELECT. The copies
        of one request are one ``duplicate`` row (``duplicate_of`` names the first), whose ``replays`` counts the
        copies after it. With ``max_queue`` > 0 a new request is refused with :class:`QueueFull` while that many
        wait (pending or processing); a copy is still counted. Raises :class:`StoreUnavailable` when the write
        would not be durable.
        """
        ts = _now(now)
        hdrs = json.dumps(headers, sort_keys=True)
        with self._ack_tx() as tx:
            if max_queue > 0:
                first = tx.one("SELECT id FROM requests WHERE source = ? AND dedup_key = ?", (source, dedup_key)) \
                    if dedup_key is not None else None
                if first is None:
                    depth = tx.one("SELECT COUNT(*) AS n FROM requests WHERE status IN ('pending', 'processing')")
                    n = int(depth["n"]) if depth else 0
                    if n >= max_queue:
                        raise QueueFull(n, max_queue)
            row = tx.one(
                "INSERT INTO requests (source, dedup_key, received_at, headers, body, status, attempts, next_attempt_at)"
                " VALUES (?, ?, ?, ?, ?, 'pending', 0, ?) ON CONFLICT (source, dedup_key) DO NOTHING RETURNING id",
                (source, dedup_key, ts, hdrs, body, ts))
            if row is not None:
                return Accepted(int(row["id"]), False)
            first = tx.one("SELECT id FROM requests WHERE source = ? AND dedup_key = ?", (source, dedup_key))
            assert first is not None
            counted = tx.run("UPDATE requests SET replays = replays + 1, last_received_at = ?"
                             " WHERE duplicate_of = ? AND status = 'duplicate'", (ts, first["id"]))
            if not counted:
                tx.run("INSERT INTO requests (source, dedup_key, duplicate_of, received_at, headers, body, status,"
                       " attempts, next_attempt_at, finished_at, last_received_at)"
                       " VALUES (?, NULL, ?, ?, ?, ?, 'duplicate', 0, ?, ?, ?)",
                       (source, first["id"], ts, hdrs, body, ts, ts, ts))
            return Accepted(int(first["id"]), True)

    def reject_request(self, source: str, headers: dict[str, str], body: str, reason: str,
                       now: float | None = None) -> int:
        """Store a malformed request (422) for the operator to inspect; it is never processed. The same body sent
        again is counted on the first row (``replays``) instead of adding one: returns that row's id."""
        import hashlib

        ts = _now(now)
        digest = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()
        with self._ack_tx() as tx:
            seen = tx.one("SELECT id FROM requests WHERE source = ? AND body_digest = ? AND status = 'rejected'"
                          " ORDER BY id LIMIT 1", (source, digest))
            if seen is not None:
                tx.run("UPDATE requests SET replays = replays + 1, last_received_at = ? WHERE id = ?",
                       (ts, seen["id"]))
                return int(seen["id"])
            row = tx.one(
                "INSERT INTO requests (source, dedup_key, received_at, headers, body, status, attempts, next_attempt_at,"
                " error, finished_at, body_digest) VALUES (?, NULL, ?, ?, ?, 'rejected', 0, ?, ?, ?, ?) RETURNING id",
                (source, ts, json.dumps(headers, sort_keys=True), body, ts, reason, ts, digest))
            assert row is not None
            return int(row["id"])

    def claim_next(self, lease_s: float, max_attempts: int, now: float | None = None) -> StoredRequest | None:
        """Atomically take the oldest due request: ``pending`` and due, or ``processing`` with an expired lease.

        A request whose lease expired after ``max_attempts`` claims killed its worker every time (a poison
        request): it is failed instead of claimed again.
        """
        ts = _now(now)
        token = f"{_owner()}:{uuid.uuid4().hex}"
        skip = " FOR UPDATE SKIP LOCKED" if self._pg else ""
        with self._tx() as tx:
            poisoned = tx.run(
                "UPDATE requests SET status = 'failed', finished_at = ?, lease_until = NULL, claim_token = NULL,"
                " error = 'the worker stopped while processing it ' || CAST(attempts AS TEXT) || ' times'"
                " WHERE status = 'processing' AND lease_until < ? AND attempts >= ?", (ts, ts, max_attempts))
            if poisoned:
                log.error("requests_failed_after_lost_leases", count=poisoned)
            row = tx.one(
                f"UPDATE requests SET status = 'processing', attempts = attempts + 1, lease_until = ?, claim_token = ?"
                f" WHERE id = (SELECT id FROM requests WHERE (status = 'pending' AND next_attempt_at <= ?)"
                f" OR (status = 'processing' AND lease_until < ?) ORDER BY next_attempt_at, id LIMIT 1{skip})"
                f" RETURNING {_REQUEST_COLS}",
                (ts + lease_s, token, ts, ts))
        return _request(row) if row else None

    def release_dead_leases(self, now: float | None = None) -> int:
        """Make work claimed by a process of this host that no longer runs due now, instead of after its lease.

        The lease is what protects work from a dead worker on another host; on this host we can tell a dead
        process from a slow one, so a restart after a crash or an OOM kill resumes at once. Returns the rows freed.
        """
        ts = _now(now)
        prefix = f"{HOSTNAME}:"
        freed = 0
        rows = self._read().rows("SELECT id, claim_token FROM requests WHERE status = 'processing' AND lease_until >= ?",
                                 (ts,))
        dead = [int(r["id"]) for r in rows if _dead_owner(r["claim_token"], prefix)]
        drows = self._read().rows("SELECT id, delivery_owner FROM incidents WHERE delivery_state = 'sending'"
                                  " AND delivery_lease_until >= ?", (ts,))
        ddead = [int(r["id"]) for r in drows if _dead_owner(r["delivery_owner"], prefix)]
        with self._tx() as tx:
            for rid in dead:
                freed += tx.run("UPDATE requests SET lease_until = ? WHERE id = ? AND status = 'processing'",
                                (ts - 1, rid))
            for iid in ddead:
                freed += tx.run("UPDATE incidents SET delivery_lease_until = ? WHERE id = ?"
                                " AND delivery_state = 'sending'", (ts - 1, iid))
        if freed:
            log.warning("dead_worker_leases_released", requests=dead, deliveries=ddead)
        return freed

    def get_request(self, request_id: int) -> StoredRequest | None:
        row = self._read().one(f"SELECT {_REQUEST_COLS} FROM requests WHERE id = ?", (request_id,))
        return _request(row) if row else None

    def list_requests(self, status: str | None = None, limit: int = 50) -> list[StoredRequest]:
        """Newest first; ``status='rejected'`` is what an operator looks at when a sender's payloads bounce."""
        if status:
            rows = self._read().rows(f"SELECT {_REQUEST_COLS} FROM requests WHERE status = ? ORDER BY id DESC LIMIT ?",
                                     (status, limit))
        else:
            rows = self._read().rows(f"SELECT {_REQUEST_COLS} FROM requests ORDER BY id DESC LIMIT ?", (limit,))
        return [_request(r) for r in rows]

    def mark_failed(self, request_id: int, claim_token: str, error: str, *, max_attempts: int, backoff_base_s: float,
                    backoff_max_s: float, permanent: bool = False, incident_ids: Sequence[int] = (),
                    now: float | None = None) -> str:
        """Record a failed attempt: back to ``pending`` after ``min(max, base * 2**(attempts-1))`` seconds, or
        ``failed`` (with the error, and its incidents ``failed``) once ``max_attempts`` is reached.

        Returns the new status, or ``lost`` when another worker owns the request now (its lease ran out).
        """
        ts = _now(now)
        with self._tx() as tx:
            row = tx.one("SELECT attempts FROM requests WHERE id = ? AND status = 'processing' AND claim_token = ?",
                         (request_id, claim_token))
            if row is None:
                return "lost"
            attempts = int(row["attempts"])
            if permanent or attempts >= max_attempts:
                tx.run("UPDATE requests SET status = 'failed', error = ?, lease_until = NULL, claim_token = NULL,"
                       " finished_at = ? WHERE id = ?", (error, ts, request_id))
                for iid in incident_ids:
                    tx.run("UPDATE incidents SET status = 'failed', error = ?, updated_at = ?"
                           " WHERE id = ? AND status IN ('open', 'diagnosing')", (error, ts, iid))
                return "failed"
            delay = min(backoff_max_s, backoff_base_s * (2 ** (attempts - 1)))
            tx.run("UPDATE requests SET status = 'pending', error = ?, next_attempt_at = ?, lease_until = NULL,"
                   " claim_token = NULL WHERE id = ?", (error, ts + delay, request_id))
            for iid in incident_ids:
                tx.run("UPDATE incidents SET status = 'open', error = ?, updated_at = ? WHERE id = ?"
                       " AND status = 'diagnosing'", (error, ts, iid))
            return "pending"

    def mark_done(self, request_id: int, claim_token: str, diagnoses: dict[int, tuple[dict[str, Any], list[str]]],
                  now: float | None = None) -> bool:
        """The final state change, one transaction: every diagnosis stored (incident ``diagnosed``, its post-back
        queued) and the request ``done``. False, and nothing changed, when the lease was lost to another worker
        (whose own run then stores the same result once).
        """
        ts = _now(now)
        try:
            with self._tx() as tx:
                n = tx.run("UPDATE requests SET status = 'done', error = NULL, lease_until = NULL, claim_token = NULL,"
                           " finished_at = ? WHERE id = ? AND status = 'processing' AND claim_token = ?",
                           (ts, request_id, claim_token))
                if n != 1:
                    raise _LeaseLost()
                for iid, (diagnosis, notes) in diagnoses.items():
                    tx.run("UPDATE incidents SET diagnosis = ?, evidence_notes = ?, status = ?, error = NULL,"
                           " updated_at = ?, delivery_state = 'pending', delivery_lease_until = NULL WHERE id = ?",
                           (json.dumps(diagnosis), json.dumps(notes), diagnosed_status(diagnosis), ts, iid))
        except _LeaseLost:
            return False
        return True

    def extend_lease(self, request_id: int, claim_token: str, lease_s: float, now: float | None = None) -> bool:
        with self._tx() as tx:
            return tx.run("UPDATE requests SET lease_until = ? WHERE id = ? AND status = 'processing'"
                          " AND claim_token = ?", (_now(now) + lease_s, request_id, claim_token)) == 1

    # -- incidents ---------------------------------------------------------------------------------------
    def upsert_incident(self, draft: IncidentDraft, *, group_key: str | None = None, group_window_s: float = 0,
                        request_id: int | None = None, now: float | None = None) -> UpsertResult:
        """Put one draft into its incident, idempotently (a re-run after a crash changes nothing more).

        - an alert seen before (same source + external_id) updates its state in the incident it joined;
        - a new firing alert whose ``group_key`` matches an incident that had an alert within ``group_window_s``
          joins it (``alert_count`` += 1, hosts and ports merged): an alert storm behind one leaf is one incident;
        - otherwise it starts a new incident (a resolved alert never seen firing is stored as ``resolved``).

        The incident becomes ``resolved`` once every alert in it is resolved; an owning alert that fires again
        reopens it. ``needs_triage`` is true for the alert that owns the incident while it waits for a diagnosis.
        """
        ts = _now(now)
        active = draft.state in ACTIVE_STATES
        with self._tx() as tx:
            if self._pg and group_key:  # one incident per key even when two workers see the storm at once
                tx.run("SELECT pg_advisory_xact_lock(hashtext(?))", (group_key,))
            member = tx.one("SELECT incident_id, state FROM incident_alerts WHERE source = ? AND external_id = ?",
                            (draft.source, draft.external_id))
            created = grouped = False
            if member is not None:
                iid = int(member["incident_id"])
                if member["state"] != draft.state:
                    tx.run("UPDATE incident_alerts SET state = ? WHERE source = ? AND external_id = ?",
                           (draft.state, draft.source, draft.external_id))
            else:
                target = None
                if group_key and active:
                    target = tx.one("SELECT id FROM incidents WHERE group_key = ? AND last_alert_at >= ?"
                                    " AND status <> 'resolved' ORDER BY last_alert_at DESC, id DESC LIMIT 1",
                                    (group_key, ts - group_window_s))
                if target is not None:
                    iid = int(target["id"])
                    grouped = True
                    cur = tx.one("SELECT hosts, devices, ports, reply_to FROM incidents WHERE id = ?", (iid,))
                    assert cur is not None
                    ports = _merge(json.loads(cur["ports"]), [p.model_dump(mode="json") for p in draft.ports])
                    reply_to = {**draft.reply_to, **json.loads(cur["reply_to"])}  # the owner's targets win
                    tx.run("UPDATE incidents SET alert_count = alert_count + 1, last_alert_at = ?, updated_at = ?,"
                           " hosts = ?, devices = ?, ports = ?, reply_to = ? WHERE id = ?",
                           (ts, ts, json.dumps(_merge(json.loads(cur["hosts"]), draft.hosts)),
                            json.dumps(_merge(json.loads(cur["devices"]), draft.devices)), json.dumps(ports),
                            json.dumps(reply_to), iid))
                else:
                    created = True
                    row = tx.one(
                        "INSERT INTO incidents (source, external_id, title, text, hosts, devices, ports, job_id,"
                        " starts_at, ends_at, labels, bundle_refs, reply_to, status, created_at, updated_at,"
                        " last_alert_at, group_key, alert_count, request_id)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?) RETURNING id",
                        (draft.source, draft.external_id, draft.title, draft.text, json.dumps(draft.hosts),
                         json.dumps(draft.devices), json.dumps([p.model_dump(mode="json") for p in draft.ports]),
                         draft.job_id, _iso_dt(draft.starts_at), _iso_dt(draft.ends_at),
                         json.dumps(draft.labels, sort_keys=True), json.dumps(draft.bundle_refs),
                         json.dumps(draft.reply_to, sort_keys=True), "open" if active else "resolved",
                         ts, ts, ts, group_key, request_id))
                    assert row is not None
                    iid = int(row["id"])
                tx.run("INSERT INTO incident_alerts (incident_id, source, external_id, state, added_at)"
                       " VALUES (?, ?, ?, ?, ?)", (iid, draft.source, draft.external_id, draft.state, ts))
            inc = tx.one("SELECT status, source, external_id FROM incidents WHERE id = ?", (iid,))
            assert inc is not None
            owner = inc["source"] == draft.source and inc["external_id"] == draft.external_id
            status = inc["status"]
            resolved = False
            if not active and status != "resolved":
                still = tx.one("SELECT COUNT(*) AS n FROM incident_alerts WHERE incident_id = ? AND state IN (?, ?)",
                               (iid, *ACTIVE_STATES))
                if still is not None and int(still["n"]) == 0:
                    tx.run("UPDATE incidents SET status = 'resolved', ends_at = COALESCE(?, ends_at), updated_at = ?"
                           " WHERE id = ?", (_iso_dt(draft.ends_at), ts, iid))
                    status, resolved = "resolved", True
            elif active and owner and status == "resolved":  # the same alert fires again: a new episode
                tx.run("UPDATE incidents SET status = 'open', starts_at = COALESCE(?, starts_at), ends_at = NULL,"
                       " error = NULL, updated_at = ?, last_alert_at = ? WHERE id = ?",
                       (_iso_dt(draft.starts_at), ts, ts, iid))
                status = "open"
            needs = active and owner and status in RETRIAGE_STATUSES
        record = self.get_incident(iid)
        assert record is not None
        return UpsertResult(record, created, grouped, needs, resolved)

    def set_incident_status(self, incident_id: int, status: str, error: str | None = None,
                            now: float | None = None) -> None:
        with self._tx() as tx:
            tx.run("UPDATE incidents SET status = ?, error = ?, updated_at = ? WHERE id = ?",
                   (status, error, _now(now), incident_id))

    def set_diagnosis(self, incident_id: int, diagnosis: dict[str, Any], notes: Sequence[str] = (),
                      now: float | None = None) -> None:
        """Store a diagnosis outside the request queue (a re-diagnosis by hand); queues its post-back."""
        with self._tx() as tx:
            tx.run("UPDATE incidents SET diagnosis = ?, evidence_notes = ?, status = ?, error = NULL,"
                   " updated_at = ?, delivery_state = 'pending', delivery_lease_until = NULL WHERE id = ?",
                   (json.dumps(diagnosis), json.dumps(list(notes)), diagnosed_status(diagnosis), _now(now),
                    incident_id))

    def get_incident(self, incident_id: int) -> IncidentRecord | None:
        row = self._read().one("SELECT * FROM incidents WHERE id = ?", (incident_id,))
        return _incident(row) if row else None

    def find_incident(self, source: str, external_id: str) -> IncidentRecord | None:
        """The incident an alert or ticket belongs to (also when it was grouped into another one)."""
        row = self._read().one("SELECT i.* FROM incidents i JOIN incident_alerts a ON a.incident_id = i.id"
                               " WHERE a.source = ? AND a.external_id = ?", (source, external_id))
        if row is None:
            row = self._read().one("SELECT * FROM incidents WHERE source = ? AND external_id = ?", (source, external_id))
        return _incident(row) if row else None

    def list_incidents(self, limit: int = 20, status: str | None = None) -> list[IncidentRecord]:
        """Newest first."""
        if status:
            rows = self._read().rows("SELECT * FROM incidents WHERE status = ? ORDER BY id DESC LIMIT ?", (status, limit))
        else:
            rows = self._read().rows("SELECT * FROM incidents ORDER BY id DESC LIMIT ?", (limit,))
        return [_incident(r) for r in rows]

    def incident_extras(self, incident_id: int) -> dict[str, Any]:
        """What the API shows beside the IncidentRecord: where results go, evidence notes, post-back state."""
        row = self._read().one("SELECT reply_to, bundle_refs, evidence_notes, delivery_state, request_id"
                               " FROM incidents WHERE id = ?", (incident_id,))
        if row is None:
            return {}
        return {"reply_to": json.loads(row["reply_to"]), "bundle_refs": json.loads(row["bundle_refs"]),
                "evidence_notes": json.loads(row["evidence_notes"]), "delivery_state": row["delivery_state"],
                "request_id": row["request_id"]}

    def get_reply_to(self, incident_id: int) -> dict[str, str]:
        return dict(self.incident_extras(incident_id).get("reply_to") or {})

    def get_bundle_refs(self, incident_id: int) -> list[str]:
        return list(self.incident_extras(incident_id).get("bundle_refs") or [])

    def create_manual_incident(self, draft: IncidentDraft) -> IncidentRecord:
        """Store an incident asked for by hand (chat ``job``/``host`` command, CLI) and queue its diagnosis.

        The queued request carries the draft as JSON; asking again for the same ``external_id`` while the first
        is still queued is a duplicate, not a second diagnosis.
        """
        res = self.upsert_incident(draft)
        key = f"{draft.external_id}:{draft.state}"
        if draft.starts_at is not None:
            key += f":{draft.starts_at.isoformat()}"
        acc = self.accept_request(draft.source, key, {"content-type": DRAFT_CONTENT_TYPE}, draft.model_dump_json())
        log.info("manual_incident_queued", incident_id=res.incident.id, request_id=acc.request_id,
                 duplicate=acc.duplicate, source=draft.source)
        return res.incident

    # -- post-backs --------------------------------------------------------------------------------------
    def claim_delivery(self, lease_s: float, incident_id: int | None = None,
                       now: float | None = None) -> IncidentRecord | None:
        """Take an incident whose post-back is due (``pending``, or ``sending`` by a worker that died).

        ``sending`` is written before the POSTs and the outcome right after, so a restart re-posts only a
        delivery whose outcome was never recorded.
        """
        ts = _now(now)
        skip = " FOR UPDATE SKIP LOCKED" if self._pg else ""
        only = " AND id = ?" if incident_id is not None else ""
        params: list[Any] = [ts + lease_s, ts]
        if incident_id is not None:
            params.append(incident_id)
        with self._tx() as tx:
            row = tx.one(
                f"UPDATE incidents SET delivery_state = 'sending', delivery_lease_until = ?, delivery_owner = ?"
                f" WHERE id = (SELECT id FROM incidents WHERE (delivery_state = 'pending' OR (delivery_state = 'sending'"
                f" AND delivery_lease_until < ?)){only} ORDER BY id LIMIT 1{skip}) RETURNING id",
                [params[0], _owner(), *params[1:]])
        return self.get_incident(int(row["id"])) if row else None

    def record_delivery(self, incident_id: int, deliveries: Sequence[DeliveryRow] | Sequence[Any],
                        now: float | None = None) -> None:
        """Store the outcome of one post-back round and close it (rows: target, ok, status_code, attempts, error)."""
        ts = _now(now)
        with self._tx() as tx:
            for d in deliveries:
                tx.run("INSERT INTO deliveries (incident_id, target, ok, status_code, attempts, error, at)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (incident_id, d.target, 1 if d.ok else 0, d.status_code, d.attempts, d.error, ts))
            tx.run("UPDATE incidents SET delivery_state = 'done', delivery_lease_until = NULL, delivery_owner = NULL"
                   " WHERE id = ?", (incident_id,))

    def list_deliveries(self, incident_id: int) -> list[DeliveryRow]:
        rows = self._read().rows("SELECT incident_id, target, ok, status_code, attempts, error, at FROM deliveries"
                                 " WHERE incident_id = ? ORDER BY id", (incident_id,))
        return [DeliveryRow(int(r["incident_id"]), r["target"], bool(r["ok"]), r["status_code"], int(r["attempts"]),
                            r["error"], float(r["at"])) for r in rows]

    # -- feedback ----------------------------------------------------------------------------------------
    def add_feedback(self, fb: FeedbackRecord) -> None:
        created = fb.created_at.timestamp() if fb.created_at else time.time()
        with self._tx() as tx:
            tx.run("INSERT INTO feedback (incident_id, verdict, cause, actual, username, platform, created_at)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (fb.incident_id, fb.verdict, fb.cause, fb.actual, fb.user, fb.platform, created))

    def list_feedback(self) -> list[FeedbackRecord]:
        rows = self._read().rows("SELECT * FROM feedback ORDER BY id")
        return [FeedbackRecord(incident_id=int(r["incident_id"]), verdict=r["verdict"], cause=r["cause"],
                               actual=r["actual"], user=r["username"], platform=r["platform"],
                               created_at=_dt(float(r["created_at"]))) for r in rows]

    # -- metrics -----------------------------------------------------------------------------------------
    def counts(self, now: float | None = None) -> dict[str, Any]:
        """Rows per status (``/metrics``, ``/healthz``); ``queue_depth`` is what the worker still has to do."""
        rd = self._read()
        req = {r["status"]: int(r["n"]) for r in rd.rows("SELECT status, COUNT(*) AS n FROM requests GROUP BY status")}
        inc = {r["status"]: int(r["n"]) for r in rd.rows("SELECT status, COUNT(*) AS n FROM incidents GROUP BY status")}
        dl = rd.one("SELECT COUNT(*) AS n FROM incidents WHERE delivery_state IN ('pending', 'sending')")
        return {"requests": req, "incidents": inc, "queue_depth": req.get("pending", 0) + req.get("processing", 0),
                "deliveries_pending": int(dl["n"]) if dl else 0}


DRAFT_CONTENT_TYPE = "application/vnd.diagnose.incident-draft+json"


class _LeaseLost(Exception):
    pass


def _iso_dt(d: datetime | None) -> str | None:
    return d.isoformat() if d is not None else None


def _request(r: dict[str, Any]) -> StoredRequest:
    return StoredRequest(
        id=int(r["id"]), source=r["source"], dedup_key=r["dedup_key"],
        duplicate_of=int(r["duplicate_of"]) if r["duplicate_of"] is not None else None,
        received_at=float(r["received_at"]), headers=json.loads(r["headers"] or "{}"), body=r["body"] or "",
        status=r["status"], attempts=int(r["attempts"]), next_attempt_at=float(r["next_attempt_at"]),
        lease_until=float(r["lease_until"]) if r["lease_until"] is not None else None,
        claim_token=r["claim_token"], error=r["error"],
        finished_at=float(r["finished_at"]) if r["finished_at"] is not None else None,
        replays=int(r["replays"] or 0),
        last_received_at=float(r["last_received_at"]) if r["last_received_at"] is not None else None)


def _incident(r: dict[str, Any]) -> IncidentRecord:
    return IncidentRecord(
        id=int(r["id"]), source=r["source"], external_id=r["external_id"], title=r["title"], text=r["text"] or "",
        hosts=json.loads(r["hosts"]), devices=json.loads(r["devices"]),
        ports=[PortRef(**p) for p in json.loads(r["ports"])], job_id=r["job_id"],
        starts_at=r["starts_at"], ends_at=r["ends_at"], labels=json.loads(r["labels"]), status=r["status"],
        created_at=_dt(float(r["created_at"])), updated_at=_dt(float(r["updated_at"])),
        diagnosis=json.loads(r["diagnosis"]) if r["diagnosis"] else None, error=r["error"],
        group_key=r["group_key"], alert_count=int(r["alert_count"]))


_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")


def redact(url: str) -> str:
    """A database URL without its password, for messages and logs."""
    return _PASSWORD.sub(r"\1***@", url)


def open_store(url: str) -> SqlStore:
    """Open ``sqlite:///path.db`` or ``postgresql://...``, creating or migrating the schema."""
    store = SqlStore(url)
    try:
        store.migrate()
    except StoreError:
        store.close()
        raise
    except Exception as exc:
        store.close()
        raise StoreError(f"cannot open the store {redact(url)}: {exc.__class__.__name__}: {exc}") from exc
    log.info("store_opened", backend=store.backend, url=redact(url), schema_version=SCHEMA_VERSION)
    return store
