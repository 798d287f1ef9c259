"""Links that trained below what both their ends can do, on any link of the fabric (switch-to-switch included).

Sources, each a verdict of the tools themselves where they give one:

* ``iblinkinfo``: the last parenthesis of a connected port holds ``Could be 4X`` / ``Could be 53.125 Gbps`` when the
  link runs narrower or slower than the best width/speed *both* ends support (infiniband-diags
  ``ibdiag_common.c`` ``get_max_msg``); an empty ``( )`` says it trained at its best. A 2X link with ``( )`` is a
  link whose ends cannot do more (an HDR100 split port), not a degraded one.
* ``ibportstate <lid> <port>`` on an active switch port: the port's PortInfo and its peer's (``Peer PortInfo:``);
  the link is degraded when its active width is below the widest width both dumps enable, or its extended speed
  below the fastest both support; the tool's own ``Peer ports operating at active width N rather than M`` warning
  (``ibportstate.c`` ``validate_width`` / ``validate_speed`` / ``validate_extended_speed``) says the same.
* ``ibdiagnet`` (its ``.log`` or stdout): the Links Speed/Width Check's own errors, ``Link: <end><--><end> -
  Unexpected actual link speed 2.5 (enable_speed1="2.5 or 5 or 10", enable_speed2="2.5 or 5 or 10" therefore final
  speed should be 10)``, each end ``S<system guid>/N<node guid>/P<port>`` or ``<host>/U1/P<port>``.
* A topology without verdicts (``ibnetdiscover``, ``ibdiagnet2.lst``): a switch-to-switch link slower than the other
  switch-to-switch links of the same listing.

Both ends are named: a switch by its short name and port (``leaf-c2/P38``), an HCA by host, device and port.
"""

from __future__ import annotations

import re
from typing import cast

import pandas as pd

from diagnose.evidence.context import Context, finding, sval
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding, Location
from diagnose.parsers._fabric import ibdiag_speed, norm_width, speed_name
from diagnose.parsers._ib import norm_guid
from diagnose.topology.fabric import SPEED_GBPS_PER_LANE, WIDTH_LANES, Fabric, link_gbps

MAX_LINK_FINDINGS = 8
_COULD_WIDTH = re.compile(r"Could be\s+(\d+X)\b", re.I)
_COULD_SPEED = re.compile(r"Could be\s+(\d+(?:\.\d+)?\s*Gbps|FDR10|SDR|DDR|QDR|FDR|EDR|HDR|NDR|XDR)\b", re.I)
_HINT = re.compile(r"\"\s*\([^()]*\)\s*$")  # iblinkinfo's verdict parenthesis after the peer's description
_IBWARN = re.compile(r"Peer ports operating at active (?P<what>width|speed|extended speed) (?P<n>\d+) rather than "
                     r"(?P<m>\d+) \((?P<label>[^)]*)\)")
_WIDTH_CODE = {1: "1X", 2: "4X", 4: "8X", 8: "12X", 16: "2X"}  # IBA LinkWidthActive encoding
_IBDIAG_LINK = re.compile(
    r"Link:\s*(?P<a>[^<>]+?)\s*<-->\s*(?P<b>[^<>]+?)\s+-\s+Unexpected actual link (?P<what>speed|width)\s+(?P<got>[^\s(]+)"
    r"(?:\s*\((?P<why>[^)]*?)\s*(?:therefore final (?:speed|width) should be\s+(?P<want>[^)\s]+))?\s*\))?"
)
_IBDIAG_END = re.compile(r"^S[0-9a-fA-F]+/N(?P<guid>[0-9a-fA-F]+)/P(?P<port>\d+)$"
                         r"|^(?P<name>[^/\s]+)(?:\s+(?P<dev>mlx\d+_\d+|HCA-\d+))?/U\d+/P(?P<hport>\d+)$")
_ORDER = ["SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR"]


