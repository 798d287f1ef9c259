"""The real alert chain: node_exporter -> Prometheus -> Alertmanager -> diagnose service -> diagnosis.

Nothing is simulated but the InfiniBand hardware. A sysfs tree (``/sys/class/infiniband`` as the mlx5 driver
lays it out) is written for one host, ``gpu-a003``. The real ``prometheus-node-exporter`` reads it with only its
infiniband collector, the real ``prometheus`` scrapes it every second and evaluates an alerting rule on
``node_infiniband_symbol_error_total``, and the real ``alertmanager`` posts the alert to the service's
``/hooks/alertmanager`` with a bearer token. The service, started with ``diagnose serve``, queries Prometheus
for the host's series and diagnoses. The test raises the counter file a few times, waits for the incident,
and checks the diagnosis: a bad cable at gpu-a003 mlx5_0 port 1, with its evidence in the Prometheus query
results the service kept.

Binaries: Debian's ``prometheus``, ``prometheus-alertmanager`` and ``prometheus-node-exporter`` packages
(upstream names ``alertmanager`` and ``node_exporter`` are found too). The test is skipped, with the reason,
when one is missing. Configuration templates: tests/service_evidence/chain/. Every process is started here
and stopped here, by its PID.

Files node_exporter's infiniband collector reads (prometheus/procfs ``sysfs/class_infiniband.go``,
``parseInfiniBandDevice`` / ``parseInfiniBandPort`` / ``parseInfiniBandCounters``): ``board_id``, ``fw_ver``,
``hca_type`` per device; ``state``, ``phys_state``, ``rate`` (required) and ``link_layer`` per port; every file
of ``ports/<n>/counters/``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from diagnose.models.diagnosis import Diagnosis

ROOT = Path(__file__).resolve().parents[2]
CHAIN = Path(__file__).resolve().parent / "chain"
HOST = "gpu-a003"
TOKEN = "chain-test-token-5f0c"
DEADLINE_S = 50.0


def _binary(*names: str) -> str | None:
    return next((p for p in map(shutil.which, names) if p), None)


PROMETHEUS = _binary("prometheus")
ALERTMANAGER = _binary("prometheus-alertmanager", "alertmanager")
NODE_EXPORTER = _binary("prometheus-node-exporter", "node_exporter")
MISSING = [n for n, b in (("prometheus", PROMETHEUS), ("prometheus-alertmanager", ALERTMANAGER),
                          ("prometheus-node-exporter", NODE_EXPORTER)) if b is None]

# CI installs the servers and sets DIAGNOSE_REQUIRE_REAL_SERVERS=1: there a missing binary fails instead of skipping
if MISSING and os.environ.get("DIAGNOSE_REQUIRE_REAL_SERVERS") == "1":
    raise RuntimeError(f"DIAGNOSE_REQUIRE_REAL_SERVERS=1 but {', '.join(MISSING)} not installed")

pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"alert chain needs {', '.join(MISSING)} (apt-get install prometheus "
                          "prometheus-alertmanager prometheus-node-exporter)")

# what a ConnectX-7 port exposes under counters/ (drivers/infiniband/core/sysfs.c pma_counter attributes)
COUNTERS = {
    "symbol_error": 0, "link_error_recovery": 0, "link_downed": 0, "port_rcv_errors": 0,
    "port_rcv_remote_physical_errors": 0, "port_rcv_switch_relay_errors": 0, "port_xmit_discards": 0,
    "port_xmit_constraint_errors": 0, "port_rcv_constraint_errors": 0, "local_link_integrity_errors": 0,
    "excessive_buffer_overrun_errors": 0, "VL15_dropped": 0, "port_xmit_wait": 18446,
    "port_xmit_data": 92177067772, "port_rcv_data": 91822012311, "port_xmit_packets": 1811101,
    "port_rcv_packets": 1810977, "unicast_xmit_packets": 1811088, "unicast_rcv_packets": 1810964,
    "multicast_xmit_packets": 13, "multicast_rcv_packets": 13,
}


def write_sysfs(root: Path) -> Path:
    """A /sys/class/infiniband tree with two HCAs, port 1 Active at 400 Gb/s; returns mlx5_0's symbol_error."""
    for dev, guid in (("mlx5_0", "946d:ae03:00e0:5ab4"), ("mlx5_1", "946d:ae03:00a1:33c0")):
        d = root / "class" / "infiniband" / dev
        port = d / "ports" / "1"
        (port / "counters").mkdir(parents=True)
        for name, value in {"board_id": "MT_0000000838", "fw_ver": "28.39.1002", "hca_type": "MT4129",
                            "node_guid": guid, "node_type": "1: CA"}.items():
            (d / name).write_text(value + "\n")
        for name, value in {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)",
                            "link_layer": "InfiniBand", "lid": "0x2a", "sm_lid": "0x1"}.items():
            (port / name).write_text(value + "\n")
        for name, value in COUNTERS.items():
            (port / "counters" / name).write_text(f"{value}\n")
    return root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters" / "symbol_error"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class Chain:
    tmp: Path
    procs: list[Proc] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = self.tmp / f"{name}.log"
        with log.open("wb") as fh:
            p = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=env, cwd=self.tmp)
        self.procs.append(Proc(name, p, log))

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.popen.poll() is None:
                p.popen.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.popen.kill()
                p.popen.wait(timeout=5)

    def logs(self) -> str:
        """The tail of every process's output, for failure messages."""
        out = []
        for p in self.procs:
            text = p.log.read_text(errors="replace") if p.log.exists() else ""
            state = "running" if p.popen.poll() is None else f"exited {p.popen.returncode}"
            out.append(f"--- {p.name} (pid {p.popen.pid}, {state}) ---\n" + "\n".join(text.splitlines()[-25:]))
        return "\n".join(out)

    def wait_for(self, what: str, check: Callable[[], Any], deadline: float) -> Any:
        """Poll ``check`` until it returns something truthy; fail with every process's log at the deadline."""
        last: object = None
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.popen.poll() is not None:
                    pytest.fail(f"{p.name} exited with {p.popen.returncode} while waiting for {what}\n{self.logs()}")
            try:
                got = check()
                if got:
                    return got
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                last = exc
            time.sleep(0.2)
        pytest.fail(f"timed out waiting for {what} (last error: {last!r})\n{self.logs()}")


