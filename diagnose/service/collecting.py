"""Collecting from the alert's hosts before the worker triages (``DIAGNOSE_COLLECT_SOURCES``, off by default).

For an incident from a source named in ``collect_sources`` (``alertmanager,pagerduty``...), the worker runs the
same fan-out as ``diagnose collect --hosts`` (:mod:`diagnose.collect.fanout`) on the hosts the alert names, at most
``collect_max_hosts`` of them, into the incident's evidence folder, and triages that bundle with the rest of the
evidence. Through ``srun`` when ``collect_via`` says so and the incident names its job (the job's step reaches its
nodes without ssh); else clush, pdsh or ssh, whichever is there (or ``collect_via``). A host that cannot be reached or
does not answer within ``collect_timeout_s`` is a note of the diagnosis, never a failure of the request: the
triage goes on with what came back. The fabric is read too when ``collect_fabric`` is set.

Host names come from the payload, so each must be a plain host name (a Prometheus ``instance``'s ``:port`` is cut
off); anything else is left out with a note, never handed to a shell.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger("diagnose.service.collecting")

_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
FOLDER = "collected"


def alert_hosts(names: Sequence[str], limit: int) -> tuple[list[str], list[str]]:
    """(the hosts to collect from, the names left out): ``gpu-a001:9100`` -> ``gpu-a001``; at most ``limit``."""
    hosts: list[str] = []
    dropped: list[str] = []
    for raw in names:
        name = raw.strip()
        if re.match(r"^[^:\[\]]+:\d+$", name):
            name = name.rsplit(":", 1)[0]
        if _HOST.match(name):
            if name not in hosts:
                hosts.append(name)
        else:
            dropped.append(raw[:80])
    return hosts[:limit], dropped + hosts[limit:]


def collect_for(settings: Any, incident: Any, workdir: Path, paths: list[Path], notes: list[str]) -> None:
    """Collect from the incident's hosts into ``workdir/collected`` and add it to ``paths``; what happened goes to
    ``notes``. Never raises: collecting is evidence, not a step a request can fail on."""
    from diagnose.collect.fanout import CollectError, Plan, collect_job, pick_via

    hosts, dropped = alert_hosts(list(incident.hosts or []), settings.collect_max_hosts)
    if dropped:
        notes.append(f"not collected from (not a host name, or past collect_max_hosts): {', '.join(dropped)}")
    if not hosts:
        notes.append("collecting is on for this source, but the alert names no host to collect from")
        return
    try:
        if settings.collect_via == "srun":
            if not incident.job_id or not shutil.which("srun"):
                raise CollectError("collect_via is srun, but " + ("the alert names no job" if not incident.job_id
                                                                   else "srun is not on PATH"))
            via = "srun"
        else:
            via = pick_via(settings.collect_via)
        plan = Plan(via=via, job=incident.job_id if via == "srun" else None,
                    remote=tuple(shlex.split(settings.collect_remote)) or ("diagnose",),
                    interval_s=settings.collect_interval_s, host_timeout_s=settings.collect_timeout_s,
                    grace_s=settings.collect_grace_s, deadline_s=settings.collect_timeout_s * 3,
                    fanout=settings.collect_fanout)
    except CollectError as exc:
        notes.append(f"not collected: {exc}")
        return
    out = workdir / FOLDER
    try:
        if out.exists():
            shutil.rmtree(out)
        res = collect_job(out, hosts, plan, fabric_from="auto" if settings.collect_fabric else None)
    except Exception as exc:  # noqa: BLE001 - a collection that breaks must not lose the triage
        log.error("collect_failed", incident=incident.id, error=f"{exc.__class__.__name__}: {exc}")
        notes.append(f"collecting from {', '.join(hosts)} failed: {exc.__class__.__name__}: {exc}")
        return
    ok = [h.host for h in res.hosts if h.status == "ok"]
    others = [f"{h.host} {h.status}" + (f" ({h.note})" if h.note else "") for h in res.hosts if h.status != "ok"]
    notes.append(f"collected through {via} from {len(ok)} of {len(res.hosts)} hosts"
                 + (f": {', '.join(ok)}" if ok else "") + (f"; {'; '.join(others)}" if others else ""))
    log.info("collected_for_incident", incident=incident.id, via=via, ok=len(ok), hosts=len(res.hosts))
    if ok:
        paths.append(out)
        # evidence.collect's note for an incident it found nothing for is no longer true
        notes[:] = [n for n in notes if not n.startswith("no evidence found:")]