def _could_be(text: str | None) -> tuple[str | None, str | None]:
    if not text:
        return None, None
    w = _COULD_WIDTH.search(text)
    s = _COULD_SPEED.search(text)
    return (norm_width(w.group(1)) if w else None), (speed_name(s.group(1)) if s else None)


def _widths(text: object) -> list[str]:
    """``'1X or 4X'`` / ``'4X (IBA extension)'`` / ``'1X or 2X or 4X'`` -> the widths named."""
    return [f"{n}X" for n in re.findall(r"\b(1|2|4|8|12)X\b", str(text or ""))]


def _speeds(text: object) -> list[str]:
    out = []
    for part in re.split(r"\s+or\s+", str(text or "")):
        s = speed_name(part)
        if s:
            out.append(s)
    return out


def _widest(ws: list[str]) -> str | None:
    return max(ws, key=lambda w: WIDTH_LANES[w]) if ws else None


def _fastest(ss: list[str]) -> str | None:
    return max(ss, key=_ORDER.index) if ss else None


def _gbps(width: str | None, speed: str | None) -> float | None:
    return link_gbps(width, speed)


class _End:
    """One end of a link, named the way an operator finds it."""

    def __init__(self, fab: Fabric | None, guid: str | None, port: int | None, desc: str | None, lid: int | None):
        self.guid, self.port, self.desc, self.lid = guid, port, desc, lid
        self.kind = fab.kind(guid) if fab is not None and guid else None
        if self.kind is None and desc:
            self.kind = "CA" if re.match(r"^\S+\s+(?:mlx\d+_\d+|HCA-\d+)\b", desc) else "SW" if ";" in desc else None
        self.host: str | None = None
        self.device: str | None = None
        if fab is not None and guid and guid in fab.graph:
            if self.kind == "CA":
                self.host, self.device = fab.host_device(guid)
            else:
                self.device = fab.name(guid)
            self.tier = fab.tier(guid)
        else:
            self.tier = None
        if self.device is None and desc:
            m = re.match(r"^\s*(\S+)\s+(mlx\d+_\d+|HCA-\d+)\b", desc)
            if m and self.kind == "CA":
                self.host, self.device = m.group(1), m.group(2)
            else:
                m2 = re.match(r"^\s*(?:MF\d+;)?(?P<name>[^:;]+?)(?::\S+)?\s*$", desc)
                self.device = m2.group("name") if m2 else desc
        if self.device is None:
            self.device = (f"lid {lid}" if lid is not None else guid) or "?"

    def label(self) -> str:
        base = f"{self.host}/{self.device}" if self.host else str(self.device)
        return f"{base}/P{self.port}" if self.port is not None else base

    def location(self, peer: _End | None) -> Location:
        return Location(host=self.host, device=self.device, port=self.port, peer=peer.label() if peer else None)


def _order(a: _End, b: _End | None) -> tuple[_End, _End | None]:
    """The end to place the finding at: the HCA end of a host link, the lower tier (leaf) of a switch link."""
    if b is None or b.kind is None:
        return a, b  # the far end is not known to be a switch or an HCA: the queried end stays first
    if a.kind == "CA" or b.kind == "CA":
        return (a, b) if a.kind == "CA" else (b, a)
    ta, tb = a.tier if a.tier is not None else 99, b.tier if b.tier is not None else 99
    if ta != tb:
        return (a, b) if ta < tb else (b, a)
    return (a, b) if (a.device or "", a.port or 0) <= (b.device or "", b.port or 0) else (b, a)


def _cable_key(a: tuple[str | None, int | None], b: tuple[str | None, int | None] | None) -> tuple:
    return tuple(sorted([(str(a[0]), a[1] or 0), (str(b[0]), b[1] or 0)])) if b is not None else ((str(a[0]), a[1] or 0),)


@extractor(fabric=True,
           reads=("FabricLink", "FabricNode", "FabricPortState", "IbPort", "PortInfo", "ToolError", "ToolMessage"),
           emits=("fabric_links_at_capability", "link_below_capability"))
