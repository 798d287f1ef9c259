"""One table of port-counter series for every extractor that reads PMA counters.

Counter samples arrive in two shapes: one ``PortCounter`` record per value (sysfs, node_exporter, ibdiagnet2
PM, ibqueryerrors, small perfquery captures) and one ``PortCounterWide`` row per perfquery block (one port,
one snapshot, a value and a line column per counter) from the columnar parser of large dumps. This module
joins both into one series per (port, counter), computed once per run with numpy and cached on the
:class:`~diagnose.evidence.context.Context`:

* ``first`` / ``last`` value, ``snaps`` (distinct snapshots), ``inc`` (increments between consecutive snapshots
  summed; a decrease is a reset, after which what was counted is the new value itself), ``reset``,
  ``extended`` (64-bit source), ``t0`` / ``t1`` (capture times in epoch seconds when printed), ``interval_s``;
* ``start`` / ``end``: the series' samples, oldest first, in :attr:`CounterTable.samples` order, for evidence.

Counters that are zero in every snapshot of a port carry no information beyond "the port was read"; they are
dropped from the series (the port still counts in :attr:`CounterTable.n_ports`), except the traffic and wait
counters that ratios need (:data:`ALWAYS`); for LinkDowned, whose standing still is evidence against a
flapping link, the quiet ports are counted (:attr:`CounterTable.quiet`). On a 4,096-host fabric this keeps the table to the ports' data
counters instead of tens of millions of zeros.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from diagnose.evidence.frames import factorize_runs
from diagnose.models.diagnosis import EvidenceRef

KEYS = ["host_k", "dev_k", "guid_k", "lid_k", "port_k"]
ALWAYS = frozenset({"port_xmit_data", "port_rcv_data", "port_xmit_wait"})
# counters whose standing still on every port is itself evidence (LinkDowned not moving argues against a
# flapping link): for bulk dumps the table counts those quiet ports instead of keeping a zero series for each
QUIET = ("link_downed",)
# traffic counts nothing reads beyond the ALWAYS ones: a bulk dump's values for them are not kept
TRAFFIC_ONLY = frozenset({"port_xmit_packets", "port_rcv_packets", "unicast_xmit_packets", "unicast_rcv_packets",
                          "multicast_xmit_packets", "multicast_rcv_packets"})

# file names that place a snapshot before or after another when no capture time is printed
EARLY_HINT = re.compile(r"before|\bpre|start|first|t0|[_-]0\b|[_-]1st", re.I)
LATE_HINT = re.compile(r"after|\bpost|end|second|last|t1|[_-]2nd", re.I)


def snapshot_rank(triples: pd.DataFrame) -> np.ndarray:
    """A global order for distinct (timestamp, source, snapshot) triples: the time printed before each
    snapshot (``date`` output) when there is one, else names such as before/after, then the file's own order."""
    ts = pd.to_datetime(triples["timestamp"], errors="coerce", utc=True, format="mixed")
    ts_i = np.array([t.value if not pd.isna(t) else -1 for t in ts], dtype=np.int64)
    name = triples["source"].astype(str).str.rsplit("/", n=1).str[-1]
    hint = np.array([0 if EARLY_HINT.search(n) else 2 if LATE_HINT.search(n) else 1 for n in name], dtype=np.int64)
    order = pd.DataFrame({"ts": ts_i, "hint": hint, "source": triples["source"].astype(str).to_numpy(),
                          "snapshot": triples["snapshot"].to_numpy()})
    idx = order.sort_values(["ts", "hint", "source", "snapshot"], kind="stable").index.to_numpy()
    rank = np.empty(len(idx), dtype=np.int64)
    rank[idx] = np.arange(len(idx))
    return rank


def _epoch(ts: pd.Series) -> np.ndarray:
    t = pd.to_datetime(ts, errors="coerce", utc=True, format="mixed")
    return np.array([x.timestamp() if not pd.isna(x) else np.nan for x in t], dtype=float)


def _numbers(col: pd.Series | None, n: int) -> np.ndarray:
    """``pd.to_numeric(col, errors="coerce").fillna(-1).astype(np.int64)`` (a missing column: all -1), without the
    conversion for what already is a column of integers (an object column of Python ints, as bulk dumps give)."""
    if col is None:
        return np.full(n, -1, dtype=np.int64)
    if col.dtype == object:
        raw = col.to_numpy(object)
        if pd.api.types.infer_dtype(raw, skipna=False) == "integer":
            return raw.astype(np.int64)
    return pd.to_numeric(col, errors="coerce").fillna(-1).astype(np.int64).to_numpy()


