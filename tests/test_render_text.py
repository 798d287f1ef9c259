"""The terminal rendering of a diagnosis: what an operator reads first."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.models.diagnosis import FileEntry
from diagnose.pipeline import triage
from diagnose.render import render_text
from diagnose.render.text import FILES_LISTED

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/link/bad_cable/positive-fattree64-hca-end"


def _with_files(n_hosts: int) -> object:
    d = triage([FIXTURE])
    files = [FileEntry(path=f"gpu-a{h:04d}/{name}", format=fmt, records=8)
             for h in range(n_hosts) for name, fmt in (("ibstat.txt", "ibstat"), ("dmesg.txt", "dmesg"))]
    files[7] = FileEntry(path="gpu-a0003/dmesg.txt", format="dmesg", records=0, problem="truncated: cut mid-line")
    files.append(FileEntry(path="core.bin", format="unreadable", records=0, problem="binary file"))
    files.append(FileEntry(path="notes.txt", format="unknown", records=0))
    return d.model_copy(update={"files": files})


def test_a_small_bundle_lists_every_file() -> None:
    d = _with_files(FILES_LISTED // 2 - 2)
    out = render_text(d, width=160, color=False)
    assert "gpu-a0000/ibstat.txt" in out and "gpu-a0017/dmesg.txt" in out


def test_a_large_bundle_lists_the_files_with_a_problem_and_counts_the_rest() -> None:
    d = _with_files(4096)
    out = render_text(d, width=160, color=False)
    files = out[out.index("Files"):]
    assert "gpu-a0003/dmesg.txt" in files and "truncated: cut mid-line" in files  # the problem, by name
    assert "core.bin" in files and "notes.txt" in files  # files not read, by name
    assert "gpu-a0000/ibstat.txt" not in files
    assert "4,096 file(s)" in files and "4,095 file(s)" in files  # ibstat, and dmesg less the listed one
    assert "32,768" in files  # the ibstat records counted
    assert "8,194 files" in files and "--verbose" in files
    assert len(out.splitlines()) < 200


def test_verbose_lists_every_file_of_a_large_bundle() -> None:
    d = _with_files(100)
    out = render_text(d, width=160, color=False, verbose=True)
    assert all(f"gpu-a{h:04d}/ibstat.txt" in out for h in range(100))


def _bundles(positive_only: bool) -> list[Path]:
    root = Path(__file__).resolve().parents[1] / "fixtures"
    return sorted(p.parent for p in root.rglob("expect.yaml")
                  if not positive_only or p.parent.name.startswith("positive"))


@pytest.mark.parametrize("positive_only", [True, pytest.param(False, marks=pytest.mark.slow)],
                         ids=["positive fixtures", "every fixture and field case"])
def test_at_80_columns_every_cited_line_is_intact_and_no_token_is_broken(positive_only: bool, diagnosed) -> None:  # type: ignore[no-untyped-def]
    bundles = _bundles(positive_only)
    assert len(bundles) >= (60 if positive_only else 220)
    broken = []
    for b in bundles:
        d = diagnosed(b)
        out = render_text(d, width=80, color=False)
        flat = " ".join(out.split())
        shown = [c for c in d.causes if c.verdict == "confirmed"] or d.causes[:1]
        for c in shown:
            for e in c.evidence[:6]:
                if " ".join(e.text.split()) not in flat or f"{e.file}:{e.line}" not in out:
                    broken.append((b.name, e.file, e.line))
        # only a token longer than the line may pass 80 columns
        too_long = [ln for ln in out.splitlines() if len(ln) > 80 and " " in ln.strip()]
        if too_long:
            broken.append((b.name, "wide", too_long[0][:60]))
    assert not broken, broken[:5]


def test_brackets_in_quoted_evidence_are_not_markup() -> None:
    from diagnose.models.diagnosis import CauseResult, Diagnosis, EvidenceRef, Location

    line = "[rank10]:[E ProcessGroupNCCL.cpp:616] [Rank 10] Watchdog caught collective operation timeout [send]"
    d = triage([FIXTURE])
    c = d.causes[0].model_copy(update={"evidence": [EvidenceRef(file="job.log", line=7, text=line, finding="x")],
                                       "summary": "[bold]not markup[/bold] on [rank3]"})
    d = d.model_copy(update={"causes": [c]})
    assert isinstance(d, Diagnosis) and isinstance(c, CauseResult) and Location
    for width in (80, 160):
        out = render_text(d, width=width, color=False)
        flat = "".join(out.split())
        assert "".join(line.split()) in flat.replace("│", "")
        assert "[bold]notmarkup[/bold]on[rank3]" in flat.replace("│", "")
