"""gather -> parse -> normalize -> find -> infer -> rank: the one path every interface calls."""

from __future__ import annotations

import atexit
import gc
import mmap
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import structlog

from diagnose import forked, parsers, pooled
from diagnose.budget import RecordBudget, held, record_bytes
from diagnose.bundle import BundleFile, LoadLimits, load_inputs, sniff_file
from diagnose.bundle.loader import iter_text_chunks, one_line, preview_inputs, read_capped, read_whole, tail_text
from diagnose.bundle.normalize import clean_pasted
from diagnose.bundle.session import segments
from diagnose.bundle.sniff import HEAD_CHARS as SNIFF_HEAD_CHARS
from diagnose.bundle.sniff import Sniffed
from diagnose.bundle.timelimit import TimeLimit, call_limited
from diagnose.catalog.loader import Catalog, load_catalog
from diagnose.engine import infer
from diagnose.evidence.context import Context, finding
from diagnose.evidence.extractors import FABRIC_LANE_READS, FABRIC_TABLES, all_extractors
from diagnose.evidence.frames import build_frames
from diagnose.evidence.scan import Prefetch, scan
from diagnose.gcpause import Pause
from diagnose.models.diagnosis import Diagnosis, EvidenceRef, FileEntry, Finding, Location, Symptom
from diagnose.models.records import ColumnBatch, Record
from diagnose.parsers.base import SNIFF_THRESHOLD
from diagnose.symptoms import (
    SYMPTOM_SOURCE,
    FreeText,
    classify,
    from_text,
    implied_symptom,
    prose_records,
    text_records,
)

if not structlog.is_configured():  # library use: quiet by default; the CLI and service configure their own
    from diagnose.logging_setup import configure

    configure("console", "warning")

log = structlog.get_logger("diagnose.pipeline")
parsers.registry()  # every run sniffs with every parser: imported once here, and inherited by forked children
all_extractors()  # likewise every extractor (and networkx, pandas' parts they use): not once per process per run

Progress = Callable[[str, int, int], None]


@dataclass
class Evidence:
    files: list[FileEntry] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    symptoms: list[Symptom] = field(default_factory=list)
    formats: set[str] = field(default_factory=set)
    second_core_peak_mib: float = 0.0  # peak RSS of the process that parsed bulk dumps, when one did
    record_bytes: int = 0  # the estimated size of the records its files gave (see diagnose.budget)


class _Spent(Exception):  # noqa: N818 - the record budget passed mid-file (see diagnose.budget)
    pass


def _parse_binary(bf: BundleFile, ev: Evidence) -> bool:
    """Offer a binary file to the parsers of binary formats; True when one took it."""
    if bf.data is None:
        return False
    best: tuple[int, str] | None = None
    for mod in parsers.registry():
        if not getattr(mod, "BINARY", False):
            continue
        try:
            score = int(mod.sniff_bytes(bf.data))
        except Exception:  # noqa: BLE001 - a sniffer bug must not cost the file
            score = 0
        if score >= SNIFF_THRESHOLD and (best is None or score > best[0]):
            best = (score, mod.FORMAT)
    if best is None:
        return False
    mod = parsers.by_format(best[1])
    try:
        res = mod.parse_bytes(bf.data, bf.path, bf.host_hint)
    except Exception as exc:  # noqa: BLE001
        log.warning("parser_failed", file=bf.path, format=best[1], error=repr(exc))
        ev.files.append(FileEntry(path=bf.path, format=best[1], records=0,
                                  problem=f"{best[1]} parser failed: {exc.__class__.__name__}: {exc}"))
        return True
    ev.records.extend(res.records)
    ev.formats.add(best[1])
    ev.files.append(FileEntry(path=bf.path, format=best[1], records=len(res.records),
                              problem="; ".join(res.problems) if res.problems else None))
    return True


def _run_parser(mod: ModuleType, text: str, bf: BundleFile, ev: Evidence, problems: list[str], offset: int = 0) -> int:
    """Parse ``text`` (the whole file, or a chunk starting after line ``offset``) with one parser."""
    try:
        res = mod.parse(text, bf.path, bf.host_hint)
    except Exception as exc:  # noqa: BLE001 - one parser bug never hides the other files
        log.warning("parser_failed", file=bf.path, format=mod.FORMAT, error=repr(exc))
        where = f" near line {offset + 1}" if offset else ""
        problems.append(f"{mod.FORMAT} parser failed{where}: {exc.__class__.__name__}: {exc}")
        return 0
    if offset:
        # the records were just built for this chunk and nobody else holds them: shift their line numbers
        # in place (dataclasses.replace would copy every record)
        for r in res.records:
            object.__setattr__(r, "line", r.line + offset)
            if isinstance(r, ColumnBatch):
                r.shift_lines(offset)
    ev.records.extend(res.records)
    problems.extend(p for p in res.problems if not (offset and p.startswith("truncated")))
    ev.formats.add(mod.FORMAT)
    return _rows(res.records)


def _run_bulk(mod: ModuleType, data: bytes | mmap.mmap, bf: BundleFile, ev: Evidence, problems: list[str]) -> int:
    """A bulk parser on the whole file's bytes (large counter dumps)."""
    try:
        res = mod.parse_bytes_bulk(data, bf.path, bf.host_hint)
    except Exception as exc:  # noqa: BLE001 - one parser bug never hides the other files
        log.warning("parser_failed", file=bf.path, format=mod.FORMAT, error=repr(exc))
        problems.append(f"{mod.FORMAT} parser failed: {exc.__class__.__name__}: {exc}")
        return 0
    if bf.stream is not None and not bf.stream.gz:
        for r in res.records:  # cite lines from the file on disk instead of holding all of its bytes
            if isinstance(r, ColumnBatch) and r.lines is not None:
                r.lines.detach(str(bf.stream.path))
    ev.records.extend(res.records)
    problems.extend(res.problems)
    ev.formats.add(mod.FORMAT)
    return _rows(res.records)


