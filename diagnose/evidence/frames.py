"""Records -> pandas frames, one per record type, plus a unified frame of error messages."""

from __future__ import annotations

import itertools
import operator
from collections import defaultdict
from typing import cast

import numpy as np
import pandas as pd

try:  # what DataFrame.from_records converts each object column with (private: a fallback below if it moves)
    from pandas.core.internals.construction import convert_object_array
except ImportError:  # pragma: no cover - depends on the pandas version
    convert_object_array = None

from diagnose.models.records import ColumnBatch, Record, field_names, int64_column


def build_frames(records: list[Record]) -> dict[str, pd.DataFrame]:
    groups: dict[type, list[Record]] = {}
    for cls, run in itertools.groupby(records, type):  # a file's records come in runs of one type
        got = groups.get(cls)
        if got is None:
            groups[cls] = list(run)
        else:
            got.extend(run)
    batches: dict[str, list[ColumnBatch]] = defaultdict(list)
    for b in cast(list[ColumnBatch], groups.pop(ColumnBatch, [])):  # keyed by type: these are ColumnBatch
        batches[b.table].append(b)
    frames = {cls.__name__: _records_frame(cls, recs) for cls, recs in groups.items()}
    for table, group in sorted(batches.items()):
        # a table of bulk rows: the batches of every file, plus records of the same type from small files
        parts: list[pd.DataFrame] = []
        for indexed, run in itertools.groupby(group, key=lambda b: b.lines is not None):
            run_list = list(run)
            parts.append(_indexed_frame(run_list) if indexed else _rows_frame(run_list))
        parts += [frames[table]] if table in frames else []
        frames[table] = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    if "EnvSetting" in frames:  # a variable set in several places: its last row is the effective value
        from diagnose.parsers._common import effective_order

        frames["EnvSetting"] = effective_order(frames["EnvSetting"])
    return frames


def _records_frame(cls: type, records: list[Record]) -> pd.DataFrame:
    """``pd.DataFrame.from_records`` of the records' fields, built column by column: one C-level pass per field
    (an object array of its values) instead of a tuple per record, a 2-D object array and its transpose, then the
    conversion ``from_records`` gives each column (``convert_object_array``: numbers, datetimes, strings), so the
    dtypes are the same. Nothing is consolidated: the frames are read column by column."""
    n = len(records)
    columns = {f: _converted(np.fromiter(map(operator.attrgetter(f), records), dtype=object, count=n))
               for f in field_names(cls)}
    return pd.DataFrame(columns, copy=False)


def _converted(raw: np.ndarray) -> np.ndarray | object:
    """What ``from_records`` makes of one column of Python values. A column of nothing but Python ints (line
    numbers, ports, LIDs) becomes int64, which pandas reaches through a slower general-purpose check of every
    value; ints beyond int64 take pandas' own way."""
    ints = int64_column(raw)
    if ints is not None:
        return ints
    if convert_object_array is None:  # pragma: no cover - the same conversion, through the public API
        return pd.DataFrame.from_records([(v,) for v in raw.tolist()], columns=["x"])["x"].array
    return convert_object_array([raw], dtype=None)[0]


def _columns(columns: dict[str, object]) -> dict[str, object]:
    """A line parser's columns with each list of nothing but ints as the int64 array pandas would make of it."""
    out = dict(columns)
    for name, values in columns.items():
        if isinstance(values, list):
            ints = int64_column(values)
            if ints is not None:
                out[name] = ints
    return out


def _indexed_frame(run: list[ColumnBatch]) -> pd.DataFrame:
    """Consecutive batches of bulk dumps (numpy columns) as one frame: what concatenating a frame of each batch
    gives, built column by column without the copies (a 4,096-host counter dump is ~400k rows of ~50 columns).

    Each column has the dtype pandas infers for it batch by batch, combined the way ``pd.concat`` combines
    them. ``_lines`` is each row's :class:`~diagnose.models.records.LineIndex`, to resolve the text of any line
    cited: a categorical column (one code per row, a category per batch), not a reference per row.
    """
    names = list(run[0].columns)
    if any(list(b.columns) != names for b in run):  # batches of differing columns: what concat fills in
        return pd.concat([_indexed_frame([b]) for b in run], ignore_index=True)
    columns: dict[str, object] = {}
    for name in names:
        parts = [b.columns[name] for b in run]
        dtypes = {p.dtype for p in parts}  # type: ignore[attr-defined]
        if len(dtypes) == 1 and np.dtype(object) not in dtypes:
            columns[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)  # type: ignore[arg-type]
        else:  # as frames, not series: concat combines an all-None object column with text differently for those
            one = [pd.DataFrame({name: p}, copy=False) for p in parts]
            columns[name] = (one[0] if len(one) == 1 else pd.concat(one, ignore_index=True))[name]  # dtype kept
    liners = {id(b.lines): b.lines for b in run}  # a line index per batch; one category per distinct index
    code_of = {k: i for i, k in enumerate(liners)}
    rows = [len(next(iter(b.columns.values()))) if b.columns else 0 for b in run]  # type: ignore[arg-type]
    codes = np.repeat(np.array([code_of[id(b.lines)] for b in run], dtype=np.int32), rows)
    columns["_lines"] = pd.Categorical.from_codes(codes, categories=pd.Index(list(liners.values()), dtype=object))
    return pd.DataFrame(columns, copy=False)


