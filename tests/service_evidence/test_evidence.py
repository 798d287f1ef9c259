"""diagnose.service.evidence: the bundle store and Prometheus as evidence for an incident.

Prometheus is played by a local HTTP server that answers with responses a real Prometheus 2.42 sent
(tests/data/prometheus_api, see its README) and records what it was asked.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from diagnose.parsers import prometheus_api
from diagnose.pipeline import triage
from diagnose.service import evidence
from diagnose.service.evidence import EvidenceSet, collect
from diagnose.service.models import IncidentRecord, PortRef
from diagnose.service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
PROM_DATA = ROOT / "tests" / "data" / "prometheus_api"
RISING = ROOT / "fixtures" / "link" / "bad_cable" / "positive-symbol-errors-rising"
T0 = (datetime.now(timezone.utc) - timedelta(days=2)).replace(microsecond=0)  # windows end before now


def incident(**kw: object) -> IncidentRecord:
    base: dict[str, object] = {"id": 7, "source": "alertmanager", "external_id": "5da1d7fd9649eadc",
                               "title": "InfinibandSymbolErrorsRising", "created_at": T0, "updated_at": T0}
    base.update(kw)
    return IncidentRecord.model_validate(base)


def store_settings(tmp_path: Path, **kw: object) -> Settings:
    return Settings(data_dir=tmp_path / "data", bundles=tmp_path / "store", **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ bundle store


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    (root / "4412" / "gpu-a003").mkdir(parents=True)
    (root / "4412" / "gpu-a004").mkdir()
    (root / "4412" / "nccl.log").write_text("gpu-a003:1234:1234 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.3<0>\n")
    (root / "gpu-a007").mkdir()
    (root / "gpu-a007" / "dmesg.txt").write_text("[ 1.0] mlx5_core 0000:1a:00.0: firmware version: 28.39.1002\n")
    (root / "gpu-a008.tar.gz").write_bytes(b"")
    (root / "gpu-a009.cluster.local").mkdir()
    (root / "GPU-A010").mkdir()
    (root / ".partial-upload").mkdir()
    (root / "archive" / "2026").mkdir(parents=True)
    (root / "archive" / "2026" / "incident-7.zip").write_bytes(b"")
    return root


def test_job_folder_with_per_host_subfolders(tmp_path: Path, store: Path) -> None:
    ev = collect(store_settings(tmp_path), incident(job_id="4412", hosts=["gpu-a003", "gpu-a005"]), tmp_path / "w")
    assert ev.paths == [(store / "4412").resolve()]  # the whole job: the other hosts hold the other ends
    assert "bundle store: 4412 (job 4412)" in ev.notes
    assert "host gpu-a003: its files are in the job's bundle" in ev.notes
    assert "no bundle for host gpu-a005 in the bundle store" in ev.notes
    assert not any("gpu-a003 in the bundle store" in n for n in ev.notes)


def test_job_prefixes_and_missing_job(tmp_path: Path, store: Path) -> None:
    (store / "slurm-981").mkdir()
    ev = collect(store_settings(tmp_path), incident(job_id="981"), tmp_path / "w")
    assert ev.paths == [(store / "slurm-981").resolve()]
    ev = collect(store_settings(tmp_path), incident(job_id="982"), tmp_path / "w")
    assert ev.paths == []
    assert "no bundle for job 982 in the bundle store" in ev.notes
    assert "no evidence found: the diagnosis can only use the alert text" in ev.notes


def test_hosts_by_exact_short_and_domain_names(tmp_path: Path, store: Path) -> None:
    inc = incident(hosts=["gpu-a007.cluster.local", "gpu-a008", "gpu-a009", "gpu-a010"],
                   ports=[PortRef(host="gpu-a011", device="mlx5_0", port=1)])
    ev = collect(store_settings(tmp_path), inc, tmp_path / "w")
    assert ev.paths == [(store / n).resolve() for n in
                        ("gpu-a007", "gpu-a008.tar.gz", "gpu-a009.cluster.local", "GPU-A010")]
    assert "bundle store: gpu-a007 (host gpu-a007.cluster.local)" in ev.notes
    assert "no bundle for host gpu-a011 in the bundle store" in ev.notes  # a port's host is searched too
    assert not any("partial-upload" in n for n in ev.notes)  # hidden entries are never matched


def test_labels_node_instance_and_job_id(tmp_path: Path, store: Path) -> None:
    inc = incident(labels={"instance": "gpu-a007:9100", "node": "gpu-a008", "job_id": "4412", "job": "node"})
    ev = collect(store_settings(tmp_path), inc, tmp_path / "w")
    assert ev.paths == [(store / "gpu-a008.tar.gz").resolve(), (store / "gpu-a007").resolve(),
                        (store / "4412").resolve()]
    assert "bundle store: 4412 (label job_id=4412)" in ev.notes


def test_bundle_refs_stay_inside_the_store(tmp_path: Path, store: Path) -> None:
    outside = tmp_path / "secrets"
    outside.mkdir()
    (outside / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (store / "escape").symlink_to(outside)
    (store / "archive" / "latest").symlink_to(store / "archive" / "2026")
    refs = ["archive/2026/incident-7.zip", "archive/latest", "../secrets", "gpu-a007/../../secrets/id_rsa",
            "escape/id_rsa", "/etc/passwd", "archive/missing.tar.gz", "gpu-a007/dmesg.txt"]
    ev = collect(store_settings(tmp_path), incident(hosts=["gpu-a007"]), tmp_path / "w", bundle_refs=refs)
    assert ev.paths == [(store / "gpu-a007").resolve(), (store / "archive/2026/incident-7.zip").resolve(),
                        (store / "archive/2026").resolve()]
    assert all(outside not in p.parents and p != outside for p in ev.paths)
    for ref in ("../secrets", "gpu-a007/../../secrets/id_rsa", "escape/id_rsa"):
        assert f"bundle ref {ref!r} leads outside the bundle store: rejected" in ev.notes
    assert "bundle store entry escape is a symlink leading outside the store: not used" in ev.notes
    assert any(n.startswith("bundle ref '/etc/passwd' is an absolute path") for n in ev.notes)
    assert "bundle ref 'archive/missing.tar.gz' not found in the bundle store" in ev.notes
    # a file inside a folder already taken adds nothing
    assert sum("gpu-a007" in str(p) for p in ev.paths) == 1


def test_missing_store(tmp_path: Path) -> None:
    ev = collect(store_settings(tmp_path), incident(hosts=["gpu-a003"]), tmp_path / "w")
    assert ev.paths == []
    assert f"bundle store {tmp_path / 'store'} does not exist: no bundles searched" in ev.notes


def test_store_bundle_is_diagnosed(tmp_path: Path) -> None:
    shutil.copytree(RISING, tmp_path / "store" / "4412")
    ev = collect(store_settings(tmp_path), incident(job_id="4412"), tmp_path / "w")
    top = triage(ev.paths).causes[0]
    assert top.id == "link.bad_cable" and top.verdict == "confirmed"


# -------------------------------------------------------------------------------------- Prometheus stand-in


class FakePrometheus:
    """Answers every request with ``reply(form) -> (status, body, delay_s)`` and keeps the requests."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, list[str]], dict[str, str]]] = []
        self.reply: Callable[[dict[str, list[str]]], tuple[int, bytes, float]] = lambda form: (200, b"{}", 0.0)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                form = parse_qs(body) if body else parse_qs(self.path.partition("?")[2])
                fake.requests.append((self.command, self.path.partition("?")[0], form,
                                      {k.lower(): v for k, v in self.headers.items()}))
                status, payload, delay = fake.reply(form)
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = _any

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    fake = FakePrometheus()
    yield fake
    fake.close()