def link_training(ctx: Context) -> list[Finding]:
    fab = ctx.fabric
    cands: list[dict[str, object]] = []
    verdict_sources = _iblinkinfo(ctx, fab, cands)
    _ibportstate(ctx, fab, cands)
    _ibdiagnet_checks(ctx, fab, cands)
    _topology_peers(ctx, fab, cands, verdict_sources)
    out: list[Finding] = []
    seen: dict[tuple, dict[str, object]] = {}
    for c in cands:
        key = cast(tuple, c["key"])  # every candidate is a _candidate: its key is a _cable_key
        if key in seen:
            seen[key]["rows"] = pd.concat([seen[key]["rows"], c["rows"]])  # type: ignore[list-item]
            seen[key]["ends_seen"] = min(2, int(seen[key]["ends_seen"]) + 1)  # type: ignore[call-overload]
            continue
        seen[key] = dict(c)
    ranked = sorted(seen.values(), key=lambda c: (float(c["ratio"] or 1.0), str(c["label"])))  # type: ignore[arg-type]
    for c in ranked[:MAX_LINK_FINDINGS]:
        out.append(finding("link_below_capability", str(c["summary"]), c["rows"], c["location"],  # type: ignore[arg-type]
                           c["attrs"] | {"ends_seen": c["ends_seen"]}))  # type: ignore[operator]
    if not seen and verdict_sources:
        out.extend(_at_capability(ctx, verdict_sources))
    if not seen and not verdict_sources:
        out.extend(_ibdiagnet_checks_passed(ctx))
    return out


def _summary(near: _End, far: _End | None, width: str | None, speed: str | None, cw: str | None, cs: str | None,
             why: str) -> str:
    switch_link = near.kind == "SW" and far is not None and far.kind == "SW"
    what = "switch-to-switch link" if switch_link else "link"
    best = " ".join(x for x in (cw or width, cs or speed) if x)
    return (f"The {what} {near.label()} <-> {far.label() if far else '(peer not shown)'} trained at "
            f"{' '.join(x for x in (width, speed) if x)} while both ends can run {best} ({why}).")


def _candidate(near: _End, far: _End | None, width: str | None, speed: str | None, cw: str | None, cs: str | None,
               basis: str, why: str, rows: pd.DataFrame, tool: str) -> dict[str, object]:
    near, far = _order(near, far)
    got = _gbps(width, speed)
    best = _gbps(cw or width, cs or speed)
    ratio = round(got / best, 3) if got and best else (0.5 if cw or cs else None)
    switch_link = near.kind == "SW" and far is not None and far.kind == "SW"
    return {
        "key": _cable_key((near.guid or near.device, near.port), (far.guid or far.device, far.port) if far else None),
        "label": near.label(),
        "summary": _summary(near, far, width, speed, cw, cs, why),
        "rows": rows,
        "location": near.location(far),
        "ends_seen": 1,
        "ratio": ratio,
        "attrs": {"width": width, "speed": speed, "capable_width": cw or width, "capable_speed": cs or speed,
                  "link_gbps": got, "capable_gbps": best, "ratio": ratio, "switch_link": switch_link,
                  "host_link": near.kind == "CA", "basis": basis, "tool": tool,
                  "width_low": bool(cw and width and WIDTH_LANES.get(cw, 0) > WIDTH_LANES.get(width, 0)),
                  "speed_low": bool(cs and speed and _ORDER.index(cs) > _ORDER.index(speed))},
    }


