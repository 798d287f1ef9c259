"""``diagnose serve`` and ``diagnose incidents list|show``: the service and its store from the command line.

The commands raise on errors instead of exiting; ``diagnose.interfaces.cli.main`` maps them to exit codes
(:class:`ServiceCliError` is a click usage error: exit 2 with a one-line message). Until the main CLI registers
them, ``python -m diagnose.interfaces.service_cli serve|incidents ...`` runs them directly.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path  # noqa: TC003 - typer evaluates annotations at run time
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from diagnose.service.settings import Settings

# the ClickException typer itself catches (recent typer releases vendor their own click)
_ClickException: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class ServiceCliError(_ClickException):  # type: ignore[misc,valid-type]
    """A usage problem (missing config file, unknown incident, unreachable store): exit code 2."""

    exit_code = 2


class ListFmt(str, Enum):
    text = "text"
    json = "json"


class ShowFmt(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


def need_service() -> None:
    """The service's packages are an extra (``pip install 'diagnose[service]'``): say so instead of a traceback."""
    import importlib.util

    missing = [m for m in ("fastapi", "uvicorn", "pydantic_settings", "httpx", "prometheus_client")
               if importlib.util.find_spec(m) is None]
    if missing:
        raise ServiceCliError(f"the incident service needs the 'service' extra ({', '.join(missing)} not installed):"
                              " pip install -e '.[service]' (or 'diagnose[service]')")


def _settings(config: Path | None, **overrides: Any) -> Settings:
    """Settings from the environment and ``config`` (an env file) when given; CLI flags win."""
    need_service()
    from diagnose.service.settings import Settings, load_settings

    if config is not None:
        if not config.is_file():
            raise ServiceCliError(f"no such config file: {config}")
        return Settings(_env_file=str(config), **overrides)  # type: ignore[call-arg]
    return load_settings(**overrides)


def _apply_site(settings: Any) -> None:
    """The service's site rule packs and thresholds (DIAGNOSE_RULES / DIAGNOSE_THRESHOLDS, from the environment or
    the env file) for every triage it runs; one that names nothing stops the start-up."""
    import os

    from diagnose.catalog.loader import load_catalog
    from diagnose.catalog.site import SiteConfigError, check, load, set_site_config, site_config

    cfg = site_config()  # the environment's, the config file's and the command line's
    if settings.rules or settings.thresholds:  # the env file's too, the command line still winning
        env = dict(os.environ)
        if settings.rules:
            env["DIAGNOSE_RULES"] = settings.rules
        if settings.thresholds:
            env["DIAGNOSE_THRESHOLDS"] = settings.thresholds
        cli = [f"{k}={v}" for k, v in cfg.thresholds.items() if cfg.origins.get(k) == "--threshold"]
        try:
            cfg = load(environ=env, rules=cfg.rule_packs, thresholds=cli)
        except SiteConfigError as exc:
            raise ServiceCliError(str(exc)) from exc
        set_site_config(cfg)
    bad = check(cfg, load_catalog())
    if bad:
        raise ServiceCliError("; ".join(bad))


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite:///...`` store URL (None for other stores and in-memory SQLite)."""
    if not url.startswith("sqlite:///") or url.endswith(":memory:"):
        return None
    return Path(url[len("sqlite:///"):])


def _store(config: Path | None, read_only: bool = False) -> Any:
    """The service's store; ``read_only``: None when its SQLite file does not exist yet (a read never creates one)."""
    from diagnose.service.store import StoreError, open_store

    settings = _settings(config)
    path = sqlite_path(settings.store_url())
    if read_only and path is not None and not path.exists():
        return None
    try:
        return open_store(settings.store_url())
    except StoreError as exc:
        raise ServiceCliError(str(exc)) from exc


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on (put a TLS proxy in front for other hosts).")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8080,
    config: Annotated[Path | None, typer.Option(help="Env file with DIAGNOSE_* settings (else $DIAGNOSE_CONFIG "
                                                     "or ./diagnose.env).")] = None,
) -> None:
    """Run the incident service: webhooks in, diagnoses stored and posted back, /healthz and /metrics."""
    need_service()
    import uvicorn

    from diagnose.service.app import create_app
    from diagnose.service.store import StoreError

    if not 0 < port < 65536:
        raise ServiceCliError(f"--port must be 1..65535, not {port}")
    settings = _settings(config)
    _apply_site(settings)
    try:
        app = create_app(settings)
    except StoreError as exc:
        raise ServiceCliError(str(exc)) from exc
    # log_config=None: uvicorn's loggers keep no handlers of their own and reach the root handler that
    # logging_setup.configure installs, so --log-format json makes every line JSON
    uvicorn.run(app, host=host, port=port, log_level="info", proxy_headers=True, log_config=None)


incidents_app = typer.Typer(no_args_is_help=True, help="Incidents stored by the service.")


