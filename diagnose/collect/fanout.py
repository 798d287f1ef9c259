"""``diagnose collect --slurm-job 4412`` / ``--hosts 'gpu-a[001-016]'``: one bundle from many hosts, and the fabric once.

How the hosts are reached: a Slurm job's nodes (from ``scontrol show job``, else ``squeue``, else the allocation's
own ``SLURM_JOB_NODELIST``) through one job step, ``srun --overlap --jobid 4412 -N<n> --ntasks-per-node=1
--nodelist=<hosts> --label``, which needs no ssh into compute nodes and runs beside the job's own steps; a host list
through ``clush``, ``pdsh`` or ``ssh`` (the first of them on ``PATH``, or ``--via``).

What runs there: ``diagnose collect --out -`` itself, the same collector table, timeouts and deny list as on one
host, writing nothing on the host and printing its bundle as one framed block of text (:mod:`diagnose.collect.stream`)
that survives the launchers' line prefixes and tells a complete answer from a cut one. So ``diagnose`` must be
installed on the hosts, as it usually is on a cluster (a shared software tree or the same virtualenv path);
``--remote-diagnose`` names it there (``/shared/venv/bin/diagnose``, ``python3 -m diagnose.interfaces.cli``). This
was chosen over streaming a script: the remote side then is the tested collector, not a second copy of it.

What comes back: ``OUT/<host>/`` per host with that host's ``manifest.json`` (``host`` is the name the host was
reached by, its own name kept as ``reported_host`` when it differs), ``OUT/fabric/`` with the fabric commands'
outputs (:mod:`diagnose.collect.fabric`) read once on one host (``--fabric-from``, default the first host that has
``ibnetdiscover`` and reaches the SM), and ``OUT/manifest.json`` (``kind: diagnose-collect-job``) with every host's
outcome: ``ok``, ``failed`` (it could not be reached, the command failed, or its answer was damaged: the launcher's
last lines say why), ``timeout`` (no complete answer within its bound) or ``skipped`` (the whole run's bound came
first). A host that fails never stops the others.

Bounds: at most ``fanout`` hosts collect at once (the hosts go in groups of that many, one launcher per group); each
host has its own collection bound (``--timeout``, passed on) plus ``grace_s`` for the connection and the transfer,
past which its launcher is killed (its process group: the stub or ssh and what it started); the whole run has
``deadline_s``, past which the groups not started are recorded as skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import structlog

from diagnose.collect import JOB_MANIFEST_KIND, MANIFEST, MANIFEST_KIND, json_list
from diagnose.collect.stream import Receiver

log = structlog.get_logger("diagnose.collect")

VIAS = ("clush", "pdsh", "ssh")
FABRIC_FOLDER = "fabric"
_HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_JOBID = re.compile(r"^\d+(?:_\d+)?$")


class CollectError(ValueError):
    """Input that cannot be collected from (a bad host list, a job that is not running, no launcher): one line."""


@dataclass
class HostOutcome:
    host: str
    status: str  # ok | failed | timeout | skipped
    note: str | None = None
    folder: str | None = None
    duration_s: float = 0.0
    reported_host: str | None = None
    commands: dict[str, int] = field(default_factory=dict)  # the host's own commands, counted by status


@dataclass
class JobResult:
    out: Path
    via: str
    job: str | None
    hosts: list[HostOutcome]
    fabric: HostOutcome | None

    def counts(self) -> dict[str, int]:
        c: dict[str, int] = {}
        for h in self.hosts:
            c[h.status] = c.get(h.status, 0) + 1
        return c


@dataclass(frozen=True)
class Plan:
    via: str  # srun | clush | pdsh | ssh
    job: str | None = None
    remote: tuple[str, ...] = ("diagnose",)
    interval_s: float = 30.0
    host_timeout_s: float = 300.0
    grace_s: float = 60.0
    deadline_s: float = 1800.0
    fanout: int = 32
    env_file: str | None = None
    options: frozenset[str] = frozenset()  # "dcgm", "ibdiagnet"


# ------------------------------------------------------------------------------------------------ which hosts


def hosts_of(expr: str) -> list[str]:
    """The hosts of a hostlist expression (``gpu-a[001-016],gpu-b7``), each once, in order."""
    from diagnose.hostlist import HostlistError, expand_hostlist

    try:
        hosts = list(dict.fromkeys(expand_hostlist(expr)))
    except HostlistError as exc:
        raise CollectError(f"--hosts: {exc}") from None
    if not hosts:
        raise CollectError("--hosts names no host")
    bad = [h for h in hosts if not _HOSTNAME.match(h)]
    if bad:
        raise CollectError(f"--hosts: {bad[0]!r} is not a host name")
    return hosts


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")


def slurm_nodes(job: str, env: dict[str, str] | None = None) -> list[str]:
    """The nodes of a running Slurm job: ``scontrol show job``, else ``squeue``, else ``SLURM_JOB_NODELIST`` when
    this is that job's allocation. Raises :class:`CollectError` for a job that is not running or cannot be read."""
    env = dict(os.environ) if env is None else env
    if not _JOBID.match(job):
        raise CollectError(f"--slurm-job takes a job id such as 4412, not {job!r}")
    state, nodelist = None, None
    try:
        if shutil.which("scontrol"):
            p = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL, errors="replace")
            if p.returncode:
                raise CollectError(f"scontrol show job {job}: {_first_line(p.stderr + p.stdout)}")
            states = re.findall(r"\bJobState=(\S+)", p.stdout)
            lists = [m for m in re.findall(r"(?<![A-Za-z])NodeList=(\S+)", p.stdout) if m != "(null)"]
            state = "RUNNING" if "RUNNING" in states else (states[0] if states else None)
            nodelist = ",".join(lists)
        elif shutil.which("squeue"):
            p = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T|%N"], capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL, errors="replace")
            if p.returncode:
                raise CollectError(f"squeue -j {job}: {_first_line(p.stderr + p.stdout)}")
            rows = [ln.split("|", 1) for ln in p.stdout.splitlines() if "|" in ln]
            if not rows:
                raise CollectError(f"squeue knows no job {job} (it may have ended)")
            state = "RUNNING" if any(r[0] == "RUNNING" for r in rows) else rows[0][0]
            nodelist = ",".join(r[1] for r in rows if r[0] == "RUNNING" and r[1])
        elif env.get("SLURM_JOB_ID") == job and env.get("SLURM_JOB_NODELIST"):
            state, nodelist = "RUNNING", env["SLURM_JOB_NODELIST"]
        else:
            raise CollectError(f"neither scontrol nor squeue is on PATH, and this is not job {job}'s allocation "
                               "(no SLURM_JOB_NODELIST for it)")
    except subprocess.TimeoutExpired:
        raise CollectError(f"Slurm did not answer about job {job} within 60 s") from None
    except OSError as exc:
        raise CollectError(f"cannot ask Slurm about job {job}: {exc}") from None
    if state != "RUNNING":
        raise CollectError(f"job {job} is {state or 'in no state Slurm reports'}, not RUNNING: srun reaches only the "
                           "nodes of a running job (use --hosts for the nodes it ran on)")
    if not nodelist:
        raise CollectError(f"job {job} has no node list")
    try:
        return hosts_of(nodelist)
    except CollectError as exc:
        raise CollectError(f"job {job}'s node list {nodelist!r}: {str(exc).removeprefix('--hosts: ')}") from None