def _iblinkinfo(ctx: Context, fab: Fabric | None, cands: list[dict[str, object]]) -> set[str]:
    """iblinkinfo's own verdicts; returns the sources that print verdicts (their '( )' is a verdict too)."""
    links = ctx.frame("FabricLink")
    states = ctx.frame("FabricPortState")
    sources: set[str] = set()
    if not links.empty:
        hinted = links["text"].astype(str).str.contains(_HINT, na=False)
        sources = set(links.loc[hinted, "source"].astype(str))
    if states.empty or "could_be" not in states:
        return sources
    hints = states[states["could_be"].notna() & states["could_be"].astype(str).str.contains("Could be", case=False)]
    if hints.empty:
        return sources
    by_line: dict[tuple[str, int], pd.Series] = {}
    if not links.empty:
        sel = links[links["source"].astype(str).isin(set(hints["source"].astype(str)))]
        for _, r in sel.iterrows():
            by_line[(str(r["source"]), int(r["line"]))] = r
    for _, h in hints.iterrows():
        cw, cs = _could_be(sval(h["could_be"]))
        if cw is None and cs is None:
            continue
        lk = by_line.get((str(h["source"]), int(h["line"])))
        near = _End(fab, sval(h["guid"]), int(h["port"]), sval(h.get("description")), _int(h.get("lid")))
        far = None
        if lk is not None:
            far = _End(fab, sval(lk["peer_guid"]), int(lk["peer_port"]), sval(lk.get("peer_description")),
                       _int(lk.get("peer_lid")))
        why = "iblinkinfo: " + str(h["could_be"]).strip()
        cands.append(_candidate(near, far, sval(h["width"]), sval(h["speed"]), cw, cs, "tool_verdict", why,
                                pd.DataFrame([h]), "iblinkinfo"))
    return sources


def _int(v: object) -> int | None:
    try:
        return None if v is None or v != v else int(v)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _ibportstate(ctx: Context, fab: Fabric | None, cands: list[dict[str, object]]) -> None:
    """A switch port's PortInfo against its peer's (ibportstate on an active switch port), and the tool's own
    'Peer ports operating at ...' warning."""
    pi = ctx.frame("PortInfo")
    if pi.empty or "peer_of_port" not in pi:
        return
    peers = pi[pi["peer_of_port"].notna()]
    if peers.empty:
        return
    local = pi[pi["peer_of_port"].isna()]
    warns = _ibwarns(ctx)
    for _, p in peers.iterrows():
        mine = local[(local["source"] == p["source"]) & (local["port"] == int(p["peer_of_port"]))
                     & (local["line"] < p["line"])]
        if not pd.isna(p["peer_of_lid"]):
            mine = mine[mine["lid"] == int(p["peer_of_lid"])]
        if mine.empty:
            continue
        m = mine.iloc[-1]
        if sval(m["state"]) != "Active":
            continue
        width, speed = sval(m["width"]), sval(m["speed"])
        both_w = set(_widths(m.get("width_enabled") or m.get("width_supported"))) & set(
            _widths(p.get("width_enabled") or p.get("width_supported")))
        ext = set(_speeds(m.get("speed_ext_supported"))) & set(_speeds(p.get("speed_ext_supported")))
        base = set(_speeds(m.get("speed_supported"))) & set(_speeds(p.get("speed_supported")))
        cw = _widest(sorted(both_w))
        cs = _fastest(sorted(ext)) or _fastest(sorted(base))
        w_low = bool(cw and width and WIDTH_LANES[cw] > WIDTH_LANES.get(width, 0))
        s_low = bool(cs and speed and speed in _ORDER and _ORDER.index(cs) > _ORDER.index(speed))
        warn = warns.get(str(p["source"]))
        if not (w_low or s_low or warn is not None):
            continue
        if warn is not None and not (w_low or s_low):
            cw = _WIDTH_CODE.get(int(warn["m"])) if warn["what"] == "width" else None
            cs = speed_name(warn["label"]) if warn["what"] != "width" else None
            w_low, s_low = cw is not None, cs is not None
        near_guid = fab.by_lid.get(int(m["lid"])) if fab is not None and not pd.isna(m["lid"]) else None
        far_guid = fab.by_lid.get(int(p["lid"])) if fab is not None and not pd.isna(p["lid"]) else None
        near = _End(fab, near_guid, int(m["port"]), None, _int(m["lid"]))
        if near.kind is None:
            near.kind = "SW"  # ibportstate only dumps the peer of a switch port
        far = _End(fab, far_guid, int(p["port"]), None, _int(p["lid"]))
        why = "ibportstate: " + (f"'{warn['text']}'" if warn is not None else
                                 f"LinkWidthActive {width}, both ends enable {cw}" if w_low else
                                 f"active speed {speed}, both ends support {cs}")
        rows = pd.concat([mine.tail(1), pd.DataFrame([p])])
        cands.append(_candidate(near, far, width, speed, cw if w_low else None, cs if s_low else None,
                                "tool_warning" if warn is not None else "both_ends_supported", why, rows,
                                "ibportstate"))


