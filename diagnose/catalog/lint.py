"""Catalog checks shared by the tests and ``diagnose rules lint``."""

from __future__ import annotations

from pathlib import Path

from diagnose.catalog.loader import CatalogError, load_catalog
from diagnose.catalog.taxonomy import TAXONOMY
from diagnose.models.rule import SITE_PREFIX

# The number of built-in rules is pinned: adding or removing one is a deliberate change to this number (a site's own
# rules, site.<domain>.<name>, are not counted)


def _fixture_dirs(root: Path, rid: str) -> tuple[list[Path], list[Path]]:
    base = root / "fixtures" / Path(*rid.removeprefix(SITE_PREFIX).split("."))
    if not base.is_dir():
        return [], []
    pos = sorted(p for p in base.iterdir() if p.is_dir() and p.name.startswith("positive"))
    neg = sorted(p for p in base.iterdir() if p.is_dir() and p.name.startswith("negative"))
    return pos, neg


# finding kinds of the message catalog that extractors consume instead of rules (stated settings become EnvSetting
# records; versions are compared across hosts by the stack_versions extractor)
CONSUMED_KINDS = frozenset({"env_setting", "component_version"})


def _message_problems(root: Path | None, cat: object) -> list[CatalogError]:
    """The message catalog: its load errors, and entries whose finding no rule weighs (a typo in a kind would make
    a known message count for nothing)."""
    from diagnose.catalog.messages import MESSAGES_DIR, load_messages

    msgs = load_messages(root)
    out: list[CatalogError] = []
    for err in msgs.errors:
        f, _, rest = err.partition(": ")
        out.append(CatalogError(f, 0, rest))
    used = {c.finding for spec in cat.rules.values()  # type: ignore[attr-defined]
            for c in (*spec.evidence.supports, *spec.evidence.against, *spec.evidence.expects)}
    for e in msgs.entries:
        if e.finding not in used and e.finding not in CONSUMED_KINDS:
            out.append(CatalogError(f"rules/{MESSAGES_DIR}", 0,
                                    f"message '{e.id}' yields finding '{e.finding}', which no rule weighs"))
    return out


def _release_problems(root: Path | None, rule_ids: set[str]) -> list[CatalogError]:
    """The known-bad release table: its load errors (schema, ranges, symptom kinds) and causes it names that no
    rule of the catalog is."""
    from diagnose.catalog.releases import load_releases

    table = load_releases(root)
    out = []
    for err in table.errors:
        f, _, rest = err.partition(": ")
        out.append(CatalogError(f, 0, rest))
    for e in table.entries:
        if e.exposes is not None and e.exposes not in rule_ids:
            out.append(CatalogError(f"rules/_releases ({e.id})", 0, f"exposes '{e.exposes}', which is no rule's id"))
    return out


def _vocabulary_problems(cat: object, rel_of: dict[str, str]) -> list[CatalogError]:
    """Rules against the declared finding vocabulary (diagnose/evidence/vocabulary.py): a clause naming a kind or a
    ``where`` attribute nothing emits never matches, so a typo there silently drops evidence; a declared kind that
    no rule weighs and that is not declared as shown-only is dead."""
    from diagnose.catalog.messages import load_messages
    from diagnose.evidence.vocabulary import KINDS, NOT_WEIGHED

    out: list[CatalogError] = []
    weighed: set[str] = set()
    for rid, spec in sorted(cat.rules.items()):  # type: ignore[attr-defined]
        for side, clauses in (("supports", spec.evidence.supports), ("against", spec.evidence.against),
                              ("expects", spec.evidence.expects)):
            for c in clauses:
                weighed.add(c.finding)
                where = f"{side} clause '{c.id}'" if getattr(c, "id", None) else f"a {side} clause"
                if c.finding not in KINDS:
                    out.append(CatalogError(rel_of[rid], 0, f"{where} names finding '{c.finding}', which nothing "
                                                             "emits (not in diagnose/evidence/vocabulary.py)"))
                    continue
                extra = sorted(set(c.where) - KINDS[c.finding])
                if extra:
                    out.append(CatalogError(rel_of[rid], 0, f"{where} tests attribute(s) {', '.join(extra)} that "
                                                             f"finding '{c.finding}' never carries"))
                out += [CatalogError(rel_of[rid], 0, f"{where}: {p}") for p in _typed(c.finding, c.where)]
    for e in load_messages(None).entries:
        if e.finding not in KINDS:
            out.append(CatalogError("rules/_messages", 0, f"message '{e.id}' yields finding '{e.finding}', which is "
                                                          "not declared in diagnose/evidence/vocabulary.py"))
    dead = sorted(set(KINDS) - weighed - NOT_WEIGHED - CONSUMED_KINDS)
    for k in dead:
        out.append(CatalogError("diagnose/evidence/vocabulary.py", 0, f"finding '{k}' is declared, but no rule "
                                                                      "weighs it and it is not in NOT_WEIGHED"))
    return out


