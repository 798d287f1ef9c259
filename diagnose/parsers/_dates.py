"""Dates as operators' tools print them, read into ISO 8601 strings so that runs and changes can be ordered.

Shapes read (each from the tool that prints it):

- ``date`` (coreutils, C locale): ``Tue Oct  6 15:00:01 UTC 2026``; en_US locale: ``Tue 06 Oct 2026 03:00:01 PM UTC``;
  ``date -Is`` / ``date --rfc-3339=seconds``: ``2026-10-06T15:00:01+00:00`` / ``2026-10-06 15:00:01+00:00``.
- git ``Date:`` lines: the default ``Tue Oct 6 14:02:11 2026 +0200``, ``--date=iso`` ``2026-10-06 14:02:11 +0200``,
  ``--date=iso-strict`` ``2026-10-06T14:02:11+02:00``, ``--date=rfc`` / format-patch ``Tue, 6 Oct 2026 14:02:11 +0200``.
- GNU ``diff -u`` headers: ``2002-02-21 23:30:39.942229878 -0800`` (fractional seconds optional).

A date with a numeric offset (or ``UTC``/``GMT``/``Z``) gives an aware ISO string (``2026-10-06T14:02:11+02:00``); a
zone abbreviation that is ambiguous (``CEST``, ``EST``) or none gives a naive one. :func:`order_key` compares both.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                        "dec"), start=1)}
_UTC_NAMES = {"UTC", "GMT", "Z", "UT"}
_OFF = r"(?P<off>[+-]\d{2}:?\d{2}|Z)"
_ISO_RE = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[T ](?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,]\d{1,9})?)?"
    rf"(?:\s?{_OFF}|\s(?P<tz>[A-Z]{{2,5}})\b)?")
# "Tue Oct  6 15:00:01 UTC 2026" (date), "Tue Oct 6 14:02:11 2026 +0200" (git), "Thu Feb 21 23:30:39 2002" (old diff)
_CTIME_RE = re.compile(
    r"(?:[A-Z][a-z]{2},?\s+)?(?P<mon>[A-Z][a-z]{2})\s+(?P<d>\d{1,2})\s+(?P<h>\d{1,2}):(?P<mi>\d{2}):(?P<s>\d{2})"
    rf"(?:\s+(?P<tz>[A-Z]{{2,5}}|{_OFF.replace('off', 'off1')}))?\s+(?P<y>\d{{4}})(?:\s+{_OFF})?")
# "Tue, 6 Oct 2026 14:02:11 +0200" (rfc), "Tue 06 Oct 2026 03:00:01 PM UTC" (date, en_US)
_RFC_RE = re.compile(
    r"(?:[A-Z][a-z]{2},?\s+)?(?P<d>\d{1,2})\s+(?P<mon>[A-Z][a-z]{2})\s+(?P<y>\d{4})\s+(?P<h>\d{1,2}):(?P<mi>\d{2})"
    rf"(?::(?P<s>\d{{2}}))?(?:\s+(?P<ampm>[AP]M))?(?:\s+(?:{_OFF}|(?P<tz>[A-Z]{{2,5}})))?")
# a date in a file name: allreduce_2026-10-01.log, run-20261001-1405.out, nccl_2026_10_01T14_05.txt
_NAME_RE = re.compile(r"(?<!\d)(?P<y>20\d{2})[-_]?(?P<mo>[01]\d)[-_]?(?P<d>[0-3]\d)"
                      r"(?:[T_\-](?P<h>[0-2]\d)[-_:]?(?P<mi>[0-5]\d)(?:[-_:]?(?P<s>[0-5]\d))?)?(?!\d)")


def _tz(off: str | None, name: str | None) -> timezone | None:
    if off:
        if off == "Z":
            return timezone.utc
        sign = -1 if off[0] == "-" else 1
        digits = off[1:].replace(":", "")
        return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4])))
    if name and name.upper() in _UTC_NAMES:
        return timezone.utc
    return None


def _iso(y: int, mo: int, d: int, h: int, mi: int, s: int, tz: timezone | None) -> str | None:
    try:
        return datetime(y, mo, d, h, mi, s, tzinfo=tz).isoformat()
    except (ValueError, OverflowError):
        return None


def parse_date(text: str) -> str | None:
    """The first date in ``text`` as an ISO string, or None. Never raises."""
    if not text or len(text) > 400:
        return None
    try:
        m = _ISO_RE.search(text)
        if m:
            return _iso(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"] or 0),
                        _tz(m["off"], m["tz"]))
        m = _CTIME_RE.search(text)
        if m and m["mon"].lower() in _MONTHS:
            return _iso(int(m["y"]), _MONTHS[m["mon"].lower()], int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]),
                        _tz(m["off"] or m["off1"], m["tz"]))
        m = _RFC_RE.search(text)
        if m and m["mon"].lower() in _MONTHS:
            h = int(m["h"])
            if m["ampm"]:
                h = h % 12 + (12 if m["ampm"] == "PM" else 0)
            return _iso(int(m["y"]), _MONTHS[m["mon"].lower()], int(m["d"]), h, int(m["mi"]), int(m["s"] or 0),
                        _tz(m["off"], m["tz"]))
    except (ValueError, TypeError, IndexError):
        return None
    return None


def name_date(name: str) -> str | None:
    """A date written in a file name (``allreduce_2026-10-01.log``), naive ISO, or None."""
    base = name.rsplit("/", 1)[-1]
    for m in _NAME_RE.finditer(base):
        got = _iso(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"] or 0), int(m["mi"] or 0), int(m["s"] or 0), None)
        if got:
            return got
    return None


def order_key(iso: str | None) -> datetime | None:
    """A comparable datetime for an ISO string from this module: aware dates in UTC with the zone dropped, naive
    dates as written (a naive and an aware date compare by wall clock: the best there is without the zone)."""
    if not iso:
        return None
    try:
        dt = datetime.fromisoformat(iso)
    except ValueError:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt
