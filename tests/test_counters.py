"""Counter normalisation: one vocabulary, saturation, resets, snapshots ordered across files."""

from __future__ import annotations

from pathlib import Path

from diagnose.models.counters import canonical_counter
from diagnose.pipeline import gather

HEAD = "# Port counters: Lid 75 port 1 (CapMask: 0x5A00)\n"


def _pq(sym: int, ler: int = 0, extended: bool = True) -> str:
    head = HEAD.replace("Port counters", "Port extended counters") if extended else HEAD
    return (head + f"SymbolErrorCounter:..............{sym}\nLinkErrorRecoveryCounter:........{ler}\n"
            "LinkDownedCounter:...............0\nPortRcvErrors:...................0\n")


def _finding(tmp: Path, files: dict[str, str]):  # type: ignore[no-untyped-def]
    for name, text in files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    ev = gather([tmp])
    return [f for f in ev.findings if f.kind == "port_counter_errors" and f.attrs["counter"] == "symbol_error"]


def test_one_vocabulary() -> None:
    names = ["SymbolErrorCounter", "symbol_error", "node_infiniband_symbol_error_total", "SymbolErrors"]
    assert {canonical_counter(n) for n in names} == {"symbol_error"}
    assert canonical_counter("PortSelect") is None


def test_rising_across_files_ordered_by_their_date_lines(tmp_path: Path) -> None:
    # the later snapshot sorts first by name; the date lines decide the order
    fs = _finding(tmp_path, {
        "n1/a_later.txt": "Tue Mar 11 17:03:07 UTC 2025\n" + _pq(5200),
        "n1/b_earlier.txt": "Tue Mar 11 16:51:07 UTC 2025\n" + _pq(5000),
    })
    assert len(fs) == 1
    assert fs[0].attrs["delta"] == 200 and fs[0].attrs["rising"] is True and fs[0].attrs["reset"] is False


def test_reset_between_snapshots_counts_the_new_value(tmp_path: Path) -> None:
    fs = _finding(tmp_path, {"n1/pq.txt": "Tue Mar 11 16:51:07 UTC 2025\n" + _pq(9000)
                             + "Tue Mar 11 17:03:07 UTC 2025\n" + _pq(40)})
    assert fs[0].attrs["reset"] is True and fs[0].attrs["delta"] == 40 and fs[0].attrs["value"] == 40


def test_saturated_basic_counter_is_flagged(tmp_path: Path) -> None:
    fs = _finding(tmp_path, {"n1/pq.txt": _pq(65535, extended=False)})
    assert fs[0].attrs["saturated"] is True
    fs2 = _finding(tmp_path / "x", {"n1/pq.txt": _pq(65535, extended=True)})
    assert fs2[0].attrs["saturated"] is False


def test_stable_old_errors_are_not_rising(tmp_path: Path) -> None:
    ev_files = {"n1/before.txt": _pq(300), "n1/after.txt": _pq(300)}
    fs = _finding(tmp_path, ev_files)
    assert fs[0].attrs["rising"] is False and fs[0].attrs["delta"] == 0
    kinds = {f.kind for f in gather([tmp_path]).findings}
    assert "port_counters_stable" in kinds


def test_nccl_ib_hca_naming_a_missing_device(tmp_path: Path) -> None:
    ib = ("CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n"
          "\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tLink layer: InfiniBand\n")
    (tmp_path / "gpu-a01").mkdir()
    (tmp_path / "gpu-a01" / "ibstat.out").write_text(ib + ib.replace("mlx5_0", "mlx5_1"))
    (tmp_path / "env.txt").write_text("NCCL_IB_HCA=mlx5_0,mlx5_4\nNCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME=eth0\n")
    kinds = {f.kind: f for f in gather([tmp_path]).findings}
    assert "mlx5_4" in kinds["ib_hca_not_present"].summary
    (tmp_path / "env.txt").write_text("NCCL_IB_HCA=mlx5\nNCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME=eth0\n")  # prefix match
    assert "ib_hca_not_present" not in {f.kind for f in gather([tmp_path]).findings}


def test_a_port_missing_from_one_snapshot_has_no_rate(tmp_path: Path) -> None:
    other = _pq(700).replace("Lid 75", "Lid 76")
    fs = _finding(tmp_path, {"n1/pq.txt": "Tue Mar 11 16:51:07 UTC 2025\n" + _pq(500) + other
                             + "Tue Mar 11 17:03:07 UTC 2025\n" + _pq(900)})
    by_lid = {f.summary.split("(lid ")[1].split(")")[0]: f for f in fs}
    assert by_lid["75"].attrs["delta"] == 400 and by_lid["75"].attrs["window_s"] == 720
    assert "delta" not in by_lid["76"].attrs and by_lid["76"].attrs["snapshots"] == 1


def test_snapshots_without_dates_fall_back_to_file_names(tmp_path: Path) -> None:
    fs = _finding(tmp_path, {"n1/pq_after.txt": _pq(260), "n1/pq_before.txt": _pq(200)})
    assert fs[0].attrs["delta"] == 60 and "window_s" not in fs[0].attrs  # no clock, no rate


