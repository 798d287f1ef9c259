"""``diagnose collect`` against stub commands on PATH that print real-format captures, fail, hang or are missing."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from diagnose.collect import COLLECTORS, DENY, MANIFEST, collect
from diagnose.pipeline import triage

ROOT = Path(__file__).resolve().parent.parent
IBSTAT = ROOT / "fixtures" / "link" / "port_down" / "positive-hca-polling-one-host" / "gpu-b112" / "ibstat.out"


def test_no_collector_changes_the_host() -> None:
    assert not [c.name for c in COLLECTORS if DENY.search(" ".join(c.argv))]
    assert DENY.search("modprobe nvidia_peermem") and DENY.search("mlxconfig -d mlx5_0 set MAX_ACC_OUT_READ=44")


def _stubs(tmp_path: Path) -> Path:
    """ibstat prints a capture with a port down; sminfo hangs; lspci fails; the others are missing."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "ibstat").write_text(f"#!/bin/sh\nexec /bin/cat {shlex.quote(str(IBSTAT))}\n")
    (bin_ / "sminfo").write_text("#!/bin/sh\nexec /bin/sleep 60\n")
    (bin_ / "lspci").write_text("#!/bin/sh\necho 'pcilib: Cannot open /sys/bus/pci' >&2\nexit 1\n")
    (bin_ / "bash").symlink_to("/bin/bash")
    for f in bin_.iterdir():
        if not f.is_symlink():
            f.chmod(0o755)
    return bin_


def _fast(timeout_s: float = 1.0):  # type: ignore[no-untyped-def]
    return [replace(c, timeout_s=timeout_s) for c in COLLECTORS]


def test_collect_records_each_command_and_triage_names_the_manifest_host(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(_stubs(tmp_path)))
    out = tmp_path / "bundle"
    env = tmp_path / "job.env"
    env.write_text("NCCL_SOCKET_IFNAME=ib0\nAWS_SECRET_ACCESS_KEY=hunter2\nNCCL_DEBUG=INFO\nHOME=/root\n")
    res = collect(out, interval_s=0, deadline_s=30, collectors=_fast(), host="gpu-z042", env_file=env)
    status = {s.name: s.status for s in res.steps}
    assert status["ibstat"] == "ok" and status["sminfo"] == "timeout" and status["lspci"] == "failed"
    assert status["nvidia_smi"] == "missing" and status["ulimit"] == "ok"  # bash is there
    man = json.loads((out / MANIFEST).read_text())
    assert man["host"] == "gpu-z042" and {c["name"] for c in man["commands"]} >= {"ibstat", "sminfo", "env"}
    assert (out / "env.txt").read_text() == "NCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME=ib0\n"  # never the secrets
    assert "Cannot open" in (out / "lspci.out").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "bundle", "job.env"]  # nothing outside --out
    d = triage([out])
    assert d.causes[0].id == "link.port_down" and d.causes[0].location.host == "gpu-z042"
    assert "manifest.json" not in [f.path for f in d.files]


def test_the_whole_run_has_a_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(_stubs(tmp_path)))
    res = collect(tmp_path / "b", interval_s=0, deadline_s=1.5, collectors=_fast(5.0), host="h1")
    status = {s.name: s.status for s in res.steps}
    assert status["sminfo"] == "timeout"  # cut at what was left of the run's bound, not its own 5 s
    assert "skipped" in status.values()  # the collectors after it were not run
    assert sum(s.duration_s for s in res.steps) < 5


def test_the_cli_collects_on_this_machine_and_refuses_a_used_folder(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(_stubs(tmp_path)), "COLUMNS": "120"}
    cmd = [sys.executable, "-m", "diagnose.interfaces.cli", "collect", "--out", str(tmp_path / "b"), "--interval", "0",
           "--timeout", "3"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "next: diagnose triage" in r.stderr and (tmp_path / "b" / MANIFEST).is_file()
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 2 and "not an empty folder" in again.stderr