def _key_codes(dfs: list[pd.DataFrame], k: str) -> tuple[np.ndarray, np.ndarray]:
    """Key column ``k`` (see KEYS) over the rows of ``dfs``, factorized in sorted order: (codes, values).

    ``host_k``/``dev_k``/``guid_k`` are the column as text (missing -> "", GUIDs lower-cased), ``lid_k``/``port_k``
    the column as a number (missing -> -1). The text keys are normalised per distinct value, not per row: a
    4,096-host fabric has ~400k counter rows but a few thousand hosts and GUIDs.
    """
    name = k[:-2] if k != "dev_k" else "device"
    if k in ("lid_k", "port_k"):
        col = np.concatenate([_numbers(df[name] if name in df else None, len(df)) for df in dfs])
        c, u = pd.factorize(col, sort=True)
        return c, np.asarray(u, dtype=object)
    raw_c, raw_u = factorize_runs(np.concatenate([df[name].to_numpy(object) if name in df else
                                              np.full(len(df), None, dtype=object) for df in dfs]))  # missing: -1
    text = [str(v).lower() if k == "guid_k" else str(v) for v in raw_u]
    if (raw_c < 0).any():
        text.append("")  # code -1 (missing) picks this last entry
    to_sorted, u = pd.factorize(np.array(text, dtype=object), sort=True)
    return to_sorted[raw_c], np.asarray(u, dtype=object)


@dataclass
class CounterTable:
    series: pd.DataFrame  # one row per kept (port, counter): KEYS, counter, first, last, inc, snaps, ...
    samples: pd.DataFrame  # line, value, order, pid (sorted by port, counter, order, line)
    n_ports: int
    max_order: int
    clean_rows: list[int]  # a few symbol_error samples, for "all clean" evidence
    quiet: dict[str, tuple[int, list[int]]]  # QUIET counter -> (ports read in 2+ snapshots, all zero; sample rows)
    # where each sample came from, for evidence: ``_row[i]`` is sample i's input row (the PortCounter rows, then
    # the PortCounterWide rows), whose source, host and line index are kept by code (compact at scale)
    _row: np.ndarray
    _sources: list[str]
    _src: np.ndarray
    _hosts: list[object]
    _host: np.ndarray
    _liners: list[object]
    _li: np.ndarray
    _long_texts: np.ndarray  # texts of the PortCounter rows; bulk samples are read from their line index
    _resolved: dict[int, str]
    _lines_cache: np.ndarray | None = None
    # the series as integer codes, for extractors that join or group them without factorizing the text columns
    # again (a 4,096-host fabric has 600k series; factorizing one text column of them takes ~40 ms): each series'
    # counter (an index into ``vocab``) and port (0.. in key order), and per key column (KEYS) each port's code
    # into the key's distinct values, which are sorted
    vocab: list[str] = field(default_factory=list)
    series_counter: np.ndarray = field(default_factory=lambda: np.array([], dtype=np.int64))
    series_port: np.ndarray = field(default_factory=lambda: np.array([], dtype=np.int64))
    port_keys: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.n_ports == 0

    def text(self, i: int) -> str:
        self._resolve([i])
        return self._resolved[i]

    @property
    def _line_no(self) -> np.ndarray:
        got = self._lines_cache
        if got is None:
            got = self._lines_cache = self.samples["line"].to_numpy()
        return got

    def _resolve(self, rows: list[int]) -> None:
        """Resolve the texts of ``rows``: record-per-value samples carry theirs; bulk samples are read from their
        line index, in one pass per index (one file open each, not one per line)."""
        todo: dict[int, list[int]] = {}
        for i in rows:
            if i in self._resolved:
                continue
            r = int(self._row[i])
            if r < len(self._long_texts):
                self._resolved[i] = str(self._long_texts[r])
            elif int(self._li[r]) >= 0:
                todo.setdefault(int(self._li[r]), []).append(i)
            else:
                self._resolved[i] = ""
        line = self._line_no
        for li, rs in todo.items():
            texts = self._liners[li].texts([int(line[r]) for r in rs])  # type: ignore[attr-defined]
            self._resolved.update(zip(rs, texts, strict=True))

    def source(self, i: int) -> str:
        return self._sources[int(self._src[self._row[i]])]

    def host(self, i: int) -> object:
        h = int(self._host[self._row[i]])
        return self._hosts[h] if h >= 0 else None

    def frame(self, rows: list[int] | np.ndarray) -> pd.DataFrame:
        """The samples at ``rows`` with their text: what ``finding(...)`` cites."""
        rows = [int(r) for r in rows]
        line = self._line_no
        self._resolve(rows)
        return pd.DataFrame({"source": [self.source(r) for r in rows], "line": [int(line[r]) for r in rows],
                             "host": [self.host(r) for r in rows], "text": [self.text(r) for r in rows]},
                            index=rows)

    def refs(self, rows: list[int] | np.ndarray, kind: str, limit: int = 4) -> list[EvidenceRef]:
        rows = [int(r) for r in rows][-limit:]
        line = self._line_no
        self._resolve(rows)
        return [EvidenceRef(file=self.source(r), line=int(line[r]), text=self.text(r), finding=kind) for r in rows]

    @staticmethod
    def rows(start: int, end: int) -> list[int]:
        return list(range(int(start), int(end)))


