"""The background worker: stored requests -> incidents -> evidence -> triage -> stored diagnosis -> post-back.

Each step is restartable. The worker claims a request with a lease; the incident upsert is idempotent; the
diagnoses and the request's ``done`` are written in one transaction (:meth:`SqlStore.mark_done`); the post-back
runs from the incident's durable ``delivery_state`` (pending -> sending -> done), so a process killed anywhere
re-does at most the unfinished step on the next start and never duplicates an incident or a recorded post-back.

Failures are retried with exponential backoff (``backoff_base_s * 2**(attempt-1)``, capped at ``backoff_max_s``)
until ``max_attempts``; then the request and its incidents are ``failed`` with the error kept for the operator.
A payload the hook rejects (:class:`PayloadError`) fails at once: retrying cannot fix it.

Test aid: ``DIAGNOSE_TEST_STEP_DELAY_S`` (seconds, default 0) makes the worker sleep after every step, so a test
can kill the process while requests are mid-way (``tests/service/test_crash.py``). Never set it in production.
"""

from __future__ import annotations

import io
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from diagnose.service.bodies import Undecodable, loads
from diagnose.service.models import IncidentDraft, IncidentRecord
from diagnose.service.settings import Settings
from diagnose.service.store import DRAFT_CONTENT_TYPE, SqlStore, StoredRequest

if TYPE_CHECKING:
    from diagnose.service.postback import Delivery

log = structlog.get_logger("diagnose.service.worker")

STEP_DELAY_ENV = "DIAGNOSE_TEST_STEP_DELAY_S"
HOOK_SOURCES = ("alertmanager", "pagerduty", "jira", "github", "generic")
POLL_S = 1.0

RequestObserver = Callable[[str, str, float], None]  # (source, outcome, seconds)
DeliveryObserver = Callable[[str, bool], None]  # (target, ok)


class BodyError(ValueError):
    """The body is not JSON or a form (422 at the door; a permanent failure in the worker)."""


def parse_body(raw: bytes, content_type: str) -> Any:
    """Decode a hook body: JSON, or a url-encoded / multipart form (fields only).

    A form whose only field is ``payload`` holding JSON is GitHub's form delivery and is decoded to that JSON
    (https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers : "If the webhook was
    configured with a content type of application/x-www-form-urlencoded, the payload is sent in a form parameter
    called payload").
    """
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        fields = _parse_form(raw, content_type)
        if set(fields) == {"payload"}:
            try:
                return loads(fields["payload"])
            except Undecodable as exc:
                raise BodyError(f"form field 'payload': {exc}") from exc
        return fields
    try:
        return loads(raw)
    except Undecodable as exc:
        raise BodyError(str(exc)) from exc


def _parse_form(raw: bytes, content_type: str) -> dict[str, str]:
    """Form fields: url-encoded with the standard library, multipart with python-multipart (files ignored)."""
    if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
        from urllib.parse import parse_qsl

        try:
            return dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(raw.strip())))
        except (UnicodeDecodeError, ValueError) as exc:
            raise BodyError(f"malformed form body: {exc}") from exc
    try:
        from python_multipart import parse_form
        from python_multipart.exceptions import FormParserError
    except ModuleNotFoundError:  # python-multipart < 0.0.13 named its module "multipart"
        from multipart import parse_form  # type: ignore[no-redef]
        from multipart.exceptions import FormParserError  # type: ignore[no-redef]

    fields: dict[str, str] = {}

    def on_field(f: Any) -> None:
        name = f.field_name.decode("utf-8", "replace") if isinstance(f.field_name, bytes) else str(f.field_name)
        val = f.value
        fields[name] = val.decode("utf-8", "replace") if isinstance(val, bytes) else ("" if val is None else str(val))

    try:
        parse_form({"Content-Type": content_type.encode("latin-1"), "Content-Length": str(len(raw)).encode()},
                   io.BytesIO(raw), on_field, lambda _f: None)
    except (FormParserError, ValueError) as exc:
        raise BodyError(f"malformed form body: {exc}") from exc
    return fields


