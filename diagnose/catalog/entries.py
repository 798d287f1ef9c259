"""Data tables of the catalog that are lists of entries in YAML files (``rules/_messages``, ``rules/_releases``):
one loader, so every table reports its errors the same way (``file: id: field: message``) and skips only the
entries that fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml
from pydantic import ValidationError

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
M = TypeVar("M", bound="_Entry")


class _Entry(Protocol):
    """A table's entry model: a pydantic model with an ``id``."""

    @property
    def id(self) -> object: ...

    @classmethod
    def model_validate(cls: type[M], obj: Any) -> M: ...


def load_entries(base: Path, rel_dir: str, key: str, model: type[M]) -> tuple[list[M], list[str]]:
    """Every ``key`` list entry of ``base/*.yaml`` validated by ``model`` (which has an ``id``), sorted by id;
    unreadable files, bad entries and reused ids become errors named ``rules/<rel_dir>/<file>: ...``."""
    entries: list[M] = []
    errors: list[str] = []
    seen: dict[str, str] = {}
    if not base.is_dir():
        return entries, errors
    for path in sorted(base.glob("*.yaml")):
        rel = f"rules/{rel_dir}/{path.name}"
        try:
            doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)  # noqa: S506 - the safe loader
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            errors.append(f"{rel}: cannot read: {exc}")
            continue
        items = (doc or {}).get(key) if isinstance(doc, dict) else None
        if not isinstance(items, list):
            errors.append(f"{rel}: expected a mapping with a '{key}' list")
            continue
        for i, item in enumerate(items):
            try:
                entry = model.model_validate(item)
            except ValidationError as exc:
                name = item.get("id", f"#{i + 1}") if isinstance(item, dict) else f"#{i + 1}"
                for err in exc.errors():
                    loc = ".".join(str(p) for p in err["loc"]) or "entry"
                    errors.append(f"{rel}: {name}: {loc}: {err['msg']}")
                continue
            eid = str(entry.id)
            if eid in seen:
                errors.append(f"{rel}: {eid}: id already used in {seen[eid]}")
                continue
            seen[eid] = rel
            entries.append(entry)
    entries.sort(key=lambda e: str(e.id))
    return entries, errors
