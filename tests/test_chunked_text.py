"""A text past the streaming size held in memory (an archive member) is parsed in chunks by the line parsers, as
the same file streamed from disk is: the same records, problems and findings either way."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from diagnose import parsers, pipeline
from diagnose.bundle import LoadLimits
from diagnose.bundle.sniff import sniff_file
from diagnose.evidence.frames import build_frames

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(stream_bytes=8192, chunk_bytes=4096)


def _streamable_samples() -> list[Path]:
    """Real samples (tests/data, fixtures) of more than a few chunks that a line parser reads."""
    out = []
    for p in sorted((ROOT / "tests" / "data").rglob("*")) + sorted((ROOT / "fixtures").rglob("*")):
        if not p.is_file() or p.suffix in (".gz", ".zip", ".pkl", ".md", ".yaml", ".json") or p.stat().st_size < 20_000:
            continue
        try:
            text = p.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        fmts = sniff_file(p.name, text[:65536]).formats
        if fmts and any(getattr(parsers.by_format(f), "STREAMABLE", False) for f in fmts):
            out.append(p)
    return out[::4]  # a quarter of them: every format among them, in seconds


def _said(ev: pipeline.Evidence, prefix: str) -> list[str]:
    """Everything the evidence holds, as text, with the archive's name taken out of the paths: each table's frame
    (the rows, whichever chunks they came in), the files table and the findings."""
    frames = build_frames(ev.records)
    tables = [f"{name}\n{frames[name].drop(columns=['_lines'], errors='ignore').to_csv()}" for name in sorted(frames)]
    files = [repr((f.path, sorted(f.format.split("+")), f.records, f.problem)) for f in ev.files]  # (formats that
    # sniff alike are named in an order that depends on how much of the head it saw: 256 KiB of a streamed file)
    return [s.replace(prefix, "") for s in [*tables, *files, *(f.model_dump_json() for f in ev.findings)]]


SAMPLES = _streamable_samples()


def test_there_are_samples_to_compare() -> None:
    assert len(SAMPLES) >= 10


@pytest.mark.parametrize("path", SAMPLES, ids=[str(p.relative_to(ROOT)) for p in SAMPLES])
def test_an_archive_member_past_the_streaming_size_gives_what_the_file_streamed_from_disk_gives(
        path: Path, tmp_path: Path) -> None:
    d = tmp_path / "b"
    d.mkdir()
    (d / path.name).write_bytes(path.read_bytes())
    with zipfile.ZipFile(tmp_path / "b.zip", "w") as zf:
        zf.write(d / path.name, path.name)
    on_disk = pipeline.gather([d], limits=LoadLimits(**SMALL))
    member = pipeline.gather([tmp_path / "b.zip"], limits=LoadLimits(**SMALL))
    assert _said(member, "b.zip/") == _said(on_disk, "")


def test_a_chunk_without_lines_of_a_parser_adds_no_nothing_found_problem_to_a_file_that_has_them(tmp_path: Path) -> None:
    """A Fabric Manager log streamed in chunks, some of them with no Fabric Manager line: the file has its lines, so
    the files table says nothing of a chunk's "no fabric manager lines found" (as for the file in one piece)."""
    sample = ROOT / "tests/data/fabric_manager_log/gpud_fabric-manager.0.lines185-340_errors_and_startup.log"
    d = tmp_path / "b"
    d.mkdir()
    filler = "".join(f"unrelated line {i} of another tool's output\\n" for i in range(400))  # whole chunks of it
    (d / "fabricmanager.log").write_text(sample.read_text() + filler + sample.read_text())
    whole = pipeline.gather([d], limits=LoadLimits())
    streamed = pipeline.gather([d], limits=LoadLimits(**SMALL))
    (w,), (s,) = whole.files, streamed.files
    assert w.records == s.records > 0 and w.format == s.format == "fabric_manager_log"
    assert s.problem == w.problem is None