def _rows_frame(run: list[ColumnBatch]) -> pd.DataFrame:
    """Consecutive row batches of a line parser (one per file or chunk): Python lists (or numpy arrays of the dtype
    pandas would infer from the values) plus their own ``text`` column. Their columns are joined first and the
    frame is built once, so each column's dtype is inferred over the whole table exactly as ``from_records`` infers
    it for records (a column that is all None in one chunk and strings in the next is still a string column, as it
    would be had the file been read in one piece)."""
    if len(run) == 1:
        return pd.DataFrame(_columns(run[0].columns))
    columns: dict[str, object] = {}
    for name in run[0].columns:
        parts = [b.columns[name] for b in run]
        if all(isinstance(p, np.ndarray) for p in parts):
            columns[name] = np.concatenate(parts)  # type: ignore[arg-type]
        else:  # Python values (an array next to a list becomes Python values again: the list decides the dtype)
            joined: list[object] = []
            for p in parts:
                joined += p.tolist() if isinstance(p, np.ndarray) else cast(list[object], p)  # else a Python list
            columns[name] = joined
    return pd.DataFrame(_columns(columns))


def factorize_runs(values: np.ndarray, sort: bool = False, use_na_sentinel: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values, ...)`` of an object array, hashing only the first value of each run of equal
    neighbours: a bulk dump repeats its file name, its snapshot's time and a node's GUID over consecutive rows,
    and comparing neighbours costs a fraction of hashing every row. (Equal neighbours are what factorize puts
    under one code anyway; values that cannot be compared, such as ``pd.NA``, take the plain factorize.)"""
    if len(values) < 2:
        return pd.factorize(values, sort=sort, use_na_sentinel=use_na_sentinel)
    try:
        head = np.empty(len(values), dtype=bool)
        head[0] = True
        np.not_equal(values[1:], values[:-1], out=head[1:])
    except (TypeError, ValueError):
        return pd.factorize(values, sort=sort, use_na_sentinel=use_na_sentinel)
    at = np.flatnonzero(head)
    if len(at) > len(values) // 2:  # short runs: hashing the heads would save little
        return pd.factorize(values, sort=sort, use_na_sentinel=use_na_sentinel)
    codes, uniques = pd.factorize(values[at], sort=sort, use_na_sentinel=use_na_sentinel)
    return np.repeat(codes, np.diff(np.append(at, len(values)))), uniques


# Which record types carry a free-text error message, and in which column.
MESSAGE_SOURCES: dict[str, tuple[str, str]] = {
    "NcclWarn": ("message", "nccl_warn"),
    "PgError": ("message", "pytorch"),
    "CudaError": ("message", "cuda"),
    "WatchdogTimeout": ("text", "pytorch"),
    "Mlx5Event": ("message", "dmesg"),
    "KernelEvent": ("message", "dmesg"),
    "PeermemEvent": ("message", "dmesg"),
    "ToolError": ("message", "tool"),
    "FreeText": ("text", "symptom"),
    "MessageHit": ("text", "catalog"),  # a known message in any file: dropped where a parser's row holds the line
}


def message_frame(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    parts = []
    for name, (col, origin) in MESSAGE_SOURCES.items():
        df = frames.get(name)
        if df is None or df.empty or col not in df.columns:
            continue
        part = df[["source", "line", "text", "host"]].copy()
        part["message"] = df[col].astype(str)
        if name == "PgError" and "last_error" in df.columns:
            extra = df["last_error"].fillna("").astype(str)
            part["message"] = part["message"] + " " + extra
        part["origin"] = origin
        part["rank"] = df["rank"] if "rank" in df.columns else None
        parts.append(part)
    if not parts:
        return pd.DataFrame(columns=["source", "line", "text", "host", "message", "origin", "rank"])
    out = pd.concat(parts, ignore_index=True)
    if "MessageHit" in frames and (out["origin"] == "catalog").any():
        # one row per line: a catalog hit on a line a parser already made a message of adds nothing, and several
        # hits on one line (a glued paste) are one message
        cat = out["origin"] == "catalog"
        parsed = pd.MultiIndex.from_frame(out.loc[~cat, ["source", "line"]])
        keys = pd.MultiIndex.from_frame(out.loc[cat, ["source", "line"]])
        drop = keys.isin(parsed) | keys.duplicated()
        out = out.drop(index=out.index[cat][drop])
    return out.sort_values(["source", "line"], kind="stable").reset_index(drop=True)
