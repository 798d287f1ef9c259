"""The chat grammar, the same on Slack, Teams and Mattermost.

Strict commands::

    incident <id>                 the stored incident and its ranked causes
    job <id> [what you see]       the latest incident of that job, or diagnose it now
    host <name> [what you see]    the same for one host
    why <cause> [incident]        evidence for and against one cause
    playbook <cause>              the remediation steps of one cause
    recent                        the latest incidents with their top cause
    feedback <incident> right|wrong [cause]   rate a diagnosis (Teams has no buttons for this)
    help

Anything else is read as free text: "why is allreduce slow on job 4412?" becomes ``job 4412`` with the
symptom ``collective_slow`` (the classifier of :mod:`diagnose.symptoms`, so chat and the CLI agree on what a
sentence means). Parsing never raises: a bad command is a :class:`BadCommand` whose reason is shown to the
user together with the help text.
"""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from diagnose.symptoms import classify

Verb = Literal["incident", "job", "host", "why", "playbook", "recent", "help", "feedback"]
VERBS: tuple[str, ...] = ("incident", "job", "host", "why", "playbook", "recent", "help", "feedback")

HELP_TEXT = """\
`incident <id>`: the incident's ranked causes (or its state while it is being diagnosed)
`job <id> [what you see]`: diagnose a job (the latest incident of that job when it is recent)
`host <name> [what you see]`: diagnose one host
`why <cause> [incident]`: the evidence for and against one cause, e.g. `why link.bad_cable 12`
`playbook <cause>`: the remediation steps, e.g. `playbook link.bad_cable`
`recent`: the latest incidents and their top cause
`feedback <incident> right` or `feedback <incident> wrong [cause]`: rate a diagnosis
Free text works too: `why is allreduce slow on job 4412?`"""

_PUNCT = ".,;:!?)]}'\""
_INT = re.compile(r"#?(\d{1,12})")
_JOB_ID = re.compile(r"[A-Za-z0-9][\w.+:-]*")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_CAUSE = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)?")

# free text: the scope is named by a keyword; a bare hostname counts after on/from/at when it has a digit
_FT_INCIDENT = re.compile(r"\bincident\s*(?:#|no\.?\s*|number\s*)?(\d{1,12})\b", re.I)
_FT_JOB = re.compile(r"\b(?:slurm\s+)?job(?:\s*id)?\s*[#:]?\s*([A-Za-z0-9][\w.+-]*)", re.I)
_FT_HOST = re.compile(r"\b(?:host|node|server|machine)(?:name)?\s*[#:]?\s*([A-Za-z0-9][A-Za-z0-9._-]*)", re.I)
_FT_HOSTLIKE = re.compile(r"\b(?:on|from|at)\s+([A-Za-z][A-Za-z0-9]*(?:[-_.][A-Za-z0-9]+)+)\b")
_NOT_IDS = {"is", "was", "the", "a", "an", "that", "this", "my", "our", "id", "of", "on", "in"}

# chat markup that reaches us inside the text
_SLACK_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
_SLACK_LINK = re.compile(r"<(?:#C[A-Z0-9]+\||!subteam\^[A-Z0-9]+\||[a-z]+://[^|>]*\|)?([^<>]*)>")
_TEAMS_AT = re.compile(r"<at>.*?</at>", re.I | re.S)
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Command:
    """One understood request. ``arg`` is the job id, host name or cause id the verb is about."""

    verb: Verb
    arg: str | None = None
    incident_id: int | None = None
    symptom: str | None = None
    symptom_kinds: tuple[str, ...] = ()
    verdict: Literal["right", "wrong"] | None = None
    free_text: bool = False


@dataclass(frozen=True)
class BadCommand:
    """Text that is not a command; ``reason`` is shown with the help text, ``suggestions`` are close cause ids."""

    reason: str
    suggestions: tuple[str, ...] = ()
    symptom_kinds: tuple[str, ...] = ()


Parsed = Command | BadCommand


