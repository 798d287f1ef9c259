"""load -> parse -> symptoms -> frames and extractors -> derived findings -> infer: the one path every interface
calls. Each step is a stage of :mod:`diagnose.stages` (values in, values out); how they are spread over processes
is the executor's (:mod:`diagnose.runtime`): :class:`SerialExecutor` unless the caller passes another (the CLI and
the service pass :class:`ParallelExecutor`), with the same result either way."""

from __future__ import annotations

import os
from collections.abc import Sequence

import structlog

from diagnose.bundle import LoadLimits
from diagnose.catalog.loader import Catalog, load_catalog
from diagnose.engine import infer
from diagnose.models.diagnosis import Diagnosis, Location
from diagnose.runtime import Executor, ParallelExecutor, SerialExecutor
from diagnose.stages.find import add_symptoms, derive
from diagnose.stages.parse import Evidence, Progress, merge

if not structlog.is_configured():  # library use: quiet by default; the CLI and service configure their own
    from diagnose.logging_setup import configure

    configure("console", "warning")

log = structlog.get_logger("diagnose.pipeline")


def gather(
    paths: Sequence[str | os.PathLike[str]],
    symptom: str | None = None,
    symptom_source: str = "cli",
    limits: LoadLimits | None = None,
    progress: Progress | None = None,
    keep_records: bool = True,
    executor: Executor | None = None,
) -> Evidence:
    """Load, sniff, parse and extract findings. Raises BundleError only for unusable inputs (no files at all is
    fine when there is a symptom: an alert or a chat question with no bundle yet).

    ``keep_records=False`` drops the parsed records once the frames hold them (``triage`` does: at 4,096 hosts
    the counter batches alone are hundreds of MB, and keeping both copies through the extractors raises the
    peak by that much).
    """
    asked = bool(symptom and symptom.strip())
    with (executor or SerialExecutor()).start(limits or LoadLimits(), progress) as run:
        ev = merge(run.parse(paths, empty_ok=asked, keep_records=keep_records))
        log.info("bundle_parsed", files=len(ev.files), records=len(ev.records), formats=sorted(ev.formats))
        add_symptoms(ev, symptom, symptom_source)
        raw, second_mib = run.extract(ev, keep_records)
        ev.second_core_peak_mib = max(ev.second_core_peak_mib, second_mib)
        return derive(ev, raw)


def triage(
    paths: Sequence[str | os.PathLike[str]],
    symptom: str | None = None,
    symptom_source: str = "cli",
    catalog: Catalog | None = None,
    limits: LoadLimits | None = None,
    progress: Progress | None = None,
    overrides: dict[str, float] | None = None,
    origins: dict[str, str] | None = None,
    executor: Executor | None = None,
) -> Diagnosis:
    """Rank the causes. Thresholds are the catalog's defaults with the site's settings over them
    (:mod:`diagnose.catalog.site`) unless ``overrides`` (``<cause id>.<name>`` -> value) is given."""
    ev = gather(paths, symptom, symptom_source, limits, progress, keep_records=False, executor=executor)
    cat = catalog or load_catalog()
    if overrides is None:
        from diagnose.catalog.site import site_config

        cfg = site_config()
        overrides, origins = cfg.thresholds, cfg.origins
    return infer(cat, ev.findings, ev.symptoms, ev.formats, ev.files, overrides, origins)


__all__ = ["Evidence", "Location", "ParallelExecutor", "SerialExecutor", "gather", "triage"]
