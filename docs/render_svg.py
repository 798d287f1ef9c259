"""Regenerate docs/triage.svg (the README picture) from a shipped fixture bundle.

    python docs/render_svg.py
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from diagnose.pipeline import triage
from diagnose.render.text import build

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "fixtures/link/bad_cable/positive-symbol-errors-rising"
SYMPTOM = "AllReduce busbw dropped to 90 GB/s on 4 nodes"


def main() -> None:
    d = triage([BUNDLE], SYMPTOM)
    console = Console(record=True, width=150, force_terminal=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(f"$ diagnose triage {BUNDLE.relative_to(ROOT)} --symptom \"{SYMPTOM}\"")
    console.print(build(d))
    console.save_svg(str(ROOT / "docs" / "triage.svg"), title="diagnose triage")


if __name__ == "__main__":
    main()