def pick_via(via: str | None, which: Callable[[str], str | None] = shutil.which) -> str:
    """The launcher for ``--hosts``: ``via`` when given (it must be on PATH), else the first of clush, pdsh, ssh."""
    if via:
        if via not in VIAS:
            raise CollectError(f"--via takes one of {', '.join(VIAS)}, not {via!r}")
        if not which(via):
            raise CollectError(f"--via {via}: {via} is not on PATH")
        return via
    for v in VIAS:
        if which(v):
            return v
    raise CollectError("none of clush, pdsh or ssh is on PATH to reach --hosts")


# ------------------------------------------------------------------------------------------------ launching


def _quote(argv: Sequence[str]) -> str:
    import shlex

    return shlex.join(argv)


_SRUN_OUT = re.compile(r"^\s*(\d+): ?(.*)$")
_SRUN_ERR = re.compile(r"^srun: (?:error|warning): ([A-Za-z0-9][\w.-]*): task (\d+): (.*)$")
_PREFIXED = re.compile(r"^([A-Za-z0-9][\w.-]*): ?(.*)$")
_LAUNCHER_ERR = re.compile(r"^(?:pdsh@[^:\s]+: |clush: )")


class _Streams:
    """What a group's launchers printed, by key: a host (clush, pdsh, ssh) or ``task:N`` (srun --label)."""

    def __init__(self) -> None:
        self.rx: dict[str, Receiver] = {}
        self.err: dict[str, deque[str]] = {}
        self.task_host: dict[str, str] = {}  # srun: task key -> the node srun named for it
        self.lock = threading.Lock()

    def out(self, key: str, line: str) -> None:
        self.rx.setdefault(key, Receiver()).feed(line)

    def note(self, key: str, line: str) -> None:
        line = line.strip()
        if line:
            with self.lock:
                self.err.setdefault(key, deque(maxlen=3)).append(line[:300])