def clean_text(text: str) -> str:
    """Strip chat markup so only the words remain.

    Slack escapes ``&<>`` and wraps mentions/links in ``<...>``
    (https://api.slack.com/reference/surfaces/formatting#escaping); Teams sends HTML with the bot's name in
    ``<at>...</at>`` (https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-outgoing-webhook).
    A leading ``/diagnose`` or ``diagnose`` is dropped so pasting a whole command line works.
    """
    t = _SLACK_MENTION.sub(" ", text or "")
    t = _TEAMS_AT.sub(" ", t)
    t = _SLACK_LINK.sub(r"\1", t)
    t = _TAG.sub(" ", t)
    t = html.unescape(t).replace("\xa0", " ")
    t = " ".join(t.split())
    t = re.sub(r"^/?diagnose\b\s*", "", t, flags=re.I)
    return t.strip()


def closest_causes(word: str, cause_ids: Iterable[str], n: int = 3) -> list[str]:
    """The known cause ids nearest to ``word``: by full id, then by the name after the domain."""
    ids = sorted(set(cause_ids))
    w = word.lower()
    out = difflib.get_close_matches(w, ids, n=n, cutoff=0.5)
    by_name: dict[str, list[str]] = {}
    for cid in ids:
        by_name.setdefault(cid.split(".", 1)[-1], []).append(cid)
    for name in difflib.get_close_matches(w.split(".", 1)[-1], list(by_name), n=n, cutoff=0.6):
        for cid in by_name[name]:
            if cid not in out:
                out.append(cid)
    return out[:n]


def resolve_cause(word: str, cause_ids: Iterable[str]) -> str | BadCommand:
    """A cause id from what the user typed: the exact id, or a name that is unique without its domain.

    ``bad_cable`` resolves to ``link.bad_cable`` because nothing else is called that; anything else unknown
    is answered with the closest ids, never guessed.
    """
    ids = set(cause_ids)
    w = word.strip(_PUNCT + "`*_").lower()
    if w in ids:
        return w
    short = [c for c in ids if c.split(".", 1)[-1] == w]
    if len(short) == 1:
        return short[0]
    sugg = tuple(closest_causes(w, ids))
    hint = f"; did you mean {', '.join(f'`{s}`' for s in sugg)}?" if sugg else " (see `help`)"
    return BadCommand(f"unknown cause `{w}`{hint}", suggestions=sugg)


def _int(tok: str) -> int | None:
    m = _INT.fullmatch(tok.strip(_PUNCT))
    return int(m.group(1)) if m else None


def _rest(tokens: list[str], start: int) -> str | None:
    rest = " ".join(tokens[start:]).strip()
    return rest or None


def _free_text(text: str) -> Parsed | None:
    """Scope (incident, job or host) and symptom from a sentence; None when it names no scope."""
    kinds = tuple(classify(text))
    m = _FT_INCIDENT.search(text)
    if m:
        return Command("incident", incident_id=int(m.group(1)), free_text=True)
    m = _FT_JOB.search(text)
    if m and m.group(1).lower().strip(_PUNCT) not in _NOT_IDS and any(ch.isdigit() for ch in m.group(1)):
        return Command("job", arg=m.group(1).rstrip(_PUNCT), symptom=text, symptom_kinds=kinds, free_text=True)
    m = _FT_HOST.search(text) or _FT_HOSTLIKE.search(text)
    if m and m.group(1).lower().strip(_PUNCT) not in _NOT_IDS and any(ch.isdigit() for ch in m.group(1)):
        return Command("host", arg=m.group(1).rstrip(_PUNCT), symptom=text, symptom_kinds=kinds, free_text=True)
    return None


