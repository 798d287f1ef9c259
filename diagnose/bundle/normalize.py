"""Text as pasted into a ticket, a chat or a forum, made plain before any reader sees it.

A paste carries the marks of where it was copied to: markdown fences around the log, ``> `` quote marks in front
of every line of a reply, HTML entities (``&gt;``, ``&#39;``) from a web page. Each is undone line by line, and
never a line added or removed, so every record still cites the file's own line numbers. Prefixes that belong to
the evidence (NCCL's ``host:pid:tid [rank]``, timestamps, launcher prefixes) are the parsers' to read, not
removed here.
"""

from __future__ import annotations

import html
import re

_FENCE = re.compile(r"^\s{0,3}(?:```|~~~)[\w+.\-]*\s*$")
_QUOTE = re.compile(r"^\s{0,3}(?:>[ \t]?)+")
_ENTITY = re.compile(r"&(?:gt|lt|amp|quot|apos|nbsp|#\d{1,5}|#x[0-9a-fA-F]{1,4});")


def clean_pasted(text: str) -> str:
    """``text`` with fences blanked, quote marks and HTML entities undone (the same number of lines)."""
    head = text[:200_000]
    if "```" not in head and "~~~" not in head and ">" not in head and "&" not in head:
        return text  # the usual file: nothing of a paste's marks (a few memchr-fast scans)
    lines = text.split("\n")
    body = [ln for ln in lines[:4000] if ln.strip()]
    if not body:
        return text
    quoted = sum(1 for ln in body if _QUOTE.match(ln)) >= max(2, len(body) // 2)
    if quoted:
        lines = [_QUOTE.sub("", ln, count=1) for ln in lines]
    fenced = any(_FENCE.match(ln) for ln in lines[:4000])
    entities = _ENTITY.search(text[:200_000]) is not None and "<" not in text[:200_000]
    if not (fenced or quoted or entities):
        return text
    out = []
    for ln in lines:
        if fenced and _FENCE.match(ln):
            ln = ""
        if entities and "&" in ln:
            ln = html.unescape(ln)
        out.append(ln)
    return "\n".join(out)


__all__ = ["clean_pasted"]