def range_body() -> bytes:
    return (PROM_DATA / "query_range_symbol_errors_rising.json").read_bytes()


def test_prometheus_series_become_evidence(tmp_path: Path, prom: FakePrometheus) -> None:
    empty = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
    prom.reply = lambda form: (200, range_body() if "gpu-a003" in form["query"][0] else empty, 0.0)
    settings = store_settings(tmp_path, prometheus_url=prom.url + "/", prometheus_step_s=15)
    inc = incident(hosts=["gpu-a003", "gpu-a004"], starts_at=T0, ends_at=T0 + timedelta(minutes=5))
    ev = collect(settings, inc, tmp_path / "w")
    assert ev.paths == [tmp_path / "w" / "prometheus"]
    written = tmp_path / "w" / "prometheus" / "prometheus_gpu-a003.json"
    assert sorted(p.name for p in ev.paths[0].iterdir()) == [written.name]
    assert written.read_text() == prometheus_api.pretty(json.loads(range_body()))
    # one POST per host, to the range endpoint, with the incident's window (15 min before the start)
    assert [(m, path) for m, path, _, _ in prom.requests] == [("POST", "/api/v1/query_range")] * 2
    form = prom.requests[0][2]
    assert float(form["start"][0]) == (T0 - timedelta(minutes=15)).timestamp()
    assert float(form["end"][0]) == (T0 + timedelta(minutes=5)).timestamp()
    assert form["step"] == ["15"]
    n_series = len(json.loads(range_body())["data"]["result"])
    assert any(n.startswith(f"Prometheus: {n_series} series for host gpu-a003") and n.endswith("prometheus_gpu-a003.json")
               for n in ev.notes)
    assert any(n.startswith("Prometheus has no node_infiniband series for host gpu-a004") for n in ev.notes)
    diag = triage(ev.paths)
    top = diag.causes[0]
    assert top.id == "link.bad_cable"
    assert (top.location.host, top.location.device, top.location.port) == ("gpu-a003", "mlx5_0", 1)
    assert {e.file for e in top.evidence} == {"prometheus_gpu-a003.json"}


