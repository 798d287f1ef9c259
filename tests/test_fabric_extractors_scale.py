"""The fabric extractors' column-wise joins give what the plain pandas joins they replace give.

``_net_pairs`` joins NCCL's [send] and [receive] channel lines on integer codes of their parsed columns;
``_wait_table`` joins each port's XmitWait and XmitData series on integer keys; ``_counter_series`` sorts and
aggregates counter snapshots on integer codes. They are checked against the pandas ``drop_duplicates``/``merge``,
``set_index``/``join`` and ``sort_values``/``groupby`` they stand for.
"""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest

from diagnose.bundle import LoadLimits, load_inputs
from diagnose.evidence.context import Context
from diagnose.evidence.counters import EARLY_HINT, LATE_HINT
from diagnose.evidence.extractors.fabric_paths import _NET_CH, _counter_series, _net_pairs
from diagnose.evidence.extractors.fabric_state import PORT_KEYS, _wait_table
from diagnose.evidence.frames import build_frames
from diagnose.parsers import nccl_log
from diagnose.stages import parse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _reference_pairs(ch: pd.DataFrame) -> tuple[int, int, list[tuple[int, int]]]:
    """(pairs, crossed pairs, (send line, receive line) of the first three crossed) the pandas way, from the lines'
    text: the connections a [send] and a [receive] line print alike, on different hosts."""
    net = ch[ch["transport"] == "NET"]
    ext = net["text"].astype(str).str.extract(_NET_CH)
    net = net.assign(**{c: ext[c] for c in ext.columns}).dropna(subset=["nic"])
    key = ["ch", "ci", "src", "sd", "dst", "dd"]
    net = net.astype({c: int for c in [*key, "nic"]})  # 02 and 2 are one channel
    snd = net[net["dir"] == "send"].drop_duplicates(key + ["host"])
    rcv = net[net["dir"] == "receive"].drop_duplicates(key + ["host"])
    pairs = snd.merge(rcv, on=key, suffixes=("_s", "_r"))
    pairs = pairs[pairs["host_s"].fillna("") != pairs["host_r"].fillna("")]
    crossed = pairs[pairs["nic_s"] != pairs["nic_r"]]
    return len(pairs), len(crossed), list(zip(crossed["line_s"].head(3), crossed["line_r"].head(3), strict=True))


def _channel_line(rng: random.Random) -> str:
    return (f"Channel {rng.choice(['00', '00', '0', '01'])}{rng.choice(['/0'] * 8 + ['/1', ''])} :"
            f" {rng.choice('112')}[0] -> 3[1]{rng.choice([' [send]', ' [receive]'] * 4 + [''])}"
            f" via {rng.choice(['NET/IB/', 'NET/Socket/', 'NET/AWS-OFI/', 'NET//', 'P2P/IPC'])}"
            f"{rng.choice(['0', '1', '12', 'x'])}{rng.choice(['', '/GDRDMA'])}")


@pytest.mark.parametrize("seed", range(80))
def test_net_pairs_match_the_merge(seed: int) -> None:
    """The parsed columns joined on integer codes pair the lines that the text of the lines pairs."""
    rng = random.Random(seed)
    lines = []
    for _ in range(rng.randint(1, 40)):
        host = rng.choice(["h1", "h2", "h3"])
        lines.append(rng.choice([f"{host}:1:1 [0] NCCL INFO {_channel_line(rng)}"] * 8
                                + [f"[2024-06-14 02:49:28] {host}:1:1 [0] NCCL INFO {_channel_line(rng)}",
                                   f"{host}:1:1 [0] NCCL INFO Connected all rings", "garbage"]))
    res = nccl_log.parse("\n".join(lines) + "\n", "job.log")
    ch = build_frames(res.records).get("NcclChannel", pd.DataFrame())
    got = _net_pairs(Context(frames={"NcclChannel": ch}, formats=set()))
    n_pairs, n_crossed, first = _reference_pairs(ch) if not ch.empty else (0, 0, [])
    if not n_pairs:
        assert got == []
        return
    (f,) = got
    assert (f.attrs["pairs"], f.attrs["cross_pairs"]) == (n_pairs, n_crossed)
    if n_crossed:
        assert f.kind == "nccl_net_pairs_cross_nic"
        assert [e.line for e in f.evidence] == [ln for pair in first for ln in pair]
    else:
        assert f.kind == "nccl_net_pairs_same_nic"


def test_net_pairs_name_the_connection_as_nccl_prints_it() -> None:
    log = ("h1:1:1 [0] NCCL INFO Channel 02/1 : 8[0] -> 9[1] [send] via NET/IB/0/GDRDMA\n"
           "h2:1:1 [1] NCCL INFO Channel 02/1 : 8[0] -> 9[1] [receive] via NET/IB/3/GDRDMA\n")
    ch = build_frames(nccl_log.parse(log, "job.log").records)["NcclChannel"]
    (f,) = _net_pairs(Context(frames={"NcclChannel": ch}, formats=set()))
    assert f.kind == "nccl_net_pairs_cross_nic"
    assert "channel 02/1 8[0] -> 9[1]: NET/0 on h1, NET/3 on h2" in f.summary
    cut = ch.assign(text=["h1:1:1 [0] NCCL INFO Channel 02/1 : 8[0] -> 9[1] [se", ch["text"].iloc[1]])
    (g,) = _net_pairs(Context(frames={"NcclChannel": cut}, formats=set()))
    assert "channel 02/1 8[0] -> 9[1]: NET/0 on h1, NET/3 on h2" in g.summary  # from the columns


