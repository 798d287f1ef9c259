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


def test_no_table_holds_a_command_that_changes_anything_and_the_deny_list_knows_what_does() -> None:
    from diagnose.catalog.taxonomy import TAXONOMY
    from diagnose.collect.fabric import FABRIC

    tables = COLLECTORS + FABRIC
    assert not [c.name for c in tables if DENY.search(" ".join(c.argv))]
    assert not [(c.name, x) for c in tables for x in c.causes if x not in TAXONOMY]
    for bad in ("perfquery -x -r", "perfquery -R 12 1", "ibqueryerrors -K", "ibqueryerrors -r --clear-errors",
                "ibdiagnet -o /tmp/x --pc", "ibdiagnet -pc", "nvidia-smi -r -i 0", "nvidia-smi -pm 1",
                "nvidia-smi nvlink -r 0", "ethtool -s ens1 speed 100000", "ethtool -K ens1 tso off",
                "mlnx_qos -i eth0 --trust dscp", "mlnx_qos -i eth0 --pfc 0,0,0,1,0,0,0,0", "dcgmi diag -r 3",
                "systemctl restart nvidia-fabricmanager", "ip link set ib0 down", "ibportstate 12 1 disable",
                "sh -c 'cat x > /sys/bus/pci/rescan'", "mlxfwreset -d mlx5_0 reset"):
        assert DENY.search(bad), bad
    for fine in ("nvidia-smi nvlink -e", "dcgmi diag -r 1", "ibqueryerrors -r", "ethtool -S ens1f0",
                 "mlnx_qos -i ens1f0", "systemctl status nvidia-fabricmanager --no-pager -l", "smpquery sl2vl 12 1"):
        assert not DENY.search(fine), fine


ROCE = ROOT / "fixtures" / "fabric" / "qos_misconfig" / "negative-lossless-prio3-degraded-nic" / "gpu-r611"
QOS = ROOT / "tests" / "data" / "mlnx_qos" / "netarbiter_setup_nic_lossless_layer3.txt"
DCGM = ROOT / "tests" / "data" / "dcgmi" / "stas00_ml-engineering_debug_md_lines225-232_dcgmi_diag_r2_gpu0_fail.txt"
NVLINK_E = ROOT / "tests" / "data" / "nvidia_smi_nvlink" / "stas00_ml-engineering_debug_md_lines286-300_nvlink_e_h100.txt"


