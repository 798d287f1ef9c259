"""Every line of every file against the message catalog (:mod:`diagnose.catalog.messages`).

A literal prefilter finds the few lines worth reading: one Aho-Corasick pass over the file's bytes for all the
catalog's literals at once (``ahocorasick_rs``, a few hundred MB/s; without it, one ``bytes.find`` sweep per
literal), then only the entries whose literal a line holds run their regex on that line. A line glued from several
records by a paste holds several messages: each match counts. A hit is a :class:`MessageHit` record stamped with
the file and line, so a known message counts wherever it appears, in a file no parser claims too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

from diagnose.catalog.messages import MessageCatalog, MessageEntry, default_messages
from diagnose.models.records import Record, clip

_ac: ModuleType | None
try:  # the prefilter's fast path: a C/Rust automaton over bytes
    import ahocorasick_rs as _ac
except ImportError:  # pragma: no cover - depends on the installation
    _ac = None

MAX_HITS_PER_ENTRY = 500  # per file: a log repeating one error a million times says it no louder than 500 times
_NCCL_WHO = re.compile(r"(?:^|\s|\]|:)([A-Za-z][\w.\-]*):(?:\d+|X+):(?:\d+|X+) \[(\d+)\]")
LOCATION_GROUPS = ("host", "device", "port", "rank", "gpu", "peer")


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageHit(Record):
    """A line that holds a known message: the entry's id, the finding kind it yields and its attributes (JSON)."""

    msg_id: str
    kind: str
    attrs: str


class Scanner:
    """The catalog compiled: the automaton of its literals and each entry's regex."""

    def __init__(self, cat: MessageCatalog) -> None:
        self.entries: list[MessageEntry] = list(cat.entries)
        self.regex = [re.compile(e.pattern, re.I if e.ignore_case else 0) for e in self.entries]
        lits: dict[bytes, set[int]] = {}
        for i, e in enumerate(self.entries):
            for lit in e.literal:
                lits.setdefault(lit.encode("utf-8"), set()).add(i)
        self.literals = sorted(lits)
        self.owners = [tuple(sorted(lits[lit])) for lit in self.literals]
        self.static = [json.dumps(e.attrs, sort_keys=True) for e in self.entries]
        self.ids = [e.id for e in self.entries]
        # entries that count only in a file holding one of their context words: (entry index, the words as bytes)
        self.within = [(i, tuple(w.encode("utf-8") for w in e.within)) for i, e in enumerate(self.entries) if e.within]
        self._auto = None
        if _ac is not None and self.literals:  # the DFA: ~1.5x the NFA's speed for a few hundred literals
            self._auto = _ac.BytesAhoCorasick(self.literals, implementation=_ac.Implementation.DFA)
            self._overlap = _ac.BytesAhoCorasick(self.literals)  # standard semantics: overlapping matches

    def _matches(self, data: bytes) -> list[tuple[int, int]]:
        """(literal index, start offset) of every occurrence of every literal."""
        if self._auto is not None:
            # one literal per occurrence is enough to pick a line: _literals_in finds all of that line's
            return [(i, s) for i, s, _e in self._auto.find_matches_as_indexes(data)]
        out: list[tuple[int, int]] = []
        for i, lit in enumerate(self.literals):
            at = data.find(lit)
            while at >= 0:
                out.append((i, at))
                at = data.find(lit, at + 1)
        return sorted(out, key=lambda t: (t[1], t[0]))

    def _literals_in(self, row: bytes) -> set[int]:
        """Every literal a (short) line holds, overlapping ones too."""
        if self._auto is not None:
            return {i for i, _s, _e in self._overlap.find_matches_as_indexes(row, overlapping=True)}
        return {i for i, lit in enumerate(self.literals) if lit in row}

    def prefilter(self, data: bytes | str) -> tuple[bytes, list[tuple[int, int]]]:
        """The bytes of ``data`` and where the literals are in them: the part of a scan that needs no Python
        objects per line (the automaton releases the GIL, so :class:`Prefetch` runs it beside a parser)."""
        raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
        return raw, self._matches(raw)

    def scan(self, data: bytes | str, source: str, host: str | None = None, first_line: int = 1,
             budget: dict[str, int] | None = None,
             pre: tuple[bytes, list[tuple[int, int]]] | None = None) -> list[MessageHit]:
        """The catalog's hits in ``data`` (a whole file, or a chunk whose first line is ``first_line``). ``budget``
        counts the hits per entry across the chunks of one file: each entry keeps at most MAX_HITS_PER_ENTRY."""
        if not self.entries or not data:
            return []
        raw, found = pre if pre is not None else self.prefilter(data)
        if not found:
            return []
        budget = {} if budget is None else budget
        ids = self.ids
        guarded = {i for i, words in self.within if not any(w in raw for w in words)}  # out of their context
        hits: list[MessageHit] = []
        lineno, pos, last = first_line, 0, -1
        for li, start in found:  # in offset order
            if start < last:
                continue  # this line is done
            if all(budget.get(ids[o], 0) >= MAX_HITS_PER_ENTRY for o in self.owners[li]):
                continue  # every entry this literal selects is spent for this file
            ls = raw.rfind(b"\n", 0, start) + 1
            le = raw.find(b"\n", start)
            le = le if le >= 0 else len(raw)
            last = le
            lineno += raw.count(b"\n", pos, ls)
            pos = ls
            row = raw[ls:le]
            owners = sorted({o for i in self._literals_in(row) for o in self.owners[i]} - guarded)
            text = row.decode("utf-8", "replace").rstrip("\r")
            line_host: str | None = "?"
            for ei in owners:
                eid = ids[ei]
                for m in self.regex[ei].finditer(text):
                    if budget.get(eid, 0) >= MAX_HITS_PER_ENTRY:
                        break
                    budget[eid] = budget.get(eid, 0) + 1
                    if line_host == "?":  # the host of NCCL's prefix, worked out for a line that holds a hit
                        who = _NCCL_WHO.search(text)
                        line_host = who.group(1) if who else None
                    hits.append(self._hit(ei, m, text, source, lineno, line_host or host))
        return hits

    def _hit(self, ei: int, m: re.Match[str], text: str, source: str, line: int, host: str | None) -> MessageHit:
        e = self.entries[ei]
        caps = {k: v for k, v in m.groupdict().items() if v is not None}
        if caps:
            attrs: dict[str, object] = dict(e.attrs)
            for k, v in caps.items():
                v = v.strip()
                attrs[k] = int(v) if v.isdigit() and len(v) < 16 else v
            if isinstance(attrs.get("host"), str):
                host = str(attrs["host"])
            blob = json.dumps(attrs, sort_keys=True)
        else:
            blob = self.static[ei]
        return MessageHit(source=source, line=line, text=clip(text), host=host, msg_id=e.id, kind=e.finding,
                          attrs=blob)