def test_query_selects_the_host_by_instance_or_label() -> None:
    q = evidence.promql("gpu-a003.cluster.local")
    matchers = re.findall(r"(\w+)=~`([^`]*)`", q)
    by_label = {k: v for k, v in matchers if k != "__name__"}
    assert set(by_label) == {"instance", "host", "hostname", "node", "nodename"}
    inst = re.compile(by_label["instance"])
    for v in ("gpu-a003:9100", "gpu-a003.cluster.local:9100", "gpu-a003"):
        assert inst.fullmatch(v), v
    for v in ("gpu-a0031:9100", "xgpu-a003:9100", "gpu-a004:9100", "gpu-a003x.cluster.local:9100"):
        assert not inst.fullmatch(v), v
    assert re.compile(by_label["host"]).fullmatch("gpu-a003")
    names = re.compile(next(v for k, v in matchers if k == "__name__"))
    for metric in ("node_infiniband_symbol_error_total", "node_infiniband_link_downed_total",
                   "node_infiniband_port_transmit_wait_total", "node_infiniband_state_id", "node_infiniband_info"):
        assert names.fullmatch(metric), metric
    assert not names.fullmatch("node_infiniband_symbol_error_total_extra")
    ip = re.compile(dict(re.findall(r"(\w+)=~`([^`]*)`", evidence.promql("10.0.0.5")))["instance"])
    assert ip.fullmatch("10.0.0.5:9100") and not ip.fullmatch("10.0.0.51:9100") and not ip.fullmatch("10x0x0x5")


def test_prometheus_errors_are_notes(tmp_path: Path, prom: FakePrometheus) -> None:
    bad = (PROM_DATA / "var_error_bad_data.json").read_bytes()
    replies = iter([(400, bad, 0.0), (503, b"upstream connect error", 0.0),
                    (200, b'{"status":"success","data":{"resultType":"vector","result":[]}}', 0.0)])
    prom.reply = lambda form: next(replies)
    settings = store_settings(tmp_path, prometheus_url=prom.url)
    ev = collect(settings, incident(hosts=["gpu-a003", "gpu-a004", "gpu-a005"], starts_at=T0), tmp_path / "w")
    assert ev.paths == []
    assert ("Prometheus query for host gpu-a003 failed: HTTP 400 bad_data: 1:43: parse error: unexpected end of "
            "input inside braces") in ev.notes
    assert ("Prometheus query for host gpu-a004 failed: HTTP 503, not a Prometheus API response "
            "('upstream connect error')") in ev.notes
    assert "Prometheus query for host gpu-a005 failed: unexpected resultType 'vector'" in ev.notes


def test_unreachable_prometheus_is_one_note_and_hides_credentials(tmp_path: Path) -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as s:
        port = s.server_address[1]  # bound, then closed: nothing listens there afterwards
    settings = store_settings(tmp_path, prometheus_url=f"http://ops:hunter2@127.0.0.1:{port}")
    ev = collect(settings, incident(hosts=["gpu-a003", "gpu-a004"], starts_at=T0), tmp_path / "w")
    unreachable = [n for n in ev.notes if "not reachable" in n]
    assert len(unreachable) == 1  # no second attempt per host against a dead server
    assert unreachable[0].startswith(f"Prometheus at http://127.0.0.1:{port} not reachable (ConnectError")
    assert not any("hunter2" in n for n in ev.notes)


def test_credentials_are_sent(tmp_path: Path, prom: FakePrometheus) -> None:
    prom.reply = lambda form: (200, range_body(), 0.0)
    settings = store_settings(tmp_path, prometheus_url=prom.url.replace("http://", "http://ops:hunter2@"))
    collect(settings, incident(hosts=["gpu-a003"], starts_at=T0), tmp_path / "w")
    auth = prom.requests[0][3]["authorization"]
    assert auth == "Basic " + base64.b64encode(b"ops:hunter2").decode()