def _typed(kind: str, where: dict[str, object]) -> list[str]:
    """A ``where`` whose values cannot match the attributes' declared types: an order (gt/gte/lt/lte) or a threshold
    (``$name``, a number) on an attribute that is not a number, a literal of another type than the attribute's."""
    from diagnose.evidence.vocabulary import ATTRS, fits

    out = []
    for attr, cond in sorted(where.items()):
        declared = ATTRS.get(kind, {}).get(attr)
        if declared is None:
            continue
        op, val = next(iter(cond.items())) if isinstance(cond, dict) else ("eq", cond)
        numeric = declared in (int, float)
        values = val if isinstance(val, list) else [val]
        if op == "in" and any(fits(v, declared) for v in values if not (isinstance(v, str) and v.startswith("$"))):
            continue  # (one value of the list can match: a spelling of it in another type is harmless)
        for v in values:
            threshold = isinstance(v, str) and v.startswith("$")
            if (op in ("gt", "gte", "lt", "lte") or threshold) and not numeric:
                out.append(f"'{attr}' of '{kind}' is {declared.__name__}: '{op}' {v!r} compares it with a number")
            elif not threshold and not fits(v, declared):
                out.append(f"'{attr}' of '{kind}' is {declared.__name__}, never {type(v).__name__} {v!r}")
    return out


def lint(root: Path | None = None, sites: list[Path] | None = None) -> list[CatalogError]:
    """The catalog's problems: the built-in one, and the site rule packs loaded with it (``sites``, by default the
    site configuration's), whose rules need a playbook, and fixtures when the pack has a fixtures/ folder."""
    cat = load_catalog(root, sites)
    problems = list(cat.errors)
    for rid in sorted(cat.rules):
        base = cat.root_of(rid)
        site = rid.startswith(SITE_PREFIX)
        short = rid.removeprefix(SITE_PREFIX).replace(".", "/")
        rel = f"{base.as_posix()}/rules/{short}.yaml" if site else f"rules/{short}.yaml"
        if rid not in cat.playbooks:
            problems.append(CatalogError(rel, 1, f"no playbook for '{rid}'"))
        pos, neg = _fixture_dirs(base, rid)
        if (base / "fixtures").is_dir():
            if not pos:
                problems.append(CatalogError(rel, 1, f"no positive fixture under fixtures/{short}/"))
            if not neg:
                problems.append(CatalogError(rel, 1, f"no negative fixture under fixtures/{short}/"))
            for d in pos + neg:
                if not (d / "expect.yaml").is_file():
                    problems.append(CatalogError(d.relative_to(base).as_posix(), 0, "fixture lacks expect.yaml"))
                if not (d / "README.md").is_file():
                    problems.append(CatalogError(d.relative_to(base).as_posix(), 0, "fixture lacks README.md"))
    problems += _message_problems(root, cat)
    rel_of = {rid: (f"{cat.root_of(rid).as_posix()}/rules/{rid.removeprefix(SITE_PREFIX).replace('.', '/')}.yaml"
                    if rid.startswith(SITE_PREFIX) else f"rules/{rid.replace('.', '/')}.yaml") for rid in cat.rules}
    problems += _vocabulary_problems(cat, rel_of)
    problems += _release_problems(root, set(cat.rules))
    missing = [cid for cid in TAXONOMY if cid not in {s.id for s in cat.builtin()}]
    if missing:  # every cause id of the taxonomy has its rule (the loader refuses ids outside it)
        problems.append(CatalogError("rules", 0, f"no rule for the taxonomy's {', '.join(missing)}"))
    return sorted(set(problems), key=lambda e: (e.file, e.line, e.message))