def dedup_key(drafts: Sequence[IncidentDraft]) -> str | None:
    """The request's dedup key: each draft's source id + state (+ start time, so an alert that fires again after
    it resolved is a new episode, not a duplicate). None when the payload names no incident."""
    if not drafts:
        return None
    parts = sorted({f"{d.external_id}:{d.state}" + (f":{d.starts_at.isoformat()}" if d.starts_at else "")
                    for d in drafts})
    key = ",".join(parts)
    if len(key) > 400:  # a large alert group: a digest keeps the UNIQUE index small
        import hashlib

        key = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
    return key


def symptom_of(incident: IncidentRecord) -> str:
    """The incident's title and text, the symptom triage reads (the alert name often carries the meaning)."""
    return "\n".join(x for x in (incident.title.strip(), incident.text.strip()) if x)


def triage_incident(paths: Sequence[Path], symptom: str, symptom_source: str, catalog: Any = None) -> Any:
    """:func:`diagnose.pipeline.triage` on the evidence, or on the symptom text alone when there is none or
    none of it is usable (an alert with no bundle still deserves the diagnosis its text supports).

    A bundle worth a second core (:data:`PROCESS_MIN_BYTES`) is triaged in a one-thread process of its own
    (:class:`diagnose.runtime.isolated.OneThread`), where the parallel executor may fork: the worker's threads keep
    this process from forking, and a parse that kills its process does not kill the service
    (:class:`~diagnose.runtime.isolated.ProcessLost`: the request is retried as any failed step is)."""
    from diagnose.bundle import BundleError
    from diagnose.pipeline import triage

    if paths:
        named = [str(p) for p in paths]
        try:
            if _bytes_under(named) >= PROCESS_MIN_BYTES:
                return _ONE_THREAD.run(triage_here, named, symptom, symptom_source, catalog)
            return triage_here(named, symptom, symptom_source, catalog)
        except BundleError as exc:
            log.warning("evidence_unusable", error=str(exc))
    return triage([], symptom, symptom_source=symptom_source, catalog=catalog)


def triage_here(paths: list[str], symptom: str, symptom_source: str, catalog: Any) -> Any:
    """The triage itself, with the parallel executor (in the one-thread process, or here for a small bundle)."""
    from diagnose.pipeline import ParallelExecutor, triage

    return triage(paths, symptom, symptom_source=symptom_source, catalog=catalog, executor=ParallelExecutor())


def _bytes_under(paths: list[str]) -> int:
    """The bytes of the files under ``paths`` (an archive by its own size), up to PROCESS_MIN_BYTES."""
    total = 0
    for p in paths:
        for root, _dirs, files in os.walk(p) if os.path.isdir(p) else [("", [], [p])]:
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_size
                except OSError:
                    continue
                if total >= PROCESS_MIN_BYTES:
                    return total
    return total


def _one_thread() -> Any:
    from diagnose.runtime.isolated import OneThread

    return OneThread(preload=("diagnose.pipeline", "diagnose.service.worker"))


# a bundle this large is triaged in the one-thread process: what the parallel executor needs before it takes a second
# core (its min_bytes: a 512-host fabric's dumps), so a smaller one gains nothing from the process's round trip
PROCESS_MIN_BYTES = 32 * 1024 * 1024
_ONE_THREAD = _one_thread()


class _Heartbeat:
    """Extends a claimed request's lease every third of ``lease_s`` while this process works on it.

    A triage of a large bundle may outlast the lease; without this another worker would take the request over
    and do it again. If the process dies, the heartbeat dies with it and the lease runs out as it should.
    """

    def __init__(self, store: SqlStore, request_id: int, token: str, lease_s: float) -> None:
        self._stop = threading.Event()
        self._args = (store, request_id, token, lease_s)
        self._thread = threading.Thread(target=self._run, name=f"diagnose-lease-{request_id}", daemon=True)

    def _run(self) -> None:
        store, rid, token, lease_s = self._args
        while not self._stop.wait(max(1.0, lease_s / 3)):
            try:
                if not store.extend_lease(rid, token, lease_s):
                    return
            except Exception as exc:  # noqa: BLE001 - the next beat tries again; the lease covers a miss
                log.warning("lease_extend_failed", request_id=rid, error=str(exc))

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


class _Permanent(Exception):
    """A failure retrying cannot fix (the stored payload no longer normalizes)."""


