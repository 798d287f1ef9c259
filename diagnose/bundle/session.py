"""A pasted terminal session: shell prompts name the tool whose output follows them.

People paste ``user@host:~$ ibstat`` then its output, or ``# lspci -vvv | grep ACSCtl`` then two lines, or several
commands one after another in one file. The prompt says what the lines after it are, better than their shape does
(a grep-filtered lsmod has no header; an lspci fragment has no device line). :func:`segments` cuts a text at its
prompt lines into the parts each command printed, each with the format its command names, so each part is read by
that tool's parser, with its own line numbers kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# ``$ cmd``, ``# cmd``, ``user@host:~/dir$ cmd``, ``[user@host dir]# cmd``, ``(env) user@host $ cmd``,
# ``/export/home/me/x# cmd``, ``PS> cmd``; the command after an optional sudo / time / env VAR=...
_PROMPT = re.compile(
    r"^\s{0,4}(?:\([\w.\-]+\)\s*)?"
    r"(?:\[[\w.\-]+@[\w.\-]+(?:\s[^\]\n]*)?\]|[\w.\-]+@[\w.\-]+(?::[^\s$#\n]*)?|[~/][^\s$#\n]*|[\w.\-]+)?"
    r"\s?[$#%>]\s+(?:(?:sudo|time|command|exec)\s+(?:-\S+\s+)*)*(?:[A-Z_][A-Z0-9_]*=\S+\s+)*"
    r"(?P<cmd>[\w.\-/]+)(?P<args>[^\n]*)$"
)

# the command's base name -> the parser's format; nvidia-smi by its subcommand (see _nvidia_smi)
COMMANDS: dict[str, str] = {
    "ibstat": "ibstat", "ibstatus": "ibstatus", "ibv_devinfo": "ibv_devinfo", "lsmod": "lsmod", "lspci": "lspci",
    "perfquery": "perfquery", "dmesg": "dmesg", "journalctl": "dmesg", "df": "df", "ulimit": "ulimit",
    "env": "env", "printenv": "env", "export": "env", "ibdev2netdev": "ibdev2netdev", "iblinkinfo": "iblinkinfo",
    "ibnetdiscover": "ibnetdiscover", "sminfo": "sminfo", "ethtool": "ethtool_stats", "mlxlink": "mlxlink",
    "ibqueryerrors": "ibqueryerrors", "dcgmi": "dcgmi", "rdma": "rdma_statistic", "smpquery": "smpquery",
    "saquery": "saquery",
    "ibportstate": "smpquery",
    "ibswitches": "ibnodes", "ibhosts": "ibnodes", "ibnodes": "ibnodes", "ibrouters": "ibnodes",
    "ibroute": "ibroute", "dump_lfts.sh": "ibroute", "dump_lfts": "ibroute", "dump_fts": "ibroute",
    "ibswinfo": "ibswinfo", "ibdiagnet": "ibdiagnet_log", "scontrol": "slurm", "sacct": "slurm",
    **{f"ib_{op}_{kind}": "perftest" for op in ("write", "read", "send", "atomic") for kind in ("bw", "lat")},
    "show_gids": "show_gids", "p2pBandwidthLatencyTest": "cuda_p2p", "simpleP2P": "cuda_p2p",
    "diff": "config_diff", "git": "config_diff",  # diff -u, git log -p / git show / git diff (see command_format)
    "mlxconfig": "mlxconfig", "mstconfig": "mlxconfig", "mlnx_qos": "mlnx_qos", "module": "modulefile",
}


PASTE_CHARS = 256 * 1024


@dataclass(frozen=True)
class Segment:
    first_line: int  # 1-based line of the segment's first line in the whole text (the prompt line)
    fmt: str | None  # the format its command names, None when the command is not a tool we read
    text: str
    command: str


def _nvidia_smi(args: str) -> str:
    a = f" {args} "
    if " topo" in a:
        return "nvidia_smi_topo"
    if " nvlink" in a:
        return "nvidia_smi_nvlink"
    if " -q" in a or " --query " in a:
        return "nvidia_smi_q"
    return "nvidia_smi"


_SMP_PKEY_OP = re.compile(r"(?:^|\s)(?:pkeys?|pkeytable)(?:\s|$)", re.IGNORECASE)
_SMP_QOS_OP = re.compile(r"(?:^|\s)(sl2vl(?:table)?|vlarb(?:itration)?)(?:\s|$)", re.IGNORECASE)


def command_format(cmd: str, args: str) -> str | None:
    base = cmd.rsplit("/", 1)[-1]
    if base in ("nvidia-smi", "nvidia_smi"):
        return _nvidia_smi(args)
    if base in ("cat", "less", "more", "tail", "head"):  # `cat /sys/.../ib/...`, `cat /etc/nccl.conf`
        if re.search(r"(?:^|[\s/])partitions\.conf\b", args):
            return "opensm_partitions"
        return "qos_policy" if re.search(r"(?:^|[\s/])qos-policy\.conf\b", args) else None
    if base == "git" and not re.match(r"\s*(?:-[Cc]\s+\S+\s+|-\S+\s+)*(?:log|show|diff|whatchanged)\b", args):
        return None  # git status, git pull, ...: not a change listing
    if base == "lspci" and re.search(r"(?:^|\s)-[A-Za-z]*t", args):  # lspci -t / -tv / -vt: the tree, not -vvv
        return "lspci_tree"
    if base == "smpquery":  # the QoS tables have parsers of their own (op names are case-insensitive)
        op = _SMP_QOS_OP.search(args)
        if op:
            return "smpquery_sl2vl" if op.group(1).lower().startswith("sl2vl") else "smpquery_vlarb"
        if _SMP_PKEY_OP.search(args):
            return "smpquery_pkeys"
    return COMMANDS.get(base)


def prompt_of(line: str) -> tuple[str, str | None] | None:
    """(command, format) when ``line`` is a shell prompt running a command, else None. A ``# word`` line counts only
    when the word is a tool we read (nccl-tests and many tools print ``# comment`` lines)."""
    if "$" not in line and "#" not in line and ">" not in line and "%" not in line:
        return None
    m = _PROMPT.match(line)
    if not m:
        return None
    cmd, args = m["cmd"], m["args"]
    fmt = command_format(cmd, args)
    stripped = line.lstrip()
    if fmt is None and (stripped.startswith(("#", ">", "%")) or "@" not in line and not stripped.startswith("$")):
        return None  # a comment or a quote, not a prompt we can use
    return cmd.rsplit("/", 1)[-1], fmt


@lru_cache(maxsize=1)
def _candidates() -> re.Pattern[str]:
    """Lines that may be prompts: a ``$``/``#``/``%``/``>`` prompt before a command we read or any ``user@host``
    or ``$`` prompt (which cut a session even when their command is not ours)."""
    names = sorted({*COMMANDS, "nvidia-smi"}, key=len, reverse=True)
    tools = "|".join(re.escape(n) for n in names)
    return re.compile(
        r"[$#%>][ \t]+(?:sudo[ \t]+(?:-\S+[ \t]+)*)?(?:[\w.~/\-]*/)?(?:" + tools + r")\b"
        r"|@[^\n\s]*[$#][ \t]|^[ \t]{0,4}\$[ \t]", re.M)


def segments(text: str) -> list[Segment]:
    """The text cut at its prompt lines (none: one segment, the whole text, format None)."""
    if "$ " not in text and "# " not in text and "> " not in text and "% " not in text:
        return [Segment(1, None, text, "")]  # no prompt can be there
    cuts: list[tuple[int, int, str, str | None]] = []  # (line index, offset of the line, command, format)
    i, pos, last = 0, 0, -1
    # a pasted session is small; in a larger file (a machine capture) only its head is looked at for prompts
    for m in _candidates().finditer(text, 0, min(len(text), PASTE_CHARS)):  # the few lines that can be prompts
        ls = text.rfind("\n", 0, m.start()) + 1
        if ls == last:
            continue
        last = ls
        le = text.find("\n", m.start())
        ln = text[ls:le if le >= 0 else len(text)]
        if len(ln) > 400:
            continue
        p = prompt_of(ln)
        if p is None:
            continue
        i += text.count("\n", pos, ls)  # the line's index, counted on from the last cut
        pos = ls
        cuts.append((i, ls, p[0], p[1]))
    if not cuts:
        return [Segment(1, None, text, "")]
    out: list[Segment] = []
    if cuts[0][1] > 0:
        out.append(Segment(1, None, text[: cuts[0][1] - 1], ""))
    for k, (li, off, cmd, fmt) in enumerate(cuts):
        end = cuts[k + 1][1] - 1 if k + 1 < len(cuts) else len(text)
        out.append(Segment(li + 1, fmt, text[off:end], cmd))
    return out


__all__ = ["COMMANDS", "Segment", "command_format", "prompt_of", "segments"]
