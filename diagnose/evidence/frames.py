"""Records -> pandas frames, one per record type, plus a unified frame of error messages."""

from __future__ import annotations

import dataclasses
import operator
from collections import defaultdict

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
    batches: dict[str, list[pd.DataFrame]] = defaultdict(list)
    for r in records:
        if type(r) is ColumnBatch:
            df = pd.DataFrame(r.columns)
            df["_lines"] = pd.Series([r.lines] * len(df), dtype=object)  # resolves the text of any line cited
            batches[r.table].append(df)
        else:
            groups[type(r)].append(r)
    frames: dict[str, pd.DataFrame] = {}
    for cls, recs in groups.items():
        cols = _fields(cls)
        getter = operator.attrgetter(*cols)  # one C call per record instead of one getattr per field
        frames[cls.__name__] = pd.DataFrame.from_records(list(map(getter, recs)), columns=list(cols))
    for table, dfs in sorted(batches.items()):
        # a table of bulk rows: the batches of every file, plus records of the same type from small files
        parts = dfs + ([frames[table]] if table in frames else [])
        frames[table] = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    return frames


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
