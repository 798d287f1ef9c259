"""Load and validate rules/ and playbooks/. One validator set serves the tests and ``diagnose rules lint``.

Errors are collected, never raised one at a time, each located as ``file:line``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from diagnose.catalog.locate import catalog_root
from diagnose.catalog.taxonomy import TAXONOMY
from diagnose.models.rule import SITE_PREFIX, Clause, ExpectClause, RuleSpec

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: 10x faster

PLAYBOOK_SECTIONS = ("Confirm", "Mitigate", "Fix", "Verify", "Escalate", "Tell apart from", "References")
PLAYBOOK_FRONT_KEYS = {"cause", "title", "risk", "needs_root", "maintenance_window"}


@dataclass(frozen=True)
class CatalogError:
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


@dataclass
class Playbook:
    cause: str
    path: str
    front: dict[str, object]
    body: str
    sections: dict[str, str]


@dataclass
class Catalog:
    root: Path
    rules: dict[str, RuleSpec] = field(default_factory=dict)
    playbooks: dict[str, Playbook] = field(default_factory=dict)
    errors: list[CatalogError] = field(default_factory=list)
    sites: list[Path] = field(default_factory=list)  # site rule packs loaded after the built-in catalog
    origin: dict[str, Path] = field(default_factory=dict)  # rule id -> the root it came from

    def root_of(self, rule_id: str) -> Path:
        return self.origin.get(rule_id, self.root)

    def builtin(self) -> list[RuleSpec]:
        return [s for s in self.sorted_rules() if not s.id.startswith(SITE_PREFIX)]

    def sorted_rules(self) -> list[RuleSpec]:
        return [self.rules[k] for k in sorted(self.rules)]


def _line_of(node: yaml.Node | None, loc: tuple[object, ...]) -> int:
    """Best line for a pydantic error location inside a composed YAML document."""
    line = (node.start_mark.line + 1) if node is not None else 1
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if k.value == key:
                    nxt = v
                    line = k.start_mark.line + 1
                    break
            if nxt is None:
                break
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def load_rule_file(path: Path, root: Path, site: bool = False) -> tuple[RuleSpec | None, list[CatalogError]]:
    """One rule file. ``site``: a site rule pack's, whose ids are ``site.<domain>.<name>`` (not in the taxonomy)."""
    rel = _rel(path, root)
    try:
        text = path.read_text(encoding="utf-8")
        node = yaml.compose(text, Loader=_LOADER)
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except (OSError, UnicodeDecodeError) as exc:
        return None, [CatalogError(rel, 1, f"unreadable: {exc}")]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return None, [CatalogError(rel, (mark.line + 1) if mark else 1, f"invalid YAML: {exc}")]
    if not isinstance(data, dict):
        return None, [CatalogError(rel, 1, "a rule file must be a YAML mapping")]
    try:
        spec = RuleSpec.model_validate(data)
    except ValidationError as exc:
        errs = []
        for e in exc.errors():
            loc = tuple(e["loc"])
            where = ".".join(str(p) for p in loc) or "(root)"
            errs.append(CatalogError(rel, _line_of(node, loc), f"{where}: {e['msg']}"))
        return None, errs
    errors: list[CatalogError] = []
    rel_parts = path.relative_to(root / "rules").with_suffix("").parts if (root / "rules") in path.parents else ()
    expected_id = (SITE_PREFIX if site and rel_parts else "") + ".".join(rel_parts)
    if expected_id and spec.id != expected_id:
        errors.append(CatalogError(rel, _line_of(node, ("id",)), f"id '{spec.id}' does not match its path ('{expected_id}')"))
    if site:
        if not spec.id.startswith(SITE_PREFIX):
            errors.append(CatalogError(rel, _line_of(node, ("id",)),
                                       f"a site rule's id is 'site.<domain>.<name>', not '{spec.id}'"))
    elif spec.id not in TAXONOMY:
        errors.append(CatalogError(rel, _line_of(node, ("id",)), f"id '{spec.id}' is not in the cause taxonomy"))
    for name, th in spec.thresholds.items():
        clauses: list[Clause | ExpectClause] = [*spec.evidence.supports, *spec.evidence.against,
                                                *spec.evidence.expects]
        used = any(f"${name}" in str(c.where) for c in clauses)
        if not used:
            errors.append(CatalogError(rel, _line_of(node, ("thresholds", name)), f"threshold '{name}' is never used"))
        del th
    return spec, errors


_FRONT = re.compile(r"\A---\n(.*?)\n---\n(.*)\Z", re.S)