@incidents_app.command("list")
def incidents_list(
    status: Annotated[str | None, typer.Option(
        help="open, diagnosing, diagnosed, waiting_for_evidence, resolved or failed.")] = None,
    limit: Annotated[int, typer.Option(help="How many, newest first.")] = 20,
    fmt: Annotated[ListFmt, typer.Option("--format", "-f", help="text or json.")] = ListFmt.text,
    config: Annotated[Path | None, typer.Option(help="Env file with DIAGNOSE_* settings.")] = None,
) -> None:
    """List incidents, newest first, with their status and top cause."""
    need_service()
    from diagnose.service.app import incident_json

    statuses = ("open", "diagnosing", "diagnosed", "waiting_for_evidence", "resolved", "failed")
    if status is not None and status not in statuses:
        raise ServiceCliError(f"--status must be one of {', '.join(statuses)}, not '{status}'")
    if limit < 1:
        raise ServiceCliError("--limit must be at least 1")
    store = _store(config, read_only=True)
    where = _settings(config).store_url()
    if store is None:
        rows: list[dict[str, Any]] = []
    else:
        try:
            rows = [incident_json(store, r, full=False) for r in store.list_incidents(limit=limit, status=status)]
        finally:
            store.close()
    if fmt is ListFmt.json:
        sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    if not rows:
        from diagnose.service.store import redact

        made = "" if store is not None else " (not created yet: the service creates it)"
        sys.stdout.write(f"0 incidents in {redact(where)}{made}\n")
        return
    t = Table(title=f"{len(rows)} incident(s)")
    for c in ("id", "status", "source", "title", "hosts", "alerts", "top cause", "updated"):
        t.add_column(c)
    for r in rows:
        t.add_row(str(r["id"]), r["status"], f"{r['source']}:{r['external_id']}", r["title"],
                  ", ".join(r["hosts"][:4]) + (" ..." if len(r["hosts"]) > 4 else ""), str(r["alert_count"]),
                  r["top_cause"] or "-", r["updated_at"][:19])
    Console(width=None if sys.stdout.isatty() else 200).print(t)


def _header(inc: dict[str, Any], markdown: bool) -> str:
    where = ", ".join(inc["hosts"]) or "-"
    lines = [f"Incident {inc['id']} ({inc['source']}:{inc['external_id']}): {inc['title']}",
             f"status {inc['status']}, {inc['alert_count']} alert(s), hosts {where}"
             + (f", grouped behind {inc['group_key']}" if inc.get("group_key") else ""),
             f"created {inc['created_at']}, updated {inc['updated_at']}"]
    if inc.get("error"):
        lines.append(f"error: {inc['error']}")
    for n in inc.get("evidence_notes") or []:
        lines.append(f"evidence: {n}")
    for d in inc.get("deliveries") or []:
        lines.append(f"posted to {d['target']}: {'ok' if d['ok'] else 'FAILED'}"
                     + (f" ({d['status_code']})" if d["status_code"] else "") + (f" {d['error']}" if d["error"] else ""))
    if markdown:
        return "\n".join([f"# {lines[0]}", ""] + [f"- {x}" for x in lines[1:]]) + "\n\n"
    return "\n".join(lines) + "\n\n"


@incidents_app.command("show")
def incidents_show(
    incident_id: Annotated[int, typer.Argument(help="The incident id (see 'diagnose incidents list').")],
    fmt: Annotated[ShowFmt, typer.Option("--format", "-f", help="text, json or markdown.")] = ShowFmt.text,
    config: Annotated[Path | None, typer.Option(help="Env file with DIAGNOSE_* settings.")] = None,
) -> None:
    """Show one incident and its diagnosis (json: the incident with the triage JSON under 'diagnosis')."""
    need_service()
    from diagnose.models.diagnosis import Diagnosis
    from diagnose.render import render_markdown, render_text
    from diagnose.service.app import incident_json

    store = _store(config, read_only=True)
    if store is None:
        raise ServiceCliError(f"no incident {incident_id}: no store at {_settings(config).store_url()} yet")
    try:
        rec = store.get_incident(incident_id)
        if rec is None:
            raise ServiceCliError(f"no incident {incident_id} (see 'diagnose incidents list')")
        inc = incident_json(store, rec)
    finally:
        store.close()
    if fmt is ShowFmt.json:
        sys.stdout.write(json.dumps(inc, indent=2, ensure_ascii=False) + "\n")
        return
    out = _header(inc, fmt is ShowFmt.markdown)
    if rec.diagnosis is None:
        out += f"No diagnosis yet (status {rec.status}).\n"
    else:
        d = Diagnosis.model_validate(rec.diagnosis)
        if fmt is ShowFmt.markdown:
            out += render_markdown(d)
        else:
            tty = sys.stdout.isatty()
            from diagnose.interfaces.cli import terminal_width

            out += render_text(d, width=terminal_width(tty), color=tty)
    sys.stdout.write(out)


def bench_hooks(
    n: Annotated[int, typer.Option("--requests", "-n", help="Webhooks to send.")] = 1000,
    concurrency: Annotated[int, typer.Option(help="Requests in flight at once.")] = 50,
    fmt: Annotated[ListFmt, typer.Option("--format", "-f", help="text or json.")] = ListFmt.text,
) -> None:
    """Webhook intake under a burst: authenticated Alertmanager webhooks to a real server on loopback."""
    need_service()
    from diagnose.service.bench import run_hook_bench, table

    if n < 1 or concurrency < 1:
        raise ServiceCliError("--requests and --concurrency must be at least 1")
    res = run_hook_bench(n=n, concurrency=concurrency)
    sys.stdout.write(json.dumps(res, indent=2) + "\n" if fmt is ListFmt.json else table(res) + "\n")
    if not res["ok"]:
        raise typer.Exit(1)


def _standalone() -> typer.Typer:
    """The commands as their own CLI, for ``python -m diagnose.interfaces.service_cli``."""
    app = typer.Typer(add_completion=False, no_args_is_help=True, help="diagnose service commands.")
    app.command("serve")(serve)
    app.add_typer(incidents_app, name="incidents")
    bench = typer.Typer(no_args_is_help=True, help="Benchmarks.")
    bench.command("hooks")(bench_hooks)
    app.add_typer(bench, name="bench")
    return app


if __name__ == "__main__":
    from diagnose.logging_setup import configure

    configure("json", "info")
    _standalone()()