def _tool(bin_: Path, name: str, body: str) -> None:
    (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
    (bin_ / name).chmod(0o755)


def test_per_netdev_commands_run_on_each_rdma_netdev_and_optional_ones_only_when_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "cat").symlink_to("/bin/cat")
    _tool(bin_, "ibstat", f"exec cat {shlex.quote(str(ROCE / 'ibstat.out'))}")  # mlx5_0..7, all Ethernet
    _tool(bin_, "ibdev2netdev", "echo 'mlx5_0 port 1 ==> ens1f0np0 (Up)'; echo 'mlx5_1 port 1 ==> ens2f0np0 (Up)';"
                                " echo 'mlx5_9 port 1 ==> ib0 (Down)'; echo 'mlx5_2 port 1 ==> x;reboot (Up)'")
    _tool(bin_, "ethtool", 'echo "NIC statistics:"; echo "     rx_prio3_pause: 7"')
    _tool(bin_, "mlnx_qos", f"exec cat {shlex.quote(str(QOS))}")
    _tool(bin_, "dcgmi", f"exec cat {shlex.quote(str(DCGM))}")
    _tool(bin_, "nvidia-smi", f'[ "$1 $2" = "nvlink -e" ] && exec cat {shlex.quote(str(NVLINK_E))}; exit 9')
    monkeypatch.setenv("PATH", str(bin_))
    res = collect(tmp_path / "a", interval_s=0, deadline_s=60, collectors=_fast(10.0), host="h1")
    steps = {s.name: s for s in res.steps}
    assert steps["ethtool_stats"].argv == ["ethtool", "-S", "ens1f0np0,ens2f0np0,ib0"]  # never "x;reboot"
    text = (tmp_path / "a" / "ethtool-S.out").read_text()
    assert text.count("=== ens1f0np0 ===\n") == 2 and text.count("NIC statistics:") == 6  # read twice
    qos = (tmp_path / "a" / "mlnx_qos.out").read_text()  # RoCE ports only: ib0 is not an Ethernet port in ibstat
    assert "$ mlnx_qos -i ens1f0np0\n" in qos and "ens2f0np0" in qos and "ib0" not in qos
    assert (tmp_path / "a" / "nvidia-smi-nvlink-errors.out").read_text().count("Link 0:") >= 2
    assert "dcgmi_diag" not in steps and not (tmp_path / "a" / "dcgmi-diag.out").exists()
    d = triage([tmp_path / "a"])
    fmt = {f.path: f.format for f in d.files}
    assert fmt["ethtool-S.out"] == "ethtool_stats" and fmt["mlnx_qos.out"] == "mlnx_qos"
    assert fmt["nvidia-smi-nvlink-errors.out"] == "nvidia_smi_nvlink"

    res = collect(tmp_path / "b", interval_s=0, deadline_s=60, collectors=_fast(10.0), host="h1",
                  options=frozenset({"dcgm"}))
    assert {s.name: s.status for s in res.steps}["dcgmi_diag"] == "ok"
    assert (tmp_path / "b" / "dcgmi-diag.out").read_text() == DCGM.read_text()


