"""Replay memory and timestamp freshness."""

from __future__ import annotations

import threading

import pytest

from diagnose.chat.replay import ReplayGuard, is_stale, parse_iso_timestamp


def test_a_key_is_accepted_once_within_the_window_and_again_after_it() -> None:
    g = ReplayGuard(window_s=300)
    assert g.first_seen("1700000000:v0=abc", now=1000.0)
    assert not g.first_seen("1700000000:v0=abc", now=1299.0)
    assert g.first_seen("1700000001:v0=abd", now=1299.0)
    assert g.first_seen("1700000000:v0=abc", now=1300.5)  # expired: a fresh request with that key is fine


def test_memory_is_bounded_oldest_first() -> None:
    g = ReplayGuard(window_s=300, max_entries=3)
    for i in range(5):
        assert g.first_seen(f"k{i}", now=10.0 + i)
    assert len(g) == 3
    assert g.first_seen("k0", now=20.0)  # forgotten (oldest)
    assert not g.first_seen("k4", now=20.0)  # still remembered


def test_concurrent_copies_are_accepted_exactly_once() -> None:
    g = ReplayGuard()
    wins: list[bool] = []
    lock = threading.Lock()
    barrier = threading.Barrier(16)

    def go() -> None:
        barrier.wait()
        ok = g.first_seen("same", now=5.0)
        with lock:
            wins.append(ok)

    threads = [threading.Thread(target=go) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(True) == 1


def test_staleness_counts_both_directions() -> None:
    assert not is_stale(1000, now=1300, max_age_s=300)
    assert is_stale(1000, now=1301, max_age_s=300)
    assert is_stale(1302, now=1001, max_age_s=300)


@pytest.mark.parametrize(("value", "epoch"), [
    ("2017-01-25T21:23:28.527Z", 1485379408.527),
    ("2017-01-25T21:23:28.5270000Z", 1485379408.527),
    ("2017-01-25T14:23:28.527-07:00", 1485379408.527),
    ("2017-01-25T21:23:28Z", 1485379408.0),
])
def test_bot_framework_timestamps(value: str, epoch: float) -> None:
    assert parse_iso_timestamp(value) == pytest.approx(epoch)


@pytest.mark.parametrize("value", ["", "yesterday", "2017-13-45T99:00:00Z"])
def test_unreadable_timestamps(value: str) -> None:
    assert parse_iso_timestamp(value) is None
