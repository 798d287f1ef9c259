"""The ``diagnose`` command. The only place that maps errors to exit codes.

Exit codes: 0 the command ran (whatever it found); 1 ``rules lint`` found problems or an internal
error; 2 usage errors (missing path, nothing readable, unknown cause id, bad option).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from enum import Enum
from pathlib import Path  # noqa: TC003 - typer evaluates annotations at run time
from typing import Annotated, Any

import structlog
import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from diagnose import __version__
from diagnose.bundle import BundleError, LoadLimits
from diagnose.catalog.loader import Catalog, load_catalog
from diagnose.interfaces.chat_cli import feedback_app
from diagnose.interfaces.service_cli import bench_hooks, incidents_app, serve
from diagnose.logging_setup import configure

_CTX = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=False, no_args_is_help=True, context_settings=_CTX,
                  help="Diagnose the GPU-cluster communication layer.")
rules_app = typer.Typer(no_args_is_help=True, help="The rule catalog.")
app.add_typer(rules_app, name="rules")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks (speed is measured here, never asserted in tests).")
app.add_typer(bench_app, name="bench")
app.command("serve")(serve)
app.add_typer(incidents_app, name="incidents")
bench_app.command("hooks")(bench_hooks)
app.add_typer(feedback_app, name="feedback")

err = Console(stderr=True)


class Fmt(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class UsageError(Exception):
    pass


def _fail(msg: str, code: int = 2) -> None:
    err.print(Text.assemble(("error: ", "bold red"), msg), highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _catalog() -> Catalog:
    from diagnose.catalog.site import check, site_config

    cat = load_catalog()
    if cat.errors:  # a rule that does not load would silently drop its cause from every diagnosis
        first = "; ".join(str(e) for e in cat.errors[:3])
        more = f" (and {len(cat.errors) - 3} more)" if len(cat.errors) > 3 else ""
        _fail(f"the rule catalog has {len(cat.errors)} problem(s), see 'diagnose rules lint': {first}{more}")
    bad = check(site_config(), cat)
    if bad:
        _fail("; ".join(bad))
    if not cat.rules:
        _fail(f"no rules found under {cat.root}: " + "; ".join(str(e) for e in cat.errors[:3]), 1)
    return cat


def _print_version(value: bool) -> None:
    if value:
        from diagnose.engine.rete import ENGINE

        typer.echo(f"diagnose {__version__} (rules matched by {ENGINE}; Python {sys.version.split()[0]})")
        raise typer.Exit(0)


# options of the whole program, accepted after the subcommand too (`diagnose triage b/ --log-level debug`)
_GLOBAL_OPTS = ("--log-level", "--log-format", "--rules", "--threshold")


def _hoist_global_options(argv: list[str]) -> list[str]:
    """Move the program's own options to the front, wherever they were typed (a value ``--opt v`` or
    ``--opt=v``; a bare ``--`` ends the options)."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest += argv[i:]
            break
        name = a.split("=", 1)[0]
        if name in _GLOBAL_OPTS:
            if "=" in a:
                front.append(a)
            elif i + 1 < len(argv):
                front += [a, argv[i + 1]]
                i += 1
            else:
                rest.append(a)
        else:
            rest.append(a)
        i += 1
    return front + rest


class FailOn(str, Enum):
    confirmed = "confirmed"
    inconclusive = "inconclusive"


@app.callback()
def _root(
    log_format: Annotated[str, typer.Option(help="Log format on stderr: console or json.")] = "console",
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error.")] = "warning",
    version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_print_version,
                                          help="Print the version and the rule matcher in use, and exit.")] = False,
    rules: Annotated[list[Path] | None, typer.Option(
        "--rules", help="A site rule pack (rules/ and playbooks/ of ids site.<domain>.<name>); repeatable."
                        " Also $DIAGNOSE_RULES and diagnose.toml's rule_packs.")] = None,
    threshold: Annotated[list[str] | None, typer.Option(
        "--threshold", help="<cause id>.<name>=<value>, over the default and the site's settings; repeatable.")]
    = None,
) -> None:
    from diagnose.catalog.site import SiteConfigError, load, set_site_config

    try:
        set_site_config(load(rules=rules or [], thresholds=threshold or []))
    except SiteConfigError as exc:
        _fail(str(exc))
    if log_format not in ("console", "json"):
        _fail("--log-format must be console or json")
    configure(log_format, log_level)


