"""The parse stage: one file of the bundle, read by the parsers that claim it, into an :class:`Evidence` of its own.

Pure of scheduling: whichever process parses a file (see :mod:`diagnose.runtime`) calls :func:`parse_file` on it,
and the evidence is the same. A file's parse is bounded by the per-file time limit and by the record budget
(:mod:`diagnose.budget`); a text past the streaming size is parsed in chunks; a file no parser claims still gives the
catalog's known messages and the reporter's sentences.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import structlog

from diagnose import parsers
from diagnose.budget import RecordBudget, held, record_bytes
from diagnose.bundle import BundleFile, LoadLimits, load_inputs, sniff_file
from diagnose.bundle.loader import iter_text_chunks, one_line, read_capped, read_whole, tail_text
from diagnose.bundle.normalize import clean_pasted
from diagnose.bundle.session import segments
from diagnose.bundle.sniff import HEAD_CHARS as SNIFF_HEAD_CHARS
from diagnose.bundle.sniff import Sniffed
from diagnose.bundle.timelimit import TimeLimit, call_limited
from diagnose.evidence.scan import Prefetch, scan
from diagnose.models.diagnosis import FileEntry, Finding, Symptom
from diagnose.models.records import ColumnBatch, Record
from diagnose.parsers.base import SNIFF_THRESHOLD, capabilities
from diagnose.symptoms import prose_records

log = structlog.get_logger("diagnose.pipeline")
parsers.registry()  # every run sniffs with every parser: imported once here (and inherited by a forked process)

Progress = Callable[[str, int, int], None]
"""``progress(what, done, total)``: a file parsed (``done`` of ``total``), or a large file's share (-1, -1)."""


def load(paths: Sequence[str | os.PathLike[str]], limits: LoadLimits, empty_ok: bool = False) -> list[BundleFile]:
    """The bundle's files (:func:`load_inputs`); no paths at all is no files when ``empty_ok`` (a symptom with no
    bundle yet: an alert or a chat question), else load_inputs explains what to pass."""
    return load_inputs(paths, limits) if paths or not empty_ok else []


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
        if not capabilities(mod).binary:
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


def run_bulk(mod: ModuleType, data: bytes | mmap.mmap, bf: BundleFile, ev: Evidence, problems: list[str]) -> int:
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