def service_command() -> list[str]:
    """``diagnose serve`` through the main CLI, logging JSON events."""
    return [sys.executable, "-m", "diagnose.interfaces.cli", "--log-format", "json", "--log-level", "info", "serve"]


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[Chain]:
    c = Chain(tmp_path)
    try:
        yield c
    finally:
        c.stop()


def prom_value(url: str, query: str) -> float | None:
    r = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=2.0).json()
    res = r["data"]["result"]
    return float(res[0]["value"][1]) if res else None


@pytest.mark.slow
def test_alert_chain_to_diagnosis(chain: Chain, tmp_path: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    symbol_error = write_sysfs(tmp_path / "sys")
    ne_port, prom_port, am_port, svc_port = (free_port() for _ in range(4))
    prom_url, svc_url = f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{svc_port}"
    subs = {"rules": str(CHAIN / "rules.yml"), "alertmanager_port": am_port, "node_exporter_port": ne_port,
            "host": HOST, "service_port": svc_port, "token": TOKEN}
    for name in ("prometheus.yml", "alertmanager.yml"):
        (tmp_path / name).write_text(string.Template((CHAIN / name).read_text()).substitute(subs))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIAGNOSE_", "SLACK_"))}
    env.update({
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "DIAGNOSE_DATA_DIR": str(tmp_path / "data"),
        "DIAGNOSE_ALERTMANAGER_TOKEN": TOKEN,
        "DIAGNOSE_PROMETHEUS_URL": prom_url,
        "DIAGNOSE_PROMETHEUS_STEP_S": "1",  # the whole test spans seconds: one point per scrape
    })
    chain.start("service", [*service_command(), "--host", "127.0.0.1", "--port", str(svc_port)], env)
    chain.start("node_exporter", [NODE_EXPORTER or "", f"--path.sysfs={tmp_path / 'sys'}",
                                  f"--web.listen-address=127.0.0.1:{ne_port}",
                                  "--collector.disable-defaults", "--collector.infiniband"])
    chain.start("alertmanager", [ALERTMANAGER or "", f"--config.file={tmp_path / 'alertmanager.yml'}",
                                 f"--storage.path={tmp_path / 'alertmanager'}",
                                 f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="])
    chain.start("prometheus", [PROMETHEUS or "", f"--config.file={tmp_path / 'prometheus.yml'}",
                               f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                               f"--web.listen-address=127.0.0.1:{prom_port}"])

    metrics = chain.wait_for("node_exporter's infiniband metrics",
                             lambda: httpx.get(f"http://127.0.0.1:{ne_port}/metrics", timeout=2.0).text, deadline)
    assert 'node_infiniband_symbol_error_total{device="mlx5_0",port="1"} 0' in metrics
    assert 'node_scrape_collector_success{collector="infiniband"} 1' in metrics
    chain.wait_for("the service", lambda: httpx.get(f"{svc_url}/healthz", timeout=2.0).status_code == 200, deadline)
    chain.wait_for("alertmanager", lambda: httpx.get(f"http://127.0.0.1:{am_port}/-/ready", timeout=2.0)
                   .status_code == 200, deadline)
    sel = f'node_infiniband_symbol_error_total{{host="{HOST}",device="mlx5_0",port="1"}}'
    chain.wait_for("the first scrape (the counter's baseline)", lambda: prom_value(prom_url, sel) == 0.0, deadline)

    # a climbing counter: each value is raised only once Prometheus has scraped the previous one
    for value in (12, 21, 33):
        symbol_error.write_text(f"{value}\n")
        chain.wait_for(f"Prometheus to scrape symbol_error={value}",
                       lambda v=value: prom_value(prom_url, sel) == float(v), deadline)

    def diagnosed() -> dict[str, Any] | None:
        rows = httpx.get(f"{svc_url}/incidents", timeout=2.0).json()
        return next((r for r in rows if r["status"] == "diagnosed" and HOST in r["hosts"]), None)

    row = chain.wait_for("the incident to be diagnosed", diagnosed, deadline)
    full = httpx.get(f"{svc_url}/incidents/{row['id']}", timeout=5.0).json()
    context = f"incident: { {k: v for k, v in full.items() if k != 'diagnosis'} }\n{chain.logs()}"
    assert full["source"] == "alertmanager", context
    assert full["title"] and full["external_id"], context
    diagnosis = Diagnosis.model_validate(full["diagnosis"])  # the CLI's JSON contract
    assert diagnosis.causes, context
    top = diagnosis.causes[0]
    assert top.id == "link.bad_cable", f"top cause {top.id}\n{context}"
    assert (top.location.host, top.location.device, top.location.port) == (HOST, "mlx5_0", 1), context
    prom_file = f"prometheus_{HOST}.json"
    assert top.evidence and {e.file for e in top.evidence} == {prom_file}, context
    assert any(f.path == prom_file and f.format == "prometheus_api" and f.records > 0 for f in diagnosis.files)
    # the evidence lines are the samples of mlx5_0's symbol_error series in the file the service kept
    kept = tmp_path / "data" / "incidents" / str(row["id"]) / "evidence" / "prometheus" / prom_file
    lines = kept.read_text().split("\n")
    for e in top.evidence:
        assert lines[e.line - 1].strip().startswith("["), (e, lines[e.line - 1])
        assert 'node_infiniband_symbol_error_total{device="mlx5_0"' in e.text
    # the values cited climb from what Prometheus had scraped to what it had when the alert was diagnosed (the
    # alert fires on the first rise, so the diagnosis may come before the last values were written)
    cited = [int(e.text.split("} ", 1)[1].split(" @", 1)[0]) for e in top.evidence]
    assert cited == sorted(cited) and set(cited) <= {0, 12, 21, 33} and cited[-1] >= 12, cited
    assert any(n.startswith("Prometheus: ") and n.endswith(prom_file) for n in full.get("evidence_notes", [])), context