def _demux_out(via: str, fixed: str | None, streams: _Streams, line: str) -> None:
    if fixed is not None:
        streams.out(fixed, line)
        return
    m = (_SRUN_OUT if via == "srun" else _PREFIXED).match(line)
    if m:
        streams.out(f"task:{m[1]}" if via == "srun" else m[1], m[2])


def _demux_err(via: str, fixed: str | None, streams: _Streams, line: str) -> None:
    line = line.rstrip("\r\n")
    if fixed is not None:
        streams.note(fixed, line)
        return
    if via == "srun":
        m = _SRUN_ERR.match(line)
        if m:
            streams.task_host[f"task:{m[2]}"] = m[1]
            streams.note(m[1], m[3])
            return
        m = _SRUN_OUT.match(line)
        streams.note(f"task:{m[1]}" if m else "", m[2] if m else line)
        return
    rest = _LAUNCHER_ERR.sub("", line)
    m = _PREFIXED.match(rest)
    if m and m[1] not in ("ssh", "pdsh", "clush", "Warning", "warning", "error"):
        streams.note(m[1], m[2])
    else:
        streams.note("", rest)


def _reader(stream: Iterable[str], handle: Callable[[str], None]) -> None:
    for line in stream:
        try:
            handle(line)
        except Exception as exc:  # noqa: BLE001 - one odd line must not lose the rest of the stream
            log.warning("collect_stream_line_failed", error=repr(exc))


def _kill(p: subprocess.Popen[str]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            p.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def _run_group(via: str, launches: list[tuple[list[str], str | None]], bound_s: float,
               streams: _Streams) -> tuple[set[str | None], dict[str | None, int | None]]:
    """Run the launchers of one group at once, each cut at ``bound_s``; (the keys of those killed, exit codes)."""
    procs: list[tuple[subprocess.Popen[str], str | None, list[threading.Thread]]] = []
    env = {**os.environ, "LC_ALL": "C"}
    codes: dict[str | None, int | None] = {}
    for argv, fixed in launches:
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, errors="replace", start_new_session=True, env=env)
        except OSError as exc:
            streams.note(fixed or "", f"{argv[0]}: {exc}")
            codes[fixed] = None
            continue
        assert p.stdout is not None and p.stderr is not None
        threads = [threading.Thread(target=_reader, args=(p.stdout, lambda ln, f=fixed: _demux_out(via, f, streams, ln)),
                                    daemon=True),
                   threading.Thread(target=_reader, args=(p.stderr, lambda ln, f=fixed: _demux_err(via, f, streams, ln)),
                                    daemon=True)]
        for t in threads:
            t.start()
        procs.append((p, fixed, threads))
    end = time.monotonic() + bound_s
    killed: set[str | None] = set()
    try:
        for p, fixed, threads in procs:
            try:
                codes[fixed] = p.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill(p)
                killed.add(fixed)
                codes[fixed] = None
            for t in threads:
                t.join(timeout=30)  # a descendant that left the process group may hold the pipe: do not wait for it
    except BaseException:  # Ctrl-C: the launchers run in their own sessions, so the terminal's signal missed them
        for p, _, _ in procs:
            if p.poll() is None:
                _kill(p)
        raise
    return killed, codes