def test_slow_prometheus_times_out(tmp_path: Path, prom: FakePrometheus, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evidence, "TIMEOUT_S", 0.3)
    prom.reply = lambda form: (200, range_body(), 1.5)
    ev = collect(store_settings(tmp_path, prometheus_url=prom.url), incident(hosts=["gpu-a003"], starts_at=T0),
                 tmp_path / "w")
    assert ev.paths == []
    assert any("not reachable (ReadTimeout" in n for n in ev.notes)


def test_oversized_response_is_not_kept(tmp_path: Path, prom: FakePrometheus,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evidence, "MAX_RESPONSE_BYTES", 4096)
    prom.reply = lambda form: (200, range_body(), 0.0)
    ev = collect(store_settings(tmp_path, prometheus_url=prom.url), incident(hosts=["gpu-a003"], starts_at=T0),
                 tmp_path / "w")
    assert ev.paths == []
    assert any(n.startswith("Prometheus query for host gpu-a003 failed: response larger than") for n in ev.notes)


def test_long_incident_window_is_capped(tmp_path: Path, prom: FakePrometheus) -> None:
    prom.reply = lambda form: (200, range_body(), 0.0)
    inc = incident(hosts=["gpu-a003"], starts_at=T0 - timedelta(days=30), ends_at=T0)
    ev = collect(store_settings(tmp_path, prometheus_url=prom.url), inc, tmp_path / "w")
    form = prom.requests[0][2]
    span = float(form["end"][0]) - float(form["start"][0])
    assert span == timedelta(days=7).total_seconds()
    assert span / int(form["step"][0]) <= 11_000  # Prometheus' limit of points per series
    assert "Prometheus: window longer than 7 days: only the last 7 days are queried" in ev.notes


def test_rerun_replaces_earlier_results(tmp_path: Path, prom: FakePrometheus) -> None:
    prom.reply = lambda form: (200, range_body(), 0.0)
    settings = store_settings(tmp_path, prometheus_url=prom.url)
    collect(settings, incident(hosts=["gpu-a003"], starts_at=T0), tmp_path / "w")
    ev = collect(settings, incident(hosts=["gpu-a007"], starts_at=T0), tmp_path / "w")
    assert sorted(p.name for p in (tmp_path / "w" / "prometheus").iterdir()) == ["prometheus_gpu-a007.json"]
    assert isinstance(ev, EvidenceSet)


def test_not_configured_and_no_host(tmp_path: Path, prom: FakePrometheus) -> None:
    ev = collect(store_settings(tmp_path), incident(hosts=["gpu-a003"]), tmp_path / "w")
    assert "Prometheus not configured (DIAGNOSE_PROMETHEUS_URL): no port counters queried" in ev.notes
    ev = collect(store_settings(tmp_path, prometheus_url=prom.url), incident(labels={"job": "node"}), tmp_path / "w")
    assert "Prometheus: the incident names no host: nothing queried" in ev.notes
    ev = collect(store_settings(tmp_path, prometheus_url=prom.url), incident(hosts=["gpu a003;drop"]), tmp_path / "w")
    assert "Prometheus: 'gpu a003;drop' is not a host name: not queried" in ev.notes
    assert prom.requests == []


def test_attachment_urls_are_not_fetched(tmp_path: Path, store: Path, prom: FakePrometheus) -> None:
    url = prom.url.replace("http://", "https://u:p@") + "/secure/attachment/10042/bundle.tar.gz"
    ev = collect(store_settings(tmp_path), incident(), tmp_path / "w", bundle_refs=[url, "s3://bucket/b.tgz"])
    assert prom.requests == []
    shown = prom.url.replace("http://", "https://") + "/secure/attachment/10042/bundle.tar.gz"
    assert (f"attachment {shown} not downloaded (the service fetches no URL named in a payload): copy the bundle "
            "into the bundle store as <job-or-host>/") in ev.notes
    assert "bundle ref s3://bucket/b.tgz is not a path in the bundle store: not used" in ev.notes


def test_two_names_of_one_host_keep_each_series_once(tmp_path: Path, prom: FakePrometheus) -> None:
    # an alert names host="gpu-a003" and instance="127.0.0.1:9100": both selectors find the same series
    prom.reply = lambda form: (200, range_body(), 0.0)
    inc = incident(hosts=["gpu-a003"], labels={"instance": "127.0.0.1:9100"}, starts_at=T0)
    ev = collect(store_settings(tmp_path, prometheus_url=prom.url), inc, tmp_path / "w")
    assert len(prom.requests) == 2
    assert sorted(p.name for p in (tmp_path / "w" / "prometheus").iterdir()) == ["prometheus_gpu-a003.json"]
    assert "Prometheus: the series for 127.0.0.1 are those already kept for gpu-a003" in ev.notes
