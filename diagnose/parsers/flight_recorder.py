"""PyTorch flight-recorder dumps (``TORCH_NCCL_TRACE_BUFFER_SIZE`` / ``TORCH_FR_BUFFER_SIZE``), one file per rank
named ``<prefix><rank>`` (default prefix ``/tmp/nccl_trace_rank_``).

The dump is a pickle written by ``torch/csrc/distributed/c10d/FlightRecorder*`` (older ``NCCLTraceBuffer``)
through the TorchScript pickler (protocol 2, only dicts/lists/tuples/str/int/float/bool/None), or JSON when dumped
with the JSON API (``_dump_nccl_trace_json``; there absent timestamps are ``0`` and ``pg_status`` values strings)::

    {"version": "2.5",
     "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
     "pg_status": {"0": {"last_enqueued_collective": 2, "last_started_collective": -1,
                         "last_completed_collective": 2}},
     "entries": [{"frames": [{"name": ..., "filename": ..., "line": ...}, ...],
                  "record_id": 0, "pg_id": 0, "process_group": ("0", "default_pg"),
                  "collective_seq_id": 1, "p2p_seq_id": 0, "op_id": 1, "profiling_name": "nccl:all_reduce",
                  "time_created_ns": ..., "input_sizes": [[3, 4]], "input_dtypes": ["Float"],
                  "output_sizes": [[3, 4]], "output_dtypes": ["Float"], "state": "completed",
                  "time_discovered_started_ns": None, "time_discovered_completed_ns": ...,
                  "retired": True, "timeout_ms": 600000, "is_p2p": False}, ...]}

Security: pickles are loaded with a restricted unpickler whose ``find_class`` refuses every global and whose
``persistent_load`` refuses persistent ids, so only builtin containers and scalars can be built and no callable
can ever be reached; a pickle that names any global is rejected with a problem, never executed.

This is a BINARY parser (``sniff_bytes``/``parse_bytes``) for the pickle and also reads the JSON form through the
text ``sniff``/``parse``. ``rank`` comes from the trailing digits of the file name. Each entry becomes a
:class:`~diagnose.parsers._gpu.FlightRecorderEntry`, each process group a
:class:`~diagnose.parsers._gpu.FlightRecorderPg`. ``frame`` is the innermost frame outside ``torch/distributed``.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from typing import Any

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._gpu import FlightRecorderEntry, FlightRecorderPg

FORMAT = "pytorch_flight_recorder"
BINARY = True

_MAX_ENTRIES = 200_000
_REPR_LIMIT = 120


class _RefusedGlobal(pickle.UnpicklingError):
    pass


class _SafeUnpickler(pickle.Unpickler):
    """Builds only builtin containers and scalars: every global / persistent id is refused."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D401 - pickle API
        raise _RefusedGlobal(f"pickle references global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise _RefusedGlobal("pickle uses a persistent id")


def _is_pickle(data: bytes) -> bool:
    return len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5


def sniff_bytes(data: bytes) -> int:
    head = data[:65536]
    if _is_pickle(head):
        if b"pg_config" in head or b"profiling_name" in head:
            return 95
        if b"entries" in head and b"version" in head:
            return 60
        return 0
    if head.lstrip()[:1] == b"{":
        try:
            return sniff(head.decode("utf-8", errors="replace"))
        except Exception:  # noqa: BLE001
            return 0
    return 0


def sniff(head: str) -> int:
    s = head.lstrip()
    if not s.startswith("{"):
        return 0
    if '"pg_config"' in s and ('"entries"' in s or '"pg_status"' in s or '"version"' in s):
        return 90
    if '"entries"' in s and '"profiling_name"' in s and '"collective_seq_id"' in s:
        return 85
    return 0


def _rank_from(source: str) -> int | None:
    base = source.replace("\\", "/").rsplit("/", 1)[-1]
    m = re.search(r"(\d+)(?:\.(?:pkl|pickle|json|bin|dump))?$", base)
    return int(m.group(1)) if m else None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"-?\d+", v.strip()):
        return int(v.strip())
    return None


def _str(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, (str, int, float)) and not isinstance(v, bool):
        return str(v)
    return None


def _bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    return None