def _progress_cb():  # type: ignore[no-untyped-def]
    if not sys.stderr.isatty():
        return None, None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    # refreshed from the callback, not by rich's refresh thread: the pipeline forks a second process to parse with
    # only when no other thread runs (a fork copies one thread; a lock held by another would stay held)
    prog = Progress(TextColumn("parsing"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                    console=err, transient=True, auto_refresh=False)
    task = prog.add_task("", total=None)
    shown = [0.0]

    def cb(path: str, i: int, n: int) -> None:
        if i < 0:  # progress inside one large file
            prog.update(task, description=path[-60:])
        else:
            prog.update(task, total=n, completed=i, description=path[-60:])
        now = time.monotonic()
        if now - shown[0] >= 0.1 or i == n:
            shown[0] = now
            prog.refresh()

    return prog, cb


_MAX_FILE_SECONDS_HELP = "Seconds of sniffing and parsing per file (0: no limit); a file past it is listed, not used."
_MAX_RECORDS_HELP = (f"MiB of parsed records (estimated) for the whole input, {LoadLimits.max_record_bytes >> 20} by default;"
                     " past it, the file that passed it and the later ones (in path order) are listed, not used.")


def _records_limit(mib: int | None) -> dict[str, int]:
    """The LoadLimits option of --max-records-mib (none when not given: the default applies)."""
    if mib is None:
        return {}
    if mib < 1:
        _fail("--max-records-mib must be at least 1")
    return {"max_record_bytes": mib << 20}


def _seconds_limit(value: float) -> float:
    if not value >= 0 or value == float("inf"):
        _fail("--max-file-seconds must be 0 (no limit) or a number of seconds")
    return value


@app.command()
def triage(
    ctx: typer.Context,
    paths: Annotated[list[str] | None, typer.Argument(help="Bundle folders, .tar.gz/.tgz/.zip archives or single files"
                                                          " (none needed with --collect).", show_default=False)] = None,
    symptom: Annotated[str | None, typer.Option("--symptom", "-s", help="What the user saw (ticket text, alert, error line).")] = None,
    fmt: Annotated[Fmt, typer.Option("--format", "-f", help="text, json or markdown.")] = Fmt.text,
    max_file_size: Annotated[int, typer.Option(help="MiB read per file; larger files are read head and tail.")] = 64,
    max_file_seconds: Annotated[float, typer.Option(help=_MAX_FILE_SECONDS_HELP)] = 60.0,
    max_records_mib: Annotated[int | None, typer.Option(help=_MAX_RECORDS_HELP, show_default=False)] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show all evidence lines.")] = False,
    fail_on: Annotated[FailOn | None, typer.Option(
        "--fail-on", help="Exit 3 when a cause at this level is found: confirmed, or inconclusive (confirmed or"
                          " inconclusive), for scripts and CI gates.")] = None,
    collect: Annotated[bool, typer.Option("--collect", help="First collect this host's evidence (read-only, as diagnose"
                                                            " collect does) into a temporary bundle, and triage it too.")]
    = False,
    keep: Annotated[bool, typer.Option("--keep", help="With --collect: keep the bundle (its path is printed).")] = False,
    collect_interval: Annotated[float, typer.Option(help="With --collect: seconds between the two counter reads.")]
    = 30.0,
) -> None:
    """Rank the likely root causes in a bundle, with evidence and playbooks.

    Exit codes: 0 ran; 2 usage error or nothing in the input recognised (no symptom given); 3 --fail-on matched."""
    from diagnose.pipeline import ParallelExecutor
    from diagnose.pipeline import triage as run
    from diagnose.render import render_json, render_markdown, render_text

    if max_file_size < 1:
        _fail("--max-file-size must be at least 1 MiB")
    paths = _with_collected(ctx, paths or [], collect, keep, collect_interval)
    limits = LoadLimits(max_file_bytes=max_file_size << 20, max_file_seconds=_seconds_limit(max_file_seconds),
                        **_records_limit(max_records_mib))
    cat = _catalog()
    prog, cb = _progress_cb()
    try:
        if prog:
            with prog:
                d = run(paths, symptom, catalog=cat, limits=limits, progress=cb, executor=ParallelExecutor())
        else:
            d = run(paths, symptom, catalog=cat, limits=limits, executor=ParallelExecutor())
    except BundleError as exc:
        _fail(str(exc))
        return
    nothing = not any(f.records for f in d.files) and not symptom
    from diagnose.collect import hosts_without_comm_tools  # (here: not on every command's start-up)

    bare = [] if nothing or symptom or _job_evidence(d.files) else hosts_without_comm_tools(paths)
    if fmt is Fmt.json:
        sys.stdout.write(render_json(d))
    elif fmt is Fmt.markdown:
        sys.stdout.write(render_markdown(d))
    else:
        tty = sys.stdout.isatty()
        sys.stdout.write(render_text(d, width=terminal_width(tty), color=tty, verbose=verbose))
    sys.stdout.flush()
    if nothing:
        # the README's promise: nothing readable is a usage error, not a clean bill of health
        err.print(f"nothing in the input was recognised ({len(d.files)} file(s), none in a known format); see the"
                  " files table", highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    if bare:  # a login node or a VM collected: its settings were read, but there is no GPU or HCA to diagnose
        err.print(f"nothing of the communication layer here: the collected host(s) {', '.join(bare[:5])}"
                  f"{' ...' if len(bare) > 5 else ''} have no GPU or RDMA tool (nvidia-smi, ibstat and ibv_devinfo"
                  " missing) and no job log was given; collect on the job's GPU nodes (--slurm-job, --hosts)",
                  highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    levels = {FailOn.confirmed: {"confirmed"}, FailOn.inconclusive: {"confirmed", "inconclusive"}}
    if fail_on is not None and any(c.verdict in levels[fail_on] for c in d.causes):
        raise typer.Exit(3)


_JOB_LOGS = frozenset({"nccl_log", "nccl_tests", "pytorch_log", "pytorch_flight_recorder", "nccl_ras", "launch", "slurm",
                       "perftest", "cuda_p2p"})


def _job_evidence(files: list[Any]) -> bool:
    """Whether any file is a job's own output (an NCCL or PyTorch log, nccl-tests, a launcher's or Slurm's)."""
    return any(fmt in _JOB_LOGS for f in files if f.records for fmt in f.format.split("+"))


def terminal_width(tty: bool) -> int:
    """The terminal's width; piped, $COLUMNS when set, else 100."""
    if tty:
        return Console().width
    try:
        cols = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        cols = 0
    return cols if 40 <= cols <= 1000 else 100


def _with_collected(ctx: typer.Context, paths: list[str], collect: bool, keep: bool, interval: float) -> list[str]:
    """``triage --collect``: the paths plus a bundle of this host collected now into a temporary folder, removed when
    the command ends unless ``--keep``."""
    if not collect:
        if keep:
            _fail("--keep goes with --collect")
        if not paths:
            _fail("give a bundle folder, archive or file to triage, or --collect to collect this host's first")
        return paths
    if interval < 0:
        _fail("--collect-interval must be 0 or more")
    import shutil
    import tempfile

    from diagnose.collect import collect as run

    tmp = Path(tempfile.mkdtemp(prefix="diagnose-collect-"))
    if not keep:
        ctx.call_on_close(lambda: shutil.rmtree(tmp, ignore_errors=True))
    res = run(tmp, interval_s=interval)
    c = res.counts()
    kept = f"kept in {tmp}" if keep else "a temporary bundle, removed after triage (--keep keeps it)"
    err.print(Text(f"collected on {res.host}: " + ", ".join(f"{n} {k}" for k, n in sorted(c.items())) + f"; {kept}"),
              soft_wrap=True, highlight=False)
    return [*paths, str(tmp)]


class Via(str, Enum):
    clush = "clush"
    pdsh = "pdsh"
    ssh = "ssh"


@app.command()
def collect(
    out: Annotated[Path, typer.Option("--out", "-o", help="The bundle folder to write (created; nothing is written"
                                                         " outside it); '-': print the bundle as text on stdout.")],
    interval: Annotated[float, typer.Option(help="Seconds between the two counter reads.")] = 30.0,
    timeout: Annotated[float, typer.Option(help="Bound of the run on each host, in seconds.")] = 300.0,
    pid: Annotated[int | None, typer.Option(help="A process of the job: its NCCL_/UCX_/CUDA_/FI_ variables.")] = None,
    env_file: Annotated[Path | None, typer.Option(help="A file of the job's environment (NAME=value lines); with"
                                                       " --slurm-job/--hosts a path each host reads.")] = None,
    slurm_job: Annotated[str | None, typer.Option(help="Collect on each node of this running job (srun --overlap).")]
    = None,
    hosts: Annotated[str | None, typer.Option(help="Collect on these hosts ('gpu-a[001-016]') through clush, pdsh or"
                                                   " ssh.")] = None,
    via: Annotated[Via | None, typer.Option(help="How --hosts are reached (default: the first on PATH).")] = None,
    fanout: Annotated[int, typer.Option(help="Hosts collecting at once.")] = 32,
    deadline: Annotated[float, typer.Option(help="Bound of the whole fan-out, fabric included, in seconds.")] = 1800.0,
    fabric_from: Annotated[str | None, typer.Option(help="The host that reads the fabric once (default: the first"
                                                         " with ibnetdiscover; 'local': this one).")] = None,
    no_fabric: Annotated[bool, typer.Option("--no-fabric", help="Do not read the fabric.")] = False,
    fabric: Annotated[bool, typer.Option("--fabric", help="Read only the fabric, from this host.")] = False,
    ports: Annotated[str | None, typer.Option(help="LID/port pairs for smpquery sl2vl/vlarb with --fabric (default:"
                                                   " this host's).")] = None,
    ibdiagnet: Annotated[bool, typer.Option("--ibdiagnet", help="Also run ibdiagnet (read-only) on the fabric.")]
    = False,
    dcgm: Annotated[bool, typer.Option("--dcgm", help="Also run dcgmi diag -r 1.")] = False,
    remote_diagnose: Annotated[str, typer.Option(help="How diagnose is run on the hosts.")] = "diagnose",
) -> None:
    """Gather evidence, read-only: the commands the rules ask for, each with a timeout, into a bundle with a
    manifest; on this host, on a job's nodes or a host list (a folder per host), and the fabric once.
    Then: diagnose triage OUT."""
    import shlex

    from diagnose.collect import COLLECTORS
    from diagnose.collect import collect as run
    from diagnose.collect.fabric import FABRIC, local_ports, parse_ports, port_items
    from diagnose.collect.fanout import Plan, collect_job, hosts_of, pick_via, slurm_nodes

    if interval < 0 or timeout <= 0 or deadline <= 0 or fanout < 1:
        _fail("--interval must be 0 or more, --timeout and --deadline more than 0, --fanout at least 1")
    stream = str(out) == "-"
    fan = slurm_job is not None or hosts is not None
    if slurm_job is not None and hosts is not None:
        _fail("give --slurm-job or --hosts, not both")
    if pid is not None and env_file is not None:
        _fail("give --pid or --env-file, not both")
    if fan and (pid is not None or fabric or stream):
        _fail("--pid, --fabric and --out - are for one host; with --slurm-job/--hosts use --env-file")
    if not stream and out.exists() and (not out.is_dir() or any(out.iterdir())):
        _fail(f"{out} exists and is not an empty folder")
    options = frozenset(o for o, on in (("dcgm", dcgm), ("ibdiagnet", ibdiagnet)) if on)
    if fan:
        try:
            targets = slurm_nodes(slurm_job) if slurm_job is not None else hosts_of(hosts or "")
            plan = Plan(via="srun" if slurm_job is not None else pick_via(via.value if via else None), job=slurm_job,
                        remote=tuple(shlex.split(remote_diagnose)) or ("diagnose",), interval_s=interval,
                        host_timeout_s=timeout, deadline_s=deadline, fanout=fanout,
                        env_file=str(env_file) if env_file else None, options=options)
        except ValueError as exc:  # CollectError, or --remote-diagnose that does not split
            _fail(str(exc))
            return
        err.print(Text(f"collecting on {len(targets)} hosts through {plan.via}, {fanout} at once"), soft_wrap=True)
        job = collect_job(out, targets, plan, fabric_from=None if no_fabric else (fabric_from or "auto"),
                          progress=lambda r: err.print(Text(f"{r.host}: {r.status}" + (f" ({r.note})" if r.note else "")),
                                                       soft_wrap=True, highlight=False))
        t = Table(title=f"Collected from {len(targets)} hosts into {out}")
        for col in ("host", "status", "commands", "note"):
            t.add_column(col)
        for r in [*job.hosts, *([job.fabric] if job.fabric else [])]:
            what = ", ".join(f"{n} {k}" for k, n in sorted(r.commands.items()))
            name = r.host if r is not job.fabric else f"fabric (on {r.host})"
            t.add_row(Text(name), Text(r.status), Text(what or "-"), Text(r.note or ""))
        err.print(t)
        c = job.counts()
        err.print(Text(", ".join(f"{n} {k}" for k, n in sorted(c.items())) + f"; next: diagnose triage {out}"),
                  soft_wrap=True)
        if not c.get("ok"):
            _fail("no host answered", code=1)
        return
    collectors = COLLECTORS
    kw: dict[str, object] = {}
    if fabric:
        try:
            port_list = parse_ports(ports) if ports else local_ports()
        except ValueError as exc:
            _fail(str(exc))
            return
        collectors, kw = FABRIC, {"items": {"job_port": port_items(port_list)}, "scope": "fabric"}
    elif ports:
        _fail("--ports goes with --fabric")
    if stream:
        from diagnose.collect.stream import write

        res = run(None, interval_s=interval, deadline_s=timeout, pid=pid, env_file=env_file, collectors=collectors,
                  options=options, **kw)  # type: ignore[arg-type]
        write(res.files, res.host, sys.stdout)
        return
    if sys.stderr.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        with Progress(TextColumn("collecting"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                      console=err, transient=True) as prog:
            task = prog.add_task("", total=len(collectors))
            res = run(out, interval_s=interval, deadline_s=timeout, pid=pid, env_file=env_file, collectors=collectors,
                      options=options, progress=lambda name: prog.update(task, advance=1, description=name),
                      **kw)  # type: ignore[arg-type]
    else:
        res = run(out, interval_s=interval, deadline_s=timeout, pid=pid, env_file=env_file, collectors=collectors,
                  options=options, **kw)  # type: ignore[arg-type]
    c = res.counts()
    t = Table(title=f"Collected on {res.host} into {out}")
    for col in ("command", "status", "file", "note"):
        t.add_column(col)
    for s in res.steps:
        t.add_row(Text(s.name), Text(s.status), Text(s.out or "-"), Text(s.note or ""))
    err.print(t)
    err.print(Text(", ".join(f"{n} {k}" for k, n in sorted(c.items())) + f"; next: diagnose triage {out}"),
              soft_wrap=True)


@app.command()
def evidence(
    paths: Annotated[list[str], typer.Argument(help="Bundle folders, archives or files.")],
    fmt: Annotated[Fmt, typer.Option("--format", "-f", help="text or json.")] = Fmt.text,
    max_file_seconds: Annotated[float, typer.Option(help=_MAX_FILE_SECONDS_HELP)] = 60.0,
    max_records_mib: Annotated[int | None, typer.Option(help=_MAX_RECORDS_HELP, show_default=False)] = None,
) -> None:
    """Show what was recognised in each file and the findings extracted from it."""
    from diagnose.pipeline import ParallelExecutor, gather

    limits = LoadLimits(max_file_seconds=_seconds_limit(max_file_seconds), **_records_limit(max_records_mib))
    try:
        ev = gather(paths, limits=limits, executor=ParallelExecutor())
    except BundleError as exc:
        _fail(str(exc))
        return
    if fmt is Fmt.json:
        out = {"files": [f.model_dump(mode="json") for f in ev.files],
               "findings": [f.model_dump(mode="json") for f in ev.findings]}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    con = Console()
    t = Table(title="Files")
    for c in ("file", "format", "records", "problem"):
        t.add_column(c)
    for f in ev.files:
        t.add_row(f.path, f.format, str(f.records), f.problem or "")
    con.print(t)
    ft = Table(title="Findings")
    for c in ("id", "where", "summary"):
        ft.add_column(c)
    for fnd in ev.findings:
        ft.add_row(fnd.id, fnd.location.label(), fnd.summary)
    con.print(ft)


def _host_ports_down(ports: object) -> list[str]:
    """HCA ports a host capture shows not Active (Down, Polling, Disabled, Init), as ``host mlx5_N port P: state
    (phys) [file:line]``: a port down on the host side is one the fabric topology may not show at all."""
    import pandas as pd

    if not isinstance(ports, pd.DataFrame) or ports.empty or "state" not in ports.columns:
        return []
    st = ports["state"].astype(str)
    bad = ports[ports["state"].notna() & ~st.str.lower().str.contains("active")]
    out = []
    for r in bad.sort_values(["host", "device", "port"], na_position="first").itertuples(index=False):
        phys = f" ({r.phys_state})" if isinstance(r.phys_state, str) and r.phys_state else ""
        who = f"{r.host} " if isinstance(r.host, str) and r.host else ""
        out.append(f"{who}{r.device} port {r.port}: {r.state}{phys} [{r.source}:{r.line}]")
    return list(dict.fromkeys(out))


@app.command()
def topology(
    paths: Annotated[list[str], typer.Argument(help="Bundle folders, archives or files with a topology source.")],
    fmt: Annotated[Fmt, typer.Option("--format", "-f", help="text or json.")] = Fmt.text,
    graphml: Annotated[Path | None, typer.Option(help="Also write the fabric graph as GraphML here.")] = None,
) -> None:
    """Summarise the fabric: tiers, counts, degraded links and ports that are down."""
    import networkx as nx

    from diagnose.evidence.frames import build_frames
    from diagnose.pipeline import ParallelExecutor, gather
    from diagnose.topology import build_fabric

    try:
        ev = gather(paths, executor=ParallelExecutor())
    except BundleError as exc:
        _fail(str(exc))
        return
    frames = build_frames(ev.records)
    fab = build_fabric(frames)
    host_down = _host_ports_down(frames.get("IbPort"))
    if fab is None and not host_down:
        _fail("no topology source in the input (ibnetdiscover, iblinkinfo, ibqueryerrors -r or ibdiagnet2.db_csv)"
              " and no host port capture (ibstat, ibstatus, ibv_devinfo, sysfs)")
        return
    summary: dict[str, object] = fab.summary() if fab is not None else {
        "nodes": {}, "hosts": 0, "cables": 0, "best_link": None, "degraded_links": [], "ports_down": []}
    summary["host_ports_down"] = host_down
    if fab is None:
        summary["note"] = "no fabric topology source: only the hosts' own port captures"
    if graphml is not None and fab is not None:
        g = fab.graph.copy()
        for _, d in g.nodes(data=True):
            for k in list(d):
                if d[k] is None:
                    del d[k]
        for _, _, d in g.edges(data=True):
            for k in list(d):
                if d[k] is None:
                    del d[k]
        nx.write_graphml(nx.Graph(g), graphml)
        summary["graphml"] = str(graphml)
    if fmt is Fmt.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        return
    con = Console()
    t = Table(title="Fabric", show_header=False)
    t.add_column()
    t.add_column()
    for tier, n in summary["nodes"].items():  # type: ignore[attr-defined]
        t.add_row(tier, str(n))
    t.add_row("hosts", str(summary["hosts"]))
    t.add_row("cables", str(summary["cables"]))
    t.add_row("best link", f"{summary['best_link']:g} Gb/s" if summary["best_link"] else "-")
    con.print(t)
    if fab is None:
        con.print(Text(str(summary["note"]), style="yellow"))
    for title, key in (("Degraded links", "degraded_links"), ("Ports down", "ports_down"),
                       ("Host ports not Active (ibstat, ibstatus, ibv_devinfo, sysfs)", "host_ports_down")):
        items = summary[key]
        if items:
            d = Table(title=f"{title} ({len(items)})", show_header=False)  # type: ignore[arg-type]
            d.add_column()
            for x in items:  # type: ignore[attr-defined]
                d.add_row(str(x))
            con.print(d)


@app.command()
def schema() -> None:
    """Print the JSON Schema of the triage JSON output."""
    from diagnose.render.json_out import json_schema

    sys.stdout.write(json_schema())


@app.command()
def playbook(cause: Annotated[str, typer.Argument(help="A cause id, e.g. link.bad_cable.")]) -> None:
    """Print a cause's remediation playbook."""
    cat = _catalog()
    pb = cat.playbooks.get(cause)
    if pb is None:
        _fail(f"no playbook for '{cause}' (see 'diagnose rules list')")
        return
    _print_markdown(pb.body)


_FENCE = re.compile(r"^(\s*)(```|~~~)")
_ITEM = re.compile(r"^\s{0,3}(?:\d+[.)]|[-*+])\s")


def _print_markdown(text: str) -> None:
    """A playbook or a rule. Piped: the markdown itself, exactly. On a terminal: the prose rendered, and each fenced
    command block printed as written, never wrapped (a wrapped command pasted into a shell runs the wrong words; a
    long line runs past the edge)."""
    if not sys.stdout.isatty():
        sys.stdout.write(text.rstrip("\n") + "\n")
        return
    con = Console()
    prose: list[str] = []

    def flush() -> None:
        # a chunk that resumes after a command block starts mid-item: an item marker after it must start a list,
        # not continue that paragraph
        lines: list[str] = []
        for p in prose:
            if _ITEM.match(p) and lines and lines[-1].strip():
                lines.append("")
            lines.append(p)
        con.print(Markdown("\n".join(lines)))
        prose.clear()

    fence: str | None = None
    for ln in text.split("\n"):
        m = _FENCE.match(ln)
        if fence is None and m:
            if prose:
                flush()
            fence, indent = m.group(2), m.group(1)
            continue
        if fence is not None:
            if m and m.group(2) == fence:
                fence = None
                con.print()
                continue
            con.print(Text("    " + ln[len(indent):] if ln.startswith(indent) else "    " + ln.lstrip(), style="cyan"),
                      soft_wrap=True)
            continue
        prose.append(ln)
    if prose:
        flush()


@rules_app.command("list")
def rules_list(fmt: Annotated[Fmt, typer.Option("--format", "-f", help="text or json.")] = Fmt.text) -> None:
    """List the rules."""
    cat = _catalog()
    rows = [{"id": r.id, "title": r.title, "severity": r.severity, "status": r.status, "playbook": r.playbook}
            for r in cat.sorted_rules()]
    if fmt is Fmt.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    t = Table(title=f"{len(rows)} rules")
    for c in ("id", "severity", "status", "title"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["id"], r["severity"], r["status"], r["title"])
    Console().print(t)


@rules_app.command("show")
def rules_show(cause: Annotated[str, typer.Argument(help="A cause id.")]) -> None:
    """Show a rule: what it detects, its evidence, thresholds, and its playbook's first steps."""
    cat = _catalog()
    spec = cat.rules.get(cause)
    if spec is None:
        _fail(f"unknown cause id '{cause}' (see 'diagnose rules list')")
        return
    from diagnose.render.markdown import escape as esc

    lines = [f"# {spec.id}: {esc(spec.title)}", "", f"severity **{spec.severity}**, status {spec.status}", "",
             "## What it detects", "", esc(spec.description.strip()), "", "## Evidence for", ""]
    for c in spec.evidence.supports:
        cond = f" where `{c.where}`" if c.where else ""
        lines.append(f"- **{c.weight}** `{c.finding}`{cond}: {esc(c.says)}")
    if spec.evidence.against or spec.evidence.expects:
        lines += ["", "## Evidence against", ""]
        for a in spec.evidence.against:
            lines.append(f"- **{a.weight}** `{a.finding}`: {esc(a.why)}")
        for e in spec.evidence.expects:
            lines.append(f"- **{e.weight}** absent `{e.finding}` when {', '.join(e.if_formats)} collected: {esc(e.why)}")
    if spec.thresholds:
        lines += ["", "## Thresholds", ""]
        from diagnose.catalog.site import site_config

        cfg = site_config()
        for k, th in spec.thresholds.items():
            key = f"{spec.id}.{k}"
            if key in cfg.thresholds and cfg.thresholds[key] != th.default:
                val = f"{cfg.thresholds[key]:g} (set by {esc(cfg.origins.get(key, '?'))}; default {th.default:g})"
            else:
                val = f"{th.default:g} (default)"
            lines.append(f"- `{k}` = {val} {esc(th.unit)} — {esc(th.source)}")
    if spec.false_positives:
        lines += ["", "## False positives", ""] + [f"- {esc(x)}" for x in spec.false_positives]
    pb = cat.playbooks.get(spec.id)
    if pb and "Confirm" in pb.sections:
        lines += ["", "## Confirm (from the playbook)", "", pb.sections["Confirm"]]
    lines += ["", f"Playbook: {spec.playbook}", "", "## References", ""] + [f"- {r}" for r in spec.references]
    _print_markdown("\n".join(lines))


@rules_app.command("lint")
def rules_lint() -> None:
    """Validate the catalog; exits 1 and names file:line for every problem."""
    from diagnose.catalog.lint import lint

    problems = lint()
    for p in problems:
        typer.echo(str(p))
    if problems:
        err.print(f"[red]{len(problems)} problem(s)[/]")
        raise typer.Exit(1)
    err.print("catalog is clean")


@rules_app.command("new")
def rules_new(
    cause: Annotated[str, typer.Argument(help="The cause id, <domain>.<name>, already in the taxonomy.")],
    root: Annotated[Path | None, typer.Option(help="The checkout to write into (default: the catalog's own).")] = None,
) -> None:
    """Scaffold a cause: its rule, playbook and a positive and a negative fixture bundle, each marked TODO (see
    CONTRIBUTING.md). The rule fails lint until its clauses are written."""
    from diagnose.catalog.locate import catalog_root
    from diagnose.catalog.scaffold import scaffold

    base = root or catalog_root()
    try:
        written = scaffold(cause, base)
    except ValueError as exc:
        _fail(str(exc))
        return
    for p in written:
        typer.echo(str(p.relative_to(base)))
    err.print(f"next: fill in the TODOs, then diagnose rules lint; the simulator's signature of {cause} and its place"
              " in tests/test_simulate.py PLACED (CONTRIBUTING.md, recipe 1)", highlight=False, soft_wrap=True)


@bench_app.command("parse")
def bench_parse_cmd(
    mib: Annotated[int, typer.Option(help="Size of the synthetic mixed-log bundle in MiB.")] = 1024,
    files: Annotated[int, typer.Option(help="Number of log files it is split into.")] = 4,
    gz: Annotated[bool, typer.Option(help="Write the logs gzip-compressed.")] = False,
) -> None:
    """Evidence-stage throughput and peak memory on a synthetic mixed-log bundle."""
    from diagnose.bench import bench_parse

    if mib < 1 or files < 1:
        _fail("--mib and --files must be at least 1")
    with err.status(f"writing and parsing {mib} MiB of logs"):
        res = bench_parse(mib, files, gz)
    typer.echo(res.table())


@bench_app.command("hostile")
def bench_hostile_cmd(
    small: Annotated[bool, typer.Option(help="The scaled-down corpus the tests use (seconds), not the full one.")]
    = False,
    timeout: Annotated[float, typer.Option(help="Seconds after which a case is stopped (shown with exit -9).")]
    = 300.0,
    memory_cap: Annotated[int, typer.Option(help="MiB past which a case is stopped (shown with exit -9); 0: none.")]
    = 4096,
) -> None:
    """The hostile corpus (compression bombs, FIFOs, /dev/zero, link loops, deep folders, corrupt gzip, odd names,
    absurd numbers) through triage and evidence, each run in its own process: exit code, wall time, peak memory."""
    from diagnose.bench import bench_hostile, hostile_table

    if not timeout > 0 or memory_cap < 0:
        _fail("--timeout must be more than 0 and --memory-cap 0 or more")
    with err.status("building the hostile corpus") as status:
        rows = bench_hostile(full=not small, timeout=timeout, cap_mib=memory_cap,
                             progress=lambda what: status.update(what))
    typer.echo(hostile_table(rows))


@bench_app.command("accuracy")
def bench_accuracy_cmd(
    root: Annotated[Path, typer.Argument(help="Folder of fixture bundles (each with an expect.yaml).")] = Path("fixtures"),
    as_json: Annotated[bool, typer.Option("--json", help="Field cases: the figures as JSON.")] = False,
) -> None:
    """Top-1/top-3 accuracy, per-cause recall and precision, confirmations on healthy bundles.

    On a folder of field cases (fixtures/field: real incidents, each expect.yaml naming a root_cause) it reports
    top-1, top-3, the cases with no cause named, per-cause recall and the confusion of the misses."""
    from diagnose.bench import bench_accuracy, bench_field, is_field

    if not root.is_dir():
        _fail(f"no such folder: {root}")
    if is_field(root):
        with err.status(f"triaging every field case under {root}"):
            fres = bench_field(root)
        typer.echo(json.dumps(fres.to_dict(), indent=2) if as_json else fres.table())
        return
    with err.status(f"triaging every bundle under {root}"):
        res = bench_accuracy(root)
    typer.echo(res.table())


class HostTools(str, Enum):
    auto = "auto"
    all = "all"


class LinkLayer(str, Enum):
    auto = "auto"
    ib = "ib"
    roce = "roce"


@bench_app.command("sweep")
def bench_sweep_cmd(
    hosts: Annotated[int, typer.Option(help="Hosts in the simulated fabric.")] = 64,
    runs: Annotated[int, typer.Option(help="Seeded injections per cause.")] = 3,
    seed: Annotated[int, typer.Option(help="First seed.")] = 0,
    pairs: Annotated[bool, typer.Option("--pairs/--no-pairs", help="Also inject pairs of causes that can coexist.")] = True,
    cause: Annotated[list[str] | None, typer.Option("--cause", help="Only these cause ids; repeatable.")] = None,
    host_tools: Annotated[HostTools, typer.Option("--host-tools", help="auto: the tools each cause needs; all: every host tool.")] = HostTools.auto,
    keep: Annotated[Path | None, typer.Option("--keep", help="Keep every simulated bundle under this folder.")] = None,
    fmt: Annotated[Fmt, typer.Option("--format", "-f", help="text or json.")] = Fmt.text,
) -> None:
    """Accuracy sweep on simulated faults: top-1, top-3, exact location per cause, pairs, healthy confirmations."""
    from diagnose.bench import bench_sweep

    try:
        with err.status("simulating and triaging"):
            res = bench_sweep(hosts, runs, pairs, seed, cause or None, host_tools=host_tools.value, keep=keep)
    except ValueError as exc:
        _fail(str(exc))
        return
    typer.echo(res.to_json() if fmt == Fmt.json else res.table())


@bench_app.command("scale")
def bench_scale_cmd(
    hosts: Annotated[list[int], typer.Option("--hosts", help="Fabric sizes in hosts (8 GPUs each).")] = [512, 1024, 2048, 4096],  # noqa: B006
    seed: Annotated[int, typer.Option(help="Simulator seed.")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the rows as JSON (for docs/render_scale_svg.py).")] = None,
    workdir: Annotated[Path | None, typer.Option("--workdir", help="Where the simulated bundles are written (removed after).")] = None,
    repeat: Annotated[int, typer.Option(help="Time the floor and the triage this many times each; medians shown.")] = 1,
) -> None:
    """Triage wall time, peak memory and ratio to the parse floor on simulated fabrics."""
    import dataclasses
    import json

    from diagnose.bench import bench_scale, scale_table

    with err.status("simulating fabrics and triaging them"):
        rows = bench_scale(tuple(hosts), seed=seed, workdir=workdir, repeat=repeat)
    typer.echo(scale_table(rows))
    if json_out is not None:
        json_out.write_text(json.dumps({"command": "diagnose bench scale " + " ".join(f"--hosts {h}" for h in hosts)
                                        + (f" --repeat {repeat}" if repeat > 1 else ""),
                                        "rows": [dataclasses.asdict(r) for r in rows]}, indent=1) + "\n")


@app.command()
def simulate(
    out: Annotated[Path, typer.Option("--out", help="Folder to write the bundle into.")],
    hosts: Annotated[int, typer.Option(help="Hosts in the rail-optimized fat tree.")] = 64,
    gpus_per_host: Annotated[int, typer.Option(help="GPUs (and HCAs) per host.")] = 8,
    fault: Annotated[list[str] | None, typer.Option(
        "--fault", help="CAUSE[@location], e.g. link.bad_cable@gpu-a003/mlx5_2, host.memlock_limit@gpu-a005 or "
        "fabric.congestion@leaf-a-r2; repeatable.")] = None,
    seed: Annotated[int, typer.Option(help="Seed: the same arguments write the same bytes.")] = 0,
    link_layer: Annotated[LinkLayer, typer.Option("--link-layer", help="auto (RoCE causes get an Ethernet fabric), ib or roce.")] = LinkLayer.auto,
    host_tools: Annotated[HostTools, typer.Option("--host-tools", help="auto: the tools each cause needs; all: every host tool.")] = HostTools.auto,
    job_hosts: Annotated[int | None, typer.Option("--job-hosts", help="Hosts the job runs on (default 8, around the faults).")] = None,
) -> None:
    """Write a bundle in the real tools' formats for a simulated fabric with injected faults."""
    from diagnose.bench import CAUSE_TO_FAULT
    from diagnose.simulate import ALIASES, CAUSES, Fault
    from diagnose.simulate import simulate as run_sim

    if hosts < 2 or gpus_per_host < 1:
        _fail("--hosts must be at least 2 and --gpus-per-host at least 1")
    try:
        faults: list[Fault | str] = []
        for spec in fault or []:
            cause, _, where = spec.partition("@")
            kind = CAUSE_TO_FAULT.get(cause)
            if kind is None:
                _fail(f"cannot inject '{cause}': the simulator knows {', '.join(sorted(CAUSES))} "
                      f"(and the short names {', '.join(sorted(ALIASES))})")
                return
            faults.append(Fault(kind, where or None))
        path = run_sim(out, hosts=hosts, faults=faults, seed=seed, hcas_per_host=gpus_per_host, job_hosts=job_hosts,
                       link_layer=link_layer.value, host_tools=host_tools.value)
    except ValueError as exc:
        _fail(str(exc))
        return
    err.print(f"wrote {path} (truth in {path / 'truth.yaml'})")


def main() -> None:
    configure("console", "warning")  # until the root callback applies --log-format/--log-level
    try:
        code = app(args=_hoist_global_options(sys.argv[1:]), prog_name="diagnose", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        name = {c.__name__ for c in type(exc).__mro__}
        if "Abort" in name:
            err.print("aborted")
            sys.exit(130)
        if "ClickException" in name and hasattr(exc, "show"):  # usage errors: bad option, missing argument
            exc.show()
            sys.exit(2)
        # the CLI never shows a traceback; the log (with --log-level debug) has it
        structlog.get_logger("diagnose.cli").debug("internal_error", exc_info=exc)
        err.print(f"[bold red]internal error:[/] {exc.__class__.__name__}: {exc} "
                  "(rerun with --log-level debug and report it)", highlight=False)
        sys.exit(1)


if __name__ == "__main__":
    main()