def _launches(plan: Plan, group: list[str], remote_argv: list[str], bound_s: float) -> list[tuple[list[str], str | None]]:
    """The launcher commands of one group: one srun / clush / pdsh over the group, or one ssh per host."""
    cmd = _quote(remote_argv)
    n, hosts, secs = len(group), ",".join(group), str(max(1, int(bound_s)))
    if plan.via == "srun":
        assert plan.job is not None
        return [(["srun", "--overlap", "--jobid", plan.job, f"-N{n}", f"--ntasks={n}", "--ntasks-per-node=1",
                  f"--nodelist={hosts}", "--label", "--kill-on-bad-exit=0", "--input=none", *remote_argv], None)]
    if plan.via == "clush":
        return [(["clush", "-f", str(n), "-u", secs, "-w", hosts, "--nostdin", cmd], None)]
    if plan.via == "pdsh":
        return [(["pdsh", "-f", str(n), "-u", secs, "-w", hosts, cmd], None)]
    return [(["ssh", "-n", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-o", "ServerAliveInterval=15",
              h, cmd], h) for h in group]


# ------------------------------------------------------------------------------------------------ assembling


def _reported(files: dict[str, str]) -> dict[str, object] | None:
    try:
        man = json.loads(files.get(MANIFEST, ""))
    except ValueError:
        return None
    return man if isinstance(man, dict) and man.get("kind") == MANIFEST_KIND else None


def _store(out: Path, folder: str, host: str, files: dict[str, str], t0: float) -> HostOutcome:
    """Write one answer's files into ``out/folder`` with its manifest naming ``host``."""
    man = _reported(files)
    if man is None:
        return HostOutcome(host, "failed", "its answer holds no collector manifest", duration_s=_since(t0))
    raw_host = man.get("host")
    reported = raw_host if isinstance(raw_host, str) else None
    dest = out / folder
    dest.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        if name != MANIFEST:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_text(text, encoding="utf-8")
    if man.get("scope", "host") == "host":
        man["host"] = host
        if reported and reported != host:
            man["reported_host"] = reported
    (dest / MANIFEST).write_text(json.dumps(man, indent=2) + "\n", encoding="utf-8")
    counts: dict[str, int] = {}
    for c in json_list(man.get("commands")):
        if isinstance(c, dict) and isinstance(c.get("status"), str):
            counts[c["status"]] = counts.get(c["status"], 0) + 1
    return HostOutcome(host, "ok", None, folder, _since(t0), reported if reported != host else None, counts)


def _since(t0: float) -> float:
    return round(time.monotonic() - t0, 3)


def _match(name: str | None, group: list[str]) -> str | None:
    if not name:
        return None
    if name in group:
        return name
    short = [h for h in group if h.split(".")[0] == name.split(".")[0]]
    return short[0] if len(short) == 1 else None