def parse(text: str, cause_ids: Iterable[str]) -> Parsed:
    """Parse one chat message (already stripped of mentions or not; :func:`clean_text` runs here)."""
    ids = list(cause_ids)
    t = clean_text(text)
    if not t:
        return Command("help")
    tokens = t.split()
    verb = tokens[0].lower().rstrip(":")
    args = tokens[1:]

    if verb in ("help", "?", "-h", "--help"):
        return Command("help")
    if verb == "recent":
        return Command("recent") if not args else BadCommand("`recent` takes no arguments")
    if verb == "incident":
        n = _int(args[0]) if args else None
        if n is None:
            return _fallback(t, "`incident` needs a number, e.g. `incident 12`")
        return Command("incident", incident_id=n)
    if verb in ("job", "host") and args:
        pat = _JOB_ID if verb == "job" else _HOST
        arg = args[0].rstrip(_PUNCT)
        if arg.lower() in _NOT_IDS or not pat.fullmatch(arg):
            return _fallback(t, f"`{verb}` needs an id, e.g. `{verb} {'4412' if verb == 'job' else 'gpu-a003'}`")
        symptom = _rest(args, 1)
        return Command(verb, arg=arg, symptom=symptom,  # type: ignore[arg-type]
                       symptom_kinds=tuple(classify(symptom)) if symptom else ())
    if verb in ("job", "host"):
        return BadCommand(f"`{verb}` needs an id, e.g. `{verb} {'4412' if verb == 'job' else 'gpu-a003'}`")
    if verb == "playbook":
        if len(args) != 1:
            return BadCommand("`playbook` takes one cause id, e.g. `playbook link.bad_cable`")
        cause = resolve_cause(args[0], ids)
        return cause if isinstance(cause, BadCommand) else Command("playbook", arg=cause)
    if verb == "why":
        if not args:
            return BadCommand("`why` needs a cause id, e.g. `why link.bad_cable 12`")
        looks_like_id = bool(_CAUSE.fullmatch(args[0].strip(_PUNCT).lower())) and len(args) <= 3
        cause = resolve_cause(args[0], ids)
        if isinstance(cause, str):
            inc = _why_incident(args[1:])
            if inc is False:
                return BadCommand(f"`why {cause}` takes an incident number after the cause, e.g. `why {cause} 12`")
            return Command("why", arg=cause, incident_id=inc or None)
        # "why is allreduce slow on job 4412?" is a question, not a cause id
        ft = _free_text(t)
        if ft is not None:
            return ft
        if looks_like_id and "." in args[0]:
            return cause
        return _fallback(t, cause.reason, cause.suggestions)
    if verb == "feedback":
        return _feedback(args, ids)
    return _fallback(t, f"unknown command `{tokens[0]}`")


def _why_incident(rest: list[str]) -> int | None | bool:
    """The optional incident after ``why <cause>``: ``12``, ``#12`` or ``incident 12``; False when malformed."""
    if not rest:
        return None
    if rest[0].lower() in ("incident", "in", "for", "of") and len(rest) == 2:
        rest = rest[1:]
    if len(rest) != 1:
        return False
    n = _int(rest[0])
    return False if n is None else n


def _feedback(args: list[str], ids: list[str]) -> Parsed:
    usage = "usage: `feedback <incident> right` or `feedback <incident> wrong [cause]`"
    if len(args) < 2:
        return BadCommand(usage)
    n = _int(args[0])
    verdict = args[1].lower().strip(_PUNCT)
    if n is None or verdict not in ("right", "wrong") or (verdict == "right" and len(args) > 2) or len(args) > 3:
        return BadCommand(usage)
    if verdict == "right":
        return Command("feedback", incident_id=n, verdict="right")
    if len(args) == 3:
        cause = resolve_cause(args[2], ids)
        if isinstance(cause, BadCommand):
            return cause
        return Command("feedback", incident_id=n, verdict="wrong", arg=cause)
    return Command("feedback", incident_id=n, verdict="wrong")


def _fallback(text: str, reason: str, suggestions: tuple[str, ...] = ()) -> Parsed:
    """Not a strict command: read it as free text, else explain what was missing."""
    ft = _free_text(text)
    if ft is not None:
        return ft
    kinds = tuple(k for k in classify(text))
    if kinds:
        return BadCommand(
            f"I read this as {', '.join(kinds)} but not where: add `job <id>`, `host <name>` or `incident <id>`",
            symptom_kinds=kinds)
    return BadCommand(reason, suggestions=suggestions)
