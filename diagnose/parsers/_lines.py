"""Reading a capture line by line, the helpers every text parser shares: lines numbered as in the file (CR and ANSI
codes removed) and the shell prompts and command echoes that cut a pasted session into its commands' outputs."""

from __future__ import annotations

import re
from collections.abc import Iterator

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) splitting on ``\\n`` only, so numbers match the file; CR/ANSI removed."""
    for i, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        yield i, line


# `[user@host dir]$ cmd`, `user@host:dir$ cmd`, `root@host:~# cmd`
_PROMPT_RE = re.compile(
    r"^\s*(?:\((?:[^()\s]+)\)\s*)?"  # optional (venv)
    r"(?:\[(?P<u1>[\w.-]+)@(?P<h1>[A-Za-z0-9][\w.-]*)(?:\s+[^\]]*)?\]"
    r"|(?P<u2>[\w.-]+)@(?P<h2>[A-Za-z0-9][\w.-]*):[^\s$#]*)"
    r"\s*[$#%]\s?(?P<cmd>.*)$"
)
# `#ibstat -l` / `$ ibstat` / `# perfquery -x` command echo lines (no host)
_CMD_RE = re.compile(r"^\s*(?:[$#>]\s*)(?P<cmd>[A-Za-z_./][\w./-]*(?:\s.*)?)$")


def prompt(line: str) -> tuple[str | None, str] | None:
    """For a shell prompt line return (host or None, command); None when the line is not a prompt."""
    m = _PROMPT_RE.match(line)
    if m:
        return (m.group("h1") or m.group("h2")), m.group("cmd").strip()
    return None


def command_line(line: str, tools: tuple[str, ...]) -> str | None:
    """The command when ``line`` is a prompt or ``#cmd``/``$ cmd`` echo of one of ``tools``; else None."""
    p = prompt(line)
    if p is not None:
        return p[1]
    m = _CMD_RE.match(line)
    if m:
        cmd = m.group("cmd").strip()
        first = cmd.split()[0] if cmd.split() else ""
        if first.rsplit("/", 1)[-1] in tools or (first == "sudo" and any(t in cmd for t in tools)):
            return cmd
    return None
