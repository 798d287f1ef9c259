"""Hostile and odd input: special files, links, loops, depth, corrupt and compression-bomb archives, absurd numbers.
Every case ends with one clear line or a ``files`` problem, bounded memory and time, and the rest diagnosed."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from diagnose.bundle import BundleError
from diagnose.bundle.loader import LoadLimits, load_inputs
from diagnose.pipeline import triage

NCCL = "gpu-a01:1:1 [0] NCCL INFO NET/IB : No device found.\n"


def _problems(files) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {f.path: "; ".join(f.problems) for f in files if f.problems}


def test_only_regular_files_are_read_and_links_stay_inside(tmp_path: Path) -> None:
    b = tmp_path / "b"
    (b / "sub").mkdir(parents=True)
    (b / "nccl.log").write_text(NCCL)
    os.mkfifo(b / "pipe")
    (b / "to_pipe").symlink_to(b / "pipe")
    (b / "loop1").symlink_to(b / "loop2")
    (b / "loop2").symlink_to(b / "loop1")
    (b / "out").symlink_to(tmp_path)
    (b / "in").symlink_to(b / "nccl.log")
    (b / "dirlink").symlink_to(b / "sub")
    got = _problems(load_inputs([b]))
    assert got["pipe"] == "a FIFO, not read"
    assert got["to_pipe"] == "symlink to a FIFO, not followed"
    assert "loops" in got["loop1"] and "loops" in got["loop2"]
    assert got["out"] == "symlink pointing outside the bundle, not followed"
    assert got["dirlink"] == "symlink to a folder, not followed"
    assert "in" not in got and "nccl.log" not in got  # a link to a file of the bundle is read
    d = triage([b])
    assert any(c.id == "host.container_rdma_access" or c.id.startswith("nccl.") for c in d.causes)


def test_special_paths_given_by_name_are_refused_with_one_line(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    for bad, says in ((tmp_path / "fifo", "a FIFO"), (Path("/dev/zero"), "running system's /dev"),
                      (Path("/proc/self/status"), "running system's /proc"), ("", "empty path")):
        with pytest.raises(BundleError, match=says):
            load_inputs([bad])
    (tmp_path / "nccl.log").write_text(NCCL)  # beside good evidence, the refused path is a files entry
    got = _problems(load_inputs([tmp_path / "nccl.log", "/dev/zero"]))
    assert "not a capture" in got["/dev/zero"]
    with pytest.raises(BundleError, match="cannot read"):
        load_inputs(["x" * 5000])


def test_deep_folders_are_not_entered_and_said_so(tmp_path: Path) -> None:
    d = tmp_path / "b"
    deep = d / "/".join(["d"] * 80)
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("x\n")
    (d / "nccl.log").write_text(NCCL)
    got = _problems(load_inputs([d]))
    assert any("nested deeper than 64" in v for v in got.values())


def test_a_corrupt_gzip_keeps_what_came_before_and_a_bomb_is_cut(tmp_path: Path) -> None:
    big = (NCCL * 400_000).encode()  # 20 MB of log: decompressed in steps
    g = bytearray(gzip.compress(big))
    g[len(g) // 2] ^= 0xFF
    (tmp_path / "flip.log.gz").write_bytes(bytes(g))
    (tmp_path / "bomb.txt.gz").write_bytes(gzip.compress(b"a" * (200 << 20)))
    files = {f.path: f for f in load_inputs([tmp_path])}
    assert "what came before was read" in files["flip.log.gz"].problems[0] and files["flip.log.gz"].text
    assert "only its first part was read" in "; ".join(files["bomb.txt.gz"].problems)
    assert len(files["bomb.txt.gz"].text or "") <= LoadLimits().max_file_bytes


def test_archive_bombs_are_cut_by_ratio_and_the_budget_bounds_the_rest(tmp_path: Path) -> None:
    z = tmp_path / "bomb.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("nccl.log", NCCL)
        for i in range(3):
            zf.writestr(f"zeros{i}.txt", b"0" * (40 << 20))
    got = _problems(load_inputs([z]))
    assert all("compression ratio" in got[f"bomb.zip/zeros{i}.txt"] for i in range(3))
    t = tmp_path / "bomb.tar.gz"
    with tarfile.open(t, "w:gz") as tf:
        for i in range(3):
            data = b"0" * (40 << 20)
            info = tarfile.TarInfo(f"zeros{i}.txt")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    assert any("expands more than 100:1" in v for v in _problems(load_inputs([t])).values())
    # the budget: past it, files are listed, not read
    b = tmp_path / "many"
    b.mkdir()
    for i in range(4):
        (b / f"log{i}.txt").write_text(NCCL * 2000)
    small = LoadLimits(max_total_bytes=200_000)
    got = _problems(load_inputs([b], small))
    assert sum("read budget" in v for v in got.values()) >= 2


def test_absurd_numbers_do_not_stop_the_engine(tmp_path: Path) -> None:
    (tmp_path / "t.log").write_text(
        "#  Rank  0 Group  0 Pid   2210 on     node021 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
        "#  Rank  1 Group  0 Pid   2211 on     node022 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
        "   busbw #wrong\n"
        "   134217728      33554432     float     sum      -1   1040.6  128.98  inf      0   1041.2  128.91"
        "  112.79      0\n"
        "    67108864      16777216     float     sum      -1   1040.6  128.98  100000000000000000000000      0"
        "   1041.2  128.91  112.79      0\n")
    triage([tmp_path])  # no OverflowError, no durable-rules error 204


def test_a_rule_that_does_not_load_stops_triage_instead_of_dropping_its_cause(tmp_path: Path) -> None:
    import subprocess
    import sys

    pack = tmp_path / "pack"
    (pack / "rules" / "link").mkdir(parents=True)
    (pack / "rules" / "link" / "broken.yaml").write_text("id: site.link.broken\ntitle: [unclosed\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIAGNOSE_")}
    env.update(DIAGNOSE_RULES=str(pack), HOME=str(tmp_path))
    (tmp_path / "nccl.log").write_text(NCCL)
    r = subprocess.run([sys.executable, "-m", "diagnose.interfaces.cli", "triage", str(tmp_path / "nccl.log")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and "rule catalog has" in r.stderr and "broken.yaml" in r.stderr
    assert "Traceback" not in r.stderr