def load_playbook(path: Path, root: Path, site: bool = False) -> tuple[Playbook | None, list[CatalogError]]:
    rel = _rel(path, root)
    try:
        text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [CatalogError(rel, 1, f"unreadable: {exc}")]
    m = _FRONT.match(text)
    if not m:
        return None, [CatalogError(rel, 1, "playbook must start with '---' YAML front matter")]
    try:
        front = yaml.load(m.group(1), Loader=_LOADER) or {}  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        return None, [CatalogError(rel, 2, f"invalid front matter: {exc}")]
    errors: list[CatalogError] = []
    if not isinstance(front, dict):
        return None, [CatalogError(rel, 2, "front matter must be a mapping")]
    missing = PLAYBOOK_FRONT_KEYS - set(front)
    if missing:
        errors.append(CatalogError(rel, 2, f"front matter lacks {sorted(missing)}"))
    body = m.group(2)
    body_line0 = m.group(1).count("\n") + 3
    sections: dict[str, str] = {}
    order: list[str] = []
    current = None
    buf: list[str] = []
    for ln in body.split("\n"):
        h = re.match(r"^## (.+?)\s*$", ln)
        if h:
            if current:
                sections[current] = "\n".join(buf).strip()
            current = h.group(1)
            order.append(current)
            buf = []
        elif current:
            buf.append(ln)
    if current:
        sections[current] = "\n".join(buf).strip()
    want = [s for s in order if s in PLAYBOOK_SECTIONS]
    for s in PLAYBOOK_SECTIONS:
        if s not in sections:
            errors.append(CatalogError(rel, body_line0, f"missing section '## {s}'"))
        elif not sections[s]:
            errors.append(CatalogError(rel, body_line0, f"section '## {s}' is empty"))
    if not errors and want != list(PLAYBOOK_SECTIONS):
        errors.append(CatalogError(rel, body_line0, f"sections out of order: {want}"))
    cause = str(front.get("cause", ""))
    domain_name = ((SITE_PREFIX if site else "") + ".".join(path.relative_to(root / "playbooks").with_suffix("").parts)
                   if (root / "playbooks") in path.parents else cause)
    if cause != domain_name:
        errors.append(CatalogError(rel, 2, f"front matter cause '{cause}' does not match its path ('{domain_name}')"))
    return Playbook(cause, rel, front, body, sections), errors


def load_catalog(root: Path | None = None, sites: list[Path] | None = None) -> Catalog:
    """The built-in catalog, then each site rule pack (``sites``; by default the ones the site configuration
    names: ``DIAGNOSE_RULES``, ``diagnose.toml``): a folder with ``rules/<domain>/<name>.yaml`` of ids
    ``site.<domain>.<name>`` and their ``playbooks/<domain>/<name>.md``."""
    root = root or catalog_root()
    cat = Catalog(root=root)
    rules_dir = root / "rules"
    if not rules_dir.is_dir():
        cat.errors.append(CatalogError("rules", 0, f"no rules folder under {root}"))
        return cat
    _load_tree(cat, root, site=False)
    if sites is None:
        from diagnose.catalog.site import site_config

        sites = site_config().rule_packs
    for pack in sites:
        pack = Path(pack)
        if not (pack / "rules").is_dir():
            cat.errors.append(CatalogError(str(pack), 0, "a site rule pack needs a rules/ folder"))
            continue
        cat.sites.append(pack)
        _load_tree(cat, pack, site=True)
    return cat


def _load_tree(cat: Catalog, root: Path, site: bool) -> None:
    before = len(cat.errors)
    _load_tree_at(cat, root, site)
    if site:  # a pack's problems are named with the pack's folder, not as if they were the built-in catalog's
        cat.errors[before:] = [CatalogError(e.file if e.file.startswith("/") else f"{root.as_posix()}/{e.file}",
                                            e.line, e.message) for e in cat.errors[before:]]


def _load_tree_at(cat: Catalog, root: Path, site: bool) -> None:
    rules_dir = root / "rules"
    ids: list[str] = []
    for path in sorted(rules_dir.rglob("*")):
        if path.is_dir():
            continue
        if path.relative_to(rules_dir).parts[0].startswith("_"):
            continue  # rules/_messages: the message catalog (diagnose.catalog.messages), not cause rules
        if path.suffix not in (".yaml", ".yml"):
            cat.errors.append(CatalogError(_rel(path, root), 1, "unexpected file in rules/ (rules are .yaml)"))
            continue
        spec, errs = load_rule_file(path, root, site=site)
        cat.errors.extend(errs)
        if spec is None:
            continue
        if spec.id in cat.rules:
            cat.errors.append(CatalogError(_rel(path, root), 1, f"duplicate rule id '{spec.id}'"))
            continue
        cat.rules[spec.id] = spec
        cat.origin[spec.id] = root
        ids.append(spec.id)
    pb_dir = root / "playbooks"
    if pb_dir.is_dir():
        for path in sorted(pb_dir.rglob("*.md")):
            if path.name == "README.md":
                continue
            pb, errs = load_playbook(path, root, site=site)
            cat.errors.extend(errs)
            if pb:
                cat.playbooks[pb.cause] = pb
    for rid in sorted(ids):
        spec = cat.rules[rid]
        if not (root / spec.playbook).is_file():
            rel = f"rules/{rid.removeprefix(SITE_PREFIX).replace('.', '/')}.yaml"
            cat.errors.append(CatalogError(rel, 1, f"playbook '{spec.playbook}' does not exist"))
