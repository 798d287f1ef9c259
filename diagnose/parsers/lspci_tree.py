"""``lspci -t`` / ``-tv`` / ``-tvv`` (pciutils ``ls-tree.c``): the PCI bus tree, as evidence of where GPUs and NICs sit.

Shape (``show_tree_bridge``/``show_tree_bus``/``show_tree_dev``)::

    -+-[0000:40]-+-01.0-[41-4f]----00.0-[42-4f]--+-00.0-[43]----00.0  NVIDIA Corporation GA100 [A100 SXM4 80GB]
     |           |                               +-04.0-[44]----00.0  Mellanox Technologies MT28908 Family [ConnectX-6]
     |           |                               \\-0c.0-[46]--
     \\-[0000:00]-+-00.0  Intel Corporation ...

``[dddd:bb]`` is a root bus (several are listed with ``+-``/``\\-`` when the host has more than one; a single one is
``-[dddd:bb]-``; old lspci prints ``[bb]`` without the domain). ``dd.f`` is a device on the bus it hangs from;
``dd.f-[ss]-`` / ``dd.f-[ss-uu]-`` is a bridge whose secondary bus ``ss`` (subordinate ``uu``) follows, ``--`` leads
to a bus's only device, ``+-`` to each device of a bus but the last, which gets ``\\-``; a bridge followed by nothing
(``-[0b]--``) has an empty bus. Every printed line keeps the columns of the open lists as ``|``, so a continuation
line's ``+-``/``\\-`` column says which list it belongs to. ``-v`` adds ``  Vendor Device`` names to non-bridges
(bridges are never named); newer ``-tvv`` adds ``  Memory at ...`` lines, which are skipped.

One :class:`PciTreeDevice` per device with its full BDF reconstructed from the tree, the bridges above it up to the
root port, the description and a class guess; one :class:`PciTree` per tree (root buses, device count, whether the
paste ends inside an open list). Bridges are classified by structure, since lspci prints no name for them: a bridge
on a root bus is a root port, a bridge below one whose secondary bus holds bridges is a PCIe switch upstream port,
and the bridges on that bus are its downstream ports. A list still open at the end of the text (last item printed
with ``+-``), or a line cut inside a token, is reported as truncated. Columns one off from the list they continue
(a paste that lost or gained a leading space) are accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._host import shell_prompt
from diagnose.parsers._lines import iter_lines
from diagnose.parsers.base import guarded_parse

FORMAT = "lspci_tree"

# ----------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True, kw_only=True)
class PciTreeDevice(Record):
    """One device of an ``lspci -t[v]`` tree.

    ``bdf`` is ``dddd:bb:dd.f`` (lower case; ``0000`` when the tree prints no domain). ``parent`` is the bridge whose
    secondary bus the device sits on (None on a root bus); ``chain`` lists the bridges above it, nearest first, up to
    the root port; ``root_bus`` is ``dddd:bb`` of the root bus at the top of that chain. ``kind`` is the class guess:
    ``gpu``, ``nic``, ``nvswitch``, ``pcie_switch`` (a switch port, or a switch's management endpoint such as
    ``PLX``/``PEX``/``PMC-Sierra``), ``bridge`` (root port or other bridge) or ``other``; ``rdma`` marks NICs that do
    RDMA (ConnectX/BlueField, EFA, Slingshot, Omni-Path, NetXtreme-E, E810). ``role`` is the bridge's place in the
    tree (``root_port``, ``switch_upstream``, ``switch_downstream``, ``bridge``), None for other devices.
    ``description`` is the ``-v`` name, empty under plain ``-t``.
    """

    bdf: str
    domain: str
    bus: int
    devfn: str
    parent: str | None
    chain: tuple[str, ...]
    root_bus: str
    is_bridge: bool
    secondary: int | None
    subordinate: int | None
    role: str | None
    description: str
    kind: str
    rdma: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PciTree(Record):
    """One ``lspci -t`` tree, cited at its first line: ``root_buses`` it shows, ``devices`` placed, ``named``
    (``-v`` names present) and ``truncated`` (the paste ends inside an open list or a cut line: devices are missing)."""

    root_buses: int
    devices: int
    named: bool
    truncated: bool


# ----------------------------------------------------------------------------------------------- class guess

_NVSWITCH = re.compile(r"NVSwitch|NVIDIA Corporation Device (?:1ac0|1ac1|1ac2|1af1|22a3)\b", re.I)
_NVIDIA = re.compile(r"\bNVIDIA\b|\bnVidia\b", re.I)
_AMD_GPU = re.compile(r"\[AMD/ATI\]|\bInstinct\b|\bRadeon\b", re.I)
_NOT_GPU = re.compile(
    r"Audio|USB|Ethernet|SMBus|Memory Controller|\bLPC\b|AHCI|SATA|\bIDE\b|\bISA\b|Bridge|HyperTransport|nForce"
    r"|\bMCP\d|\bCK80|Co-?processor|Serial|UCSI|Controller Hub|Host bridge|PCIe Dummy|Switch|Network", re.I)
_SWITCH_EP = re.compile(
    r"PLX Technology|\bPEX ?\d{4}|PMC-Sierra|Microsemi|Switchtec|Microchip.*Switch|Broadcom / LSI.*(?:PCIe|Switch)"
    r"|PCIe Switch|PCI Express Switch", re.I)
_NIC = re.compile(
    r"Mellanox|ConnectX|BlueField|InfiniHost|InfiniBand|Elastic Fabric Adapter|\bEFA\b|Cassini|Slingshot|Omni-?Path"
    r"|NetXtreme|Ethernet|Network (?:Connection|Controller|Adapter|device)|\bE810\b|gVNIC|Elastic Network Adapter"
    r"|Chelsio|Solarflare|QLogic|Wireless", re.I)
_NOT_NIC = re.compile(r"Management Interface|SoC Management|PCIe Bridge|Switch|Bridge\b|Flash Recovery", re.I)
_RDMA = re.compile(
    r"Mellanox|ConnectX|BlueField|InfiniHost|InfiniBand|Elastic Fabric Adapter|\bEFA\b|Cassini|Slingshot|Omni-?Path"
    r"|NetXtreme-E|BCM57[45]\d\d|\bE810\b", re.I)


def classify(description: str) -> tuple[str, bool]:
    """(kind, rdma) of a non-bridge device from its ``-v`` name (``Vendor Device [Model]``)."""
    d = description
    if not d:
        return "other", False
    if _NVSWITCH.search(d):
        return "nvswitch", False
    if _SWITCH_EP.search(d):
        return "pcie_switch", False
    if (_NVIDIA.search(d) or _AMD_GPU.search(d)) and not _NOT_GPU.search(d):
        return "gpu", False
    if _NIC.search(d) and not _NOT_NIC.search(d):
        return "nic", bool(_RDMA.search(d))
    return "other", False


# ----------------------------------------------------------------------------------------------- sniff

_SNIFF_ROOT = re.compile(r"^ ?-(?:\+-)?\[(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}\]-", re.MULTILINE)
_SNIFF_ITEM = re.compile(
    r"^[ |]*(?:[+\\]-(?:\[(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}\]-|[0-9a-fA-F]{2}\.[0-7](?:-\[|  \S|$)))",
    re.MULTILINE)
_SNIFF_BRIDGE = re.compile(r"[0-9a-fA-F]{2}\.[0-7]-\[[0-9a-fA-F]{2}(?:-[0-9a-fA-F]{2})?\]-")


def sniff(head: str) -> int:
    head = head.replace("\r\n", "\n")
    roots = len(_SNIFF_ROOT.findall(head))
    items = len(_SNIFF_ITEM.findall(head))
    bridges = len(_SNIFF_BRIDGE.findall(head))
    if roots and (items or bridges):
        return 95
    if items >= 3 and bridges:
        lines = sum(1 for ln in head.split("\n") if ln.strip())
        return 85 if items * 2 >= lines else 60
    return 0


# ----------------------------------------------------------------------------------------------- parse

_ROOT_TOK = re.compile(r"\[(?:(?P<dom>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2})\]-")
_DEV_TOK = re.compile(r"(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7])")
_BR_TOK = re.compile(r"-\[(?P<sec>[0-9a-fA-F]{2})(?:-(?P<sub>[0-9a-fA-F]{2}))?\]-")
_FILTERED = re.compile(r"(?P<dom>[0-9a-fA-F]{4,8}):(?P<bus>[0-9a-fA-F]{2}):")  # `lspci -t -s ...` lines
_BASES = re.compile(r"^\s*(?:Region \d+: )?(?:Memory at|I/O ports at|\[virtual\]|\[enhanced\])")


class _Damaged(Exception):
    """A tree line that stops inside a token."""


@dataclass
class _Ctx:
    kind: str  # "buses" (a list of buses under `owner`) or "devs" (the devices of `bus`)
    owner: str | None
    bus: tuple[str, int] | None
    open: bool = True


@dataclass
class _Dev:
    line: int
    text: str
    host: str | None
    dom: str
    bus: int
    devfn: str
    sec: int | None = None
    sub: int | None = None
    desc: str = ""


@dataclass
class _Tree:
    line: int
    text: str
    host: str | None
    ctx: dict[int, _Ctx] = field(default_factory=dict)
    devs: dict[str, _Dev] = field(default_factory=dict)
    bus_parent: dict[tuple[str, int], str | None] = field(default_factory=dict)
    roots: set[tuple[str, int]] = field(default_factory=set)
    damaged: list[int] = field(default_factory=list)


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse, text, source, host)


def _bdf(dom: str, bus: int, devfn: str) -> str:
    return f"{dom}:{bus:02x}:{devfn}"


class _LineParser:
    """Walks one tree line from a known position, registering lists at their columns."""

    def __init__(self, tree: _Tree, line: str, n: int) -> None:
        self.t = tree
        self.s = line
        self.n = n

    def bridge_body(self, pos: int, owner: str | None, bus: tuple[str, int] | None) -> None:
        """What follows a bridge's ``-[ss]-`` plus ``show_tree_bridge``'s ``-`` (or the host bridge's leading ``-``)."""
        s = self.s
        if owner is None:
            m = _ROOT_TOK.match(s, pos)
            if m:  # the host bridge's only root bus
                self.bus_body(m.end(), self.root_bus(m))
                return
        if s.startswith(("+-[", "\\-["), pos):
            self.t.ctx[pos] = _Ctx("buses", owner, None, open=s[pos] == "+")
            self.bus_item(pos + 2, owner)
            return
        if bus is None:
            raise _Damaged
        self.bus_body(pos, bus)

    def root_bus(self, m: re.Match[str]) -> tuple[str, int]:
        dom = (m.group("dom") or "0000").lower().rjust(4, "0")[-4:]
        key = (dom, int(m.group("bus"), 16))
        self.t.roots.add(key)
        self.t.bus_parent.setdefault(key, None)
        return key

    def bus_item(self, pos: int, owner: str | None) -> None:
        m = _ROOT_TOK.match(self.s, pos)
        if not m:
            raise _Damaged
        if owner is None:
            key = self.root_bus(m)
        else:
            dom = (m.group("dom") or "0000").lower().rjust(4, "0")[-4:]
            key = (dom, int(m.group("bus"), 16))
            self.t.bus_parent.setdefault(key, owner)
        self.bus_body(m.end(), key)

    def bus_body(self, pos: int, bus: tuple[str, int]) -> None:
        s = self.s
        rest = s[pos:]
        if not rest.strip():
            return  # empty bus
        if rest.startswith("--"):
            self.device(pos + 2, bus)
        elif rest.startswith(("+-", "\\-")):
            self.t.ctx[pos] = _Ctx("devs", None, bus, open=rest[0] == "+")
            self.device(pos + 2, bus)
        else:
            raise _Damaged

    def device(self, pos: int, bus: tuple[str, int]) -> None:
        s = self.s
        m = _DEV_TOK.match(s, pos)
        if not m:
            raise _Damaged
        devfn = f"{m.group('dev').lower()}.{m.group('fn')}"
        bdf = _bdf(bus[0], bus[1], devfn)
        after = m.end()
        br = _BR_TOK.match(s, after)
        if br:
            sec = int(br.group("sec"), 16)
            sub = int(br.group("sub"), 16) if br.group("sub") else sec
            self.add(bdf, bus, devfn, sec=sec, sub=sub)
            self.t.bus_parent[(bus[0], sec)] = bdf
            nxt = br.end()
            if nxt >= len(s) or not s[nxt:].strip():
                raise _Damaged  # show_tree_bridge always writes its `-`
            if s[nxt] != "-":
                raise _Damaged
            self.bridge_body(nxt + 1, bdf, (bus[0], sec))
            return
        tail = s[after:]
        if tail and not tail.startswith(" ") and not tail.startswith("-"):
            raise _Damaged
        if tail.startswith("-") and tail.strip() != "":
            raise _Damaged  # a bridge token cut short (`00.0-[4`)
        self.add(bdf, bus, devfn, desc=tail.strip())

    def add(self, bdf: str, bus: tuple[str, int], devfn: str, sec: int | None = None, sub: int | None = None,
            desc: str = "") -> None:
        if bdf in self.t.devs:
            return  # a line pasted twice
        self.t.devs[bdf] = _Dev(self.n, self.s, self.t.host, bus[0], bus[1], devfn, sec, sub, desc)


def _lookup(tree: _Tree, col: int) -> tuple[int, _Ctx] | None:
    for c in (col, col - 1, col + 1):
        if c in tree.ctx:
            return c, tree.ctx[c]
    return None


def _continuation(tree: _Tree, line: str, n: int, col: int) -> bool:
    """A ``+-``/``\\-`` item at ``col``; False when no list of the tree is there."""
    found = _lookup(tree, col)
    lp = _LineParser(tree, line, n)
    if found is None:
        m = _ROOT_TOK.match(line, col + 2)
        if not m:
            return False
        # a paste that starts at a later root bus (` +-[0000:40]-+-...`): the root list is at this column
        tree.ctx[col] = _Ctx("buses", None, None, open=line[col] == "+")
        lp.bus_item(col + 2, None)
        return True
    k, ctx = found
    for c in [c for c in tree.ctx if c > k]:
        del tree.ctx[c]  # the lists of the previous sibling's subtree are finished
    ctx.open = line[col] == "+"
    if ctx.kind == "buses":
        lp.bus_item(col + 2, ctx.owner)
    elif ctx.bus is not None:
        lp.device(col + 2, ctx.bus)
    return True


def _emit(tree: _Tree, source: str, records: list[Record], problems: list[str]) -> None:
    open_lists = [c for c, x in tree.ctx.items() if x.open]
    truncated = bool(open_lists) or bool(tree.damaged)
    if not tree.devs and not tree.roots:
        return
    by_bus: dict[tuple[str, int], list[str]] = {}
    for bdf, d in tree.devs.items():
        by_bus.setdefault((d.dom, d.bus), []).append(bdf)
    records.append(PciTree(source=source, line=tree.line, text=clip(tree.text), host=tree.host,
                           root_buses=len(tree.roots), devices=len(tree.devs),
                           named=any(d.desc for d in tree.devs.values()), truncated=truncated))
    chains: dict[str, tuple[tuple[str, ...], tuple[str, int]]] = {}
    for bdf, d in tree.devs.items():
        chain: list[str] = []
        key = (d.dom, d.bus)
        while True:
            p = tree.bus_parent.get(key)
            if p is None or p in chain or p not in tree.devs:
                break
            chain.append(p)
            pd = tree.devs[p]
            key = (pd.dom, pd.bus)
        chains[bdf] = (tuple(chain), key)
    # bridge roles, top down: a bridge right below a switch's upstream port is one of its downstream ports; any
    # other bridge below the root port whose bus holds bridges is the upstream port of a (further) switch
    roles: dict[str, str] = {}
    for bdf in sorted((b for b, d in tree.devs.items() if d.sec is not None), key=lambda b: len(chains[b][0])):
        d = tree.devs[bdf]
        parent = tree.bus_parent.get((d.dom, d.bus))
        if parent is None:
            roles[bdf] = "root_port"
        elif roles.get(parent) == "switch_upstream":
            roles[bdf] = "switch_downstream"
        elif any(tree.devs[k].sec is not None for k in by_bus.get((d.dom, d.sec or -1), [])):
            roles[bdf] = "switch_upstream"
        else:
            roles[bdf] = "bridge"
    for bdf, d in tree.devs.items():
        chain_t, key = chains[bdf]
        role = roles.get(bdf)
        if d.sec is not None:
            kind, rdma = ("pcie_switch" if role in ("switch_upstream", "switch_downstream") else "bridge"), False
        else:
            kind, rdma = classify(d.desc)
        records.append(PciTreeDevice(
            source=source, line=d.line, text=clip(d.text), host=d.host, bdf=bdf, domain=d.dom, bus=d.bus,
            devfn=d.devfn, parent=chain_t[0] if chain_t else None, chain=chain_t,
            root_bus=f"{key[0]}:{key[1]:02x}", is_bridge=d.sec is not None, secondary=d.sec,
            subordinate=d.sub, role=role, description=d.desc, kind=kind, rdma=rdma,
        ))
    if open_lists:
        problems.append(f"truncated: the tree starting at line {tree.line} ends inside an open list"
                        f" ({len(open_lists)} list(s) without their last `\\-` item); devices are missing")
    for n in tree.damaged[:3]:
        problems.append(f"truncated: tree line {n} stops inside a token")


def _parse(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    cur_host = host
    tree: _Tree | None = None
    for n, line in iter_lines(text):
        if not line.strip():
            continue
        p = shell_prompt(line)
        if p is not None:
            if tree is not None:
                _emit(tree, source, records, problems)
                tree = None
            if p[0]:
                cur_host = p[0]
            continue
        col = len(line) - len(line.lstrip(" |"))
        rest = line[col:]
        try:
            if rest.startswith("-") and col <= 1 and (rest.startswith("-[") or rest.startswith("-+-[")
                                                      or rest.startswith("-\\-[")):
                if tree is not None:
                    _emit(tree, source, records, problems)
                tree = _Tree(n, line, cur_host)
                _LineParser(tree, line, n).bridge_body(col + 1, None, None)
                continue
            if rest.startswith(("+-", "\\-")):
                if tree is None:
                    if not _ROOT_TOK.match(line, col + 2):
                        continue
                    tree = _Tree(n, line, cur_host)
                if not _continuation(tree, line, n, col):
                    continue
                continue
            fm = _FILTERED.match(rest)
            if fm and _DEV_TOK.match(rest, fm.end()):
                if tree is None:
                    tree = _Tree(n, line, cur_host)
                dom = fm.group("dom").lower().rjust(4, "0")[-4:]
                bus = (dom, int(fm.group("bus"), 16))
                tree.bus_parent.setdefault(bus, None)
                tree.roots.add(bus)
                _LineParser(tree, line, n).device(col + fm.end(), bus)
                continue
        except _Damaged:
            if tree is not None:
                tree.damaged.append(n)
            continue
        if tree is not None and _BASES.match(rest):
            continue  # `-tvv` BAR lines
    if tree is not None:
        _emit(tree, source, records, problems)