def _ibwarns(ctx: Context) -> dict[str, dict[str, str]]:
    te = ctx.frame("ToolError")
    if te.empty:
        return {}
    hit = te[te["message"].astype(str).str.contains("Peer ports operating at active", regex=False, na=False)]
    out: dict[str, dict[str, str]] = {}
    for _, r in hit.iterrows():
        m = _IBWARN.search(str(r["message"]))
        if m:
            out.setdefault(str(r["source"]), {**m.groupdict(), "text": m.group(0)})
    return out


def _ibdiag_end(fab: Fabric | None, text: str) -> _End:
    """``S<sys>/N<node>/P20`` (a node by GUID) or ``c0104/U1/P1`` (an HCA by the first word of its description)."""
    m = _IBDIAG_END.match(text)
    if m is None:
        end = _End(fab, None, None, None, None)
        end.device = text  # a split-port label (``.../P1/3/1``) or a form not seen yet: shown as ibdiagnet printed it
        return end
    if m.group("guid"):
        return _End(fab, norm_guid("0x" + m.group("guid")), int(m.group("port")), None, None)
    end = _End(fab, None, int(m.group("hport")), None, None)
    end.kind, end.host = "CA", m.group("name")
    devs = [d for h, d in sorted(fab.by_host_dev) if h == end.host] if fab is not None else []
    end.device = m.group("dev") or (devs[0] if len(devs) == 1 else "HCA")
    return end


def _ibdiagnet_checks(ctx: Context, fab: Fabric | None, cands: list[dict[str, object]]) -> None:
    """ibdiagnet's Links Speed / Width Check errors: the link trained below what both ends enable."""
    tm = ctx.frame("ToolMessage")
    if tm.empty:
        return
    msg = tm["message"].astype(str)
    hit = tm[msg.str.contains("Unexpected actual link ", regex=False, na=False)]
    for idx, r in hit.iterrows():
        m = _IBDIAG_LINK.search(str(r["message"]))
        if m is None:
            continue
        near, far = _ibdiag_end(fab, m.group("a")), _ibdiag_end(fab, m.group("b"))
        want = m.group("want")
        if m.group("what") == "speed":
            got_s, want_s = ibdiag_speed(m.group("got")), ibdiag_speed(want)
            if got_s is None:
                continue
            c = _candidate(near, far, None, got_s, None, want_s, "tool_verdict",
                           "ibdiagnet: " + m.group(0).split(" - ", 1)[1], hit.loc[[idx]], "ibdiagnet")
            per_got, per_want = SPEED_GBPS_PER_LANE.get(got_s), SPEED_GBPS_PER_LANE.get(want_s or "")
            ratio = round(per_got / per_want, 3) if per_got and per_want else 0.5
        else:
            got_w, want_w = norm_width(m.group("got")), norm_width(want)
            if got_w is None:
                continue
            c = _candidate(near, far, got_w, None, want_w, None, "tool_verdict",
                           "ibdiagnet: " + m.group(0).split(" - ", 1)[1], hit.loc[[idx]], "ibdiagnet")
            ratio = round(WIDTH_LANES[got_w] / WIDTH_LANES[want_w], 3) if want_w else 0.5
        c["ratio"] = ratio
        c["attrs"] = {**c["attrs"], "ratio": ratio}  # type: ignore[dict-item]
        cands.append(c)


