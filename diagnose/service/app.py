"""The HTTP service (FastAPI): hooks in, incidents and diagnoses out, health and metrics for the operator.

A hook request is answered only after it is durably stored, and only after its sender is authenticated on the
raw bytes (the signature covers exactly what was sent, so nothing is parsed first):

====================  =====================================================================================
413                   body over ``max_body_bytes`` (counted while streaming: a missing or lying
                      Content-Length changes nothing); not stored
401                   ``HOOKS[source].verify`` refused it (unsigned, bad signature or token, stale, source not
                      configured); not stored
422                   not UTF-8, not JSON (nested too deep, a number too long included) / not a form, or the
                      hook's ``normalize`` refused its shape (or failed on it); stored as ``rejected`` with the
                      reason (``GET /requests?status=rejected``), so the sender stops retrying
503                   the store cannot make the request durable (its file deleted or replaced, unwritable, disk
                      full, PostgreSQL unreachable), or ``max_queue`` requests are waiting; ``Retry-After`` set,
                      nothing stored: the sender retries
200 ``duplicate``     the same alert state was already accepted; counted on one ``duplicate`` row (``replays``),
                      not processed again
202 ``accepted``      stored ``pending`` and the store checked durable; the worker diagnoses it in the background
====================  =====================================================================================
"""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import anyio.to_thread
import structlog
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from diagnose.service.bodies import TooLarge, read_capped
from diagnose.service.models import IncidentRecord
from diagnose.service.settings import Settings, load_settings
from diagnose.service.store import QueueFull, SqlStore, StoreUnavailable, open_store
from diagnose.service.worker import HOOK_SOURCES, BodyError, Worker, dedup_key, parse_body

log = structlog.get_logger("diagnose.service.app")

# headers kept with a stored request: what an operator needs to trace a delivery, never a credential
_SAFE_HEADERS = frozenset({"content-type", "content-length", "user-agent", "x-forwarded-for", "x-real-ip"})
_SECRET_WORDS = ("auth", "token", "secret", "signature", "key", "cookie", "password", "session", "credential")
HOOK_THREADS = 4
IncidentStatusQ = Literal["open", "diagnosing", "diagnosed", "waiting_for_evidence", "resolved", "failed"]
RequestStatusQ = Literal["pending", "processing", "done", "failed", "rejected", "duplicate"]


def safe_headers(headers: dict[str, str]) -> dict[str, str]:
    """The headers worth keeping (event type, delivery id, content type), without anything secret-looking."""
    out: dict[str, str] = {}
    for k, v in headers.items():
        name = k.lower()
        if any(w in name for w in _SECRET_WORDS):
            continue
        if name in _SAFE_HEADERS or name.startswith("x-"):
            out[name] = v[:500]
    return out