def sniff(bf: BundleFile) -> Any:
    """``sniff_file`` of ``bf``, asked once: choosing the files for the second process sniffs the large ones, and
    parsing them would sniff them again. A large file's text is only its head: the end of the file is read for the
    sniffers too, as they see the end of a file read whole (a job log whose nccl-tests table comes last)."""
    if bf.sniffed is None:
        text = bf.text or ""
        if bf.stream is not None and not bf.stream.gz and text:
            text = text[:SNIFF_HEAD_CHARS] + "\n" + tail_text(bf.stream.path, SNIFF_HEAD_CHARS // 4)
        bf.sniffed = sniff_file(bf.path, text)
    return bf.sniffed


def sniff_limited(bf: BundleFile, limits: LoadLimits) -> Any:
    """:func:`sniff` within ``limits.max_file_seconds``; stopped, the file is marked so that it is not parsed."""
    try:
        return call_limited(limits.max_file_seconds, sniff, bf)
    except TimeLimit:
        log.warning("file_time_limit", file=bf.path, seconds=limits.max_file_seconds, stage="sniff")
        bf.sniffed = Sniffed((), {}, stopped=limits.max_file_seconds)
        return bf.sniffed


def time_limit_note(seconds: float) -> str:
    """The problem of a file whose sniffing and parsing ran past the per-file time limit."""
    return (f"sniffing and parsing stopped at the per-file time limit ({seconds:g} s, --max-file-seconds):"
            " nothing of this file was used")


def parse_file(bf: BundleFile, ev: Evidence, limits: LoadLimits, progress: Progress | None = None,
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


def taken(part: Evidence) -> None:
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
    sn = sniff(bf)
    if sn.stopped is not None:  # sniffing it already ran past the limit (see sniff_limited)
        raise TimeLimit(sn.stopped)
    if not sn.formats:
        # no parser claims it: its known messages still count (a pasted fragment, a tool nothing reads yet)
        hits = settled(scan(bf.text, bf.path, bf.host_hint) if bf.stream is None else _scan_large(bf, limits), [])
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
        chunked = [m for m in mods if capabilities(m).streamable] if len(text) > limits.stream_bytes else []
        for mod in mods:
            if mod not in chunked:
                n += _run_parser(mod, text, bf, ev, problems)
        if chunked:
            n += _parse_chunks(text_chunks(text, limits.chunk_bytes), len(text), chunked, bf, ev, problems, first,
                               progress)
        else:
            ev.records.extend(settled(scan(text, bf.path, bf.host_hint), ev.records, first))
    else:
        # a large file: line-oriented formats are parsed chunk by chunk (memory bounded by the chunk size),
        # the others see the head and tail of the file
        bulk = [m for m in mods if capabilities(m).bulk]
        if bulk:
            data = read_whole(bf.stream, limits, mapped)
            if data is None:
                problems.append(f"larger than {limits.max_bulk_bytes // 1048576} MiB: read in part")
                bulk = []
            else:
                try:
                    for mod in bulk:
                        n += run_bulk(mod, data, bf, ev, problems)
                    # a large counter dump a bulk parser reads whole is a table every line of which is a record:
                    # the catalog reads the logs, not the dumps (a 4,096-host fabric's dumps are 1.5 GB of counters)
                finally:
                    _release(data)
                del data
        streamed = [m for m in mods if capabilities(m).streamable and m not in bulk]
        capped = [m for m in mods if not capabilities(m).streamable and m not in bulk]
        if streamed:
            n += _parse_chunks(iter_text_chunks(bf.stream, limits, problems), bf.stream.size, streamed, bf, ev,
                               problems, first, progress)
        if capped:
            text, notes = read_capped(bf.stream, limits)
            problems += notes
            for mod in capped:
                n += _run_parser(mod, text, bf, ev, problems)
            if not streamed and not bulk:
                ev.records.extend(settled(scan(text, bf.path, bf.host_hint), ev.records, first))
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
        ev.records.extend(settled(hits, ev.records, first))
        done += len(chunk)
        if progress:
            progress(f"{bf.path} {min(100, done * 100 // max(1, size))}%", -1, -1)
    # a chunk's "no ... lines found" is not the file's when other chunks gave that parser records (a problem of a
    # line stays): the file reads as it would in one piece
    for k, fmt in reversed(empty):
        if fmt in gave and not problems[k].startswith("line "):
            del problems[k]
    return n


def text_chunks(text: str, size: int) -> Iterator[tuple[int, str]]:
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
    if named <= set(sniff(bf).formats):
        return False  # the whole file is that tool's output already (a perfquery dump's `# perfquery` lines)
    mixable = {m.FORMAT for m in parsers.registry() if capabilities(m).mixable}
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
    hits = settled(scan(bf.text, bf.path, bf.host_hint), ev.records, first)
    ev.records.extend(hits)
    prose = prose_records(bf.text, bf.path, bf.host_hint)  # the reporter's words between the commands
    ev.records.extend(prose)
    fmt = "+".join(formats) if formats else ("messages" if hits else "prose" if prose else "unknown")
    ev.files.append(FileEntry(path=bf.path, format=fmt, records=n + len(hits) + len(prose),
                              problem="; ".join(dict.fromkeys(problems)) if problems else None))
    return True


def settled(hits: Sequence[Record], records: list[Record], first: int = 0) -> list[Record]:
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



def parse_here(bf: BundleFile, limits: LoadLimits, progress: Progress | None = None,
               parse: Callable[..., None] | None = None) -> Evidence:
    """``bf`` parsed into an Evidence of its own (``parse``: :func:`parse_file` unless given); its text is let go
    once parsed (its records hold what it said; a parse that must start again in path order, see
    :mod:`diagnose.budget`, loads the input again)."""
    part = Evidence()
    (parse or parse_file)(bf, part, limits, progress)
    bf.text = bf.data = None
    return part


def merge(parts: Iterable[Evidence]) -> Evidence:
    """The files' Evidence in file order, as one: the result does not depend on which process parsed which."""
    ev = Evidence()
    for part in parts:
        ev.records.extend(part.records)
        ev.files.extend(part.files)
        ev.formats |= part.formats
        ev.second_core_peak_mib = max(ev.second_core_peak_mib, part.second_core_peak_mib)
        ev.record_bytes += part.record_bytes
    return ev
