"""``diagnose bench hooks``: webhook intake under a burst, through the real HTTP server.

What is measured is the door: authenticate, validate, store durably (SQLite WAL, ``synchronous=FULL``), answer.
The server runs in a child process (uvicorn, one event loop, the store writes in its thread pool); the worker is
not started, so triage does not compete for the CPU with the intake being measured (its cost is
per incident, not per request, and it is measured by ``diagnose bench parse``). Every answer is checked, and
every accepted request must be in the store afterwards: a fast but lossy intake fails the bench.

The payloads are Alertmanager webhook notifications (version 4,
https://prometheus.io/docs/alerting/latest/configuration/#webhook_config) with one firing alert each and a
distinct fingerprint, authenticated the way Alertmanager's ``http_config.authorization`` sends a bearer token
(https://prometheus.io/docs/alerting/latest/configuration/#http_config).
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def alertmanager_payload(i: int, host: str | None = None, status: str = "firing") -> dict[str, Any]:
    """One Alertmanager notification with one InfiniBand alert (node_exporter infiniband collector labels)."""
    host = host or f"gpu-b{i % 512:03d}"
    labels = {"alertname": "InfinibandSymbolErrors", "severity": "warning", "instance": f"{host}:9100",
              "device": "mlx5_0", "port": "1", "bench_seq": str(i)}
    return {
        "version": "4", "groupKey": f'{{}}:{{alertname="InfinibandSymbolErrors", instance="{host}:9100"}}',
        "truncatedAlerts": 0, "status": status, "receiver": "diagnose",
        "groupLabels": {"alertname": "InfinibandSymbolErrors"}, "commonLabels": labels,
        "commonAnnotations": {"summary": f"symbol errors rising on {host} mlx5_0 port 1"},
        "externalURL": "http://alertmanager.example:9093",
        "alerts": [{"status": status, "labels": labels,
                    "annotations": {"summary": f"symbol errors rising on {host} mlx5_0 port 1"},
                    "startsAt": "2026-11-29T10:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
                    "generatorURL": "http://prometheus.example:9090/graph", "fingerprint": f"{i:016x}"}],
    }


def free_socket() -> socket.socket:
    """A listening-ready socket bound to a free loopback port (handed to uvicorn: no port race)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    return s


