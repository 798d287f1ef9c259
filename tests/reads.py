"""Frames that note which tables are asked for (the extractor-lane and declaration tests)."""

from __future__ import annotations


class Reads(dict):  # type: ignore[type-arg]
    def __init__(self, frames: dict) -> None:  # type: ignore[type-arg]
        super().__init__(frames)
        self.read: set[str] = set()

    def get(self, k: str, default: object = None) -> object:
        self.read.add(k)
        return super().get(k, default)

    def __getitem__(self, k: str) -> object:
        self.read.add(k)
        return super().__getitem__(k)

    def __contains__(self, k: object) -> bool:
        self.read.add(str(k))
        return super().__contains__(k)