def _resolve(plan: Plan, group: list[str], streams: _Streams, killed: set[str | None],
             codes: dict[str | None, int | None], bound_s: float, out: Path, folders: dict[str, str],
             t0: float) -> list[HostOutcome]:
    """Each host of a group: its answer stored, or why there is none."""
    by_host: dict[str, Receiver] = {}
    task_of: dict[str, str] = {}
    rx: Receiver | None
    for key, rx in streams.rx.items():
        if plan.via == "srun":
            man = _reported(rx.files) if rx.files else None
            host = _match(str(man.get("slurm_node") or "") if man else None, group) \
                or _match(rx.reported_host, group) or _match(streams.task_host.get(key), group)
            if host:
                by_host[host] = rx
                task_of[host] = key
        elif key in group:
            by_host[key] = rx
    for key, host in streams.task_host.items():
        task_of.setdefault(host, key)
    results = []
    for host in group:
        rx = by_host.get(host)
        if rx is not None and rx.files is not None:
            results.append(_store(out, folders[host], host, rx.files, t0))
            continue
        lines = list(streams.err.get(task_of.get(host, "-"), ())) + list(streams.err.get(host, ()))
        if rx is not None and rx.error:
            results.append(HostOutcome(host, "failed", f"its answer is unusable: {rx.error}", duration_s=_since(t0)))
            continue
        was_killed = (host if plan.via == "ssh" else None) in killed
        if was_killed:
            what = "an incomplete answer" if rx is not None and rx.started else "no answer"
            results.append(HostOutcome(host, "timeout", f"{what} within {bound_s:g} s; its launcher was stopped"
                                       + (f" ({lines[-1]})" if lines else ""), duration_s=_since(t0)))
            continue
        if not lines:
            lines = list(streams.err.get("", ()))[-2:]
        code = codes.get(host if plan.via == "ssh" else None)
        note = "; ".join(lines) or f"{plan.via} exited{f' with code {code}' if code is not None else ''} without an answer"
        status = "timeout" if re.search(r"timed? ?out", note, re.IGNORECASE) else "failed"
        results.append(HostOutcome(host, status, note[:500], duration_s=_since(t0)))
    return results


def _collect_on(plan: Plan, hosts: list[str], remote_argv: list[str], out: Path, folders: dict[str, str],
                bound_s: float, deadline: float,
                progress: Callable[[HostOutcome], None] | None) -> list[HostOutcome]:
    results: list[HostOutcome] = []
    for i in range(0, len(hosts), max(1, plan.fanout)):
        group = hosts[i:i + max(1, plan.fanout)]
        left = deadline - time.monotonic()
        if left <= 0:
            done = [HostOutcome(h, "skipped", "the run's bound was reached before its turn") for h in group]
        else:
            b = min(bound_s, left)
            streams, t0 = _Streams(), time.monotonic()
            killed, codes = _run_group(plan.via, _launches(plan, group, remote_argv, b), b, streams)
            done = _resolve(plan, group, streams, killed, codes, b, out, folders, t0)
        for r in done:
            log.info("collect_host_done", host=r.host, status=r.status, note=r.note)
            if progress:
                progress(r)
        results.extend(done)
    return results


def _remote(plan: Plan, *args: str) -> list[str]:
    return [*plan.remote, "collect", "--out", "-", *args]


def _fabric_host(results: list[HostOutcome], out: Path) -> str | None:
    """The first host that answered with ibnetdiscover on it and sminfo working, else the first with ibnetdiscover."""
    candidates: list[tuple[bool, int, str]] = []
    for r in results:
        if r.status != "ok" or not r.folder:
            continue
        man = _reported({MANIFEST: (out / r.folder / MANIFEST).read_text(encoding="utf-8")}) or {}
        if "ibnetdiscover" not in json_list(man.get("fabric_tools")):  # (a list: never a substring test)
            continue
        sm_ok = any(isinstance(c, dict) and c.get("name") == "sminfo" and c.get("status") == "ok"
                    for c in json_list(man.get("commands")))
        candidates.append((not sm_ok, len(candidates), r.host))
    return min(candidates)[2] if candidates else None


def _job_ports(results: list[HostOutcome], out: Path) -> list[tuple[int, int]]:
    from diagnose.collect.fabric import ports_of

    ports: list[tuple[int, int]] = []
    for r in results:
        f = out / (r.folder or "-") / "ibstat.out"
        if r.status == "ok" and f.is_file():
            ports.extend(ports_of(f.read_text(encoding="utf-8", errors="replace"), str(f)))
    return ports


