"""Group an alert storm by the fabric element the alerts share, from the topology file.

When a leaf switch (or the cable bundle under it) fails, every host behind it alerts within seconds: dozens
of alerts, one cause. :class:`Grouper` gives each incoming draft a key, the name of the switch its hosts'
HCAs are cabled to, and the store merges drafts with equal keys that arrive within
``settings.group_window_s`` into one incident.

The fabric comes from ``settings.topology``: any topology source the pipeline parses (``ibnetdiscover``
topology file or ports report, ``iblinkinfo``, ``ibqueryerrors -r``, an ``ibdiagnet2`` output folder or
``.db_csv``), built with :func:`diagnose.topology.build_fabric`. It is loaded on the first call, kept, and
loaded again when the file's modification time or size changes (the fabric is re-discovered after
recabling). HCAs are tied to hosts by their node description (``gpu-a017 mlx5_3``), so a topology whose HCAs
carry no host name cannot place hosts; their drafts get no key.

What the key is, for one draft:

* a host with a device (``PortRef(host, device[, port])``, or ``hosts`` with ``devices``, or the alert's
  ``device``/``port`` labels): the switch that HCA port is cabled to (``leaf-a-r3``);
* a switch named as a host or port owner (``PortRef(host="leaf-a-r3", port=40)``, a ``switch`` label, a GUID):
  that switch;
* a host without a device: the switches all its HCAs are cabled to. On a rail-optimized fabric these are
  the host's rail leaves, and the key joins their names with ``+`` (``leaf-a-r0+leaf-a-r1+...``). Every
  host of the same scalable unit gets the same key, so a host-level storm still groups, but it does not
  merge with device-level alerts on one of those leaves;
* several hosts behind different switches (one draft naming many hosts: a job-level alert, a grouped
  notification): when exactly one switch of the next tier is cabled to all those switches (their leaves'
  uplinks all reach one spine), that spine (``spine-03``); otherwise their names joined with ``+``;
* nothing the topology knows: ``None`` (the store does not group it).

Limits. A key is a function of one draft. Alertmanager sends one alert per host or port, so a spine failure
reaches the service as alerts from hosts behind many different leaves: each gets its own leaf's key and they
are not merged. On a non-blocking fat tree every leaf reaches every spine of its plane, so hosts alone
cannot point at one spine anyway; the spine is only found when an alert names a spine port, or when one
draft names hosts whose leaves share a single uplink switch (a tapered or partly failed fabric).
:meth:`Grouper.shared_uplink` answers the question for a set of keys (for example the open incidents of the
group window), but merging on it is the store's decision.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from diagnose import parsers
from diagnose.bundle import BundleError, LoadLimits, load_inputs, sniff_file
from diagnose.evidence.frames import build_frames
from diagnose.models.records import Record
from diagnose.service.models import IncidentDraft
from diagnose.service.settings import Settings
from diagnose.topology import Fabric, build_fabric

log = structlog.get_logger("diagnose.service.grouping")

JOIN = "+"
# a topology file is read whole: large fabrics' ibnetdiscover files are tens of MiB
_LIMITS = LoadLimits(max_file_bytes=1 << 30, stream_bytes=1 << 30)
_GUID = re.compile(r"^(?:0x)?([0-9a-fA-F]{1,16})$")


def _short(name: str) -> str:
    return name if re.match(r"^\d{1,3}(?:\.\d{1,3}){3}$", name) else name.split(".", 1)[0]


def _strip_port(v: str) -> str:
    v = v.strip()
    if v.startswith("["):
        return v[1:].split("]", 1)[0]
    return re.sub(r":\d+$", "", v) if v.count(":") <= 1 else v


@dataclass
class _Model:
    """The fabric plus the name indexes the lookups need."""

    fabric: Fabric
    hcas: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # host (casefold) -> [(device, guid)]
    switches: dict[str, str] = field(default_factory=dict)  # switch name or GUID (casefold) -> guid

    @classmethod
    def of(cls, fab: Fabric) -> _Model:
        m = cls(fab)
        for (host, dev), guid in sorted(fab.by_host_dev.items()):
            for k in dict.fromkeys([host.casefold(), _short(host.casefold())]):
                m.hcas.setdefault(k, []).append((dev, guid))
        for guid in fab.switches():
            m.switches.setdefault(fab.name(guid).casefold(), guid)
            g = _GUID.match(guid)
            if g:
                m.switches.setdefault("0x" + g.group(1).lower().rjust(16, "0"), guid)
        return m

    def switch(self, name: str) -> str | None:
        k = name.strip().casefold()
        if k in self.switches:
            return self.switches[k]
        g = _GUID.match(k)
        if g and len(g.group(1)) >= 8:
            return self.switches.get("0x" + g.group(1).rjust(16, "0"))
        return None

    def attachments(self, host: str, device: str | None, port: int | None) -> set[str]:
        """The switches a host's HCA port (or all its HCAs) is cabled to."""
        k = host.strip().casefold()
        hcas = self.hcas.get(k) or self.hcas.get(_short(k)) or []
        if device:
            hcas = [(d, g) for d, g in hcas if d == device]
        out: set[str] = set()
        for _, guid in hcas:
            if port is not None:
                far = self.fabric.peer(guid, port)
                if far is not None and self.fabric.kind(far[0]) == "SW":
                    out.add(far[0])
                    continue
                if device:
                    continue  # that port is not cabled in the topology
            out.update(s for s in self.fabric.leaf_of(guid) if self.fabric.kind(s) == "SW")
        return out

    def uplinks(self, sw: str) -> set[str]:
        tier = self.fabric.tier(sw)
        if tier is None:
            return set()
        return {n for n in self.fabric.graph.neighbors(sw)
                if self.fabric.kind(n) == "SW" and (self.fabric.tier(n) or -1) > tier}


