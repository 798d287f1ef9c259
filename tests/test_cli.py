"""The CLI as a user meets it: exit codes, one-line errors, bad input, output formats."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parent.parent
NCCL_LINES = "".join(
    f"gpu-a01:1234:1234 [{i}] NCCL INFO Channel 0{i}/0 : {i}[{i}] -> {i + 8}[{i}] [send] via NET/Socket/0\n" for i in range(4)
) + "gpu-a01:1234:1234 [0] NCCL INFO Using network Socket\n"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env, timeout=120)


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    r = run("triage", str(tmp_path / "nope"))
    assert r.returncode == 2
    assert "no such file or folder" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_empty_folder_is_a_usage_error(tmp_path: Path) -> None:
    r = run("triage", str(tmp_path))
    assert r.returncode == 2
    assert "no readable file" in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_cause_is_a_usage_error() -> None:
    r = run("rules", "show", "link.no_such_thing")
    assert r.returncode == 2 and "unknown cause id" in r.stderr


def test_bad_option_is_a_usage_error(tmp_path: Path) -> None:
    r = run("triage", str(tmp_path), "--format", "yaml")
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.slow
def test_binary_and_unknown_files_are_listed_and_the_rest_is_diagnosed(tmp_path: Path) -> None:
    (tmp_path / "core.bin").write_bytes(b"\x7fELF\x00\x00\x01\x02" * 100)
    (tmp_path / "notes.txt").write_text("lunch at noon\nnothing to see\n")
    (tmp_path / "job.log").write_text(NCCL_LINES)
    r = run("triage", str(tmp_path), "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    files = {f["path"]: f for f in d["files"]}
    assert files["core.bin"]["format"] == "unreadable" and "binary" in files["core.bin"]["problem"]
    assert files["notes.txt"]["format"] == "unknown"
    assert files["job.log"]["format"] == "nccl_log" and files["job.log"]["records"] == 5
    assert d["causes"][0]["id"] == "nccl.socket_fallback"


@pytest.mark.slow
def test_truncated_and_gzipped_logs(tmp_path: Path) -> None:
    (tmp_path / "a.log.gz").write_bytes(gzip.compress(NCCL_LINES.encode())[:-12])
    (tmp_path / "b.log").write_text(NCCL_LINES[:-20])
    r = run("triage", str(tmp_path), "--format", "json")
    assert r.returncode == 0, r.stderr
    files = {f["path"]: f for f in json.loads(r.stdout)["files"]}
    assert "gzip" in files["a.log.gz"]["problem"]
    assert files["b.log"]["records"] >= 4


@pytest.mark.slow
def test_archive_with_parent_paths_is_not_extracted(tmp_path: Path) -> None:
    arc = tmp_path / "bundle.tar.gz"
    with tarfile.open(arc, "w:gz") as tf:
        for name, data in (("../../evil.log", b"x\n"), ("ok/job.log", NCCL_LINES.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    r = run("triage", str(arc), "--format", "json")
    assert r.returncode == 0, r.stderr
    files = {f["path"]: f for f in json.loads(r.stdout)["files"]}
    evil = [f for p, f in files.items() if "evil" in p]
    assert evil and "unsafe archive path" in evil[0]["problem"]
    assert files["bundle.tar.gz/ok/job.log"]["format"] == "nccl_log"
    assert not (tmp_path.parent / "evil.log").exists()


@pytest.mark.slow
def test_large_file_is_read_head_and_tail(tmp_path: Path) -> None:
    big = tmp_path / "huge.log"
    with big.open("w") as fh:
        fh.write(NCCL_LINES)
        line = "gpu-a01:1234:1234 [0] NCCL INFO some chatter that repeats a lot in a long run\n"
        fh.write(line * (3 * 1024 * 1024 // len(line)))
        fh.write("[2024-01-01 00:00:00] gpu-a01:1234:1234 [0] misc/shmutils.cc:90 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888)\n")
    r = run("triage", str(tmp_path), "--format", "json", "--max-file-size", "1")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert "only the first and last" in d["files"][0]["problem"]
    assert any(c["id"] == "host.shm_too_small" for c in d["causes"])


@pytest.mark.slow
def test_json_output_is_byte_identical_and_matches_the_schema(tmp_path: Path) -> None:
    (tmp_path / "job.log").write_text(NCCL_LINES)
    a = run("triage", str(tmp_path), "--format", "json", "--symptom", "allreduce slow, busbw 3 GB/s")
    b = run("triage", str(tmp_path), "--format", "json", "--symptom", "allreduce slow, busbw 3 GB/s")
    assert a.returncode == 0 and a.stdout == b.stdout
    schema = json.loads(run("schema").stdout)
    jsonschema.validate(json.loads(a.stdout), schema)
    with pytest.raises(jsonschema.ValidationError):
        bad = json.loads(a.stdout)
        bad["causes"][0]["score"] = 1.5
        jsonschema.validate(bad, schema)


@pytest.mark.slow
def test_markdown_and_text_render_the_same_diagnosis(tmp_path: Path) -> None:
    (tmp_path / "job.log").write_text(NCCL_LINES)
    md = run("triage", str(tmp_path), "--format", "markdown")
    txt = run("triage", str(tmp_path))
    assert md.returncode == txt.returncode == 0
    assert "`nccl.socket_fallback`" in md.stdout and "job.log:1" in md.stdout
    assert "nccl.socket_fallback" in txt.stdout and "playbooks/nccl/socket_fallback.md" in txt.stdout


def test_rules_list_json_and_playbook() -> None:
    r = run("rules", "list", "--format", "json")
    rows = json.loads(r.stdout)
    assert {"id", "title", "severity", "status", "playbook"} == set(rows[0])
    assert any(x["id"] == "link.bad_cable" for x in rows)
    p = run("playbook", "link.bad_cable")
    assert p.returncode == 0 and "Confirm" in p.stdout


def test_rules_lint_names_file_and_line_of_a_malformed_rule(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(ROOT / "rules", tmp_path / "rules")
    shutil.copytree(ROOT / "playbooks", tmp_path / "playbooks")
    bad = tmp_path / "rules" / "link" / "bad_cable.yaml"
    bad.write_text(bad.read_text().replace("severity: high", "severity: catastrophic"))
    env = {**os.environ, "DIAGNOSE_CATALOG": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "rules", "lint"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 1
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("rules/link/bad_cable.yaml:"))
    lineno = int(line.split(":")[1])
    assert bad.read_text().splitlines()[lineno - 1].startswith("severity:")


def test_rules_lint_is_clean_on_the_shipped_catalog() -> None:
    r = run("rules", "lint")
    assert r.returncode == 0, r.stdout + r.stderr


def test_nothing_recognised_exits_2_after_printing_the_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("lunch at noon\n")
    r = run("triage", str(tmp_path), "--format", "json")
    assert r.returncode == 2 and "nothing in the input was recognised" in r.stderr
    assert json.loads(r.stdout)["files"][0]["format"] == "unknown"
    # a symptom is evidence: the same folder with one is a normal run
    assert run("triage", str(tmp_path), "--symptom", "NCCL WARN NET/IB : No device found").returncode == 0


def test_fail_on_gates_a_script_on_the_verdict() -> None:
    bundle = str(ROOT / "fixtures" / "link" / "bad_cable" / "positive-symbol-errors-rising")
    assert run("triage", bundle, "--fail-on", "confirmed", "--format", "json").returncode == 3
    healthy = sorted((ROOT / "fixtures" / "healthy").iterdir())[0]
    assert run("triage", str(healthy), "--fail-on", "confirmed", "--format", "json").returncode == 0
    assert run("triage", bundle, "--fail-on", "maybe").returncode == 2


def test_version_help_and_global_options_after_the_subcommand() -> None:
    v = run("--version")
    assert v.returncode == 0 and v.stdout.startswith("diagnose ") and "rules matched by" in v.stdout
    assert run("-h").returncode == 0 and "Usage" in run("-h").stdout
    assert run("triage", "-h").returncode == 0
    r = run("playbook", "host.gdr_unavailable", "--log-level", "debug")
    assert r.returncode == 0 and "GPUDirect" in r.stdout
    assert run("--log-level=info", "playbook", "host.gdr_unavailable").returncode == 0


def test_piped_text_uses_columns_else_100(tmp_path: Path) -> None:
    (tmp_path / "job.log").write_text(NCCL_LINES)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "triage", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert r.returncode == 0 and max(len(ln) for ln in r.stdout.splitlines()) <= 100
    wide = run("triage", str(tmp_path))
    assert max(len(ln) for ln in wide.stdout.splitlines()) > 100


def test_reading_incidents_never_creates_a_store_and_says_where_it_looks(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIAGNOSE_", "XDG_"))}
    env.update(HOME=str(tmp_path / "home"), COLUMNS="160")
    work = tmp_path / "work"
    work.mkdir()
    cmd = [sys.executable, "-m", "diagnose.interfaces.cli"]
    r = subprocess.run([*cmd, "incidents", "list"], capture_output=True, text=True, cwd=work, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"{tmp_path}/home/.local/share/diagnose/diagnose.db" in r.stdout and "not created yet" in r.stdout
    assert not (tmp_path / "home").exists() and list(work.iterdir()) == []
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    r = subprocess.run([*cmd, "incidents", "show", "1"], capture_output=True, text=True, cwd=work, env=env,
                       timeout=120)
    assert r.returncode == 2 and "xdg/diagnose/diagnose.db" in r.stderr and not (tmp_path / "xdg").exists()
    r = subprocess.run([*cmd, "feedback", "report"], capture_output=True, text=True, cwd=work, env=env, timeout=120)
    assert r.returncode == 0 and not (tmp_path / "xdg").exists()


def test_a_piped_playbook_is_its_markdown_exactly() -> None:
    from diagnose.catalog.loader import load_catalog

    body = load_catalog().playbooks["link.bad_cable"].body
    r = run("playbook", "link.bad_cable")
    assert r.returncode == 0 and r.stdout == body.rstrip("\n") + "\n"
    shown = run("rules", "show", "link.bad_cable").stdout
    assert "LinkBW\\*1e9\\*720\\*1e-14" in shown  # markdown that renders the stars, not emphasis


def test_on_a_terminal_commands_of_a_playbook_are_never_wrapped(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from diagnose.catalog.loader import load_catalog
    from diagnose.interfaces import cli

    body = load_catalog().playbooks["link.bad_cable"].body
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    cli._print_markdown(body)
    out = capsys.readouterr().out
    fenced, inside = [], False
    for ln in body.split("\n"):
        if ln.strip().startswith("```"):
            inside = not inside
        elif inside and ln.strip():
            fenced.append(ln.strip())
    assert fenced and all(any(cmd in o for o in out.splitlines()) for cmd in fenced)
    assert any(len(cmd) > 80 for cmd in fenced)  # the check bites: some commands are wider than the terminal


def test_topology_lists_a_host_port_that_triage_finds_down() -> None:
    bundle = ROOT / "fixtures" / "link" / "port_down" / "positive-hca-polling-one-host"
    tri = json.loads(run("triage", str(bundle), "--format", "json").stdout)
    loc = next(c["location"] for c in tri["causes"] if c["id"] == "link.port_down")
    topo = run("topology", str(bundle), "--format", "json")
    assert topo.returncode == 0, topo.stderr
    down = json.loads(topo.stdout)["host_ports_down"]
    assert any(d.startswith(f"{loc['host']} {loc['device']} port {loc['port']}:") for d in down), down


@pytest.mark.slow
def test_every_line_of_the_readme_tour_runs_as_pasted(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Use", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [ln for ln in block.splitlines() if ln.strip()]
    assert len(lines) >= 10
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "HOME": str(tmp_path), "COLUMNS": "100"}
    for ln in lines:
        r = subprocess.run(["bash", "-o", "pipefail", "-c", ln],
                           capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        ok = r.returncode in ((0, 141) if "| head" in ln else (0,))  # head closing the pipe early is fine
        assert ok and "Traceback" not in r.stderr, (ln, r.returncode, r.stderr[-500:])
        if "--fail-on" in ln:
            assert r.stdout.rstrip().endswith("exit 3")
