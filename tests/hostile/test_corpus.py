"""Every case of the hostile corpus through ``diagnose triage`` and ``diagnose evidence``: exit 0 or 2, the limit
or refusal it hits said in the files table (or in the one error line), no traceback, no internal error, and on
stderr nothing but one line per problem."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner, Result

from diagnose.bundle import hostile
from diagnose.interfaces.cli import app


def _run(args: list[str]) -> Result:
    return CliRunner().invoke(app, args)


def _clean(r: Result, problems: int) -> None:
    """No traceback or internal error anywhere; stderr one line per problem at most (and never a long one)."""
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    for stream in (r.stdout, r.stderr):
        assert "Traceback" not in stream and "internal error" not in stream
    lines = r.stderr.splitlines()
    assert len(lines) <= problems + 1, r.stderr
    assert all(len(ln) <= 400 for ln in lines), r.stderr


@pytest.mark.parametrize("name", hostile.NAMES)
def test_a_hostile_case_ends_in_exit_0_or_2_with_its_problem_said(name: str, corpus: dict[str, hostile.Case],
                                                                  small_limits: None) -> None:
    case = corpus[name]
    triage = _run(["triage", *case.paths, "--format", "json", "--max-file-size", "1"])
    ev = _run(["evidence", *case.paths, "--format", "json"])
    if case.usage_error:  # the only input refused: one line, exit 2, for both commands
        for r in (triage, ev):
            assert r.exit_code == 2 and r.stdout == "", (r.exit_code, r.stdout)
            assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("error: "), r.stderr
            assert all(s in r.stderr for s in case.says), r.stderr
            _clean(r, 0)
        return
    assert triage.exit_code in (0, 2) and ev.exit_code == 0, (triage.exit_code, triage.stderr, ev.stderr)
    files = json.loads(ev.stdout)["files"]
    assert files == json.loads(triage.stdout)["files"]  # both commands read the bundle alike
    problems = "\n".join(f["problem"] or "" for f in files)
    missing = [s for s in case.says if s not in problems]
    assert not missing, f"{missing} not in:\n{problems}"
    n = sum(1 for f in files if f["problem"])
    _clean(triage, n)
    _clean(ev, n)
    if triage.exit_code == 2:  # nothing recognised: the one line that says so
        assert "nothing in the input was recognised" in triage.stderr
    else:  # what is readable is still read, beside what is not
        assert any(f["records"] for f in files), files