def _sample_order(pid: np.ndarray, code: np.ndarray, order: np.ndarray, line: np.ndarray,
                  sizes: tuple[int, int, int]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The stable sort of the samples by (port, counter, snapshot order, line): the permutation, and the four
    keys in sorted order. ``sizes``: how many ports, counters and snapshot orders there are.

    The four keys are combined into one integer (mixed radix) when it fits in 63 bits, which it does for any
    real fabric: one stable argsort of mostly presorted runs (each counter's samples in dump order) then costs a
    fraction of a four-key lexsort, and the sorted keys are decoded from the sorted combined key instead of
    gathered one by one. (The snapshot order also decides the source, which the samples are not sorted by.)
    """
    n_pid, n_code, n_order = sizes
    lo = int(line.min()) if len(line) else 0
    span = (int(line.max()) - lo + 1) if len(line) else 1
    if n_pid * n_code * n_order * span >= 1 << 63:
        srt = np.lexsort((line, order, code, pid))
        return srt, [pid[srt], code[srt], order[srt], line[srt]]
    key = ((pid * n_code + code) * n_order + order) * span + (line - lo)
    srt = np.argsort(key, kind="stable")
    key = key[srt]
    key, line_s = np.divmod(key, span)
    key, order_s = np.divmod(key, n_order)
    pid_s, code_s = np.divmod(key, n_code)
    return srt, [pid_s, code_s, order_s, line_s + lo]


def build_counter_table(frames: dict[str, pd.DataFrame]) -> CounterTable:
    long = frames.get("PortCounter")
    wide = frames.get("PortCounterWide")
    long = long if long is not None and not long.empty else None
    wide = wide if wide is not None and not wide.empty else None
    if long is None and wide is None:
        nothing = np.array([], dtype=np.int64)
        return CounterTable(pd.DataFrame(), pd.DataFrame(), 0, 0, [], {}, nothing, [], nothing, [], nothing, [],
                            nothing, np.array([], dtype=object), {})
    # port ids over both shapes: each key column factorized in sorted order, the codes combined in mixed radix,
    # so that pid order is the lexicographic order of (host, device, guid, lid, port) without a frame groupby
    n_long = len(long) if long is not None else 0
    dfs = [df for df in (long, wide) if df is not None]
    codes = np.zeros(n_long + (len(wide) if wide is not None else 0), dtype=np.int64)
    uniques: dict[str, np.ndarray] = {}
    span = 1
    for k in KEYS:
        key_c, u = _key_codes(dfs, k)
        span *= max(len(u), 1)
        if span >= 1 << 62:
            raise OverflowError("too many distinct port keys to combine")  # not reachable with real fabrics
        codes = codes * len(u) + key_c
        uniques[k] = np.asarray(u, dtype=object)
    pid_all, order_u = pd.factorize(codes, sort=True)  # what np.unique(codes, return_inverse=True) gives
    rest = order_u.copy()
    cols: dict[str, np.ndarray] = {}
    port_keys: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for k in reversed(KEYS):  # decode the combined codes back into the key values of each port
        n = len(uniques[k])
        rest, kc = np.divmod(rest, n)
        cols[k] = uniques[k][kc]
        port_keys[k] = (kc, uniques[k])
    ports = pd.DataFrame({k: cols[k] for k in KEYS})
    ports["lid_k"] = ports["lid_k"].astype(np.int64)
    ports["port_k"] = ports["port_k"].astype(np.int64)
    del codes
    pid_wide = pid_all[n_long:]
    # sources (in name order) and hosts by code, over both shapes
    src_codes_all, sources = factorize_runs(
        np.concatenate([df["source"].astype(str).to_numpy(object) for df in dfs]), sort=True)
    host_codes_all, hosts = factorize_runs(
        np.concatenate([df["host"].to_numpy(object) for df in dfs]), sort=True)  # None -> -1
    # snapshot triples over both shapes, the same way
    ts_col = np.concatenate([df["timestamp"].astype(object).to_numpy() for df in dfs])
    snap_col = np.concatenate([df["snapshot"].astype(np.int64).to_numpy() for df in dfs])
    ts_c, ts_u = factorize_runs(ts_col, use_na_sentinel=False)
    snap_c, snap_u = pd.factorize(snap_col)
    combo = (ts_c.astype(np.int64) * len(sources) + src_codes_all) * len(snap_u) + snap_c
    tcode, tcode_u = pd.factorize(combo, sort=True)
    r = tcode_u.copy()
    tu_snap = np.asarray(snap_u)[r % len(snap_u)]
    r //= len(snap_u)
    tu_src = np.asarray(sources, dtype=object)[r % len(sources)]
    r //= len(sources)
    tu_ts = np.asarray(ts_u, dtype=object)[r]
    tu = pd.DataFrame({"timestamp": [None if (t is None or (isinstance(t, float) and t != t)) else t for t in tu_ts],
                       "source": tu_src, "snapshot": tu_snap})
    rank = snapshot_rank(tu)
    # per snapshot order (a rank of the triples): its capture time; every row's order
    ts_of_order = np.empty(len(rank), dtype=np.float64)
    ts_of_order[rank] = _epoch(tu["timestamp"])
    order_all = rank[tcode]

    vocab: list[str] = []
    if long is not None:
        vocab += sorted(set(long["counter"].astype(str)))
    if wide is not None:
        vocab += [c[2:] for c in wide.columns if c.startswith("v:")]
    vocab = sorted(set(vocab))
    vidx = {c: i for i, c in enumerate(vocab)}
    # the samples, as (input row, counter code, value, line) columns in parts
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("row", "code", "value", "line")}

    def add(row: np.ndarray, code: np.ndarray, value: np.ndarray, line: np.ndarray) -> None:
        for k, v in zip(parts, (row, code, value, line), strict=True):
            parts[k].append(v)

    # line indexes by code: one per bulk file (a categorical column of the batches' line indexes)
    liners: list[object] = []
    li_all = np.full(len(src_codes_all), -1, dtype=np.int32)
    if wide is not None and "_lines" in wide:
        li_codes, li_u = pd.factorize(wide["_lines"])
        liners = list(li_u)
        li_all[n_long:] = li_codes

    clean_marks: list[tuple[str, int]] = []
    quiet_marks: dict[str, list[tuple[str, int]]] = {}
    quiet_ports: dict[str, int] = {}
    if long is not None:
        n = n_long
        add(np.arange(n), long["counter"].astype(str).map(vidx).to_numpy(np.int64),
            pd.to_numeric(long["value"], errors="coerce").to_numpy(np.float64), long["line"].to_numpy(np.int64))
        se = long[long["counter"] == "symbol_error"].sort_values(["source", "line"], kind="stable").head(3)
        clean_marks += list(zip(se["source"].astype(str), se["line"].astype(int), strict=True))
    ext_all = np.concatenate([df["extended"].fillna(False).to_numpy(bool) if is_long else
                              df["extended"].to_numpy(bool) for df, is_long in ((long, True), (wide, False))
                              if df is not None])
    if wide is not None:
        o = order_all[n_long:]
        src_c = src_codes_all[n_long:]
        n_pid = len(order_u)
        for c in vocab:
            if f"v:{c}" not in wide or c in TRAFFIC_ONLY:
                continue
            v = wide[f"v:{c}"].to_numpy(np.int64)
            present = v >= 0
            if c in ALWAYS:
                keep = present
            else:
                moved = np.zeros(n_pid, dtype=bool)  # ports with a non-zero value in some snapshot
                moved[pid_wide[v > 0]] = True
                keep = present & moved[pid_wide]
                if c in QUIET:
                    # ports read in two or more snapshots whose counter never left zero: their zero samples span
                    # more than one snapshot
                    zero = present & ~keep
                    lo = np.full(n_pid, np.iinfo(np.int64).max, dtype=np.int64)
                    hi = np.full(n_pid, -1, dtype=np.int64)
                    np.minimum.at(lo, pid_wide[zero], o[zero])
                    np.maximum.at(hi, pid_wide[zero], o[zero])
                    quiet_ports[c] = int((hi > lo).sum())
                    first = np.flatnonzero(zero)[:3]
                    ln = wide[f"l:{c}"].to_numpy(np.int64)
                    quiet_marks[c] = [(str(sources[src_c[i]]), int(ln[i])) for i in first]
                    keep = keep.copy()
                    keep[first] = True
                if c == "symbol_error" and len(clean_marks) < 3:
                    first = np.flatnonzero(present)[: 3 - len(clean_marks)]
                    ln = wide[f"l:{c}"].to_numpy(np.int64)
                    clean_marks += [(str(sources[src_c[i]]), int(ln[i])) for i in first]
                    keep = keep.copy()
                    keep[first] = True
            idx = np.flatnonzero(keep)
            if not len(idx):
                continue
            add(idx + n_long, np.full(len(idx), vidx[c], dtype=np.int64), v[idx].astype(np.float64),
                wide[f"l:{c}"].to_numpy()[idx].astype(np.int64))
    cat = {k: np.concatenate(v) if v else np.array([]) for k, v in parts.items()}
    m = len(cat["row"])
    if m:
        row_u = cat["row"]
        srt, (pid, code, order, line) = _sample_order(pid_all[row_u], cat["code"], order_all[row_u], cat["line"],
                                                       (len(order_u), len(vocab), len(rank)))
        row, value = row_u[srt], cat["value"][srt]
    else:  # no samples: the empty columns a concatenation of nothing gives
        row = pid = code = order = line = value = cat["row"]
    same = np.zeros(m, dtype=bool)
    if m > 1:
        same[1:] = (pid[1:] == pid[:-1]) & (code[1:] == code[:-1])
    starts = np.flatnonzero(~same)
    ends = np.append(starts[1:], m)
    step = np.zeros(m)
    step[1:] = value[1:] - value[:-1]
    inc_i = np.where(same, np.where(step < 0, value, step), 0.0)
    reset_i = same & (step < 0)
    new_snap = np.zeros(m, dtype=np.int64)
    if m > 1:
        new_snap[1:] = same[1:] & (order[1:] != order[:-1])
    ts = ts_of_order[order.astype(np.int64)] if m else value
    with np.errstate(invalid="ignore"):
        t0 = np.fmin.reduceat(ts, starts) if m else ts
        t1 = np.fmax.reduceat(ts, starts) if m else ts
    # the ports' key columns at each series, then the series' own: one frame built once, not column by column
    at = pid[starts].astype(np.int64)
    series = pd.DataFrame({**{k: ports[k].array.take(at) for k in KEYS},
                           # the names as a column of the dtype pandas gives them, then taken: no per-row inference
                           "counter": pd.Series(np.array(vocab, dtype=object)).array.take(code[starts]) if m else [],
                           "first": value[starts], "last": value[ends - 1],
                           "inc": np.add.reduceat(inc_i, starts) if m else [],
                           "reset": np.logical_or.reduceat(reset_i, starts) if m else [],
                           "snaps": (np.add.reduceat(new_snap, starts) + 1) if m else [],
                           "extended": ext_all[row[ends - 1].astype(np.int64)] if m else value,
                           "t0": t0, "t1": t1, "interval_s": t1 - t0, "start": starts, "end": ends}, copy=False)
    samples = pd.DataFrame({"line": line, "value": value, "order": order, "pid": pid}, copy=False)
    src_list = [str(x) for x in sources]

    def rows_of(marks: list[tuple[str, int]]) -> list[int]:
        found = []
        for s, ln in marks[:3]:
            if s not in src_list:
                continue
            at_line = np.flatnonzero(line == ln)
            hit = at_line[src_codes_all[row[at_line]] == src_list.index(s)]
            if len(hit):
                found.append(int(hit[0]))
        return found

    clean_rows = rows_of(clean_marks)
    quiet = {c: (quiet_ports.get(c, 0), rows_of(quiet_marks.get(c, []))) for c in quiet_marks}
    return CounterTable(series=series, samples=samples, n_ports=len(ports), max_order=int(order.max()) if m else 0,
                        clean_rows=clean_rows, quiet=quiet, _row=row, _sources=src_list, _src=src_codes_all,
                        _hosts=list(hosts), _host=host_codes_all, _liners=liners, _li=li_all,
                        _long_texts=long["text"].astype(object).to_numpy() if long is not None else
                        np.array([], dtype=object), _resolved={}, vocab=vocab,
                        series_counter=code[starts].astype(np.int64), series_port=at, port_keys=port_keys)