def collect_job(out: Path, hosts: list[str], plan: Plan, *, fabric_from: str | None = "auto",
                progress: Callable[[HostOutcome], None] | None = None) -> JobResult:
    """Collect every host into ``out/<host>/``, then the fabric once into ``out/fabric/`` (``fabric_from``: a host,
    ``"auto"`` for the first that has the tools, ``"local"`` for this one, None for none), and write the job's
    manifest. Nothing is written outside ``out``."""
    from diagnose import __version__

    started = time.monotonic()
    deadline = started + plan.deadline_s
    out.mkdir(parents=True, exist_ok=True)
    folders = {h: h if h != MANIFEST else f"{h}.host" for h in hosts}  # a folder per host, beside the manifest
    fabric_folder = FABRIC_FOLDER if FABRIC_FOLDER not in folders else f"{FABRIC_FOLDER}.collect"
    args = ["--interval", f"{plan.interval_s:g}", "--timeout", f"{plan.host_timeout_s:g}"]
    if plan.env_file:
        args += ["--env-file", plan.env_file]
    if "dcgm" in plan.options:
        args.append("--dcgm")
    bound = plan.host_timeout_s + plan.grace_s
    log.info("collect_job_start", hosts=len(hosts), via=plan.via, job=plan.job, fanout=plan.fanout)
    results = _collect_on(plan, hosts, _remote(plan, *args), out, folders, bound, deadline, progress)

    fabric: HostOutcome | None = None
    if fabric_from is not None:
        from diagnose.collect.fabric import port_items

        ports = port_items(_job_ports(results, out))
        fargs = ["--fabric", "--timeout", f"{plan.host_timeout_s:g}"]
        if ports:
            fargs += ["--ports", ",".join(p.replace(" ", "/") for p in ports)]
        if "ibdiagnet" in plan.options:
            fargs.append("--ibdiagnet")
        where = _fabric_host(results, out) if fabric_from == "auto" else fabric_from
        if where is None:
            fabric = HostOutcome("-", "skipped", "no host that answered has ibnetdiscover; name one with --fabric-from")
        elif where == "local":
            fabric = _fabric_here(out, fabric_folder, plan, ports, deadline)
        elif deadline - time.monotonic() <= 0:
            fabric = HostOutcome(where, "skipped", "the run's bound was reached before the fabric's turn")
        else:
            fplan = plan if plan.via != "srun" or where in folders else replace(plan, via="ssh")  # not a job node
            fabric = _collect_on(fplan, [where], _remote(plan, *fargs), out, {where: fabric_folder}, bound, deadline,
                                 None)[0]
        log.info("collect_fabric_done", host=fabric.host, status=fabric.status, note=fabric.note)

    result = JobResult(out, plan.via, plan.job, results, fabric)
    top = {"kind": JOB_MANIFEST_KIND, "collected_at": datetime.now(timezone.utc).isoformat(),
           "collector_version": __version__, "via": plan.via, "slurm_job": plan.job,
           "host_timeout_s": plan.host_timeout_s, "deadline_s": plan.deadline_s, "fanout": plan.fanout,
           "duration_s": _since(started), "hosts": [asdict(r) for r in results],
           "fabric": asdict(fabric) if fabric else None}
    (out / MANIFEST).write_text(json.dumps(top, indent=2) + "\n", encoding="utf-8")
    return result


def _fabric_here(out: Path, folder: str, plan: Plan, ports: list[str], deadline: float) -> HostOutcome:
    from diagnose.collect import collect
    from diagnose.collect.fabric import FABRIC

    t0 = time.monotonic()
    res = collect(out / folder, interval_s=0, deadline_s=max(1.0, min(plan.host_timeout_s, deadline - t0)),
                  collectors=FABRIC, options=plan.options, items={"job_port": ports}, scope="fabric")
    return HostOutcome(res.host, "ok", None, folder, _since(t0), None, res.counts())