def _short(obj: Any, limit: int = _REPR_LIMIT) -> str:
    """A bounded repr (depth, width and cycles are all safe)."""
    out: list[str] = []
    budget = [limit + 1]

    def emit(s: str) -> None:
        if budget[0] > 0:
            out.append(s[: budget[0]])
            budget[0] -= len(s)

    def walk(o: Any, depth: int) -> None:
        if budget[0] <= 0:
            return
        if depth > 6:
            emit("...")
            return
        if isinstance(o, (list, tuple)):
            emit("[" if isinstance(o, list) else "(")
            for i, x in enumerate(o):
                if budget[0] <= 0:
                    return
                if i:
                    emit(", ")
                walk(x, depth + 1)
            emit("]" if isinstance(o, list) else ")")
        elif isinstance(o, dict):
            emit("{...}")
        elif o is None or isinstance(o, (bool, int, float)):
            emit(repr(o))
        elif isinstance(o, str):
            emit(repr(o[:limit]))
        else:
            emit(type(o).__name__)

    walk(obj, 0)
    s = "".join(out)
    return s if len(s) <= limit else s[: limit - 1] + "\u2026"


def _frame(frames: Any) -> str | None:
    if not isinstance(frames, list):
        return None
    cands = [f for f in frames[:64] if isinstance(f, dict)]
    if not cands:
        return None
    pick = next(
        (f for f in cands if "torch/distributed" not in str(f.get("filename", "")).replace("\\", "/")), cands[0]
    )
    name, fn, ln = _str(pick.get("name")), _str(pick.get("filename")), _int(pick.get("line"))
    if name is None and fn is None:
        return None
    return clip(f"{name or '?'} at {fn or '?'}:{ln if ln is not None else '?'}")


def parse_bytes(data: bytes, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        if _is_pickle(data):
            try:
                obj = _SafeUnpickler(io.BytesIO(data)).load()
            except _RefusedGlobal as exc:
                problems.append(f"refused: {exc}; the file was not loaded")
                return ParseResult(format=FORMAT, records=records, problems=problems)
            except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
                    AttributeError, UnicodeDecodeError, OverflowError, MemoryError, RecursionError) as exc:
                problems.append(f"truncated or corrupt pickle: {type(exc).__name__}: {exc}")
                return ParseResult(format=FORMAT, records=records, problems=problems)
            _convert(obj, source, host, records, problems, entry_lines=None, lines=None)
        elif data.lstrip()[:1] == b"{":
            return parse(data.decode("utf-8", errors="replace"), source, host)
        else:
            problems.append("not a flight-recorder dump (neither a pickle nor JSON)")
    except Exception as exc:  # noqa: BLE001 - a parser never raises
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    records: list[Record] = []
    problems: list[str] = []
    try:
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:
            msg = str(exc)
            kind = "truncated" if "Expecting" in msg and "char" in msg and _near_end(exc, text) else "malformed"
            problems.append(f"{kind} JSON flight-recorder dump: {msg[:200]}")
            return ParseResult(format=FORMAT, records=records, problems=problems)
        lines = text.split("\n")
        entry_lines = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(r'"profiling_name"\s*:', text)]
        _convert(obj, source, host, records, problems, entry_lines=entry_lines, lines=lines)
    except Exception as exc:  # noqa: BLE001 - a parser never raises
        problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return ParseResult(format=FORMAT, records=records, problems=problems)


def _near_end(exc: Exception, text: str) -> bool:
    pos = getattr(exc, "pos", None)
    return isinstance(pos, int) and pos >= len(text.rstrip()) - 1