@lru_cache(maxsize=1)
def scanner() -> Scanner:
    """The shipped catalog's scanner, built once per process."""
    return Scanner(default_messages())


def scan(data: bytes | str, source: str, host: str | None = None, first_line: int = 1,
         budget: dict[str, int] | None = None,
         pre: tuple[bytes, list[tuple[int, int]]] | None = None) -> list[MessageHit]:
    """:meth:`Scanner.scan` of the shipped catalog; a failure is logged and costs only the hits."""
    try:
        return scanner().scan(data, source, host, first_line, budget, pre)
    except Exception as exc:  # noqa: BLE001 - the catalog pass never costs a file its parsed records
        import structlog

        structlog.get_logger("diagnose.scan").warning("message_scan_failed", file=source, error=repr(exc))
        return []


class Prefetch:
    """The prefilter of one chunk run in a thread while the parsers read the same chunk (the automaton releases the
    GIL: a 1 GiB log's scan then costs the parse little wall time). :meth:`hits` joins it and reads the lines."""

    def __init__(self, chunk: str) -> None:
        import threading

        self.chunk = chunk
        self.pre: tuple[bytes, list[tuple[int, int]]] | None = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = threading.Thread(target=self._run, name="diagnose-scan", daemon=True)
        try:
            self.thread.start()
        except RuntimeError:  # no thread can be started: the scan runs inline in hits()
            self.thread = None

    def _run(self) -> None:
        try:
            self.pre = scanner().prefilter(self.chunk)
        except BaseException as exc:  # noqa: BLE001 - reported by hits(), in the caller's thread
            self.error = exc

    def hits(self, source: str, host: str | None, first_line: int, budget: dict[str, int]) -> list[MessageHit]:
        if self.thread is not None:
            self.thread.join()
        # a failed prefilter is run again inline, where scan() reports what fails
        return scan(self.chunk, source, host, first_line, budget, None if self.error is not None else self.pre)

__all__ = ["LOCATION_GROUPS", "MessageHit", "Prefetch", "Scanner", "scan", "scanner"]
