"""sysfs ``ports/N/pkeys/I``: P_Key table entries, in the grep form and as a cat transcript."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import sysfs_ib
from diagnose.parsers._pkeys import PkeyEntry

DATA = Path(__file__).resolve().parents[1] / "data"


def _entries(text: str, host: str | None = None) -> list[PkeyEntry]:
    return [r for r in sysfs_ib.parse(text, "f", host).records if isinstance(r, PkeyEntry)]


def test_azure_cat_transcript() -> None:
    text = (DATA / "sysfs_infiniband/azure_docs_setup_mpi_cat_pkeys.txt").read_text()
    assert sysfs_ib.sniff(text) >= 90
    got = [(e.line, e.device, e.port, e.index, e.pkey, e.full, e.host) for e in _entries(text, "vm1")]
    assert got == [(2, "mlx5_0", 1, 0, 0x800B, True, "vm1"), (4, "mlx5_0", 1, 1, 0x7FFF, False, "vm1")]


def test_grep_form_with_prompt_skips_empty_slots_and_reports_bad_values() -> None:
    text = ("[root@gpu-c101 ~]# grep . /sys/class/infiniband/mlx5_*/ports/1/pkeys/*\n"
            "/sys/class/infiniband/mlx5_0/ports/1/pkeys/0:0xffff\n"
            "/sys/class/infiniband/mlx5_0/ports/1/pkeys/1:0x0000\n"
            "/sys/class/infiniband/mlx5_1/ports/1/pkeys/1:0x8003\n"
            "/sys/class/infiniband/mlx5_1/ports/1/pkeys/2:garbage\n")
    res = sysfs_ib.parse(text, "f")
    es = [r for r in res.records if isinstance(r, PkeyEntry)]
    assert [(e.device, e.index, e.pkey, e.host) for e in es] == [("mlx5_0", 0, 0xFFFF, "gpu-c101"),
                                                                ("mlx5_1", 1, 0x8003, "gpu-c101")]
    assert any("garbage" in p for p in res.problems)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.integers(0, 127), st.integers(0, 0xFFFF), min_size=1, max_size=10))
def test_any_table_round_trips(table: dict[int, int]) -> None:
    text = "".join(f"/sys/class/infiniband/mlx5_3/ports/1/pkeys/{i}:0x{k:04x}\n" for i, k in sorted(table.items()))
    assert {(e.index, e.pkey) for e in _entries(text)} == {(i, k) for i, k in table.items() if k & 0x7FFF}