class Worker:
    """Claims stored requests and post-backs and runs them; ``run_once`` is one unit of work (tests call it).

    ``hooks`` defaults to :data:`diagnose.service.hooks.HOOKS`; the observers feed the app's metrics.
    """

    def __init__(self, settings: Settings, store: SqlStore, *, hooks: Mapping[str, Any] | None = None,
                 on_request: RequestObserver | None = None, on_delivery: DeliveryObserver | None = None) -> None:
        self.settings = settings
        self.store = store
        self._hooks = hooks
        self.on_request = on_request
        self.on_delivery = on_delivery
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._grouper: Any = None
        self._catalog: Any = None
        self._init_lock = threading.Lock()
        self._triage_lock = threading.Lock()
        self._triaging: int | None = None
        self._tmp: Path | None = None
        self._tempdir_before: str | None = None
        try:
            self.step_delay = float(os.environ.get(STEP_DELAY_ENV) or 0)
        except ValueError:
            self.step_delay = 0.0
        if self.step_delay:
            log.warning("test_step_delay_enabled", seconds=self.step_delay, env=STEP_DELAY_ENV)

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start ``settings.worker_threads`` threads (daemon: a hung triage never blocks interpreter exit).

        The process's temporary files (the triage's second-process results) go to ``<data_dir>/tmp/<pid>``,
        removed when the worker stops, so a triage cut short by SIGTERM leaves nothing in the system's /tmp; a
        folder left by a process of this host that no longer runs (kill -9) is removed here.
        """
        self._stop.clear()
        self._use_own_tmp()
        for i in range(max(1, self.settings.worker_threads)):
            t = threading.Thread(target=self._loop, name=f"diagnose-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        log.info("worker_started", threads=len(self._threads))

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the threads to finish their current step and wait for them. Work still unfinished stays claimed:
        the next start on this host takes it over at once (the process that held it is gone), a worker on
        another host when its lease runs out."""
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            # a triage still running is abandoned (the threads are daemons): its request stays claimed and the
            # next start on this host takes it over at once
            log.warning("worker_stop_timeout", threads=alive, incident=self._triaging, waited_s=timeout)
        _ONE_THREAD.close(kill=bool(alive))  # (a triage abandoned there is stopped with its process)
        self._threads = []
        self._drop_own_tmp()
        log.info("worker_stopped")

    def alive(self) -> bool:
        return bool(self._threads) and all(t.is_alive() for t in self._threads)

    def triage_running(self) -> bool:
        return self._triaging is not None

    def _use_own_tmp(self) -> None:
        import tempfile

        base = self.settings.data_dir / "tmp"
        try:
            base.mkdir(parents=True, exist_ok=True)
            for old in base.iterdir():
                if old.name.isdigit() and int(old.name) != os.getpid() and not _pid_alive(int(old.name)):
                    shutil.rmtree(old, ignore_errors=True)
            own = base / str(os.getpid())
            own.mkdir(exist_ok=True)
        except OSError as exc:
            log.warning("worker_tmp_unavailable", path=str(base), error=str(exc))
            return
        self._tmp = own
        self._tempdir_before = tempfile.tempdir
        tempfile.tempdir = str(own)

    def _drop_own_tmp(self) -> None:
        import tempfile

        if self._tmp is None:
            return
        if tempfile.tempdir == str(self._tmp):
            tempfile.tempdir = self._tempdir_before
        shutil.rmtree(self._tmp, ignore_errors=True)
        self._tmp = None

    def notify(self) -> None:
        """A request was stored: wake an idle thread now instead of at the next poll."""
        self._wake.set()

    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                did = self.run_once()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - the store may be briefly unreachable; keep the thread
                failures += 1
                log.error("worker_loop_error", error=f"{exc.__class__.__name__}: {exc}", failures=failures)
                did = False
                self._stop.wait(min(30.0, 0.5 * 2 ** min(failures, 6)))
            if not did and not self._stop.is_set():
                self._wake.wait(POLL_S)
                self._wake.clear()

    # -- one unit of work --------------------------------------------------------------------------------
    def run_once(self, now: float | None = None) -> bool:
        """Deliver one due post-back, else process one due request. False when there was nothing to do."""
        inc = self.store.claim_delivery(self.settings.lease_s, now=now)
        if inc is not None:
            self._deliver(inc)
            return True
        req = self.store.claim_next(self.settings.lease_s, self.settings.max_attempts, now=now)
        if req is None:
            return False
        self.process(req, now=now)
        return True

    def run_until_idle(self, now: float | None = None, limit: int = 1000) -> int:
        """Run until nothing is due (tests, and draining before shutdown); returns the units done."""
        n = 0
        while n < limit and self.run_once(now=now):
            n += 1
        return n

    def process(self, req: StoredRequest, now: float | None = None) -> str:
        """Run one claimed request to ``done``, a retry, or ``failed``; returns that outcome.

        ``now`` (tests) fixes the clock of every store change; the lease heartbeat runs on real time only.
        """
        if now is None:
            assert req.claim_token is not None
            with _Heartbeat(self.store, req.id, req.claim_token, self.settings.lease_s):
                return self._process(req, None)
        return self._process(req, now)

    def _process(self, req: StoredRequest, now: float | None) -> str:
        started = time.monotonic()
        rlog = log.bind(request_id=req.id, source=req.source, attempt=req.attempts)
        rlog.info("request_claimed")
        incident_ids: list[int] = []
        assert req.claim_token is not None
        try:
            drafts = self._normalize(req)
            self._step(rlog, "normalized", drafts=len(drafts))
            to_diagnose: list[IncidentRecord] = []
            for d in drafts:
                key = self._group_key(d) if req.source in HOOK_SOURCES else None
                res = self.store.upsert_incident(d, group_key=key, group_window_s=self.settings.group_window_s,
                                                 request_id=req.id, now=now)
                rlog.info("incident_upserted", incident_id=res.incident.id, created=res.created, grouped=res.grouped,
                          group_key=key, state=d.state, needs_triage=res.needs_triage, resolved=res.resolved,
                          alert_count=res.incident.alert_count)
                if res.needs_triage and res.incident.id not in incident_ids:
                    incident_ids.append(res.incident.id)
                    to_diagnose.append(res.incident)
            self._step(rlog, "incidents_stored", incidents=incident_ids)
            results: dict[int, tuple[dict[str, Any], list[str]]] = {}
            for inc in to_diagnose:
                results[inc.id] = self._diagnose(inc, req, rlog, now)
            if not self.store.mark_done(req.id, req.claim_token, results, now=now):
                rlog.warning("lease_lost", detail="another worker took the request over; its run stores the result")
                self._observe(req.source, "lost", started)
                return "lost"
            rlog.info("request_done", incidents=incident_ids, diagnosed=len(results))
            self._observe(req.source, "done", started)
        except Exception as exc:  # noqa: BLE001 - every failure is recorded on the request, never lost
            permanent = isinstance(exc, _Permanent)
            err = str(exc) if permanent else f"{exc.__class__.__name__}: {exc}"
            outcome = self.store.mark_failed(
                req.id, req.claim_token, err, max_attempts=self.settings.max_attempts,
                backoff_base_s=self.settings.backoff_base_s, backoff_max_s=self.settings.backoff_max_s,
                permanent=permanent, incident_ids=incident_ids, now=now)
            event = rlog.error if outcome == "failed" else rlog.warning
            event("request_failed" if outcome == "failed" else "request_retry", error=err, outcome=outcome,
                  max_attempts=self.settings.max_attempts)
            self._observe(req.source, "failed" if outcome == "failed" else "retry", started)
            return outcome
        for iid in incident_ids:  # the post-back right away; a crash here leaves it 'pending' for the next run
            claimed = self.store.claim_delivery(self.settings.lease_s, incident_id=iid, now=now)
            if claimed is not None:
                self._deliver(claimed)
        return "done"

    # -- steps -------------------------------------------------------------------------------------------
    def _step(self, rlog: Any, event: str, **kw: Any) -> None:
        rlog.info(event, **kw)
        if self.step_delay:
            time.sleep(self.step_delay)

    def _observe(self, source: str, outcome: str, started: float) -> None:
        if self.on_request is not None:
            self.on_request(source, outcome, time.monotonic() - started)

    def hooks(self) -> Mapping[str, Any]:
        if self._hooks is None:
            from diagnose.service.hooks import HOOKS

            self._hooks = HOOKS
        return self._hooks

    def _normalize(self, req: StoredRequest) -> list[IncidentDraft]:
        ctype = req.headers.get("content-type", "application/json")
        if ctype == DRAFT_CONTENT_TYPE:  # queued by create_manual_incident
            return [IncidentDraft.model_validate_json(req.body)]
        hook = self.hooks().get(req.source)
        if hook is None:
            raise _Permanent(f"no hook for source '{req.source}'")
        from diagnose.service.hooks import PayloadError

        try:
            return list(hook.normalize(parse_body(req.body.encode("utf-8"), ctype), self.settings))
        except (PayloadError, BodyError) as exc:
            raise _Permanent(f"payload no longer accepted: {exc}") from exc

    def _group_key(self, draft: IncidentDraft) -> str | None:
        if draft.state not in ("firing", "open"):
            return None
        with self._init_lock:
            if self._grouper is None:
                from diagnose.service.grouping import Grouper

                self._grouper = Grouper(self.settings)
        return self._grouper.key(draft)

    def catalog(self) -> Any:
        with self._init_lock:
            if self._catalog is None:
                from diagnose.catalog.loader import load_catalog

                self._catalog = load_catalog()
        return self._catalog

    def workdir(self, incident_id: int) -> Path:
        """Where the evidence fetched for an incident is kept (Prometheus query results and the like)."""
        return self.settings.data_dir / "incidents" / str(incident_id) / "evidence"

    def _diagnose(self, inc: IncidentRecord, req: StoredRequest, rlog: Any,
                  now: float | None) -> tuple[dict[str, Any], list[str]]:
        from diagnose.service.evidence import collect

        ilog = rlog.bind(incident_id=inc.id)
        self.store.set_incident_status(inc.id, "diagnosing", now=now)
        work = self.workdir(inc.id)
        if work.exists():  # a re-run after a crash starts from a clean folder
            shutil.rmtree(work)
        work.mkdir(parents=True)
        # the paths the payload named (annotations.bundle, bundle_refs, bundle= in a ticket) are resolved inside the
        # bundle store; attachment URLs are noted, never fetched
        ev = collect(self.settings, inc, work, bundle_refs=self.store.get_bundle_refs(inc.id))
        if inc.source in self.settings.collect_sources:  # off by default: collect from the alert's hosts first
            from diagnose.service.collecting import collect_for

            collect_for(self.settings, inc, work, ev.paths, ev.notes)
        self._step(ilog, "evidence_collected", paths=len(ev.paths), notes=len(ev.notes))
        source = "chat" if inc.source == "chat" else "cli" if inc.source == "cli" else "hook"
        # one triage at a time per worker, whatever worker_threads says: each reads its bundles through the
        # loader's budget (LoadLimits), so the worker's memory is one budget, not one per thread
        with self._triage_lock:
            self._triaging = inc.id
            try:
                d = triage_incident(ev.paths, symptom_of(inc), source, self.catalog())
            finally:
                self._triaging = None
        top = d.causes[0].id if d.causes else None
        self._step(ilog, "triaged", top_cause=top, causes=len(d.causes), evidence_files=len(d.files))
        return d.model_dump(mode="json"), list(ev.notes)

    def _deliver(self, inc: IncidentRecord) -> None:
        """Post the stored diagnosis back; the outcome is recorded at once so a restart does not post twice."""
        from diagnose.models.diagnosis import Diagnosis

        ilog = log.bind(incident_id=inc.id)
        if inc.diagnosis is None:
            self.store.record_delivery(inc.id, [])
            return
        reply_to = self.store.get_reply_to(inc.id)
        results: list[Delivery | _Failed]
        try:
            from diagnose.service.postback import deliver

            results = list(deliver(self.settings, inc, Diagnosis.model_validate(inc.diagnosis), reply_to))
        except Exception as exc:  # noqa: BLE001 - a post-back bug must not lose the diagnosis
            ilog.error("postback_error", error=f"{exc.__class__.__name__}: {exc}")
            results = [_Failed("postback", f"{exc.__class__.__name__}: {exc}")]
        self.store.record_delivery(inc.id, results)
        for r in results:
            ilog.info("postback_recorded", target=r.target, ok=r.ok, status_code=r.status_code, attempts=r.attempts,
                      error=r.error)
            if self.on_delivery is not None:
                self.on_delivery(r.target, r.ok)
        self._step(ilog, "posted_back", targets=len(results))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Failed:
    """A delivery row for a post-back that raised instead of returning its outcome."""

    def __init__(self, target: str, error: str) -> None:
        self.target = target
        self.ok = False
        self.status_code: int | None = None
        self.attempts = 1
        self.error = error
