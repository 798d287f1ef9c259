"""Records -> pandas frames, one per record type, plus a unified frame of error messages."""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections import defaultdict

import numpy as np
import pandas as pd

from diagnose.models.records import ColumnBatch, Record

_FIELD_CACHE: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    f = _FIELD_CACHE.get(cls)
    if f is None:
        f = tuple(x.name for x in dataclasses.fields(cls))
        _FIELD_CACHE[cls] = f
    return f


def build_frames(records: list[Record]) -> dict[str, pd.DataFrame]:
    groups: dict[type, list[Record]] = defaultdict(list)
    batches: dict[str, list[ColumnBatch]] = defaultdict(list)
    for r in records:
        if type(r) is ColumnBatch:
            batches[r.table].append(r)  # type: ignore[arg-type]
        else:
            groups[type(r)].append(r)
    frames: dict[str, pd.DataFrame] = {}
    for cls, recs in groups.items():
        cols = _fields(cls)
        getter = operator.attrgetter(*cols)  # one C call per record instead of one getattr per field
        frames[cls.__name__] = pd.DataFrame.from_records(list(map(getter, recs)), columns=list(cols))
    for table, group in sorted(batches.items()):
        # a table of bulk rows: the batches of every file, plus records of the same type from small files
        parts: list[pd.DataFrame] = []
        for indexed, run in itertools.groupby(group, key=lambda b: b.lines is not None):
            run_list = list(run)
            parts += [_indexed_frame(b) for b in run_list] if indexed else [_rows_frame(run_list)]
        parts += [frames[table]] if table in frames else []
        frames[table] = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    return frames


def _indexed_frame(batch: ColumnBatch) -> pd.DataFrame:
    """A batch of a bulk dump (numpy columns), with ``_lines`` to resolve the text of any line cited."""
    df = pd.DataFrame(batch.columns)
    df["_lines"] = pd.Series([batch.lines] * len(df), dtype=object)
    return df


def _rows_frame(run: list[ColumnBatch]) -> pd.DataFrame:
    """Consecutive row batches of a line parser (one per file or chunk): Python lists (or numpy arrays of the dtype
    pandas would infer from the values) plus their own ``text`` column. Their columns are joined first and the
    frame is built once, so each column's dtype is inferred over the whole table exactly as ``from_records`` infers
    it for records (a column that is all None in one chunk and strings in the next is still a string column, as it
    would be had the file been read in one piece)."""
    if len(run) == 1:
        return pd.DataFrame(run[0].columns)
    columns: dict[str, object] = {}
    for name in run[0].columns:
        parts = [b.columns[name] for b in run]
        if all(isinstance(p, np.ndarray) for p in parts):
            columns[name] = np.concatenate(parts)  # type: ignore[arg-type]
        else:  # Python values (an array next to a list becomes Python values again: the list decides the dtype)
            columns[name] = list(itertools.chain.from_iterable(
                p.tolist() if isinstance(p, np.ndarray) else p for p in parts))  # type: ignore[union-attr]
    return pd.DataFrame(columns)


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
    return out.sort_values(["source", "line"], kind="stable").reset_index(drop=True)
