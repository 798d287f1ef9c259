"""Configuration changes as people keep them: unified ``diff -u`` output, ``git diff``, and ``git log -p`` /
``git show`` of a configuration repository.

Layouts (GNU diffutils manual, "Detailed Description of Unified Format"; git ``Documentation/diff-format.txt`` and
``pretty-formats.txt``)::

    commit 5b6d59d5f78615018d2e5d8d8c12242c027b442c          (git log -p / git show only)
    Author: Yevgeny Kliteynik <kliteyn@dev.mellanox.co.il>
    Date:   Wed Jan 16 16:01:50 2008 +0200

        opensm/scripts: fixing MAXSMPS values to the right default

    diff --git a/scripts/opensm.conf b/scripts/opensm.conf
    index c4712bc8..502eea2f 100644
    --- a/scripts/opensm.conf                                 (diff -u: "--- path<TAB>2002-02-21 23:30:39.94 -0800")
    +++ b/scripts/opensm.conf
    @@ -31,8 +31,8 @@ LMC=0
     #  one outstanding SMP.
    -MAXSMPS=0
    +MAXSMPS=4

Records: :class:`ConfigChange`, one per changed setting. Within a run of ``-``/``+`` lines the removed and added
lines are read as settings and paired by key: a key on both sides is one change (old -> new), a key on one side
only is a setting removed (``new`` None) or added (``old`` None). The key is read by the file's kind: opensm.conf
``key value``; ``KEY=value`` (nccl.conf, env files, ``export``, partitions.conf ``Name=0x8001, ...``); Lmod
``setenv("NCCL_IB_SL","1")`` and Tcl ``setenv NCCL_IB_SL 1`` (modulefiles); qos-policy.conf ``key: value``; any
other line is its own key (the whole line). Comment lines are not settings. ``when`` is the commit's date (git),
else the ``+++`` file's time stamp (diff -u), as ISO 8601; None when neither is printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._dates import parse_date
from diagnose.parsers.base import guarded_parse

FORMAT = "config_diff"
STREAMABLE = False  # a commit's header and its hunks must stay together
MIXABLE = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigChange(Record):
    """One setting changed in a diff. ``line``/``text`` are the ``+`` line (the ``-`` line for a removal);
    ``old_line``/``old_text`` the ``-`` line when there is one. ``style`` is how the key was read: ``opensm``,
    ``env``, ``modulefile``, ``partitions``, ``qos_policy`` or ``line``."""

    file: str | None
    key: str
    old: str | None
    new: str | None
    when: str | None
    commit: str | None
    author: str | None
    subject: str | None
    style: str
    old_line: int | None
    old_text: str | None


# ----------------------------------------------------------------------------------------------------------------
# Sniff

_SNIFF_UNIFIED = re.compile(r"^--- \S[^\n]*\n\+\+\+ \S[^\n]*\n@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.M)
_SNIFF_GITDIFF = re.compile(r"^diff --git a/\S+ b/\S+$", re.M)
_SNIFF_COMMIT = re.compile(r"^commit [0-9a-f]{7,40}\b[^\n]*\n(?:Merge:[^\n]*\n)?Author: [^\n]+\n(?:AuthorDate|Date):", re.M)
_SNIFF_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.M)


def sniff(head: str) -> int:
    try:
        hunk = _SNIFF_HUNK.search(head) is not None
        if _SNIFF_COMMIT.search(head):
            return 95 if hunk else 70
        if _SNIFF_GITDIFF.search(head) and hunk:
            return 95
        if _SNIFF_UNIFIED.search(head):
            return 90
        return 0
    except Exception:  # pragma: no cover - sniff never raises
        return 0


# ----------------------------------------------------------------------------------------------------------------
# Parse

_LEAD = r"^(?:\s{0,4}\d{1,6}: )?"  # srun -l
_COMMIT_RE = re.compile(_LEAD + r"commit (?P<sha>[0-9a-f]{7,40})\b")
_AUTHOR_RE = re.compile(_LEAD + r"Author:\s+(?P<name>[^<\n]*?)\s*(?:<[^>\n]*>)?\s*$")
_DATE_RE = re.compile(_LEAD + r"(?:Author)?Date:\s+(?P<date>.+?)\s*$")
_DIFFGIT_RE = re.compile(_LEAD + r"diff --git (?:\"?a/)?(?P<a>\S+) (?:\"?b/)?(?P<b>\S+?)\"?$")
_OLDFILE_RE = re.compile(_LEAD + r"--- (?P<path>[^\t\n]+?)(?:\t(?P<ts>[^\n]*))?$")
_NEWFILE_RE = re.compile(_LEAD + r"\+\+\+ (?P<path>[^\t\n]+?)(?:\t(?P<ts>[^\n]*))?$")
_HUNK_RE = re.compile(_LEAD + r"@@ -\d+(?:,(?P<oc>\d+))? \+\d+(?:,(?P<nc>\d+))? @@")

# settings, by the shape of the line (after the +/- sign)
_LUA_SETENV = re.compile(r"""^\s*(?:setenv|pushenv|append_path|prepend_path)\s*\(\s*["'](?P<k>[A-Za-z_]\w*)["']\s*,"""
                         r"""\s*["']?(?P<v>[^"')]*?)["']?\s*(?:,[^)]*)?\)""")
_TCL_SETENV = re.compile(r"^\s*(?:setenv|pushenv)\s+(?P<k>[A-Za-z_]\w*)\s+(?P<v>.*?)\s*$")
_ASSIGN = re.compile(r"^\s*(?:export\s+)?(?P<k>[A-Za-z_][\w.\-]*)\s*=\s*(?P<v>.*?)\s*;?\s*$")
_COLON = re.compile(r"^\s*(?P<k>[A-Za-z][\w\-]*(?:\s+[\w\-]+)?)\s*:\s*(?P<v>.*?)\s*$")
_KEYVAL = re.compile(r"^\s*(?P<k>[A-Za-z_][\w\-]*)\s+(?P<v>\S.*?)\s*$")
_KEYVAL_GENERIC = re.compile(r"^\s*(?P<k>[a-z][a-z0-9]*_[a-z0-9_]+)\s+(?P<v>\S.*?)\s*$")  # opensm-like keys
_COMMENT = ("#", ";", "//", "--", "!")


def _style(path: str | None) -> str:
    name = (path or "").rsplit("/", 1)[-1].lower()
    if "partition" in name:
        return "partitions"
    if "qos-policy" in name or "qos_policy" in name:
        return "qos_policy"
    if "opensm" in name and ".conf" in name or name.endswith(".conf") and name.startswith(("osm", "ufm", "sm")):
        return "opensm"
    if name.endswith(".lua") or "modulefile" in (path or "").lower():
        return "modulefile"
    if "nccl" in name or name.endswith((".env", ".sh", ".bashrc", ".profile")) or name in ("environment",):
        return "env"
    return "line"


def read_setting(body: str, style: str) -> tuple[str, str, str] | None:
    """(key, value, style read) of one config line, or None for a comment or blank line."""
    s = body.strip()
    if not s or s.startswith(_COMMENT):
        return None
    m = _LUA_SETENV.match(s)
    if m:
        return m["k"], m["v"], "modulefile"
    m = _TCL_SETENV.match(s)
    if m:
        return m["k"], m["v"].strip("\"'"), "modulefile"
    if style == "qos_policy":
        m = _COLON.match(s)
        if m:
            return " ".join(m["k"].split()), m["v"], "qos_policy"
    m = _ASSIGN.match(s)
    if m:
        return m["k"], m["v"].strip("\"'"), ("partitions" if style == "partitions" else "env")
    if style == "opensm":
        s2 = s.split("#", 1)[0].strip()
        m = _KEYVAL.match(s2)
        if m:
            return m["k"], m["v"], "opensm"
    else:
        m = _KEYVAL_GENERIC.match(s.split("#", 1)[0])
        if m:
            return m["k"], m["v"].strip(), "opensm"
    return s, s, "line"


@dataclass(slots=True)
class _State:
    sha: str | None = None
    author: str | None = None
    when: str | None = None  # the commit's date
    subject: str | None = None
    in_message: bool = False
    file: str | None = None
    file_when: str | None = None  # diff -u: the +++ file's time stamp
    old_left: int = 0
    new_left: int = 0


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    st = _State()
    removed: list[tuple[int, str, str]] = []  # (line, raw line, body)
    out: list[ConfigChange] = []
    added: list[tuple[int, str, str]] = []
    pending_old: str | None = None

    def flush() -> None:
        if not removed and not added:
            return
        style = _style(st.file)
        olds: dict[str, tuple[str, int, str, str]] = {}
        for n, raw, body in removed:
            got = read_setting(body, style)
            if got is not None and got[0] not in olds:
                olds[got[0]] = (got[1], n, raw, got[2])
        seen: set[str] = set()
        when = st.when or st.file_when
        for n, raw, body in added:
            got = read_setting(body, style)
            if got is None or got[0] in seen:
                continue
            key, value, how = got
            seen.add(key)
            old = olds.pop(key, None)
            if old is not None and " ".join(old[0].split()) == " ".join(value.split()):
                continue  # whitespace or comment only
            out.append(ConfigChange(
                source=source, line=n, text=clip(raw), host=host, file=st.file, key=key,
                old=None if old is None or how == "line" else old[0], new=value, when=when, commit=st.sha,
                author=st.author, subject=st.subject, style=how,
                old_line=old[1] if old else None, old_text=clip(old[2]) if old else None))
        for key, (value, n, raw, how) in olds.items():
            out.append(ConfigChange(
                source=source, line=n, text=clip(raw), host=host, file=st.file, key=key, old=value, new=None,
                when=when, commit=st.sha, author=st.author, subject=st.subject, style=how, old_line=n,
                old_text=clip(raw)))
        out.sort(key=lambda r: r.line)
        records.extend(out)
        out.clear()
        removed.clear()
        added.clear()

    lines = text.split("\n")
    for idx, raw in enumerate(lines):
        n = idx + 1
        line = raw.rstrip("\r")
        if st.old_left > 0 or st.new_left > 0:
            sign, body = line[:1], line[1:]
            if sign == "-" and st.old_left > 0:
                removed.append((n, line, body))
                st.old_left -= 1
                continue
            if sign == "+" and st.new_left > 0:
                added.append((n, line, body))
                st.new_left -= 1
                continue
            if sign == "\\":  # "\ No newline at end of file"
                continue
            if sign == " " or (line == "" and st.old_left > 0 and st.new_left > 0):
                flush()
                st.old_left -= 1
                st.new_left -= 1
                continue
            flush()
            problems.append(f"line {n}: hunk ends early ({st.old_left} old / {st.new_left} new lines missing)")
            st.old_left = st.new_left = 0
        else:
            flush()
        m = _HUNK_RE.match(line)
        if m:
            if st.file is None and pending_old is not None:
                st.file = pending_old
            st.old_left = int(m["oc"]) if m["oc"] is not None else 1
            st.new_left = int(m["nc"]) if m["nc"] is not None else 1
            continue
        m = _COMMIT_RE.match(line)
        if m:
            st = _State(sha=m["sha"])
            pending_old = None
            continue
        if st.sha is not None and st.file is None:
            if st.in_message:
                if line.startswith("    "):
                    if st.subject is None and line.strip():
                        st.subject = line.strip()[:200]
                    continue
                if not line.strip():
                    continue
                st.in_message = False
            m = _AUTHOR_RE.match(line)
            if m:
                st.author = m["name"] or None
                continue
            m = _DATE_RE.match(line)
            if m:
                st.when = parse_date(m["date"])
                st.in_message = True
                continue
        m = _DIFFGIT_RE.match(line)
        if m:
            st.file, st.file_when, pending_old = m["b"], None, None
            continue
        m = _OLDFILE_RE.match(line)
        if m:
            path = m["path"].strip()
            pending_old = None if path == "/dev/null" else _strip_ab(path)
            st.file = None if st.sha is None else st.file
            continue
        m = _NEWFILE_RE.match(line)
        if m:
            path = m["path"].strip()
            st.file = pending_old if path == "/dev/null" else _strip_ab(path)
            st.file_when = parse_date(m["ts"]) if m["ts"] else None
            continue
    if st.old_left > 0 or st.new_left > 0:
        problems.append(f"diff cut inside a hunk ({st.old_left} old / {st.new_left} new lines missing)")
        last = len(lines)
        if not text.endswith("\n"):  # the last line itself may be cut short: not read as a setting
            for side in (removed, added):
                if side and side[-1][0] == last:
                    side.pop()
    flush()


def _strip_ab(path: str) -> str:
    p = path.strip('"')
    return p[2:] if p.startswith(("a/", "b/")) else p