class Grouper:
    """Keys drafts by the fabric element they share; the topology is loaded lazily and cached."""

    def __init__(self, settings: Settings) -> None:
        self._path: Path | None = settings.topology
        self._lock = threading.Lock()
        self._model: _Model | None = None
        self._stamp: tuple[int, int] | None = None

    # ------------------------------------------------------------------------------------------ loading

    def fabric(self) -> Fabric | None:
        """The fabric from the topology file, or None when none is configured or it cannot be used."""
        m = self._current()
        return m.fabric if m else None

    def _current(self) -> _Model | None:
        if self._path is None:
            return None
        try:
            st = os.stat(self._path)
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError as exc:
            stamp = (-1, -1)
            if self._stamp != stamp:
                log.warning("topology_unusable", path=str(self._path), error=exc.strerror or str(exc))
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                self._model = None if stamp == (-1, -1) else self._load(self._path)
            return self._model

    @staticmethod
    def _load(path: Path) -> _Model | None:
        t0 = time.monotonic()
        try:
            files = load_inputs([path], _LIMITS)
        except BundleError as exc:
            log.warning("topology_unusable", path=str(path), error=str(exc))
            return None
        records: list[Record] = []
        for bf in files:
            if bf.text is None:
                continue
            for fmt in sniff_file(bf.path, bf.text).formats:
                try:
                    records.extend(parsers.by_format(fmt).parse(bf.text, bf.path, bf.host_hint).records)
                except Exception as exc:  # noqa: BLE001 - a parser bug must not stop the service
                    log.warning("topology_parser_failed", path=bf.path, format=fmt, error=repr(exc))
        fab = build_fabric(build_frames(records)) if records else None
        if fab is None:
            log.warning("topology_unusable", path=str(path), error="no cables found (not a topology source?)")
            return None
        m = _Model.of(fab)
        log.info("topology_loaded", path=str(path), switches=len(fab.switches()), hcas=len(fab.hcas()),
                 hosts=len({h for h, _ in fab.by_host_dev}), seconds=round(time.monotonic() - t0, 3))
        return m

    # --------------------------------------------------------------------------------------------- keys

    def key(self, draft: IncidentDraft) -> str | None:
        """The shared fabric element of the draft's hosts and ports (see the module docstring), or None."""
        m = self._current()
        if m is None:
            return None
        found: set[str] = set()
        owners: set[str] = set()  # distinct hosts / switches that resolved
        for name, device, port in _targets(draft):
            sw = m.switch(name)
            if sw is not None:
                found.add(sw)
                owners.add("sw:" + sw)
                continue
            att = m.attachments(name, device, port)
            if att:
                found |= att
                owners.add(_short(name.casefold()))
        if not found:
            return None
        fab = m.fabric
        if len(found) == 1:
            return fab.name(next(iter(found)))
        if len(owners) > 1:
            common = set.intersection(*(m.uplinks(s) for s in found))
            if len(common) == 1:
                return fab.name(next(iter(common)))
        return JOIN.join(sorted(fab.name(s) for s in found))

    def shared_uplink(self, keys: Iterable[str]) -> str | None:
        """The one switch of the next tier cabled to every switch named in ``keys`` (a spine above several
        leaves), or None when there is none or more than one. Keys joined with ``+`` count each switch."""
        m = self._current()
        if m is None:
            return None
        sws: set[str] = set()
        for k in keys:
            for part in k.split(JOIN):
                sw = m.switch(part)
                if sw is None:
                    return None
                sws.add(sw)
        if not sws:
            return None
        common = set.intersection(*(m.uplinks(s) for s in sws))
        return m.fabric.name(next(iter(common))) if len(common) == 1 else None


def _targets(draft: IncidentDraft) -> list[tuple[str, str | None, int | None]]:
    """(host or switch, device, port) triples the draft names, most specific first."""
    labels = draft.labels
    l_dev = (labels.get("device") or "").strip() or None
    l_port_s = (labels.get("port") or "").strip()
    l_port = int(l_port_s) if l_port_s.isdigit() else None
    out: list[tuple[str, str | None, int | None]] = []
    covered: set[str] = set()
    for p in draft.ports:
        if p.host:
            out.append((p.host, p.device, p.port))
            covered.add(p.host.casefold())
        else:
            out.extend((h, p.device, p.port) for h in draft.hosts)
            covered.update(h.casefold() for h in draft.hosts)
    names = list(draft.hosts)
    for k in ("host", "node", "instance", "switch", "switch_name"):
        v = (labels.get(k) or "").strip()
        if v:
            names.append(_strip_port(v) if k == "instance" else v)
    for h in dict.fromkeys(names):
        if h.casefold() in covered:
            continue
        covered.add(h.casefold())
        if draft.devices:
            out.extend((h, d, l_port) for d in draft.devices)
        else:
            out.append((h, l_dev, l_port if l_dev else None))
    return out
