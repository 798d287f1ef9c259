from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import lsmod

DATA = Path(__file__).resolve().parent.parent / "data"

LSMOD = """Module                  Size  Used by
nvidia_uvm           4956160  0
nvidia_modeset       1355776  1 nvidia_drm
nvidia              54501376  3 nvidia_uvm,nvidia_peermem,nvidia_modeset
nvidia_peermem         16384  0
ib_core               520192  9 rdma_cm,ib_ipoib,nvidia_peermem,iw_cm,ib_umad,rdma_ucm,ib_uverbs,mlx5_ib,ib_cm
"""
PROC = """nvidia_peermem 16384 0 - Live 0xffffffffc0e3c000 (POE)
nvidia 54501376 3 nvidia_uvm,nvidia_peermem,nvidia_modeset, Live 0xffffffffc1000000 (POE)
mlx5_ib 454656 0 - Live 0xffffffffc0d70000 (OE)
ib_uverbs 163840 2 rdma_ucm,mlx5_ib, Live 0xffffffffc0d40000 (OE)
ib_core 520192 9 rdma_cm,ib_ipoib, Live 0xffffffffc0c90000 (OE)
"""


def test_lsmod_table() -> None:
    res = lsmod.parse(LSMOD, "lsmod.txt", host="gpu-a01")
    mods = {r.name: r for r in res.records}
    assert set(mods) == {"nvidia_uvm", "nvidia_modeset", "nvidia", "nvidia_peermem", "ib_core"}
    assert mods["nvidia"].used_by == ("nvidia_uvm", "nvidia_peermem", "nvidia_modeset")
    assert mods["nvidia_peermem"].line == 5 and mods["nvidia_peermem"].host == "gpu-a01"
    assert lsmod.sniff(LSMOD) >= 90


def test_proc_modules() -> None:
    res = lsmod.parse(PROC, "modules")
    assert [r.name for r in res.records][:2] == ["nvidia_peermem", "nvidia"]
    assert res.records[1].used_by == ("nvidia_uvm", "nvidia_peermem", "nvidia_modeset")
    assert lsmod.sniff(PROC) >= 80


def test_does_not_claim_other_formats() -> None:
    for d in DATA.iterdir():
        if d.is_dir() and d.name != "lsmod":
            for f in d.iterdir():
                if f.is_file() and f.name != "README.md":
                    assert lsmod.sniff(f.read_text(errors="replace")[:65536]) < 40, f


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises(text: str) -> None:
    lsmod.parse(text, "x")
    assert 0 <= lsmod.sniff(text) <= 100
