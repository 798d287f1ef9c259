"""Replay protection for signed chat requests.

A valid signature proves who sent a request, not that it is the first time it arrives: anyone who captured
one (a proxy log, a misrouted copy) could send it again within the platform's freshness window and make the
bot act twice. Slack's guidance is to reject a request older than five minutes
(https://api.slack.com/authentication/verifying-requests-from-slack#validating-a-request); within those five
minutes we also remember every (timestamp, signature) pair we accepted and reject a second copy. Teams
activities carry a unique ``id`` that serves as the key.

The memory is bounded: past ``max_entries`` the oldest keys are forgotten first (logged), so a flood can
cost memory only up to the bound.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from datetime import datetime, timezone

import structlog

log = structlog.get_logger("diagnose.service.chat.replay")


class ReplayGuard:
    """Remembers request keys for ``window_s`` seconds; :meth:`first_seen` is an atomic check-and-remember."""

    def __init__(self, window_s: float = 300.0, max_entries: int = 100_000) -> None:
        if window_s <= 0 or max_entries <= 0:
            raise ValueError("window_s and max_entries must be positive")
        self.window_s = float(window_s)
        self.max_entries = int(max_entries)
        self._expiry: dict[str, float] = {}
        self._order: deque[tuple[float, str]] = deque()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._expiry)

    def _purge(self, now: float) -> None:
        while self._order and self._order[0][0] <= now:
            exp, key = self._order.popleft()
            if self._expiry.get(key) == exp:
                del self._expiry[key]

    def first_seen(self, key: str, now: float) -> bool:
        """True (and remembered) the first time ``key`` is offered within the window; False for a replay."""
        with self._lock:
            self._purge(now)
            exp = self._expiry.get(key)
            if exp is not None and exp > now:
                return False
            self._expiry[key] = now + self.window_s
            self._order.append((now + self.window_s, key))
            evicted = 0
            while len(self._expiry) > self.max_entries and self._order:
                exp_old, old = self._order.popleft()
                if self._expiry.get(old) == exp_old:
                    del self._expiry[old]
                    evicted += 1
            if evicted:
                log.warning("replay_guard_full", evicted=evicted, max_entries=self.max_entries)
            return True


def is_stale(ts_epoch: float, now: float, max_age_s: float) -> bool:
    """A request timestamp further than ``max_age_s`` from now, in either direction (clock skew included)."""
    return abs(now - ts_epoch) > max_age_s


def parse_iso_timestamp(value: str) -> float | None:
    """Epoch seconds of an ISO 8601 timestamp such as Teams' ``2017-01-25T21:23:28.5270000Z``; None if unreadable.

    Bot Framework timestamps may carry 7 fractional digits, more than :func:`datetime.fromisoformat` reads on
    Python 3.10, so the fraction is cut to microseconds first.
    """
    if not isinstance(value, str) or not value:
        return None
    s = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    m = re.fullmatch(r"([^.]+)\.(\d+)(.*)", s)
    if m:
        s = f"{m.group(1)}.{m.group(2)[:6].ljust(6, '0')}{m.group(3)}"
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()
