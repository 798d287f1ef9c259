"""``diagnose collect --slurm-job`` / ``--hosts``: the collector run on each fake host through stub launchers, one
bundle assembled with a folder per host and the fabric once, hosts that fail recorded while the rest goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.collect import MANIFEST
from diagnose.collect.fanout import CollectError, Plan, collect_job, hosts_of, pick_via, slurm_nodes
from diagnose.pipeline import triage
from tests.collect.cluster import Cluster, port_down_hosts


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    c = Cluster(tmp_path / "cluster")
    monkeypatch.setenv("PATH", c.path)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    return c


def _cli(*args: str, path: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path, "COLUMNS": "200"}
    env.pop("SLURMD_NODENAME", None)
    return subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "collect", *args], capture_output=True,
                          text=True, env=env, timeout=timeout)


def _top(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / MANIFEST).read_text())


def test_a_slurm_job_is_collected_per_node_and_the_fabric_once_then_triaged_to_the_sick_host(
        cluster: Cluster, tmp_path: Path) -> None:
    port_down_hosts(cluster)
    cluster.unreachable("mike")
    cluster.job("4412", "kilo,lima,mike")
    out = tmp_path / "b"
    r = _cli("--slurm-job", "4412", "--out", str(out), "--interval", "0", "--timeout", "30", path=cluster.path)
    assert r.returncode == 0, r.stderr
    [srun] = [a for a in cluster.calls("srun") if "--nodelist=kilo,lima,mike" in a]
    assert srun[:3] == ["--overlap", "--jobid", "4412"] and "-N3" in srun and "--ntasks-per-node=1" in srun
    top = _top(out)
    outcome = {h["host"]: h["status"] for h in top["hosts"]}
    assert top["kind"] == "diagnose-collect-job" and top["slurm_job"] == "4412" and top["via"] == "srun"
    assert outcome == {"kilo": "ok", "lima": "ok", "mike": "failed"}
    assert "No route to host" in next(h["note"] for h in top["hosts"] if h["host"] == "mike")
    assert sorted(p.name for p in out.iterdir()) == ["fabric", "kilo", "lima", "manifest.json"]  # no folder for mike
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "cluster"]  # nothing written outside --out
    for host in ("kilo", "lima"):
        man = json.loads((out / host / MANIFEST).read_text())
        assert man["host"] == host and man["slurm_node"] == host
        assert {c["name"]: c["status"] for c in man["commands"]}["ibstat"] == "ok"
    # the fabric was read once, on kilo (the host that has ibnetdiscover), smpquery on the job's own ports' LIDs
    assert top["fabric"]["host"] == "kilo" and top["fabric"]["status"] == "ok"
    fab = json.loads((out / "fabric" / MANIFEST).read_text())
    assert fab["scope"] == "fabric"
    assert {c["name"]: c["status"] for c in fab["commands"]}["ibnetdiscover"] == "ok"
    assert "# SL2VL table: Lid 322" in (out / "fabric" / "smpquery-sl2vl.out").read_text()
    assert [a for a in cluster.calls("srun") if "--nodelist=kilo" in a and "--fabric" in a]
    assert "mike: failed" in r.stderr and "next: diagnose triage" in r.stderr

    d = triage([out])
    assert d.causes[0].id == "link.port_down" and d.causes[0].location.host == "lima"  # from the manifest
    assert not [f.path for f in d.files if f.path.endswith(MANIFEST)]
    hosts = {f.path.split("/")[0] for f in d.files}
    assert hosts == {"kilo", "lima", "fabric", "mike"}
    [mike] = [f for f in d.files if f.path.startswith("mike")]  # the host not collected is said, not left out
    assert mike.path == "mike/" and mike.records == 0
    assert mike.problem is not None and mike.problem.startswith("collect on mike: failed (") and \
        "No route to host" in mike.problem


def test_hosts_through_pdsh_and_clush_land_in_one_folder_each(cluster: Cluster, tmp_path: Path) -> None:
    port_down_hosts(cluster)
    for via in ("pdsh", "clush"):
        out = tmp_path / via
        res = collect_job(out, ["kilo", "lima"], Plan(via=via, interval_s=0, host_timeout_s=30), fabric_from=None)
        assert [(h.host, h.status, h.folder) for h in res.hosts] == [("kilo", "ok", "kilo"), ("lima", "ok", "lima")]
        assert json.loads((out / "lima" / MANIFEST).read_text())["host"] == "lima"
        assert (out / "lima" / "dmesg.out").read_text().startswith("[Sun Jun  1")
        assert _top(out)["fabric"] is None and not (out / "fabric").exists()
        [call] = cluster.calls(via)[-1:]
        assert call[call.index("-w") + 1] == "kilo,lima" and call[call.index("-f") + 1] == "2"


def test_ssh_hosts_go_in_groups_of_fanout_and_a_failing_one_is_recorded(cluster: Cluster, tmp_path: Path) -> None:
    port_down_hosts(cluster)
    cluster.unreachable("mike")
    cluster.host("nova", diagnose="echo 'diagnose: command not found' >&2; exit 127")
    out = tmp_path / "b"
    res = collect_job(out, ["kilo", "mike", "nova", "lima"], Plan(via="ssh", interval_s=0, host_timeout_s=30,
                                                                 fanout=2), fabric_from="lima")
    status = {h.host: (h.status, h.note) for h in res.hosts}
    assert status["kilo"][0] == status["lima"][0] == "ok"
    assert status["mike"] == ("failed", "ssh: connect to host mike port 22: No route to host")
    assert status["nova"] == ("failed", "diagnose: command not found")
    assert len(cluster.calls("ssh")) == 5  # one per host, and one for the fabric
    # the fabric from a host without the fabric tools: recorded as missing, not an error
    assert res.fabric is not None and res.fabric.host == "lima" and res.fabric.status == "ok"
    fab = json.loads((out / "fabric" / MANIFEST).read_text())
    assert {c["name"]: c["status"] for c in fab["commands"]}["ibnetdiscover"] == "missing"


def test_a_damaged_answer_is_refused_not_stored(cluster: Cluster, tmp_path: Path) -> None:
    cluster.host("kilo", diagnose="echo '==diagnose-collect== begin 1 kilo'; echo 'H4sIAAAA'; "
                                  "echo '==diagnose-collect== end 999 00'")
    cluster.host("lima", diagnose="echo 'Last login: Mon'; echo '==diagnose-collect== begin 1 lima'; echo 'H4sI'")
    out = tmp_path / "b"
    res = collect_job(out, ["kilo", "lima"], Plan(via="ssh", host_timeout_s=30), fabric_from=None)
    status = {h.host: (h.status, h.note or "") for h in res.hosts}
    assert status["kilo"][0] == "failed" and "damaged" in status["kilo"][1]
    assert status["lima"][0] == "failed" and "without an answer" in status["lima"][1]
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json"]


@pytest.mark.slow
def test_a_host_that_hangs_is_cut_at_its_bound_and_the_others_are_kept(cluster: Cluster, tmp_path: Path) -> None:
    port_down_hosts(cluster)
    cluster.hanging("mike")
    cluster.job("4412", "kilo,lima,mike")
    out = tmp_path / "b"
    for via, hosts in (("srun", slurm_nodes("4412")), ("ssh", ["kilo", "lima", "mike"])):
        res = collect_job(out / via, hosts, Plan(via=via, job="4412", interval_s=0, host_timeout_s=10, grace_s=20),
                          fabric_from=None)
        status = {h.host: (h.status, h.note or "") for h in res.hosts}
        assert status["kilo"][0] == status["lima"][0] == "ok", status
        assert status["mike"][0] == "timeout" and "no answer within 30 s" in status["mike"][1]
        assert _top(out / via)["hosts"][2]["status"] == "timeout"


def test_the_whole_runs_bound_skips_the_groups_not_started(cluster: Cluster, tmp_path: Path) -> None:
    port_down_hosts(cluster)
    res = collect_job(tmp_path / "b", ["kilo", "lima"], Plan(via="ssh", deadline_s=0.0, fanout=1),
                      fabric_from="kilo")
    assert [h.status for h in res.hosts] == ["skipped", "skipped"]
    assert res.fabric is not None and res.fabric.status == "skipped"
    assert not cluster.calls("ssh")


def test_slurm_node_lists_and_their_errors(cluster: Cluster) -> None:
    cluster.job("4412", "gpu-a[001-003],gpu-b7")
    cluster.job("4413", "(null)", state="PENDING")
    assert slurm_nodes("4412") == ["gpu-a001", "gpu-a002", "gpu-a003", "gpu-b7"]
    with pytest.raises(CollectError, match="job 4413 is PENDING, not RUNNING"):
        slurm_nodes("4413")
    with pytest.raises(CollectError, match="Invalid job id specified"):
        slurm_nodes("9999")
    with pytest.raises(CollectError, match="takes a job id"):
        slurm_nodes("4412; rm -rf /")
    (Path(cluster.path) / "scontrol").unlink()
    assert slurm_nodes("4412") == ["gpu-a001", "gpu-a002", "gpu-a003", "gpu-b7"]  # squeue's %N
    with pytest.raises(CollectError, match="job 4413 is PENDING"):
        slurm_nodes("4413")
    (Path(cluster.path) / "squeue").unlink()
    env = {"SLURM_JOB_ID": "4412", "SLURM_JOB_NODELIST": "gpu-c[07-08]"}
    assert slurm_nodes("4412", env) == ["gpu-c07", "gpu-c08"]  # inside the allocation, without scontrol
    with pytest.raises(CollectError, match="neither scontrol nor squeue"):
        slurm_nodes("4414", env)


def test_host_lists_and_launcher_choice() -> None:
    assert hosts_of("gpu-a[001-002],gpu-a001,gpu-b7") == ["gpu-a001", "gpu-a002", "gpu-b7"]
    with pytest.raises(CollectError, match="--hosts: .*start after end"):
        hosts_of("gpu-a[009-001]")
    with pytest.raises(CollectError, match="is not a host name"):
        hosts_of("gpu-a1,$(reboot)")
    assert pick_via(None, lambda t: t if t in ("pdsh", "ssh") else None) == "pdsh"
    assert pick_via(None, lambda t: t if t == "ssh" else None) == "ssh"
    with pytest.raises(CollectError, match="--via clush: clush is not on PATH"):
        pick_via("clush", lambda t: None)
    with pytest.raises(CollectError, match="none of clush, pdsh or ssh"):
        pick_via(None, lambda t: None)


def test_the_cli_refuses_what_does_not_go_together(cluster: Cluster, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from diagnose.interfaces.cli import app

    out = str(tmp_path / "b")
    for args, msg in ((["--slurm-job", "1", "--hosts", "a"], "not both"),
                      (["--hosts", "a", "--pid", "1"], "are for one host"),
                      (["--hosts", "gpu[3-1]"], "start after end"),
                      (["--slurm-job", "77"], "Invalid job id"),
                      (["--hosts", "a", "--remote-diagnose", "'x"], "quotation"),
                      (["--ports", "12/1"], "--ports goes with --fabric"),
                      (["--fabric", "--ports", "x/1"], "LID/port pairs")):
        r = CliRunner().invoke(app, ["collect", "--out", out, *args])
        assert r.exit_code == 2 and msg in r.output, (args, r.output)
        assert not Path(out).exists()
    r = CliRunner().invoke(app, ["collect", "--out", out, "--hosts", "mike", "--via", "ssh", "--timeout", "30"])
    assert r.exit_code == 1 and "no host answered" in r.output
    assert json.loads((Path(out) / MANIFEST).read_text())["hosts"][0]["status"] == "failed"


def test_the_fabric_alone_from_this_host_with_ibdiagnet_into_its_own_folder(cluster: Cluster, tmp_path: Path) -> None:
    port_down_hosts(cluster)
    log = Path(__file__).resolve().parent.parent / "data" / "ibdiagnet_log" / \
        "kobibar_OpenAI.recipe.md@c314151_lines237-241_rail_validation.log"
    hbin = cluster.root / "hosts" / "kilo" / "bin"
    (hbin / "ibdiagnet").write_text(f'#!/bin/sh\n[ "$1" = "-o" ] || exit 3\nexec cat {log} > "$2/ibdiagnet2.log"\n')
    (hbin / "ibdiagnet").chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "f"
    env_path = f"{hbin}:{cluster.path}"
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "collect", "--fabric", "--ibdiagnet", "--out",
                        str(out), "--timeout", "30"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PATH": env_path, "TMPDIR": str(tmp), "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    man = json.loads((out / MANIFEST).read_text())
    steps = {c["name"]: c for c in man["commands"]}
    assert man["scope"] == "fabric" and steps["ibdiagnet"]["status"] == "ok"
    assert (out / "ibdiagnet2" / "ibdiagnet2.log").read_text() == log.read_text()
    assert steps["smpquery_vlarb"]["argv"][:2] == ["smpquery", "vlarb"] and "322 1" in steps["smpquery_vlarb"]["argv"][2]
    assert list(tmp.iterdir()) == []  # ibdiagnet's own folder was a temporary one, removed
    d = triage([out])
    assert {f.path: f.format for f in d.files}["ibdiagnet2/ibdiagnet2.log"] == "ibdiagnet_log"


def test_the_fabric_from_a_host_outside_the_job_goes_by_ssh_and_local_reads_it_here(cluster: Cluster,
                                                                                    tmp_path: Path) -> None:
    port_down_hosts(cluster)
    cluster.host("ufm01", ibnetdiscover=Path(__file__).resolve().parent.parent / "data" / "ibnetdiscover" /
                 "ibnetdiscover_ports_test.out")
    cluster.job("4412", "kilo,lima")
    plan = Plan(via="srun", job="4412", interval_s=0, host_timeout_s=30)
    res = collect_job(tmp_path / "a", ["kilo", "lima"], plan, fabric_from="ufm01")
    assert res.fabric is not None and (res.fabric.host, res.fabric.status) == ("ufm01", "ok")
    assert [c[-2] for c in cluster.calls("ssh")] == ["ufm01"] and "--fabric" in cluster.calls("ssh")[0][-1]
    assert (tmp_path / "a" / "fabric" / "ibnetdiscover.out").is_file()
    res = collect_job(tmp_path / "b", ["kilo"], plan, fabric_from="local")
    assert res.fabric is not None and res.fabric.status == "ok" and res.fabric.folder == "fabric"
    man = json.loads((tmp_path / "b" / "fabric" / MANIFEST).read_text())
    assert man["scope"] == "fabric" and {c["status"] for c in man["commands"]} == {"missing"}  # no tools here


def test_an_interrupted_fan_out_stops_its_launchers(cluster: Cluster, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cluster.hanging("mike")
    pid_file = cluster.root / "hosts" / "mike" / "pid"
    real_wait = subprocess.Popen.wait

    raised: list[bool] = []

    def interrupted(self: subprocess.Popen[str], timeout: float | None = None) -> int:
        if timeout is None or raised:  # only the fan-out's first wait is interrupted, not the kill's own
            return real_wait(self, timeout)
        raised.append(True)
        for _ in range(1200):  # until the stub launcher is up (a safety bound, never reached when it starts)
            if pid_file.is_file() and pid_file.read_text():
                break
            real_wait_or_none(self)
        raise KeyboardInterrupt

    def real_wait_or_none(p: subprocess.Popen[str]) -> None:
        try:
            real_wait(p, timeout=0.1)
        except subprocess.TimeoutExpired:
            pass

    monkeypatch.setattr(subprocess.Popen, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        collect_job(tmp_path / "b", ["mike"], Plan(via="ssh", host_timeout_s=600), fabric_from=None)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)  # the launcher was killed (and reaped), not left running