def _context(bundle: Path) -> Context:
    limits, ev = LoadLimits(), parse.Evidence()
    for bf in load_inputs([bundle], limits):
        parse.parse_file(bf, ev, limits)
    return Context(frames=build_frames(ev.records), formats=ev.formats)


@pytest.mark.parametrize("bundle", ["fabric/congestion", "fabric/adaptive_routing_off", "fabric/route_imbalance",
                                    "healthy/fattree64-clean"])
def test_wait_table_is_the_join_of_the_two_counters(bundle: str) -> None:
    ctx = _context(FIXTURES / bundle)
    t = ctx.counters.series
    measured, _ = _wait_table(ctx)
    assert not measured.empty
    wait = t[t["counter"] == "port_xmit_wait"].set_index(PORT_KEYS)
    data = t[t["counter"] == "port_xmit_data"].set_index(PORT_KEYS)
    j = wait.add_suffix("_w").join(data.add_suffix("_d"), how="inner")
    delta = (j["snaps_w"] > 1) & (j["snaps_d"] > 1)
    lost = j["inc_w"].where(delta, j["last_w"]).astype(float) * 8
    sent = j["inc_d"].where(delta, j["last_d"]).astype(float) * 4
    sat = ~j["extended_w"].astype(bool) & (j["last_w"] >= (1 << 32) - 1)
    ref = j[(lost + sent > 0) & ~sat & (sent > 0)]
    assert list(zip(*(measured[c].tolist() for c in PORT_KEYS), strict=True)) == list(ref.index)
    assert measured["ratio"].tolist() == (lost / (lost + sent))[ref.index].tolist()
    for c in ("start_w", "end_w", "start_d", "end_d"):
        assert measured[c].tolist() == ref[c].tolist()


def _reference_series(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The counter series the pandas way: rows ordered by capture time, file-name hint, file and line; sorted by
    the keys and that order; increments summed (a decrease is a reset); groupby first/last/size/sum."""
    ts = pd.to_datetime(df["timestamp"], errors="coerce", utc=True, format="mixed")
    ts_i = ts.fillna(pd.Timestamp(0, tz="UTC")).astype("int64").where(ts.notna(), -1)
    name = df["source"].astype(str).str.rsplit("/", n=1).str[-1]
    hint = pd.Series(1, index=df.index).mask(name.str.contains(LATE_HINT), 2).mask(name.str.contains(EARLY_HINT), 0)
    key = pd.DataFrame({"ts": ts_i, "hint": hint, "source": df["source"].astype(str), "line": df["line"]})
    idx = key.sort_values(["ts", "hint", "source", "line"], kind="stable").index
    df = df.assign(_o=pd.Series(range(len(idx)), index=idx).reindex(df.index))
    df = df.sort_values(keys + ["_o"], kind="stable").reset_index(drop=True)
    same = df[keys].eq(df[keys].shift()).all(axis=1)
    step = df["value"].astype(float).diff()
    df["_inc"] = step.where(same, 0.0).where(~(same & (step < 0)), df["value"].astype(float)).fillna(0.0)
    agg = df.groupby(keys, sort=True, dropna=False).agg(
        first=("value", "first"), last=("value", "last"), snaps=("_o", "size"), inc=("_inc", "sum"),
        line=("line", "last"), source=("source", "last"))
    agg["delta"] = agg["inc"].where(agg["snaps"] > 1)
    return agg.reset_index()


@pytest.mark.parametrize("seed", range(60))
def test_counter_series_match_the_groupby(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    stamps = [None, "2024-05-01T10:00:00", "2024-05-01T09:00:00Z", "Wed May  1 10:00:05 2024", "garbage"]
    df = pd.DataFrame({
        "source": [rng.choice(["h1/ethtool-before.txt", "h1/ethtool-after.txt", "h2/ethtool.txt", "h2/x_0"])
                   for _ in range(n)],
        "line": [rng.randint(1, 9) for _ in range(n)],
        "host_k": [rng.choice(["h1", "h2", ""]) for _ in range(n)],
        "dev": [rng.choice(["eth0", "eth1", None]) for _ in range(n)],
        "counter": [rng.choice(["rx_prio3_pause", "tx_prio3_pause"]) for _ in range(n)],
        "prio": [rng.choice([0, 3]) for _ in range(n)],
        "value": [rng.choice([0, 5, 9, 100, 2**40]) for _ in range(n)],
        "timestamp": [rng.choice(stamps) for _ in range(n)],
    }).astype({"source": "str", "host_k": "str", "dev": "str", "counter": "str"})
    if seed % 3 == 0:
        df = df.drop(columns="timestamp").assign(timestamp=None)
    if seed % 4 == 1:
        df["value"] = df["value"].astype(float).mask(pd.Series([rng.random() < 0.2 for _ in range(n)]))
    keys = ["host_k", "dev", "prio", "counter"]
    pd.testing.assert_frame_equal(_counter_series(df, keys), _reference_series(df, keys))