def _convert(
    obj: Any,
    source: str,
    host: str | None,
    records: list[Record],
    problems: list[str],
    entry_lines: list[int] | None,
    lines: list[str] | None,
) -> None:
    if not isinstance(obj, dict):
        problems.append(f"not a flight-recorder dump (top level is {type(obj).__name__}, not a dict)")
        return
    rank = _rank_from(source)
    version = _str(obj.get("version"))
    raw_entries = obj.get("entries")
    if raw_entries is None:
        raw_entries = []
        if "pg_config" not in obj:
            problems.append("not a flight-recorder dump (no entries, no pg_config)")
            return
    if not isinstance(raw_entries, list):
        problems.append("'entries' is not a list")
        raw_entries = []
    if len(raw_entries) > _MAX_ENTRIES:
        problems.append(f"{len(raw_entries)} entries: only the last {_MAX_ENTRIES} were read")
        raw_entries = raw_entries[-_MAX_ENTRIES:]

    use_lines = entry_lines is not None and len(entry_lines) == len(raw_entries)
    id_to_name: dict[str, tuple[str | None, str | None]] = {}
    bad = 0
    for i, e in enumerate(raw_entries):
        if not isinstance(e, dict):
            bad += 1
            continue
        pg = e.get("process_group")
        pg_name = pg_desc = None
        if isinstance(pg, (tuple, list)) and len(pg) >= 2:
            pg_name, pg_desc = _str(pg[0]), _str(pg[1])
        pg_id = _str(e.get("pg_id"))
        if pg_id is not None:
            id_to_name.setdefault(pg_id, (pg_name, pg_desc))
        op = _str(e.get("profiling_name"))
        state = _str(e.get("state"))
        seq = _int(e.get("collective_seq_id"))
        started = _int(e.get("time_discovered_started_ns")) or None  # JSON writes 0 for "not yet"
        completed = _int(e.get("time_discovered_completed_ns")) or None
        duration = e.get("duration_ms")
        if use_lines:
            assert entry_lines is not None and lines is not None
            line = entry_lines[i]
            text = lines[line - 1] if 0 < line <= len(lines) else ""
        elif lines is not None:
            line, text = 1, lines[0] if lines else ""
        else:
            line = i + 1
            text = f"entries[{i}]: {op} pg={pg_name or pg_id} seq={seq} state={state}"
        records.append(
            FlightRecorderEntry(
                source=source,
                line=line,
                text=clip(text),
                host=host,
                rank=rank,
                pg_id=pg_id,
                pg_desc=pg_desc,
                collective_seq_id=seq,
                p2p_seq_id=_int(e.get("p2p_seq_id")),
                op=op,
                state=state,
                input_sizes=_short(e["input_sizes"]) if "input_sizes" in e else None,
                time_created_ns=_int(e.get("time_created_ns")),
                timeout_ms=_int(e.get("timeout_ms")),
                pg_name=pg_name,
                record_id=_int(e.get("record_id")),
                time_discovered_started_ns=started,
                time_discovered_completed_ns=completed,
                retired=_bool(e.get("retired")),
                is_p2p=_bool(e.get("is_p2p")),
                duration_ms=float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool)
                else None,
                frame=_frame(e.get("frames")),
                version=version,
            )
        )
    if bad:
        problems.append(f"{bad} entries are not dicts")

    raw_cfg, raw_st = obj.get("pg_config"), obj.get("pg_status")
    pg_config: dict[Any, Any] = raw_cfg if isinstance(raw_cfg, dict) else {}
    pg_status: dict[Any, Any] = raw_st if isinstance(raw_st, dict) else {}
    used_cfg: set[str] = set()
    first_line = 1
    first_text = lines[0] if lines else "pg_status"
    for key, st in list(pg_status.items())[:10_000]:
        pg_id = _str(key)
        if pg_id is None:
            continue
        name, desc = id_to_name.get(pg_id, (None, None))
        cfg_key = name if name is not None and name in pg_config else (pg_id if pg_id in pg_config else None)
        cfg = pg_config.get(cfg_key) if cfg_key is not None else None
        if cfg_key is not None:
            used_cfg.add(cfg_key)
        cfg = cfg if isinstance(cfg, dict) else {}
        st = st if isinstance(st, dict) else {}
        records.append(
            FlightRecorderPg(
                source=source,
                line=first_line,
                text=clip(first_text if lines is not None else f"pg_status[{pg_id}]"),
                host=host,
                rank=rank,
                pg_id=pg_id,
                pg_name=name if name is not None else _str(cfg.get("name")),
                pg_desc=desc if desc is not None else _str(cfg.get("desc")),
                ranks=_str(cfg.get("ranks")),
                last_enqueued=_int(st.get("last_enqueued_collective")),
                last_started=_int(st.get("last_started_collective")),
                last_completed=_int(st.get("last_completed_collective")),
                version=version,
            )
        )
    for key, cfg in list(pg_config.items())[:10_000]:
        k = _str(key)
        if k is None or k in used_cfg:
            continue
        cfg = cfg if isinstance(cfg, dict) else {}
        records.append(
            FlightRecorderPg(
                source=source,
                line=first_line,
                text=clip(first_text if lines is not None else f"pg_config[{k}]"),
                host=host,
                rank=rank,
                pg_id=None,
                pg_name=_str(cfg.get("name")) or k,
                pg_desc=_str(cfg.get("desc")),
                ranks=_str(cfg.get("ranks")),
                last_enqueued=None,
                last_started=None,
                last_completed=None,
                version=version,
            )
        )