def test_out_dash_prints_the_bundle_as_a_checked_block_and_writes_nothing(tmp_path: Path) -> None:
    from diagnose.collect.stream import Receiver, StreamError, decode, encode

    run_dir = tmp_path / "cwd"
    run_dir.mkdir()
    bin_ = _stubs(tmp_path)
    (bin_ / "sminfo").unlink()  # the one that hangs
    env = {**os.environ, "PATH": str(bin_)}
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "collect", "--out", "-", "--interval", "0",
                        "--timeout", "5"], capture_output=True, text=True, env=env, timeout=120, cwd=run_dir)
    assert r.returncode == 0, r.stderr
    rx = Receiver()
    for line in r.stdout.splitlines():
        rx.feed(f"{line}\n")
    assert rx.files is not None and rx.error is None
    assert rx.files["ibstat.out"] == IBSTAT.read_text() and json.loads(rx.files[MANIFEST])["kind"] == "diagnose-collect"
    assert list(run_dir.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["bin", "cwd"]

    lines = list(encode({"a.out": "x" * 5000}, "h1"))
    cut = Receiver()
    for line in lines[:-2] + lines[-1:]:  # a line lost in transit
        cut.feed(line)
    assert cut.files is None and "damaged" in (cut.error or "")
    evil = list(encode({"../../etc/cron.d/x": "boom"}, "h1"))
    with pytest.raises(StreamError, match="not a plain relative path"):
        decode(evil[1:-1], int(evil[-1].split()[2]), evil[-1].split()[3])


def test_triage_collect_triages_this_host_and_removes_the_bundle_unless_kept(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    bin_ = _stubs(tmp_path)
    (bin_ / "sminfo").unlink()  # the one that hangs
    env = {**os.environ, "PATH": str(bin_), "TMPDIR": str(tmp), "COLUMNS": "160"}
    cmd = [sys.executable, "-m", "diagnose.interfaces.cli", "triage", "--collect", "--collect-interval", "0",
           "--format", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["causes"][0]["id"] == "link.port_down"
    assert "removed after triage" in r.stderr and list(tmp.iterdir()) == []
    r = subprocess.run([*cmd, "--keep"], capture_output=True, text=True, env=env, timeout=180)
    [kept] = list(tmp.iterdir())
    assert r.returncode == 0 and f"kept in {kept}" in r.stderr and (kept / MANIFEST).is_file()
    from typer.testing import CliRunner

    from diagnose.interfaces.cli import app

    for args, msg in ((["--keep", str(kept)], "--keep goes with --collect"), ([], "or --collect")):
        bad = CliRunner().invoke(app, ["triage", *args])
        assert bad.exit_code == 2 and msg in bad.output


def test_a_manifest_that_is_no_regular_file_is_never_opened(tmp_path: Path) -> None:
    b = tmp_path / "b"
    (b / "h1").mkdir(parents=True)
    os.mkfifo(b / "h1" / MANIFEST)  # opening it would block until a writer came
    (b / "h1" / "ibstat.out").write_text(IBSTAT.read_text())
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "triage", str(b), "--format", "json"],
                       capture_output=True, text=True, timeout=120)  # a safety net: it returns at once
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["causes"][0]["id"] == "link.port_down"
    assert [f["problem"] for f in out["files"] if f["path"] == "h1/manifest.json"] == ["a FIFO, not read"]


def test_a_manifest_that_links_out_of_the_bundle_names_no_host(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / MANIFEST).write_text(json.dumps({"kind": "diagnose-collect", "host": "stolen-name"}))
    b = tmp_path / "b"
    (b / "h1").mkdir(parents=True)
    (b / "h1" / MANIFEST).symlink_to(outside / MANIFEST)
    (b / "h1" / "ibstat.out").write_text(IBSTAT.read_text())
    from diagnose.pipeline import triage

    d = triage([b])
    assert "stolen-name" not in {c.location.host for c in d.causes}


def test_a_host_without_gpu_or_rdma_tools_triages_to_nothing_of_the_communication_layer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A login node or a VM: ulimit and /dev/shm are read, nvidia-smi, ibstat and ibv_devinfo are missing. Triage says
    so and exits 2 (as for nothing recognised); a job log given beside it is evidence again."""
    from typer.testing import CliRunner

    from diagnose.interfaces.cli import app

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "bash").symlink_to("/bin/bash")
    monkeypatch.setenv("PATH", str(bin_))
    out = tmp_path / "b"
    res = collect(out, interval_s=0, deadline_s=30, collectors=_fast(), host="login01")
    status = {s.name: s.status for s in res.steps}
    assert status["ulimit"] == "ok" and {status[t] for t in ("nvidia_smi", "ibstat", "ibv_devinfo")} == {"missing"}
    r = CliRunner().invoke(app, ["triage", str(out)])
    assert r.exit_code == 2, r.output
    assert "nothing of the communication layer here: the collected host(s) login01 have no GPU or RDMA tool" in \
        " ".join(r.stderr.split())
    log = tmp_path / "nccl.log"
    log.write_text("gpu-a01:2210:2210 [0] NCCL INFO NET/IB : No device found.\n")
    assert CliRunner().invoke(app, ["triage", str(out), str(log)]).exit_code == 0
    assert CliRunner().invoke(app, ["triage", str(out), "--symptom", "NCCL timeout"]).exit_code == 0


def test_a_forged_manifest_whose_commands_are_no_list_is_read_as_naming_no_command(tmp_path: Path) -> None:
    from diagnose.collect import MANIFEST_KIND, hosts_without_comm_tools

    for commands in (5, "ibstat missing", {"ibstat": "missing"}, None):
        b = tmp_path / f"b{len(list(tmp_path.iterdir()))}"
        b.mkdir()
        (b / MANIFEST).write_text(json.dumps({"kind": MANIFEST_KIND, "host": "h1", "commands": commands}))
        (b / "ulimit.out").write_text("max locked memory       (kbytes, -l) 8192\n")
        assert hosts_without_comm_tools([b]) == []  # (no command recorded: not a host known to lack the tools)
        d = triage([b])
        assert [f.path for f in d.files] == ["ulimit.out"]
