"""A site's own settings: rule packs to load beside the built-in catalog, and thresholds set away from their defaults.

Sources, later ones winning for a threshold (each value remembers where it came from):

1. a TOML file: ``$DIAGNOSE_SITE_CONFIG`` when set, else ``./diagnose.toml``, else
   ``$XDG_CONFIG_HOME/diagnose/diagnose.toml`` (``~/.config/diagnose/diagnose.toml``)::

       rule_packs = ["/etc/diagnose/site-rules"]     # relative paths are read from the file's folder

       [thresholds]
       "link.bad_cable.rising_min" = 20
       "host.gdr_unavailable.busbw_ratio_low" = 0.5

2. the environment (the service's env file sets the same names): ``DIAGNOSE_RULES`` (rule pack folders, separated
   by ``os.pathsep``) and ``DIAGNOSE_THRESHOLDS`` (``link.bad_cable.rising_min=20,host.x.y=0.5``);
3. the CLI: ``--rules DIR`` and ``--threshold id.name=value``.

A threshold is ``<cause id>.<name>`` of a rule's ``thresholds:``; one that names no threshold of the loaded catalog
is an error (:func:`check`), never silently ignored. ``rules show`` prints each value with its origin, and the JSON
output's ``settings`` header records every value set away from its default.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class SiteConfigError(ValueError):
    """A site setting that cannot be used (unreadable TOML, a threshold that is no number or names nothing)."""


@dataclass(frozen=True)
class SiteConfig:
    rule_packs: list[Path] = field(default_factory=list)
    thresholds: dict[str, float] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # threshold key -> the file or variable that set it
    file: Path | None = None


def config_file(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path | None:
    env = os.environ if environ is None else environ
    explicit = env.get("DIAGNOSE_SITE_CONFIG", "").strip()
    if explicit:
        return Path(explicit)
    here = (cwd or Path.cwd()) / "diagnose.toml"
    if here.is_file():
        return here
    base = env.get("XDG_CONFIG_HOME", "").strip()
    xdg = (Path(base) if base and Path(base).is_absolute() else Path.home() / ".config") / "diagnose" / "diagnose.toml"
    return xdg if xdg.is_file() else None


def _number(key: str, raw: object, origin: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise SiteConfigError(f"{origin}: threshold '{key}' must be a number, not {raw!r}")
    try:
        return float(raw)
    except ValueError:
        raise SiteConfigError(f"{origin}: threshold '{key}' must be a number, not {raw!r}") from None


def parse_thresholds(text: str, origin: str) -> dict[str, float]:
    """``id.name=value,id.name=value`` (``DIAGNOSE_THRESHOLDS``, ``--threshold``)."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.replace("\n", ",").split(",")):
        if not part:
            continue
        key, sep, val = part.partition("=")
        if not sep or key.count(".") < 2:
            raise SiteConfigError(f"{origin}: '{part}' is not '<cause id>.<threshold>=<value>'")
        out[key.strip()] = _number(key.strip(), val.strip(), origin)
    return out


def load(environ: Mapping[str, str] | None = None, cwd: Path | None = None,
         rules: Sequence[Path] = (), thresholds: Sequence[str] = ()) -> SiteConfig:
    env = os.environ if environ is None else environ
    packs: list[Path] = []
    values: dict[str, float] = {}
    origins: dict[str, str] = {}
    path = config_file(env, cwd)
    if path is not None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise SiteConfigError(f"{path}: {exc}") from exc
        for p in data.get("rule_packs", []) or []:
            pack = Path(str(p))
            packs.append(pack if pack.is_absolute() else path.parent / pack)
        table = data.get("thresholds", {}) or {}
        if not isinstance(table, dict):
            raise SiteConfigError(f"{path}: [thresholds] must be a table of '<cause id>.<name>' = number")
        for k, v in table.items():
            values[str(k)] = _number(str(k), v, str(path))
            origins[str(k)] = str(path)
    for p in env.get("DIAGNOSE_RULES", "").split(os.pathsep):
        if p.strip():
            packs.append(Path(p.strip()))
    for k, v in parse_thresholds(env.get("DIAGNOSE_THRESHOLDS", ""), "DIAGNOSE_THRESHOLDS").items():
        values[k], origins[k] = v, "DIAGNOSE_THRESHOLDS"
    packs += [Path(p) for p in rules]
    for t in thresholds:
        for k, v in parse_thresholds(t, "--threshold").items():
            values[k], origins[k] = v, "--threshold"
    seen: set[Path] = set()
    uniq = [p for p in packs if not (p.resolve() in seen or seen.add(p.resolve()))]  # type: ignore[func-returns-value]
    return SiteConfig(uniq, values, origins, path)


_current: SiteConfig | None = None


def site_config() -> SiteConfig:
    """The process's site configuration: the one :func:`set_site_config` gave, else the environment's and the
    config file's, read once."""
    global _current
    if _current is None:
        _current = load()
    return _current


def set_site_config(cfg: SiteConfig | None) -> None:
    """Use ``cfg`` for this process (the CLI, after reading its options); None: read the environment again."""
    global _current
    _current = cfg


def check(cfg: SiteConfig, catalog: object) -> list[str]:
    """The thresholds that name no threshold of the loaded catalog."""
    rules = catalog.rules  # type: ignore[attr-defined]
    bad = []
    for key in sorted(cfg.thresholds):
        rid, _, name = key.rpartition(".")
        if rid not in rules or name not in rules[rid].thresholds:
            bad.append(f"{cfg.origins.get(key, '?')}: '{key}' is no threshold of the catalog"
                       f" (see 'diagnose rules show {rid}')" if rid in rules else
                       f"{cfg.origins.get(key, '?')}: '{key}' names no rule ('{rid}')")
    return bad
