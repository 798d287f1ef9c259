"""Container specs (Kubernetes manifests, compose files: :mod:`diagnose.parsers.container_spec`) -> the findings the
message catalog makes of the same facts on a ``docker run`` line (rules/_messages/container.yaml), so the rules weigh
a manifest the way they weigh the command line:

==========================================================  =========================================================
fact in the spec                                            finding (attributes the rules read)
==========================================================  =========================================================
/dev/shm emptyDir ``medium: Memory`` + ``sizeLimit``,       ``container_shm_size`` (``size_mib``)
compose ``shm_size``
``hostIPC: true``, compose ``ipc: host``, the host's        ``container_ipc_host``
/dev/shm bound in
``hostNetwork: true``, compose ``network_mode: host``       ``container_host_network``
``capabilities.add: [IPC_LOCK]`` (or ``ALL``), compose      ``container_ipc_lock``
``cap_add``, ``privileged: true`` (all capabilities)
``rdma/...`` / Network Operator RDMA resources,             ``container_rdma_device``
``vpc.amazonaws.com/efa``, a ``/dev/infiniband`` hostPath
or compose device, ``privileged: true`` (every host device)
==========================================================  =========================================================

A line the catalog already read (a flow-style ``emptyDir: {medium: Memory, sizeLimit: 16Gi}``, ``hostNetwork: true``,
``rdma/hca: 1``) keeps the catalog's finding only. Every file with a container yields ``context_container`` (the
job runs in a container, which sees no RDMA device and a 64 MB /dev/shm unless given them), with ``rdma_access``:
``no`` when none of the job's containers (those asking for GPUs, else all) is given an RDMA device, a resource
claim or an extra network that may bring one, ``maybe`` when only such a claim or network is there, ``yes``
otherwise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.evidence.context import Context, finding, hosts_label
from diagnose.evidence.extractors import extractor
from diagnose.models.diagnosis import Finding, Location

# fact -> the finding kinds it yields (privileged: every capability and every host device)
_KINDS: dict[str, tuple[str, ...]] = {
    "shm_size": ("container_shm_size",),
    "host_ipc": ("container_ipc_host",),
    "shm_host": ("container_ipc_host",),
    "host_network": ("container_host_network",),
    "ipc_lock": ("container_ipc_lock",),
    "privileged": ("container_ipc_lock", "container_rdma_device"),
    "rdma_resource": ("container_rdma_device",),
    "efa": ("container_rdma_device",),
    "infiniband_device": ("container_rdma_device",),
}
_SAYS = {
    "container_shm_size": "the container spec sizes the container's /dev/shm",
    "container_ipc_host": "the container spec gives the container the host's IPC namespace or /dev/shm",
    "container_host_network": "the container spec puts the pod or service on the host's network",
    "container_ipc_lock": "the container spec lets the container lock memory (IPC_LOCK), which RDMA registration needs",
    "container_rdma_device": "the container spec gives the container the host's RDMA devices",
}
_VIA = {
    "shm_size": "shm size", "host_ipc": "host IPC", "shm_host": "host /dev/shm", "host_network": "host network",
    "ipc_lock": "IPC_LOCK", "privileged": "privileged", "rdma_resource": "RDMA resource", "efa": "EFA resource",
    "infiniband_device": "/dev/infiniband",
}
_ACCESS = ("rdma_resource", "efa", "infiniband_device", "privileged")
_MAYBE = ("network_attachment", "resource_claim")


def _catalog_lines(ctx: Context) -> set[tuple[str, int, str]]:
    hits = ctx.frame("MessageHit")
    if hits.empty:
        return set()
    hits = hits[hits["kind"].astype(str).str.startswith("container_")]
    return set(zip(hits["source"].astype(str), hits["line"].astype(int), hits["kind"].astype(str), strict=True))


@extractor(reads=("ContainerFact", "MessageHit"),
           emits=("container_host_network", "container_ipc_host", "container_ipc_lock", "container_rdma_device",
                  "container_shm_size", "context_container", "shm_size"))
def container_spec_facts(ctx: Context) -> list[Finding]:
    facts = ctx.frame("ContainerFact")
    if facts.empty:
        return []
    out: list[Finding] = []
    rows = facts[facts["fact"].isin(list(_KINDS))]
    # a container's own facts count for the job's containers only: a privileged sidecar (GKE's tcpx-daemon) gives the
    # NCCL container nothing; pod-level facts (host network, host IPC) hold for every container of the pod
    own = rows["container"].astype(str) != ""
    rows = rows[~own | _container_key(rows).isin(_job_containers(facts))]
    if not rows.empty:
        kinds = rows["fact"].map(_KINDS).explode()
        rows = rows.loc[kinds.index].assign(kind=kinds.to_numpy())
        seen = _catalog_lines(ctx)
        if seen:
            key = list(zip(rows["source"].astype(str), rows["line"].astype(int), rows["kind"].astype(str), strict=True))
            rows = rows[[k not in seen for k in key]]
        rows = rows.assign(
            hostk=rows["host"].fillna("").astype(str),
            via=rows["fact"].map(_VIA),
            size_mib=np.where(rows["kind"] == "container_shm_size", rows["number"].astype(float) / 1048576.0, np.nan),
        )
        for (kind, hostk, via, size), grp in rows.groupby(["kind", "hostk", "via", rows["size_mib"].fillna(-1.0)],
                                                         sort=True):
            ctrs = sorted({c for c in grp["container"].astype(str) if c})
            n = len(grp)
            label = f" ({', '.join(ctrs[:4])}{' and more' if len(ctrs) > 4 else ''})" if ctrs else ""
            attrs: dict[str, str | int | float | bool | None] = {
                "via": str(via), "containers": ",".join(ctrs), "lines": n, "in_symptom": False}
            extra = ""
            if kind == "container_shm_size":
                attrs["size_mib"] = round(float(size), 3)
                extra = f" to {float(size):g} MiB"
            if kind == "container_rdma_device":
                attrs["efa"] = bool(via == "EFA resource")
            out.append(finding(
                str(kind),
                f"{_SAYS[str(kind)]}{extra} [{via}]{label}{' on ' + hostk if hostk else ''}"
                f" ({n} line{'s' if n != 1 else ''}).",
                grp, Location(host=hostk or None), attrs,
            ))
    out += _in_container(facts)
    return out


def _container_key(df: pd.DataFrame) -> pd.Series:
    return (df["source"].astype(str) + "\0" + df["workload"].astype(str) + "\0" + df["pod"].astype(str) + "\0"
            + df["container"].astype(str))


def _job_containers(facts: pd.DataFrame) -> set[str]:
    """The containers that run the job: per file, those that ask for GPUs, or all of them when none does."""
    key = _container_key(facts)
    ctr = facts["fact"] == "container"
    gpu = set(key[facts["fact"] == "gpu"])
    has_gpu = facts["source"].astype(str).isin(set(facts["source"].astype(str)[facts["fact"] == "gpu"]))
    return set(key[ctr & (key.isin(gpu) | ~has_gpu)])


def _in_container(facts: pd.DataFrame) -> list[Finding]:
    """``context_container`` per spec file, with whether the job's containers can reach an RDMA device."""
    out: list[Finding] = []
    f = facts.assign(hostk=facts["host"].fillna("").astype(str), src=facts["source"].astype(str),
                     podk=facts["workload"].astype(str) + "\0" + facts["pod"].astype(str))
    ctr = f[f["fact"] == "container"]
    if ctr.empty:
        return out
    ckey = _container_key(f)
    jobs = _job_containers(f)
    access = set(ckey[f["fact"].isin(_ACCESS)])
    pod_level = f["container"].astype(str) == ""
    maybe_pods = set((f["src"] + "\0" + f["podk"])[f["fact"].isin(_MAYBE) & pod_level])
    maybe_ctrs = set(ckey[f["fact"].isin(_MAYBE) & ~pod_level])
    ctr = ctr.assign(key=ckey[ctr.index], pkey=(f["src"] + "\0" + f["podk"])[ctr.index])
    for _src, grp in ctr.groupby("src", sort=True):
        job = grp[grp["key"].isin(jobs)]
        if job.empty:
            continue
        has = job["key"].isin(access)
        may = job["key"].isin(maybe_ctrs) | job["pkey"].isin(maybe_pods)
        without = job[~has & ~may]
        if (~has & ~may).any():
            state = "no"
        elif (~has).any():
            state = "maybe"
        else:
            state = "yes"
        names = sorted(set(job["container"].astype(str)))
        spec = ", ".join(sorted(set((job["spec"].astype(str) + " " + job["workload"].astype(str)).str.strip())))
        hosts = sorted(set(job["hostk"]) - {""})
        lacking = sorted(set(without["container"].astype(str)))
        what = {"no": f"{', '.join(lacking[:4])}{' and more' if len(lacking) > 4 else ''} given no RDMA device"
                      " (no /dev/infiniband, RDMA resource or privileged mode)",
                "maybe": "their RDMA devices can only come from an extra network or a resource claim",
                "yes": "they are given RDMA devices"}[state]
        ev = without if not without.empty else job
        out.append(finding(
            "context_container",
            f"The job runs in containers ({spec}: {', '.join(names[:4])}"
            f"{' and more' if len(names) > 4 else ''}){' on ' + hosts_label(hosts) if hosts else ''}: {what}.",
            ev.head(4), Location(host=hosts[0] if len(hosts) == 1 else None),
            {"said": "", "from_evidence": True, "rdma_access": state, "containers": len(names),
             "without_rdma": ",".join(lacking)},
        ))
    return out
