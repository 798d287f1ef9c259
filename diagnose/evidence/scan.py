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

from diagnose.catalog.messages import MessageCatalog, MessageEntry, default_messages
from diagnose.models.records import Record, clip

try:  # the prefilter's fast path: a C/Rust automaton over bytes
    import ahocorasick_rs as _ac
except ImportError:  # pragma: no cover - depends on the installation
    _ac = None

MAX_HITS_PER_FILE = 2000  # a log repeating one error a million times says it no louder than 2,000 times
_NCCL_WHO = re.compile(r"(?:^|\s|\]|:)([A-Za-z][\w.\-]*):(?:\d+|X+):(?:\d+|X+) \[(\d+)\]")
_LOCATION_GROUPS = ("host", "device", "port", "rank", "gpu", "peer")


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
        self._auto = _ac.BytesAhoCorasick(self.literals) if (_ac is not None and self.literals) else None

    def _matches(self, data: bytes) -> list[tuple[int, int]]:
        """(literal index, start offset) of every occurrence of every literal."""
        if self._auto is not None:
            return [(i, s) for i, s, _e in self._auto.find_matches_as_indexes(data, overlapping=True)]
        out: list[tuple[int, int]] = []
        for i, lit in enumerate(self.literals):
            at = data.find(lit)
            while at >= 0:
                out.append((i, at))
                at = data.find(lit, at + 1)
        return out

    def scan(self, data: bytes | str, source: str, host: str | None = None, first_line: int = 1) -> list[MessageHit]:
        """The catalog's hits in ``data`` (a whole file, or a chunk whose first line is ``first_line``)."""
        if not self.entries or not data:
            return []
        raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
        found = self._matches(raw)
        if not found:
            return []
        lines: dict[int, set[int]] = {}
        for li, start in found:
            ls = raw.rfind(b"\n", 0, start) + 1
            lines.setdefault(ls, set()).update(self.owners[li])
        hits: list[MessageHit] = []
        lineno, pos = first_line, 0
        for ls in sorted(lines):
            lineno += raw.count(b"\n", pos, ls)
            pos = ls
            le = raw.find(b"\n", ls)
            text = raw[ls:le if le >= 0 else len(raw)].decode("utf-8", "replace").rstrip("\r")
            who = _NCCL_WHO.search(text)
            line_host = who.group(1) if who else None
            for ei in sorted(lines[ls]):
                for m in self.regex[ei].finditer(text):
                    hits.append(self._hit(ei, m, text, source, lineno, line_host or host))
                    if len(hits) >= MAX_HITS_PER_FILE:
                        return hits
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


@lru_cache(maxsize=2)
def _scanner(key: int) -> Scanner:
    return Scanner(default_messages())


def scanner() -> Scanner:
    """The shipped catalog's scanner, built once per process."""
    return _scanner(0)


def scan(data: bytes | str, source: str, host: str | None = None, first_line: int = 1) -> list[MessageHit]:
    try:
        return scanner().scan(data, source, host, first_line)
    except Exception as exc:  # noqa: BLE001 - the catalog pass never costs a file its parsed records
        import structlog

        structlog.get_logger("diagnose.scan").warning("message_scan_failed", file=source, error=repr(exc))
        return []


LOCATION_GROUPS = _LOCATION_GROUPS

__all__ = ["LOCATION_GROUPS", "MessageHit", "Scanner", "scan", "scanner"]
