"""``diagnose rules new <domain.name>``: the files a new cause starts from (CONTRIBUTING.md, recipe 1).

The rule, its playbook and two fixture bundles (a positive and a near-miss negative), each with what is still to be
written marked ``TODO``. The rule names a finding kind no extractor emits (``todo_finding_kind``), so ``diagnose rules
lint`` fails, and a triage with the catalog refuses to run, until the clauses are written: a scaffold is never shipped
by mistake as a rule that silently matches nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from diagnose.catalog.taxonomy import TAXONOMY

_ID = re.compile(r"[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*")

_RULE = """\
id: {cid}
title: "{title}"
severity: medium  # critical | high | medium | low
status: experimental  # stable once its fixtures and the field corpus agree
description: >
  TODO: what breaks, how it shows in the communication layer (which errors, which slowdowns), and where.
explains: [collective_slow]  # TODO: the symptom kinds it explains (diagnose/symptoms)
prior: 0.03
evidence:
  supports:
    - id: todo_clause
      finding: todo_finding_kind  # TODO: a kind declared in diagnose/evidence/vocabulary.py
      weight: strong  # strong | moderate | weak
      says: TODO, one sentence a user reads as the reason.
  against: []
thresholds: {{}}  # name: {{default: ..., unit: ..., source: "the spec, vendor doc or measurement it comes from"}}
collect:
  - formats: [TODO]
    command: "TODO: the read-only command that would decide it"
false_positives:
  - "TODO: what else looks like this, and how the rule tells them apart."
references:
  - "TODO: the public source (a vendor document, an upstream issue with the confirmed fix)"
playbook: playbooks/{domain}/{name}.md
"""

_PLAYBOOK = """\
---
cause: {cid}
title: "{title}"
risk: low  # low | medium | high: what the fix can break
needs_root: false
maintenance_window: false
---
# {title}

TODO: what is wrong, in two or three sentences an on-call operator can act on.

## Confirm

TODO: the read-only commands that confirm it, with the output that says yes and the output that says no.

## Mitigate

TODO: what keeps the job running meanwhile (drain the host, exclude the HCA, an environment variable).

## Fix

TODO: the steps, in order, each with the command.

## Verify

TODO: how to see that it is fixed (the same command as Confirm, the job's busbw, the counters).

## Escalate

TODO: when and to whom (the vendor, the fabric team), with what to attach.

## Tell apart from

TODO: the causes that look alike, and the evidence that tells them apart.

## References

- TODO: the public sources.
"""

_README = """\
**Incident**: TODO: what the user saw{near}.
**Decisive evidence**: TODO: the files and lines that {decide}.
**Source**: TODO: the public thread or sample it quotes (quote real text byte for byte; a file made from a real one
is named `var_*` and says which).
**Decisive lines**: TODO `file:line`.
"""


def scaffold(cause_id: str, root: Path) -> list[Path]:
    """Write the scaffold of ``cause_id`` under ``root`` (the checkout: ``rules/``, ``playbooks/``, ``fixtures/``);
    the paths written. ValueError (nothing written) when the id is malformed, not in the taxonomy, or has a rule."""
    if not _ID.fullmatch(cause_id):
        raise ValueError(f"'{cause_id}' is not a cause id (<domain>.<name>, lower case, e.g. link.bad_cable)")
    if cause_id not in TAXONOMY:
        raise ValueError(f"'{cause_id}' is not in the taxonomy: cause ids are a public contract, add it to "
                         "diagnose/catalog/taxonomy.py (and its simulator spec) first")
    domain, name = cause_id.split(".")
    title = TAXONOMY[cause_id].replace('"', "'")
    files = {
        root / "rules" / domain / f"{name}.yaml": _RULE.format(cid=cause_id, title=title, domain=domain, name=name),
        root / "playbooks" / domain / f"{name}.md": _PLAYBOOK.format(cid=cause_id, title=title),
        root / "fixtures" / domain / name / "positive-TODO" / "README.md": _README.format(
            near="", decide="confirm the cause"),
        root / "fixtures" / domain / name / "positive-TODO" / "expect.yaml":
            f'symptom: "TODO: the ticket text"\ntop: {cause_id}\n',
        root / "fixtures" / domain / name / "negative-TODO" / "README.md": _README.format(
            near=", close to this cause but not it (the near miss)", decide="rule it out"),
        root / "fixtures" / domain / name / "negative-TODO" / "expect.yaml":
            f'symptom: "TODO: the ticket text"\nnot_confirmed: [{cause_id}]\n',
    }
    there = [p for p in files if p.exists()]
    if there:
        raise ValueError(f"{cause_id} has files already: {', '.join(str(p.relative_to(root)) for p in there)}")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)