class ServerThread:
    """uvicorn serving an app on a free 127.0.0.1 port in a background thread (bench and tests)."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.sock = free_socket()
        self.port = self.sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="diagnose-uvicorn", daemon=True)

    def start(self, timeout: float = 30.0) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the server thread exited during startup")
            if time.monotonic() > deadline:
                raise TimeoutError("the server did not start")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        self.sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _burst(base_url: str, token: str, n: int, concurrency: int) -> tuple[list[float], list[tuple[int, Any]]]:
    import httpx

    sem = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    answers: list[tuple[int, Any]] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60.0,
                                 headers={"Authorization": f"Bearer {token}"}) as client:
        # warm-up, not timed: open the connections and let the server start its thread pool and their
        # database connections, so the figures are the steady state of a burst and not the first second
        await asyncio.gather(*(client.get("/healthz") for _ in range(concurrency)))

        async def one(i: int) -> None:
            async with sem:
                t0 = time.perf_counter()
                r = await client.post("/hooks/alertmanager", json=alertmanager_payload(i))
                latencies.append(time.perf_counter() - t0)
                answers.append((r.status_code, r.json() if r.headers.get("content-type", "").startswith(
                    "application/json") else r.text))

        await asyncio.gather(*(one(i) for i in range(n)))
    return latencies, answers


def _pct(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def _bench_server(data_dir: str, token: str, port: int) -> None:
    """The server process of the bench: the real app and uvicorn, worker off, warnings only."""
    import uvicorn
    from pydantic import SecretStr

    from diagnose.logging_setup import configure
    from diagnose.service.app import create_app
    from diagnose.service.settings import Settings

    configure("console", "warning")
    # _env_file is pydantic-settings' own init option, not a field mypy sees
    settings = Settings(_env_file=None,  # type: ignore[call-arg]
                        data_dir=Path(data_dir), alertmanager_token=SecretStr(token))
    uvicorn.run(create_app(settings, start_worker=False), host="127.0.0.1", port=port, log_level="warning",
                access_log=False)


def _wait_healthy(base_url: str, proc: Any, timeout: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        if not proc.is_alive():
            raise RuntimeError(f"the bench server exited during startup (exit code {proc.exitcode})")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("the bench server did not start")
        time.sleep(0.05)


def run_hook_bench(n: int = 1000, concurrency: int = 50) -> dict[str, Any]:
    """Fire ``n`` authenticated Alertmanager webhooks, ``concurrency`` at a time, at a real server on loopback.

    The server runs in its own process (the client's event loop does not share its interpreter lock) on a
    temporary SQLite store. Returns requests/s, p50/p99 latency (ms), the answers by status code, ``stored``
    (accepted requests found ``pending`` in the store afterwards) and ``client_cpu_s`` (the httpx client's own
    CPU time, which on a small machine competes with the server); ``ok`` is true only when every request got 202
    and was stored.
    """
    import multiprocessing

    from diagnose.service.store import open_store

    if n < 1 or concurrency < 1:
        raise ValueError("n and concurrency must be at least 1")
    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="diagnose-bench-") as tmp:
        sock = free_socket()
        port = sock.getsockname()[1]
        sock.close()
        proc = multiprocessing.get_context("spawn").Process(target=_bench_server, args=(tmp, token, port),
                                                             name="diagnose-bench-server", daemon=True)
        proc.start()
        try:
            base_url = f"http://127.0.0.1:{port}"
            _wait_healthy(base_url, proc)
            t0, c0 = time.perf_counter(), time.process_time()
            latencies, answers = asyncio.run(_burst(base_url, token, n, concurrency))
            wall, client_cpu = time.perf_counter() - t0, time.process_time() - c0
        finally:
            proc.terminate()
            proc.join(30)
        ids = {a[1]["request_id"] for a in answers if a[0] == 202 and isinstance(a[1], dict)}
        store = open_store(f"sqlite:///{Path(tmp) / 'diagnose.db'}")
        try:
            stored = {r.id for r in store.list_requests(status="pending", limit=n + 10)}
        finally:
            store.close()
    codes: dict[int, int] = {}
    for code, _ in answers:
        codes[code] = codes.get(code, 0) + 1
    return {
        "requests": n, "concurrency": concurrency, "wall_s": round(wall, 3),
        "requests_per_s": round(n / wall, 1) if wall else None,
        "p50_ms": round(_pct(latencies, 50) * 1000, 2), "p99_ms": round(_pct(latencies, 99) * 1000, 2),
        "status_codes": codes, "accepted": len(ids), "stored": len(ids & stored),
        "client_cpu_s": round(client_cpu, 3),
        "ok": codes.get(202, 0) == n and len(ids) == n and ids <= stored,
    }


def table(res: dict[str, Any]) -> str:
    """The bench result for a terminal."""
    rows = [("requests", f"{res['requests']} at concurrency {res['concurrency']}"),
            ("answered", ", ".join(f"{k}: {v}" for k, v in sorted(res["status_codes"].items()))),
            ("stored", f"{res['stored']} of {res['accepted']} accepted"),
            ("throughput", f"{res['requests_per_s']} requests/s ({res['wall_s']} s)"),
            ("latency p50 / p99", f"{res['p50_ms']} ms / {res['p99_ms']} ms"),
            ("client CPU", f"{res['client_cpu_s']} s of {res['wall_s']} s: the HTTP client's own cost is part of "
                           "the figures (a floor of the server's capacity on a small machine)"),
            ("result", "ok" if res["ok"] else "FAILED: not every request was accepted and stored")]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(w)}  {v}" for k, v in rows)