class ServiceMetrics:
    """Prometheus metrics in the app's own registry (several apps in one process, as in tests, stay apart)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.hook_requests = Counter("diagnose_hook_requests", "Hook requests by source and outcome at the door "
                                     "(accepted, duplicate, rejected, unauthorized, too_large, queue_full, store_unavailable).",
                                     ["source", "outcome"], registry=r)
        self.processed = Counter("diagnose_requests_processed", "Requests finished by the worker by source and "
                                 "outcome (done, retry, failed, lost).", ["source", "outcome"], registry=r)
        self.duration = Histogram("diagnose_request_processing_seconds", "Worker time per request (normalize to "
                                  "stored diagnosis).", ["source"], registry=r,
                                  buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
        self.deliveries = Counter("diagnose_postbacks", "Post-back deliveries by target and outcome (ok, error).",
                                  ["target", "outcome"], registry=r)
        self.queue_depth = Gauge("diagnose_queue_depth", "Requests pending or processing.", registry=r)
        self.queue_limit = Gauge("diagnose_queue_limit", "Queue depth past which new hook requests get 503 "
                                 "(0: no bound).", registry=r)
        self.triage_running = Gauge("diagnose_triage_running", "1 while the worker runs a triage (one at a time).",
                                    registry=r)
        self.requests = Gauge("diagnose_stored_requests", "Stored requests by status.", ["status"], registry=r)
        self.incidents = Gauge("diagnose_incidents", "Incidents by status.", ["status"], registry=r)
        self.deliveries_pending = Gauge("diagnose_postbacks_pending", "Incidents whose post-back is not done yet.",
                                        registry=r)

    def observe_request(self, source: str, outcome: str, seconds: float) -> None:
        self.processed.labels(source, outcome).inc()
        self.duration.labels(source).observe(seconds)

    def observe_delivery(self, target: str, ok: bool) -> None:
        self.deliveries.labels(target, "ok" if ok else "error").inc()

    def refresh(self, counts: dict[str, Any]) -> None:
        self.queue_depth.set(counts["queue_depth"])
        self.deliveries_pending.set(counts["deliveries_pending"])
        for st in ("pending", "processing", "done", "failed", "rejected", "duplicate"):
            self.requests.labels(st).set(counts["requests"].get(st, 0))
        for st in ("open", "diagnosing", "diagnosed", "waiting_for_evidence", "resolved", "failed"):
            self.incidents.labels(st).set(counts["incidents"].get(st, 0))


def incident_json(store: SqlStore, rec: IncidentRecord, *, full: bool = True) -> dict[str, Any]:
    """An incident as the API and ``diagnose incidents show --format json`` give it.

    ``diagnosis`` is exactly the ``diagnose triage --format json`` document (schema_version 1), or null.
    """
    out = rec.model_dump(mode="json")
    out["top_cause"] = rec.top_cause()
    if not full:
        out.pop("diagnosis", None)
        return out
    out.update(store.incident_extras(rec.id))
    out["deliveries"] = [d.as_json() for d in store.list_deliveries(rec.id)]
    return out


def _include_chat(app: FastAPI, settings: Settings, store: SqlStore) -> None:
    try:
        from diagnose.chat import build_router
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == "diagnose.chat" or exc.name.startswith("diagnose.chat.")):
            log.info("chat_not_installed")
            return
        log.error("chat_unavailable", error=f"{exc.__class__.__name__}: {exc}")
        return
    except ImportError as exc:
        log.error("chat_unavailable", error=f"{exc.__class__.__name__}: {exc}")
        return
    app.include_router(build_router(settings, store))
    log.info("chat_enabled")


def read_guard(settings: Settings) -> Any:
    """The dependency of the read endpoints: incidents and stored requests carry host names, alert bodies and
    diagnoses, so when ``DIAGNOSE_READ_TOKEN`` is set they need ``Authorization: Bearer <token>`` (compared in
    constant time). ``/healthz`` and ``/metrics`` stay open for probes and scrapers; they hold no incident data."""
    token = settings.read_token.get_secret_value().encode() if settings.read_token else None

    def guard(request: Request) -> None:
        if token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token):
            log.warning("read_unauthorized", path=request.url.path,
                        client=request.client.host if request.client else None)
            raise HTTPException(401, "unauthorized: this endpoint needs Authorization: Bearer <DIAGNOSE_READ_TOKEN>",
                                headers={"WWW-Authenticate": "Bearer"})

    return guard


def create_app(settings: Settings | None = None, *, start_worker: bool = True) -> FastAPI:
    """Build the service: opens (and migrates) the store now, so a bad store URL fails before serving.

    ``start_worker=False`` serves the HTTP side only (the bench, tests that drive ``app.state.worker.run_once``).
    """
    settings = settings or load_settings()
    store = open_store(settings.store_url())
    # the hook path (parse, normalize, durable insert) runs on a few threads, not on the default pool of 40: the
    # writes are serialized anyway, and 40 threads fighting for the interpreter lock stretch a burst's tail
    # latency from milliseconds to seconds
    hook_threads = anyio.CapacityLimiter(HOOK_THREADS)

    async def in_thread(fn: Any, *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=hook_threads)

    metrics = ServiceMetrics()
    worker = Worker(settings, store, on_request=metrics.observe_request, on_delivery=metrics.observe_delivery)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if start_worker:
            await run_in_threadpool(store.release_dead_leases)
            worker.start()
        log.info("service_started", store=store.backend, worker=start_worker, threads=settings.worker_threads)
        try:
            yield
        finally:
            if start_worker:
                await run_in_threadpool(worker.stop, settings.shutdown_grace_s)
            store.close()
            log.info("service_stopped")

    app = FastAPI(title="diagnose", summary="GPU-cluster communication-layer diagnosis service",
                  lifespan=lifespan)
    app.state.settings = settings
    app.state.store = store
    app.state.worker = worker
    app.state.metrics = metrics

    @app.post("/hooks/{source}", status_code=202)
    async def hook(source: str, request: Request) -> JSONResponse:
        """Receive one webhook: authenticate, validate, store, acknowledge (processing happens later)."""
        if source not in HOOK_SOURCES:
            raise HTTPException(404, f"unknown hook source '{source}' (one of: {', '.join(HOOK_SOURCES)})")
        from diagnose.service.hooks import HOOKS, AuthError, PayloadError

        hk = HOOKS.get(source)
        if hk is None:
            raise HTTPException(404, f"hook source '{source}' is not available")
        client = request.client.host if request.client else None
        hlog = log.bind(source=source, client=client)
        try:
            raw = await read_capped(request, settings.max_body_bytes)
        except TooLarge:
            metrics.hook_requests.labels(source, "too_large").inc()
            hlog.warning("hook_too_large", limit=settings.max_body_bytes)
            return JSONResponse({"detail": f"body larger than {settings.max_body_bytes} bytes"}, status_code=413)
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            hk.verify(settings, raw, headers, time.time())
        except AuthError as exc:
            metrics.hook_requests.labels(source, "unauthorized").inc()
            hlog.warning("hook_unauthorized", reason=str(exc))
            return JSONResponse({"detail": f"unauthorized: {exc}"}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"} if source == "alertmanager" else None)
        body_text = raw.decode("utf-8", "replace")
        kept = safe_headers(headers)

        def validate() -> list[Any]:
            payload = parse_body(raw, headers.get("content-type", "application/json"))
            return list(hk.normalize(payload, settings))

        def unavailable(exc: StoreUnavailable) -> JSONResponse:
            outcome = "queue_full" if isinstance(exc, QueueFull) else "store_unavailable"
            metrics.hook_requests.labels(source, outcome).inc()
            hlog.warning("hook_" + outcome, state=exc.state, detail=exc.detail)
            return JSONResponse({"detail": f"not accepted, retry later: {exc.detail}", "store": exc.state},
                                status_code=503, headers={"Retry-After": str(settings.retry_after_s)})

        reason: str | None = None
        try:
            drafts = await in_thread(validate)
        except (BodyError, PayloadError) as exc:
            reason = str(exc) or exc.__class__.__name__
        except ValidationError as exc:  # a value the incident model cannot hold (a port number past any range...)
            first: Mapping[str, Any] = exc.errors()[0] if exc.errors() else {}
            where = ".".join(str(x) for x in first.get("loc", ())) or "payload"
            reason = f"{where}: {first.get('msg', 'invalid value')}"
        except RecursionError:
            reason = "payload nested too deep"
        except Exception as exc:  # noqa: BLE001 - a normalizer that fails on a payload: still the sender's answer
            # is final (422, kept as rejected): a 500 would make it retry the same body forever
            hlog.error("hook_normalize_failed", error=f"{exc.__class__.__name__}: {str(exc)[:300]}")
            reason = f"payload could not be read ({exc.__class__.__name__})"
        if reason is not None:
            try:
                rid = await in_thread(store.reject_request, source, kept, body_text, reason)
            except StoreUnavailable as exc:
                return unavailable(exc)
            metrics.hook_requests.labels(source, "rejected").inc()
            hlog.warning("hook_rejected", request_id=rid, reason=reason)
            return JSONResponse({"detail": reason, "request_id": rid, "status": "rejected"}, status_code=422)
        try:
            acc = await in_thread(store.accept_request, source, dedup_key(drafts), kept, body_text, None,
                                  settings.max_queue)
        except StoreUnavailable as exc:
            return unavailable(exc)
        if acc.duplicate:
            metrics.hook_requests.labels(source, "duplicate").inc()
            hlog.info("hook_duplicate", request_id=acc.request_id)
            return JSONResponse({"request_id": acc.request_id, "status": "duplicate"}, status_code=200)
        metrics.hook_requests.labels(source, "accepted").inc()
        hlog.info("hook_accepted", request_id=acc.request_id, incidents=len(drafts))
        worker.notify()
        return JSONResponse({"request_id": acc.request_id, "status": "accepted"}, status_code=202)

    reader = [Depends(read_guard(settings))]

    @app.get("/incidents", dependencies=reader)
    def incidents(limit: int = Query(20, ge=1, le=500),
                  status: IncidentStatusQ | None = None) -> list[dict[str, Any]]:
        """Newest incidents first, without the diagnosis body (``top_cause`` names its first cause)."""
        return [incident_json(store, r, full=False) for r in store.list_incidents(limit=limit, status=status)]

    @app.get("/incidents/{incident_id}", dependencies=reader)
    def incident(incident_id: int) -> dict[str, Any]:
        """One incident: its alerts count, post-back outcomes and the diagnosis (the triage JSON contract)."""
        rec = store.get_incident(incident_id)
        if rec is None:
            raise HTTPException(404, f"no incident {incident_id}")
        return incident_json(store, rec)

    @app.get("/requests", dependencies=reader)
    def requests(status: RequestStatusQ | None = None, limit: int = Query(50, ge=1, le=500)) -> list[dict[str, Any]]:
        """Stored hook requests, newest first; ``?status=rejected`` shows what senders got wrong, and why."""
        return [r.as_json(body_limit=4096) for r in store.list_requests(status=status, limit=limit)]

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        """200 when the store takes durable writes, the queue has room and the worker threads run; 503 otherwise,
        with what is wrong (``store``: ok, gone, replaced, unwritable, full, busy, io_error, unreachable). No
        secrets in here."""
        state, detail = store.health()
        try:
            depth: int | None = store.counts()["queue_depth"] if state != "unreachable" else None
        except Exception as exc:  # noqa: BLE001 - health checks report, they do not raise
            log.warning("healthz_counts_failed", error=str(exc))
            depth = None
        worker_state = ("alive" if worker.alive() else "dead") if start_worker else "disabled"
        full = bool(settings.max_queue) and depth is not None and depth >= settings.max_queue
        healthy = state == "ok" and worker_state != "dead" and not full
        body: dict[str, Any] = {"status": "ok" if healthy else "unhealthy", "store": state,
                                "store_backend": store.backend, "worker": worker_state, "queue_depth": depth,
                                "max_queue": settings.max_queue or None, "queue_full": full,
                                "triage_running": worker.triage_running()}
        if detail:
            body["store_detail"] = detail
        return JSONResponse(body, status_code=200 if healthy else 503)

    @app.get("/metrics")
    def metrics_endpoint() -> PlainTextResponse:
        metrics.queue_limit.set(settings.max_queue)
        metrics.triage_running.set(1 if worker.triage_running() else 0)
        try:
            metrics.refresh(store.counts())
        except Exception as exc:  # noqa: BLE001 - counters still tell something when the store is down
            log.warning("metrics_store_unreachable", error=str(exc))
        return PlainTextResponse(generate_latest(metrics.registry).decode(), media_type=CONTENT_TYPE_LATEST)

    _include_chat(app, settings, store)
    return app