_CHECK_OK = re.compile(r"^Links (?P<what>Speed|Width) Check finished successfully", re.I)


def _ibdiagnet_checks_passed(ctx: Context) -> list[Finding]:
    """ibdiagnet ran its Links Speed and Width Checks over the whole fabric and neither found a link below what both
    of its ends enable."""
    tm = ctx.frame("ToolMessage")
    if tm.empty:
        return []
    ok = tm[tm["message"].astype(str).str.match(_CHECK_OK, na=False)]
    if set(ok["message"].astype(str).str.extract(_CHECK_OK)["what"].str.title()) != {"Speed", "Width"}:
        return []
    return [finding(
        "fabric_links_at_capability",
        "ibdiagnet's Links Speed Check and Links Width Check finished successfully: no link of the fabric, host or "
        "switch-to-switch, trained below the width and speed both of its ends enable.",
        ok.head(2), attrs={"links": None, "switch_links": None, "tool": "ibdiagnet"},
    )]


def _topology_peers(ctx: Context, fab: Fabric | None, cands: list[dict[str, object]], verdicts: set[str]) -> None:
    """A switch-to-switch link slower than the other switch-to-switch links of a listing that prints no verdicts."""
    links = ctx.frame("FabricLink")
    if links.empty or fab is None:
        return
    rest = links[~links["source"].astype(str).isin(verdicts) & (links["state"].fillna("Active") == "Active")]
    if rest.empty:
        return
    kinds = fab.kind
    sw = rest[[kinds(str(g)) == "SW" and kinds(str(pg)) == "SW"
               for g, pg in zip(rest["guid"], rest["peer_guid"], strict=True)]]
    for _, grp in sw.groupby(sw["source"].astype(str)):
        rates = [link_gbps(sval(w), sval(s)) for w, s in zip(grp["width"], grp["speed"], strict=True)]
        known = [r for r in rates if r]
        if len(known) < 2:
            continue
        best = max(known)
        best_rows = [i for i, r in enumerate(rates) if r == best]
        bw, bs = sval(grp.iloc[best_rows[0]]["width"]), sval(grp.iloc[best_rows[0]]["speed"])
        for i, r in enumerate(rates):
            if not r or r >= best:
                continue
            row = grp.iloc[i]
            near = _End(fab, str(row["guid"]), int(row["port"]), sval(row.get("description")), _int(row.get("lid")))
            far = _End(fab, str(row["peer_guid"]), int(row["peer_port"]), sval(row.get("peer_description")),
                       _int(row.get("peer_lid")))
            w, s = sval(row["width"]), sval(row["speed"])
            cw = bw if bw and w and WIDTH_LANES.get(bw, 0) > WIDTH_LANES.get(w, 0) else None
            cs = bs if bs and s and bs in SPEED_GBPS_PER_LANE and s in _ORDER and _ORDER.index(bs) > _ORDER.index(s) \
                else None
            why = f"the other switch-to-switch links of this listing run {' '.join(x for x in (bw, bs) if x)}"
            cands.append(_candidate(near, far, w, s, cw, cs, "peers", why, pd.DataFrame([row]), "topology"))


def _at_capability(ctx: Context, sources: set[str]) -> list[Finding]:
    links = ctx.frame("FabricLink")
    sel = links[links["source"].astype(str).isin(sources) & (links["state"] == "Active")]
    if len(sel) < 2:
        return []
    sw = [("SW" in str(d) or ";" in str(d)) and (";" in str(pd_)) for d, pd_ in
          zip(sel["description"].fillna(""), sel["peer_description"].fillna(""), strict=True)]
    return [finding(
        "fabric_links_at_capability",
        f"iblinkinfo lists {len(sel)} active port(s) and none has a 'Could be' hint: every link trained at the best "
        "width and speed both of its ends support.",
        sel.head(2), attrs={"links": len(sel), "switch_links": int(sum(sw)), "tool": "iblinkinfo"},
    )]