def _release(data: object) -> None:
    """Unmap a mapped file now (a view of it still held elsewhere keeps it mapped until that view goes)."""
    close = getattr(data, "close", None)
    if close is not None:
        try:
            close()
        except BufferError:
            pass


def _rows(records: list[Record]) -> int:
    """Records a file gave, counting every row of a columnar batch."""
    return sum(len(r.columns["line"]) if isinstance(r, ColumnBatch) else 1 for r in records)  # type: ignore[arg-type,misc]


def _sniff(bf: BundleFile) -> Any:
    """``sniff_file`` of ``bf``, asked once: choosing the files for the second process sniffs the large ones, and
    parsing them would sniff them again. A large file's text is only its head: the end of the file is read for the
    sniffers too, as they see the end of a file read whole (a job log whose nccl-tests table comes last)."""
    if bf.sniffed is None:
        text = bf.text or ""
        if bf.stream is not None and not bf.stream.gz and text:
            text = text[:SNIFF_HEAD_CHARS] + "\n" + tail_text(bf.stream.path, SNIFF_HEAD_CHARS // 4)
        bf.sniffed = sniff_file(bf.path, text)
    return bf.sniffed


def _sniff_limited(bf: BundleFile, limits: LoadLimits) -> Any:
    """:func:`_sniff` within ``limits.max_file_seconds``; stopped, the file is marked so that it is not parsed."""
    try:
        return call_limited(limits.max_file_seconds, _sniff, bf)
    except TimeLimit:
        log.warning("file_time_limit", file=bf.path, seconds=limits.max_file_seconds, stage="sniff")
        bf.sniffed = Sniffed((), {}, stopped=limits.max_file_seconds)
        return bf.sniffed


def time_limit_note(seconds: float) -> str:
    """The problem of a file whose sniffing and parsing ran past the per-file time limit."""
    return (f"sniffing and parsing stopped at the per-file time limit ({seconds:g} s, --max-file-seconds):"
            " nothing of this file was used")


def _parse_file(bf: BundleFile, ev: Evidence, limits: LoadLimits, progress: Progress | None = None,
                mapped: bool = False) -> None:
    """``bf`` parsed into ``ev``, within ``limits.max_file_seconds`` of wall time (in whichever process parses it:
    this one, the forked child or the pool's worker, each enforcing it on its own parse). Past the limit, what the
    file gave so far is dropped and the file is listed with the limit (a ``file_problem``). ``mapped``: bulk dumps
    are mapped, not read (see :func:`read_whole`: the child only)."""
    records, files, formats = len(ev.records), len(ev.files), set(ev.formats)
    if held.spent:  # the record budget was spent by the files before this one (serially, in path order)
        _drop(bf, ev, records, files, formats, held.skipped())
        return
    try:
        call_limited(limits.max_file_seconds, _parse_file_now, bf, ev, limits, progress, mapped)
        cost = record_bytes(ev.records[records:])
        if not held.fits(cost):
            raise _Spent
        held.charge(cost)
        ev.record_bytes += cost
        for k in range(files, len(ev.files)):  # a problem is one line, whatever a parser's message held
            fe = ev.files[k]
            if fe.problem and ("\n" in fe.problem or "\r" in fe.problem):
                ev.files[k] = fe.model_copy(update={"problem": one_line(fe.problem)})
    except TimeLimit:
        _drop(bf, ev, records, files, formats, time_limit_note(limits.max_file_seconds))
        log.warning("file_time_limit", file=bf.path, seconds=limits.max_file_seconds, stage="parse")
    except _Spent:
        if not held.serial:
            del ev.records[records:]
            raise RecordBudget(held.limit) from None
        held.spent = True
        _drop(bf, ev, records, files, formats, held.note())
        log.warning("record_budget_spent", file=bf.path, limit_mib=held.limit >> 20)


def _taken(part: Evidence) -> None:
    """A file's Evidence that another process parsed, counted here: this process holds it now (a part whose records
    pass the budget raises :class:`RecordBudget`, as one parsed here would)."""
    if not held.fits(part.record_bytes):
        raise RecordBudget(held.limit)
    held.charge(part.record_bytes)


def _drop(bf: BundleFile, ev: Evidence, records: int, files: int, formats: set[str], note: str) -> None:
    """What ``bf`` gave to ``ev`` taken back (past ``records`` and ``files``, formats not in ``formats``), and the
    file listed with ``note``, the limit it hit."""
    del ev.records[records:]
    del ev.files[files:]
    ev.formats.intersection_update(formats)
    sn = bf.sniffed
    fmt = "+".join(sn.formats) if sn is not None and sn.formats else "unknown"
    ev.files.append(FileEntry(path=bf.path, format=fmt, records=0, problem="; ".join([*dict.fromkeys(bf.problems), note])))


def _parse_file_now(bf: BundleFile, ev: Evidence, limits: LoadLimits, progress: Progress | None = None,
                    mapped: bool = False) -> None:
    if bf.text is None:
        if _parse_binary(bf, ev):
            return
        ev.files.append(FileEntry(path=bf.path, format="unreadable", records=0, problem="; ".join(bf.problems)))
        return
    if not bf.text.strip():
        ev.files.append(FileEntry(path=bf.path, format="empty", records=0, problem="empty file"))
        return
    if bf.stream is None:
        cleaned = clean_pasted(bf.text)
        if cleaned is not bf.text:  # fences, quote marks or HTML entities of a paste, undone line for line
            bf.text = cleaned
            bf.sniffed = None
        if _parse_session(bf, ev):
            return
    sn = _sniff(bf)
    if sn.stopped is not None:  # sniffing it already ran past the limit (see _sniff_limited)
        raise TimeLimit(sn.stopped)
    if not sn.formats:
        # no parser claims it: its known messages still count (a pasted fragment, a tool nothing reads yet)
        hits = _settled(scan(bf.text, bf.path, bf.host_hint) if bf.stream is None else _scan_large(bf, limits), [])
        ev.records.extend(hits)
        prose = prose_records(bf.text, bf.path, bf.host_hint) if bf.stream is None else []
        ev.records.extend(prose)
        fmt = "messages" if hits else "prose" if prose else "unknown"
        ev.files.append(FileEntry(path=bf.path, format=fmt, records=len(hits) + len(prose),
                                  problem="; ".join(bf.problems) or None))
        return
    problems = list(bf.problems)
    mods = [parsers.by_format(f) for f in sn.formats]
    n = 0
    first = len(ev.records)
    if bf.stream is None:
        # a text past the streaming size held in memory (an archive member) is parsed in chunks by the parsers that
        # can, as the same file streamed from disk is: one parse of 64 MiB of log lines builds a GB of values at once
        text = bf.text
        chunked = [m for m in mods if getattr(m, "STREAMABLE", False)] if len(text) > limits.stream_bytes else []
        for mod in mods:
            if mod not in chunked:
                n += _run_parser(mod, text, bf, ev, problems)
        if chunked:
            n += _parse_chunks(_text_chunks(text, limits.chunk_bytes), len(text), chunked, bf, ev, problems, first,
                               progress)
        else:
            ev.records.extend(_settled(scan(text, bf.path, bf.host_hint), ev.records, first))
    else:
        # a large file: line-oriented formats are parsed chunk by chunk (memory bounded by the chunk size),
        # the others see the head and tail of the file
        bulk = [m for m in mods if hasattr(m, "parse_bytes_bulk")]
        if bulk:
            data = read_whole(bf.stream, limits, mapped)
            if data is None:
                problems.append(f"larger than {limits.max_bulk_bytes // 1048576} MiB: read in part")
                bulk = []
            else:
                try:
                    for mod in bulk:
                        n += _run_bulk(mod, data, bf, ev, problems)
                    # a large counter dump a bulk parser reads whole is a table every line of which is a record:
                    # the catalog reads the logs, not the dumps (a 4,096-host fabric's dumps are 1.5 GB of counters)
                finally:
                    _release(data)
                del data
        streamed = [m for m in mods if getattr(m, "STREAMABLE", False) and m not in bulk]
        capped = [m for m in mods if not getattr(m, "STREAMABLE", False) and m not in bulk]
        if streamed:
            n += _parse_chunks(iter_text_chunks(bf.stream, limits, problems), bf.stream.size, streamed, bf, ev,
                               problems, first, progress)
        if capped:
            text, notes = read_capped(bf.stream, limits)
            problems += notes
            for mod in capped:
                n += _run_parser(mod, text, bf, ev, problems)
            if not streamed and not bulk:
                ev.records.extend(_settled(scan(text, bf.path, bf.host_hint), ev.records, first))
    ev.files.append(FileEntry(path=bf.path, format="+".join(sn.formats), records=n,
                              problem="; ".join(dict.fromkeys(problems)) if problems else None))


def _parse_chunks(chunks: Iterable[tuple[int, str]], size: int, mods: list[ModuleType], bf: BundleFile, ev: Evidence,
                  problems: list[str], first: int, progress: Progress | None) -> int:
    """A file's text, chunk by chunk (``(first line number, text)``, each ending on a line boundary), through the
    line parsers ``mods`` and the catalog's prefilter; the record budget is checked between chunks (a file streamed
    from disk may hold any number of records). Returns the rows parsed."""
    n = done = 0
    seen, cost = first, 0  # the records of the chunks so far, and their estimated size
    budget: dict[str, int] = {}  # the catalog's hits per entry across the chunks of this file
    gave: set[str] = set()  # the parsers that made records of some chunk
    empty: list[tuple[int, str]] = []  # where in ``problems`` a chunk without records of that parser said something
    for first_line, chunk in chunks:
        cost += record_bytes(ev.records[seen:])
        seen = len(ev.records)
        if not held.fits(cost):
            raise _Spent
        pre = Prefetch(chunk)  # the catalog's prefilter on this chunk, beside the parsers
        for mod in mods:
            before = len(problems)
            rows = _run_parser(mod, chunk, bf, ev, problems, offset=first_line - 1)
            n += rows
            if rows:
                gave.add(mod.FORMAT)
            else:
                empty += [(k, mod.FORMAT) for k in range(before, len(problems))]
        hits = pre.hits(bf.path, bf.host_hint, first_line, budget)
        del pre
        ev.records.extend(_settled(hits, ev.records, first))
        done += len(chunk)
        if progress:
            progress(f"{bf.path} {min(100, done * 100 // max(1, size))}%", -1, -1)
    # a chunk's "no ... lines found" is not the file's when other chunks gave that parser records (a problem of a
    # line stays): the file reads as it would in one piece
    for k, fmt in reversed(empty):
        if fmt in gave and not problems[k].startswith("line "):
            del problems[k]
    return n


def _text_chunks(text: str, size: int) -> Iterator[tuple[int, str]]:
    """``text`` in the chunks :func:`iter_text_chunks` cuts the same file into on disk (``size`` characters read at a
    time, each chunk up to the last line end read so far), with their first line numbers: a line parser that reads
    across lines sees the same pieces either way (lines are clipped when decoded, so a chunk stays bounded)."""
    pos = start = 0
    line = 1
    while pos < len(text):
        pos = min(pos + size, len(text))
        last = text.rfind("\n", start, pos)
        if last < 0:
            continue
        chunk = text[start:last + 1]
        yield line, chunk
        line += chunk.count("\n")
        start = last + 1
    if start < len(text):
        yield line, text[start:]


def _parse_session(bf: BundleFile, ev: Evidence) -> bool:
    """A pasted terminal session (see :mod:`diagnose.bundle.session`): each command's output read by the parser its
    command names (and by any line log that claims it), with the file's own line numbers. False when no prompt in
    the file names a tool we read: the file is sniffed whole as usual."""
    assert bf.text is not None
    segs = segments(bf.text)
    named = {sg.fmt for sg in segs if sg.fmt}
    if not named:
        return False
    if named <= set(_sniff(bf).formats):
        return False  # the whole file is that tool's output already (a perfquery dump's `# perfquery` lines)
    mixable = {m.FORMAT for m in parsers.registry() if getattr(m, "MIXABLE", False)}
    problems = list(bf.problems)
    first = len(ev.records)
    formats: list[str] = []
    n = 0
    for sg in segs:
        if not sg.text.strip():
            continue
        claimed = list(sniff_file(bf.path, sg.text, shortcut=False).formats)
        if sg.fmt and sg.fmt not in claimed:
            claimed = [sg.fmt] + [f for f in claimed if f in mixable]
        for f in claimed:
            try:
                mod = parsers.by_format(f)
            except KeyError:
                continue
            got = _run_parser(mod, sg.text, bf, ev, problems, offset=sg.first_line - 1)
            n += got
            if f not in formats and (got or f == sg.fmt):
                formats.append(f)
    hits = _settled(scan(bf.text, bf.path, bf.host_hint), ev.records, first)
    ev.records.extend(hits)
    prose = prose_records(bf.text, bf.path, bf.host_hint)  # the reporter's words between the commands
    ev.records.extend(prose)
    fmt = "+".join(formats) if formats else ("messages" if hits else "prose" if prose else "unknown")
    ev.files.append(FileEntry(path=bf.path, format=fmt, records=n + len(hits) + len(prose),
                              problem="; ".join(dict.fromkeys(problems)) if problems else None))
    return True


def _settled(hits: Sequence[Record], records: list[Record], first: int = 0) -> list[Record]:
    """The catalog's hits of one file, a stated setting (``NCCL_X set by environment to Y``) as the EnvSetting
    record a parser would make of it, unless a parser already did for that line (``records[first:]``: the records
    parsed so far from this file; read only when a hit states a setting)."""
    if not any(h.kind == "env_setting" for h in hits):  # type: ignore[attr-defined]
        return list(hits)
    import json
    from itertools import islice

    from diagnose.parsers._common import EnvSetting

    have = {(r.source, r.line, r.name) for r in islice(records, first, None) if isinstance(r, EnvSetting)}
    out: list[Record] = []
    for h in hits:
        if h.kind != "env_setting":  # type: ignore[attr-defined]
            out.append(h)
            continue
        a = json.loads(h.attrs)  # type: ignore[attr-defined]
        name, value = str(a.get("name", "")), str(a.get("value", ""))
        if name and (h.source, h.line, name) not in have:
            have.add((h.source, h.line, name))
            out.append(EnvSetting(source=h.source, line=h.line, text=h.text, host=h.host, name=name,
                                  value=value.rstrip(".,;"), origin="nccl_log"))
    return out


def _scan_large(bf: BundleFile, limits: LoadLimits) -> list[Record]:
    """The catalog's hits in a large file no parser claims, read chunk by chunk."""
    assert bf.stream is not None
    out: list[Record] = []
    notes: list[str] = []
    budget: dict[str, int] = {}
    for first_line, chunk in iter_text_chunks(bf.stream, limits, notes):
        out.extend(scan(chunk, bf.path, bf.host_hint, first_line, budget))
    return out


def _leave(obj: object, where: str, path: str | None = None) -> str:
    """Pickle ``obj`` into ``path`` or a new file in ``where`` (how results pass between the processes); the path.
    Raises what writing or pickling raises."""
    import pickle
    import tempfile

    if path is None:
        fd, path = tempfile.mkstemp(dir=where, suffix=".pickle")
        fh = os.fdopen(fd, "wb")
    else:
        fh = open(path, "wb")  # noqa: SIM115 - closed below
    with fh:
        pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def _take_back(path: str) -> Any:
    """The object :func:`_leave` pickled at ``path``; the file is removed, read or not."""
    import pickle

    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


_SPILLS: dict[str, int] = {}  # the spill folders not yet removed, and the process that made each


class _SpillDir:
    """A temporary folder for second-process results, made on first use and removed with all it holds (also when
    the process leaves without closing it: at exit, and on SIGTERM during :func:`gather`, see :class:`_Terminated`)."""

    def __init__(self) -> None:
        self.path: str | None = None

    def get(self) -> str | None:
        if self.path is None:
            import tempfile

            try:
                self.path = tempfile.mkdtemp(prefix="diagnose-parts-")
            except OSError:
                return None
            _SPILLS[self.path] = os.getpid()
        return self.path

    def close(self) -> None:
        if self.path is not None:
            import shutil

            shutil.rmtree(self.path, ignore_errors=True)
            _SPILLS.pop(self.path, None)
            self.path = None


def _remove_spills() -> None:
    """At exit: the spill folders this process made and did not remove (a forked child's copy of the list is its
    parent's: not removed there)."""
    import shutil

    for path, pid in list(_SPILLS.items()):
        if pid == os.getpid():
            shutil.rmtree(path, ignore_errors=True)
            _SPILLS.pop(path, None)


atexit.register(_remove_spills)


class _Terminated:
    """While :func:`gather` runs in a process's main thread that left SIGTERM to its default (the CLI), SIGTERM
    leaves as ``SystemExit(143)`` instead of ending the process where it stands: the forked child is stopped and
    the spill folder removed on the way out, as on an error. A process that handles SIGTERM itself (the service)
    keeps its handler."""

    def __enter__(self) -> None:
        import signal

        self.previous = None
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self.previous = signal.signal(signal.SIGTERM, _exit_on_signal)

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _sends_columns(mod: ModuleType) -> bool:
    """A parser whose result for a large file is a few column batches (numpy arrays or lists of values), which
    cross a process boundary cheaply; a million small records would cost more to send than to parse here."""
    return hasattr(mod, "parse_bytes_bulk") or bool(getattr(mod, "COLUMNS_WHEN_LARGE", False))


def _worth_a_second(files: list[BundleFile], limits: LoadLimits) -> bool:
    """Whether the large files could reach ``limits.parallel_min_bytes`` (before sniffing what they are)."""
    if (os.cpu_count() or 1) < 2 or limits.parallel_min_bytes <= 0:
        return False
    return sum(bf.stream.size for bf in files if bf.stream is not None and bf.text is not None) >= \
        limits.parallel_min_bytes


def _plan(files: list[BundleFile], limits: LoadLimits) -> tuple[list[int], dict[int, float]]:
    """The bulk files, most expensive first, and their estimated costs: what both processes work out alike."""
    offload = _offloadable(files, limits)
    costs = {i: _bulk_cost(files[i]) for i in offload}
    return sorted(offload, key=lambda i: (-costs[i], i)), costs


def _offloadable(files: list[BundleFile], limits: LoadLimits, pool: bool = False) -> set[int]:
    """Large files worth parsing on the second core: counter dumps and topologies, whose parsers give column
    batches (see :func:`_sends_columns`), together at least ``limits.parallel_min_bytes`` (``pool``: through
    the fork-server pool, at least ``limits.pool_min_bytes`` too)."""
    if (os.cpu_count() or 1) < 2 or limits.parallel_min_bytes <= 0:
        return set()
    minimum = max(limits.parallel_min_bytes, limits.pool_min_bytes) if pool else limits.parallel_min_bytes
    picked: set[int] = set()
    total = 0
    for i, bf in enumerate(files):
        if bf.stream is None or bf.text is None:
            continue
        sn = _sniff_limited(bf, limits)
        if sn.formats and all(_sends_columns(parsers.by_format(f)) for f in sn.formats):
            picked.add(i)
            total += bf.stream.size
    return picked if total >= minimum else set()


_HAND_OVER = 256  # small files handed to an idle second process at a time


def _parse_here(bf: BundleFile, limits: LoadLimits, progress: Progress | None = None) -> Evidence:
    part = Evidence()
    _parse_file(bf, part, limits, progress)
    bf.text = bf.data = None  # its records hold what it said: the text is not held on to the end (a parse that
    # must start again in path order, see diagnose.budget, loads the input again)
    if bf.stream is not None:
        # a large file's records live until the run ends and hold no cycles: frozen, the collections that the
        # rest of the parse triggers do not walk them again (gather() unfreezes everything at its end)
        gc.freeze()
    return part


def _run_some(ctx: Context, todo: list[tuple[str, Callable[[Context], list[Finding]]]]
              ) -> dict[str, tuple[list[Finding], str | None]]:
    """Run extractors: name -> (findings, the error that stopped it as ``Class: message``, or None)."""
    out: dict[str, tuple[list[Finding], str | None]] = {}
    for name, fn in todo:
        try:
            out[name] = (fn(ctx), None)
        except Exception as exc:  # noqa: BLE001 - one extractor bug never hides the others' findings
            out[name] = ([], f"{exc.__class__.__name__}: {exc}")
    return out


def _peak_mib() -> float:
    """An upper bound of the memory a forked child added to the machine's use: its peak resident set (the pages it
    still shares with its parent, and those of the files it maps, count too). A kernel counter, cheap to read: the
    exact private share (smaps_rollup) walks every page table, ~17 ms a call in a child holding a 4,096-host
    fabric's columns, and is only the current use, not the peak."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class _Lane:
    """Fabric extractors running in a forked child, whose results land in ``path``."""

    pid: int
    path: str
    todo: list[tuple[str, Callable[[Context], list[Finding]]]]

    def collect(self, ctx: Context) -> tuple[dict[str, tuple[list[Finding], str | None]], float]:
        """The child's results (and its peak memory in MiB); the extractors run here if it failed."""
        try:
            _, status = os.waitpid(self.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError(f"fabric lane exited with status {os.waitstatus_to_exitcode(status)}")
            out, mib = _take_back(self.path)
            if set(out) != {n for n, _ in self.todo}:
                raise RuntimeError("fabric lane returned another set of extractors")
            return out, mib
        except Exception as exc:  # noqa: BLE001 - a lost child costs time, never findings (the spill folder
            log.warning("fabric_lane_failed", error=repr(exc))  # goes with what it may hold)
            return _run_some(ctx, self.todo), 0.0


def _fork_lane(ctx: Context, todo: list[tuple[str, Callable[[Context], list[Finding]]]], spill: _SpillDir
               ) -> _Lane | None:
    """Fork a child that runs ``todo`` on the same (copy-on-write) frames and leaves its findings in a file.

    Only where :func:`_can_fork`; the child never logs and leaves by ``os._exit``."""
    if not _can_fork():
        return None
    where = spill.get()
    if where is None:
        return None
    import tempfile

    try:
        fd, path = tempfile.mkstemp(dir=where, suffix=".pickle")
    except OSError as exc:  # no room for its result: the extractors run here
        log.warning("fabric_lane_unavailable", error=repr(exc))
        return None
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(fd)
        log.warning("fabric_lane_unavailable", error=repr(exc))
        return None
    if pid == 0:  # the child
        code = 1
        try:
            os.close(fd)
            _leave((_run_some(ctx, todo), _peak_mib()), where, path)
            code = 0
        finally:
            os._exit(code)
    os.close(fd)
    return _Lane(pid, path, todo)


class _RemoteLane:
    """The fabric extractors in the forked child that parsed the counter dumps and the topology and kept their
    records (see :func:`diagnose.forked._serve`): this process sends it the fabric tables' records it parsed itself
    and the other tables those extractors read (:data:`FABRIC_LANE_READS`); if the child cannot answer, the files it
    parsed are parsed again here for their fabric records and the extractors run here."""

    def __init__(self, second: forked._ForkSecond, files: list[BundleFile], limits: LoadLimits, parts: list[Evidence],
                 spill: _SpillDir) -> None:
        self.second, self.files, self.limits, self.spill = second, files, limits, spill
        self.theirs = sorted(i for i in second.mine() if second.done.get(i) is not None)  # their records are there
        self.sent: dict[int, list[Record]] = {}
        for i, part in enumerate(parts):  # this process's own fabric records leave its frames
            owned, part.records = _owned(part.records)
            if owned:
                self.sent[i] = owned

    asked: bool | None = None  # whether the child was asked (None: not yet)

    def ask(self, shared: dict[str, Any], formats: set[str]) -> None:
        """Send the child this process's fabric rows and ``shared`` (the frames of FABRIC_LANE_READS)."""
        where = self.spill.get()
        self.asked = where is not None and self.second.ask_lane(self.sent, shared, set(formats), where)

    def collect(self, ctx: Context, todo: list[tuple[str, Callable[[Context], list[Finding]]]], asked: bool
                ) -> tuple[dict[str, tuple[list[Finding], str | None]], float]:
        got = self.second.lane_result() if asked else None
        if got is not None and set(got[0]) == {n for n, _ in todo}:
            return got
        log.warning("fabric_lane_failed", error="the second process gave no fabric findings; running them here")
        by_file = dict(self.sent)
        for i in self.theirs:
            owned, _ = _owned(_parse_here(self.files[i], self.limits).records)
            if owned:
                by_file[i] = owned
        local = Context(frames={**ctx.frames, **build_frames([r for i in sorted(by_file) for r in by_file[i]])},
                        formats=ctx.formats)
        return _run_some(local, todo), 0.0


def run_extractors(ctx: Context, limits: LoadLimits, spill: _SpillDir | None = None,
                   remote: _RemoteLane | None = None) -> tuple[list[Finding], float]:
    """Every extractor's findings, in registry order, and the MiB a second process added (0 when none ran).

    On a large bundle the fabric extractors (those reading the counter table or the fabric graph, which only they
    build) run in a forked child while this process runs the others; the findings are merged in registry order,
    so the result is the same either way."""
    from diagnose.evidence.extractors import FABRIC_LANE

    todo = all_extractors()
    fabric = [(n, f) for n, f in todo if n in FABRIC_LANE]
    rows = sum(len(ctx.frames[k]) for k in FABRIC_TABLES if k in ctx.frames)
    own = spill or _SpillDir()
    try:
        if remote is not None:  # the child that parsed the fabric tables runs them (see _RemoteLane)
            if remote.asked is None:
                remote.ask({k: ctx.frames[k] for k in FABRIC_LANE_READS if k in ctx.frames}, ctx.formats)
            here = _run_some(ctx, [(n, f) for n, f in todo if n not in FABRIC_LANE])
            got, mib = remote.collect(ctx, fabric, bool(remote.asked))
            here.update(got)
            return _merged(todo, here), mib
        lane = None
        if fabric and 0 < limits.fabric_lane_min_rows <= rows:
            lane = _fork_lane(ctx, fabric, own)
        here = _run_some(ctx, [(n, f) for n, f in todo if lane is None or n not in FABRIC_LANE])
        mib = 0.0
        if lane is not None:
            got, mib = lane.collect(ctx)
            here.update(got)
    finally:
        if spill is None:
            own.close()
    return _merged(todo, here), mib


def _merged(todo: list[tuple[str, Callable[[Context], list[Finding]]]],
            here: dict[str, tuple[list[Finding], str | None]]) -> list[Finding]:
    """Every extractor's findings in registry order, a failed one's error as a finding of its own."""
    raw: list[Finding] = []
    for name, _fn in todo:
        found, error = here[name]
        raw.extend(found)
        if error is not None:
            log.warning("extractor_failed", extractor=name, error=error)
            raw.append(finding("extractor_failed", f"Extractor {name} failed: {error}", attrs={"extractor": name}))
    return raw


def _can_fork() -> bool:
    """Whether a child may be forked here: a POSIX process with no thread but this one (a fork copies only the
    calling thread; a lock another thread holds, such as a stream's, would stay held in the child forever). The
    threads reaping earlier children are waited for first: each ends when the kernel has freed its child (a triage
    right after another waits up to ~0.1 s for that)."""
    forked.join_reapers()
    return hasattr(os, "fork") and threading.active_count() == 1 and (os.cpu_count() or 1) >= 2


_DEFAULT_NS_PER_BYTE = 40.0  # measured for the line parsers of ibstat, dmesg, NCCL logs (2026, this project's VM)
_NS_PER_FILE = 80_000.0  # sniffing and bookkeeping per file


def _cost(bf: BundleFile, ns_per_byte: float = _DEFAULT_NS_PER_BYTE) -> float:
    """Estimated seconds to parse ``bf``: only compared with other estimates, to decide who parses what."""
    size = bf.stream.size if bf.stream is not None else len(bf.text or "")
    return (_NS_PER_FILE + size * ns_per_byte) * 1e-9


def _bulk_cost(bf: BundleFile) -> float:
    sn = _sniff(bf)
    rates = [float(getattr(parsers.by_format(f), "PARSE_NS_PER_BYTE", _DEFAULT_NS_PER_BYTE)) for f in sn.formats]
    return _cost(bf, sum(rates) if rates else _DEFAULT_NS_PER_BYTE)


def _owned(records: list[Record]) -> tuple[list[Record], list[Record]]:
    """``records`` split into the fabric tables' (:data:`FABRIC_TABLES`) and the rest, each in order."""
    mine: list[Record] = []
    rest: list[Record] = []
    for r in records:
        (mine if _table(r) in FABRIC_TABLES else rest).append(r)
    return mine, rest


def _table(r: Record) -> str:
    return r.table if isinstance(r, ColumnBatch) else type(r).__name__  # type: ignore[attr-defined,no-any-return]


def gather(
    paths: Sequence[str | os.PathLike[str]],
    symptom: str | None = None,
    symptom_source: str = "cli",
    limits: LoadLimits | None = None,
    progress: Progress | None = None,
    keep_records: bool = True,
) -> Evidence:
    """Load, sniff, parse and extract findings. Raises BundleError only for unusable inputs.

    ``keep_records=False`` drops the parsed records once the frames hold them (``triage`` does: at 4,096 hosts
    the counter batches alone are hundreds of MB, and keeping both copies through the extractors raises the
    peak by that much).
    """
    spill = _SpillDir()
    # Loading and parsing build millions of objects that form no cycles and live until the frames are built: each
    # full collection on the way walks all of them again (0.3-0.4 s at 4,096 hosts, a forked child's parse
    # included, as it inherits the pause). The collector is paused until they are frozen (_findings) and
    # resumes, if it ran (see diagnose.gcpause: pauses on other threads overlap), for the extractors.
    with _Terminated():
        pause = Pause()
        try:
            return _gather(paths, symptom, symptom_source, limits or LoadLimits(), progress, keep_records, spill,
                           pause)
        finally:
            spill.close()
            gc.unfreeze()  # what _gather froze goes back to the collector
            pause.release()


def _gather(paths: Sequence[str | os.PathLike[str]], symptom: str | None, symptom_source: str, limits: LoadLimits,
            progress: Progress | None, keep_records: bool, spill: _SpillDir, pause: Pause) -> Evidence:
    # Without records to return (triage), the child keeps the fabric tables' records it parses (the counter dumps
    # and the topology: most of a large bundle's bytes) and later runs the fabric extractors on them itself;
    # they never cross to this process, which holds the rest.
    # The child is forked as soon as the large files are known (listed, their heads read), before the thousands
    # of small files are read (~0.3 s at 4,096 hosts): it starts on the dumps while this process reads the rest.
    second: forked._ForkSecond | None = None
    held.begin(limits.max_record_bytes, serial=False)  # before the fork: the child counts its own records
    preview = preview_inputs(paths, limits) if paths and _can_fork() else None
    if preview is not None and _worth_a_second(preview, limits):
        second = forked._ForkSecond.start(preview, limits, spill, own_fabric=not keep_records)
    try:
        # no files at all is fine when there is a symptom (an alert or a chat question with no bundle yet): the
        # text is then the only evidence; with neither, load_inputs explains what to pass
        files = load_inputs(paths, limits) if paths or not (symptom and symptom.strip()) else []
    except BaseException:
        if second is not None:
            second.close(kill=True)
        raise
    if second is not None and not second.adopt(files):  # not the files it was forked with: forked again below
        second.close(kill=True)
        second = None
    ev = Evidence()
    gc.freeze()  # the loaded texts live until the end and hold no cycles: no collection walks them again
    if second is None and _can_fork() and _worth_a_second(files, limits):
        second = forked._ForkSecond.start(files, limits, spill, own_fabric=not keep_records)
    offload = set(second.bulk) if second is not None else _offloadable(files, limits, pool=True)
    remote: _RemoteLane | None = None
    held.serial = not offload  # one process, in path order
    try:
        try:
            if second is not None and offload:
                parts = forked._parse_forked(files, offload, second, limits, progress)
                if second.own_fabric:
                    remote = _RemoteLane(second, files, limits, parts, spill)
            else:
                if second is not None:
                    second.close()
                parts = pooled._parse_pooled(files, offload, limits, progress, spill)
            if not held.serial and held.limit and sum(p.record_bytes for p in parts) > held.limit:
                raise RecordBudget(held.limit)  # each process stayed under it, but not both together
        except RecordBudget:
            # the bundle's records pass the budget: which files are left out must not depend on which process
            # parsed what first, so it is parsed again, in one process, in path order (see diagnose.budget)
            if remote is not None:
                remote.second.close(kill=True)
            elif second is not None:
                second.close(kill=True)
            remote = second = None
            parts, files = [], []
            log.warning("record_budget_reparse", limit_mib=limits.max_record_bytes >> 20)
            files = load_inputs(paths, limits)
            held.begin(limits.max_record_bytes, serial=True)
            for k, bf in enumerate(files):
                parts.append(_parse_here(bf, limits, progress))
                if progress:
                    progress(bf.path, k + 1, len(files))
        for part in parts:  # merged in file order: the result does not depend on timing
            ev.records.extend(part.records)
            ev.files.extend(part.files)
            ev.formats |= part.formats
            ev.second_core_peak_mib = max(ev.second_core_peak_mib, part.second_core_peak_mib)
            ev.record_bytes += part.record_bytes
        del parts
        found = _findings(ev, symptom, symptom_source, limits, keep_records, spill, remote, pause)
    except BaseException:  # an error or an interrupt here: the child is stopped, not waited for
        if remote is not None:
            remote.second.close(kill=True)
        raise
    if remote is not None:
        remote.second.close()
    return found


def _findings(ev: Evidence, symptom: str | None, symptom_source: str, limits: LoadLimits, keep_records: bool,
              spill: _SpillDir, remote: _RemoteLane | None, pause: Pause | None = None) -> Evidence:
    """Frames of the parsed records, the extractors' findings, and the symptoms they imply (``pause``: gather's
    hold on the cyclic collector, released once the parsed objects are frozen)."""
    log.info("bundle_parsed", files=len(ev.files), records=len(ev.records), formats=sorted(ev.formats))
    if symptom and symptom.strip():
        ev.symptoms.extend(from_text(symptom, symptom_source))
        ev.records.extend(text_records(symptom))
        ev.records.extend(_settled(scan(symptom, SYMPTOM_SOURCE), ev.records))
    if not any(s.kind != "unknown" for s in ev.symptoms):
        # no symptom said what failed: the reporter's sentences in the bundle may (a report.txt's "hangs")
        for r in ev.records:
            if isinstance(r, FreeText) and r.source != SYMPTOM_SOURCE:
                for kind in classify(r.text):
                    if all(s.kind != kind for s in ev.symptoms):
                        ev.symptoms.append(Symptom(kind=kind, text=r.text, source=f"{r.source}:{r.line}"))  # type: ignore[arg-type]
        if len(ev.symptoms) > 1:
            ev.symptoms = [s for s in ev.symptoms if s.kind != "unknown"]
    if remote is not None:
        # the frames the child's fabric extractors read first, sent before this process builds the rest: the
        # child starts on its part ~0.5 s earlier at 4,096 hosts (each frame is built from its table alone)
        shared: list[Record] = []
        rest: list[Record] = []
        for r in ev.records:
            (shared if _table(r) in FABRIC_LANE_READS else rest).append(r)
        frames = build_frames(shared)
        remote.ask(frames, ev.formats)
        frames.update(build_frames(rest))
        del shared, rest
    else:
        frames = build_frames(ev.records)
    ctx = Context(frames=frames, formats=ev.formats)
    if not keep_records:
        ev.records = []
    # After parsing, a big bundle holds millions of objects that live until the run ends and form no cycles; each
    # full collection triggered by the extractors' allocations would walk all of them again (seconds at 4,096
    # hosts). Frozen, they sit in the permanent generation until gather() unfreezes them. Process-wide, but it
    # only delays cycle collection.
    gc.freeze()
    if pause is not None:
        pause.release()
    raw, lane_mib = run_extractors(ctx, limits, spill, remote)
    ev.second_core_peak_mib = max(ev.second_core_peak_mib, lane_mib)
    for fe in ev.files:
        if fe.problem and (fe.format in ("unreadable", "unknown", "empty") or fe.records == 0):
            raw.append(finding("file_problem", f"{fe.path}: {fe.problem}",
                               evidence=[EvidenceRef(file=fe.path, line=0, text=fe.problem or "", finding="file_problem")]))
    raw.sort(key=lambda f: (f.kind, f.location.label(), [(e.file, e.line) for e in f.evidence[:1]], f.summary))
    counts: dict[str, int] = {}
    for f in raw:
        counts[f.kind] = counts.get(f.kind, 0) + 1
        ev.findings.append(f.model_copy(update={"id": f"{f.kind}#{counts[f.kind]}"}))
    seen: set[str] = {s.kind for s in ev.symptoms}
    for f in ev.findings:
        implied = implied_symptom(f.kind, f.attrs)
        if implied and implied not in seen and f.evidence:
            e = f.evidence[0]
            ev.symptoms.append(Symptom(kind=implied, text=f.summary, source=f"{e.file}:{e.line}"))  # type: ignore[arg-type]
            seen.add(implied)
    log.info("findings_extracted", findings=len(ev.findings), symptoms=len(ev.symptoms))
    return ev


def triage(
    paths: Sequence[str | os.PathLike[str]],
    symptom: str | None = None,
    symptom_source: str = "cli",
    catalog: Catalog | None = None,
    limits: LoadLimits | None = None,
    progress: Progress | None = None,
    overrides: dict[str, float] | None = None,
    origins: dict[str, str] | None = None,
) -> Diagnosis:
    """Rank the causes. Thresholds are the catalog's defaults with the site's settings over them
    (:mod:`diagnose.catalog.site`) unless ``overrides`` (``<cause id>.<name>`` -> value) is given."""
    ev = gather(paths, symptom, symptom_source, limits, progress, keep_records=False)
    cat = catalog or load_catalog()
    if overrides is None:
        from diagnose.catalog.site import site_config

        cfg = site_config()
        overrides, origins = cfg.thresholds, cfg.origins
    return infer(cat, ev.findings, ev.symptoms, ev.formats, ev.files, overrides, origins)


__all__ = ["Evidence", "Location", "gather", "triage"]