def test_ber_uses_the_window_and_the_link_rate(tmp_path: Path) -> None:
    ib = ("CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n"
          "\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: 75\n\t\tLink layer: InfiniBand\n")
    fs = _finding(tmp_path, {"n1/ibstat.out": ib,
                             "n1/pq.txt": "Tue Mar 11 16:51:07 UTC 2025\n" + _pq(1000)
                             + "Tue Mar 11 17:03:07 UTC 2025\n" + _pq(1003)})
    a = fs[0].attrs
    # 3 errors over 720 s at 400 Gb/s: 3 / (400e9 * 720) = 1.04e-14, just over the 12-minute PDR limit
    assert a["window_s"] == 720 and a["link_gbps"] == 400.0
    assert abs(a["ber"] - 1.042e-14) < 1e-16 and a["ber_log10"] == -13.98


# ------------------------------------------------------------------------------ the counter table's own parts

def _table_rows(table):  # type: ignore[no-untyped-def]
    """Each series of a counter table with the evidence of its samples, keyed by port and counter."""
    from diagnose.evidence.counters import KEYS

    out = {}
    for row in table.series.itertuples(index=False):
        refs = [(e.file, e.line, e.text) for e in table.refs(table.rows(row.start, row.end), "k", limit=99)]
        key = tuple(getattr(row, k) for k in KEYS) + (row.counter,)
        out[key] = (row.first, row.last, row.inc, row.reset, row.snaps, row.extended, row.t0, row.t1, refs)
    return out


def test_bulk_dump_and_records_give_the_same_series() -> None:
    """The columns of a bulk perfquery dump and the records of the line parser, over the same text, give the same
    series and cite the same lines (the bulk table keeps fewer: counters that never left zero are dropped)."""
    import numpy as np

    from diagnose.evidence.counters import build_counter_table
    from diagnose.evidence.frames import build_frames
    from diagnose.parsers import perfquery

    base = Path(__file__).parent / "data" / "perfquery"
    text = (base / "var_two_snapshots_with_date.txt").read_text()
    for variant in (text, text.replace("Lid 1", "Lid 9"), "Mon Jun  3 10:00:00 UTC 2024\n" + text):
        long: list = []
        perfquery._parse(variant, "f", "h0", long, [])
        wide: list = []
        assert perfquery._parse_bulk(variant.encode(), "f", "h0", wide, [])
        a, b = build_counter_table(build_frames(long)), build_counter_table(build_frames(wide))
        rows_a, rows_b = _table_rows(a), _table_rows(b)
        assert rows_b and set(rows_b) <= set(rows_a)
        for key, got in rows_b.items():
            want = rows_a[key]
            assert got[:6] == want[:6] and got[8] == want[8], key
            assert np.array_equal(np.array(got[6:8]), np.array(want[6:8]), equal_nan=True), key
        assert a.n_ports == b.n_ports and a.max_order == b.max_order
        # samples sorted by port, counter, snapshot order, line: each series a run of one port
        s = b.samples
        assert list(s["pid"]) == sorted(s["pid"])
        for start, end in zip(b.series["start"], b.series["end"], strict=True):
            run = s.iloc[start:end]
            assert run["pid"].nunique() == 1
            assert list(zip(run["order"], run["line"], strict=True)) == sorted(zip(run["order"], run["line"],
                                                                                   strict=True))


def test_sample_order_is_the_four_key_stable_sort() -> None:
    """The combined-key sort and the lexsort it stands for (still used when the key would overflow) agree,
    ties included."""
    import numpy as np

    from diagnose.evidence.counters import _sample_order

    rng = np.random.default_rng(7)
    for n in (0, 1, 5, 500):
        pid, code, order = rng.integers(0, 6, n), rng.integers(0, 4, n), rng.integers(0, 3, n)
        line = rng.integers(0, 40, n) - 3  # a few below zero, as the offset must handle
        fast = _sample_order(pid, code, order, line, (6, 4, 3))
        slow = _sample_order(pid, code, order, line, (1 << 40, 1 << 20, 1 << 10))  # too big: the lexsort
        assert np.array_equal(fast[0], np.lexsort((line, order, code, pid)))
        assert np.array_equal(fast[0], slow[0])
        for x, y in zip(fast[1], slow[1], strict=True):
            assert np.array_equal(x, y)


def test_factorize_by_runs_is_pandas_factorize() -> None:
    import numpy as np
    import pandas as pd

    from diagnose.evidence.frames import factorize_runs as _factorize

    nan = float("nan")
    cases = [
        ["b", "b", "a", "a", "b", "c", "c"],
        [None, None, "x", None, "x", "y"],
        [nan, nan, None, "a", nan, None, None, "a"],
        [3, 3, 1, 1, 2, 3],
        ["0xA", "0xa", "0xa"],
        ["a", pd.NA, pd.NA, "b"],  # cannot be compared: the plain factorize
        [],
        ["only"],
    ]
    for values in cases + [[v for v in values for _ in range(4)] for values in cases]:  # and as runs
        arr = np.array(values, dtype=object)
        for sort in (False, True):
            for sentinel in (True, False):
                got = _factorize(arr, sort=sort, use_na_sentinel=sentinel)
                want = pd.factorize(arr, sort=sort, use_na_sentinel=sentinel)
                assert np.array_equal(got[0], want[0]), (values, sort, sentinel)
                assert [repr(v) for v in got[1]] == [repr(v) for v in want[1]], (values, sort, sentinel)
