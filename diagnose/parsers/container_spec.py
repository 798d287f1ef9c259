"""Kubernetes manifests and docker compose files: the job container's environment and its access to RDMA and /dev/shm.

What is read (field names from the Kubernetes API reference, PodSpec / Container / Volume / SecurityContext, and the
Compose file reference, ``services``):

* Kubernetes: every document with ``apiVersion`` and ``kind`` (``Pod``, ``Job``, ``Deployment``, ``MPIJob``,
  ``PyTorchJob``, ``JobSet``, ``RayCluster``, a ``List`` of them, ``kubectl get pod -o yaml``, Helm-rendered output);
  every pod spec found in it (a mapping with a ``containers`` list, under ``spec`` of a Pod, a ``template`` or a
  replica spec) gives, per container (``initContainers`` are left out: they are not the job):

  - ``env: [{name, value}]`` entries of communication variables -> :class:`~diagnose.parsers._common.EnvSetting`
    (origin ``container_spec``) at the entry's ``- name:`` line (``valueFrom`` entries have no value here: skipped)
  - pod ``hostNetwork: true`` / ``hostIPC: true``
  - a volume mounted at ``/dev/shm``: an ``emptyDir`` with ``medium: Memory`` (its ``sizeLimit``, a quantity such as
    ``1Gi`` or ``250Gi``; without one the size is the pod's memory, not stated) or a ``hostPath`` of ``/dev/shm``
  - ``securityContext.privileged: true`` and ``securityContext.capabilities.add`` holding ``IPC_LOCK``
  - ``resources.limits`` / ``requests``: ``rdma/<name>`` (Mellanox k8s-rdma-shared-dev-plugin, k8s-rdma-sriov-dev-plugin),
    the NVIDIA Network Operator's RDMA resources seen in public manifests (``nvidia.com/rdma-vf``, ``nvidia.com/hostdev``,
    ``nvidia.com/mlnxnics``), ``vpc.amazonaws.com/efa`` (AWS EFA device plugin), ``nvidia.com/gpu``; ``claims`` (DRA)
  - a ``hostPath`` of ``/dev/infiniband`` mounted into the container
  - pod annotations that attach extra networks (``k8s.v1.cni.cncf.io/networks``, ``networking.gke.io/interfaces``):
    the network plugin may inject RDMA devices that the spec does not name
  - pod ``resourceClaims`` (Dynamic Resource Allocation: RDMA NICs may come that way, e.g. GKE managed RDMA)

* Compose: a document with a ``services`` mapping; per service ``environment`` (list ``- NAME=value`` or mapping
  ``NAME: value``), ``shm_size`` (a byte value: ``16gb``, ``2g``, ``512m``, bytes when bare), ``ipc: host``,
  ``network_mode: host``, ``privileged``, ``cap_add``, ``devices`` and ``volumes`` naming ``/dev/infiniband`` (or
  ``/dev/shm`` bound from the host), and ``deploy.resources.reservations.devices`` asking for GPUs.

* A manifest pasted in markdown (an issue thread): the fenced blocks that hold one.

Every container yields a :class:`ContainerFact` row ``fact="container"`` (at its ``- name:`` line; compose: the
service's key line) and one row per fact above, each at the line that states it. Pod-level facts have
``container=""`` and the pod's locator in ``pod``. Documents that are neither are ignored (a Service, a ConfigMap, a
training config). Broken YAML is a problem of the result (the other documents of the file are still read). Helm
templates before rendering (``{{ }}``) are not YAML and are not read. Pure: no I/O, never raises.

Samples: tests/data/container_spec/README.md (GoogleCloudPlatform/container-engine-accelerators, kubeflow/mpi-operator,
Mellanox/k8s-rdma-shared-dev-plugin, Mellanox/network-operator, oracle-quickstart/oci-hpc-oke,
aws-samples/awsome-distributed-training, NVIDIA/dgx-spark-playbooks, NVIDIA/nccl#1925).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeAlias

import yaml

from diagnose.models.records import ParseResult, Record, clip
from diagnose.parsers._common import EnvSetting, is_comm_env
from diagnose.parsers.base import guarded_parse

FORMAT = "container_spec"
# a job script's `mpirun -x NCCL_X=...` lines embedded in a manifest's args are the env parser's: it runs beside
MIXABLE = True

MAX_CHARS = 8 * 1024 * 1024  # a manifest is kilobytes; a larger "YAML" file is a dump this parser does not need
MAX_DOCUMENTS = 5000
MAX_PODS = 5000

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DOC_SPLIT = re.compile(r"^(?:---|\.\.\.)(?:[ \t].*)?$", re.MULTILINE)
_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([A-Za-z0-9_+-]*)[^\n]*$", re.MULTILINE)

_YAML_START = re.compile(r"^(?:---|apiVersion:|kind:|services:|version:|name:|x-[\w-]+:|\{)")
_SNIFF_API = re.compile(r"^[ \t]*apiVersion:[ \t]*['\"]?[A-Za-z0-9.\-/]+['\"]?[ \t]*$", re.MULTILINE)
_SNIFF_KIND = re.compile(r"^[ \t]*kind:[ \t]*['\"]?[A-Z][A-Za-z0-9]*['\"]?[ \t]*$", re.MULTILINE)
_SNIFF_CONTAINERS = re.compile(r"^[ \t]*containers:[ \t]*(?:\[.*)?$", re.MULTILINE)
_SNIFF_CONTAINER_ITEM = re.compile(r"^[ \t]*-[ \t]+(?:name|image):[ \t]*\S", re.MULTILINE)
_SNIFF_SERVICES = re.compile(r"^services:[ \t]*$", re.MULTILINE)
_SNIFF_SERVICE_KEYS = re.compile(
    r"^[ \t]{2,}(?:image|build|environment|shm_size|ipc|network_mode|devices|cap_add|privileged):", re.MULTILINE)
_SNIFF_COMPOSE_IMAGE = re.compile(r"^[ \t]{2,}(?:image|build):", re.MULTILINE)

_TRUE = frozenset({"true", "yes", "on"})
_IPC_LOCK = frozenset({"IPC_LOCK", "CAP_IPC_LOCK", "ALL"})
# RDMA device resources named in public manifests: the shared/SR-IOV device plugins' ``rdma/`` prefix and the NVIDIA
# Network Operator resources of oracle-quickstart/oci-hpc-oke (rdma-vf) and Mellanox/network-operator examples
_NVIDIA_RDMA = re.compile(r"^nvidia\.com/(?:rdma[\w.-]*|hostdev|mlnxnics)$")
_EFA = "vpc.amazonaws.com/efa"
_NETWORK_ANNOTATIONS = ("k8s.v1.cni.cncf.io/networks", "networking.gke.io/interfaces")
# Kubernetes resource quantities (apimachinery resource.Quantity): binary and decimal suffixes
_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)(?:[eE](\d+))?\s*(Ki|Mi|Gi|Ti|Pi|Ei|k|K|M|G|T|P|E)?\s*$")
_QUANTITY_MULT = {
    None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
    "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}
# Compose byte values (Compose file reference, "Specifying byte values"): b, k/kb, m/mb, g/gb, powers of 1024
_BYTES = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmgBKMG])?[bB]?\s*$")
_BYTES_MULT = {None: 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerFact(Record):
    """One fact a manifest states about a job container, at the line that states it.

    ``spec`` is the document's ``kind`` (``Pod``, ``MPIJob``...) or ``compose``; ``workload`` its ``metadata.name``
    (compose: empty); ``pod`` the locator of the pod spec inside the document (``spec``,
    ``spec.mpiReplicaSpecs.Worker.template.spec``; compose: the service name); ``container`` the container's name
    (empty for a pod-level fact). ``fact`` is one of ``container`` (value: the image), ``host_network``,
    ``host_ipc``, ``shm_size`` (value as written, ``number`` in bytes), ``shm_memory`` (a memory-backed /dev/shm with
    no size stated), ``shm_host`` (the host's /dev/shm bound in), ``privileged``, ``ipc_lock`` (value: the capability
    as written), ``rdma_resource`` / ``efa`` / ``gpu`` (value: the resource name, ``number``: the count),
    ``infiniband_device`` (value: the host path), ``network_attachment`` (value: the annotation), ``resource_claim``
    (value: the claim's name).
    """

    spec: str
    workload: str
    pod: str
    container: str
    fact: str
    value: str
    number: float | None = None


# ----------------------------------------------------------------------------------------------------------------
# Sniff


def sniff(head: str) -> int:
    try:
        if _SNIFF_API.search(head) and _SNIFF_KIND.search(head) and _SNIFF_CONTAINERS.search(head) \
                and _SNIFF_CONTAINER_ITEM.search(head):
            return 92
        if _SNIFF_SERVICES.search(head) and _SNIFF_COMPOSE_IMAGE.search(head):
            return 88 if len(_SNIFF_SERVICE_KEYS.findall(head)) >= 2 else 70
        return 0
    except Exception:  # pragma: no cover - sniff must never raise
        return 0


# ----------------------------------------------------------------------------------------------------------------
# YAML nodes (composed, not constructed: every node keeps its line)

_Node: TypeAlias = yaml.Node


def _mapping(node: _Node | None, depth: int = 0) -> dict[str, tuple[_Node, _Node]]:
    """A mapping node as {key: (key node, value node)}, ``<<`` merge keys applied (own keys win)."""
    out: dict[str, tuple[_Node, _Node]] = {}
    if not isinstance(node, yaml.MappingNode) or depth > 20:
        return out
    merged: dict[str, tuple[_Node, _Node]] = {}
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.tag == "tag:yaml.org,2002:merge":
            for src in (v.value if isinstance(v, yaml.SequenceNode) else [v]):
                for mk, mv in _mapping(src, depth + 1).items():
                    merged.setdefault(mk, mv)
        elif isinstance(k, yaml.ScalarNode):
            out[k.value] = (k, v)  # a duplicate key: the last wins, as the API server's decoder does
    for mk, mv in merged.items():
        out.setdefault(mk, mv)
    return out


def _get(node: _Node | None, *path: str) -> _Node | None:
    for key in path:
        kv = _mapping(node).get(key)
        if kv is None:
            return None
        node = kv[1]
    return node


def _scalar(node: _Node | None) -> str | None:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None


def _items(node: _Node | None) -> list[_Node]:
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _is_true(node: _Node | None) -> bool:
    v = _scalar(node)
    return v is not None and v.strip().lower() in _TRUE


def _line(node: _Node) -> int:
    return int(node.start_mark.line) + 1


def quantity_bytes(text: str) -> int | None:
    """A Kubernetes quantity (``64Mi``, ``1Gi``, ``32G``, ``67108864``) in bytes; None when not one."""
    m = _QUANTITY.match(text)
    if not m:
        return None
    n = float(m.group(1)) * (10 ** int(m.group(2)) if m.group(2) else 1)
    return int(n * _QUANTITY_MULT[m.group(3)])


def compose_bytes(text: str) -> int | None:
    """A Compose byte value (``16gb``, ``2g``, ``512m``, ``1024``) in bytes; None when not one."""
    m = _BYTES.match(text)
    if not m:
        return None
    return int(float(m.group(1)) * _BYTES_MULT[m.group(2).lower() if m.group(2) else None])


def _count(node: _Node | None) -> float | None:
    v = _scalar(node)
    if v is None:
        return None
    try:
        return float(v.strip().strip("'\""))
    except ValueError:
        return None


# ----------------------------------------------------------------------------------------------------------------
# Parse


class _Doc:
    """One YAML document: the file's lines (for the records' text), where it starts, what it is."""

    def __init__(self, lines: list[str], offset: int, source: str, host: str | None, records: list[Record]) -> None:
        self.lines, self.offset, self.source, self.host, self.records = lines, offset, source, host, records
        self.spec = self.workload = ""

    def text(self, line: int) -> str:
        return clip(self.lines[line - 1]) if 0 < line <= len(self.lines) else ""

    def at(self, node: _Node) -> int:
        return _line(node) + self.offset

    def fact(self, node: _Node, pod: str, container: str, fact: str, value: str, number: float | None = None) -> None:
        ln = self.at(node)
        self.records.append(ContainerFact(
            source=self.source, line=ln, text=self.text(ln), host=self.host, spec=self.spec, workload=self.workload,
            pod=pod, container=container, fact=fact, value=value, number=number))

    def env(self, node: _Node, name: str, value: str) -> None:
        if not is_comm_env(name):
            return
        ln = self.at(node)
        self.records.append(EnvSetting(source=self.source, line=ln, text=self.text(ln), host=self.host,
                                       name=name, value=value, origin="container_spec"))


def _documents(text: str) -> Iterator[tuple[int, str]]:
    """(line offset, text) of each YAML document: split at ``---`` / ``...`` lines, so one broken document does not
    hide the others."""
    start = 0
    line = 0
    for m in _DOC_SPLIT.finditer(text):
        chunk = text[start:m.start()]
        yield line, chunk
        line += chunk.count("\n") + 1
        start = m.end() + 1
    yield line, text[start:]


def _fenced(text: str) -> Iterator[tuple[int, str]]:
    """(line offset, text) of each fenced block of a markdown text (an unclosed last fence runs to the end)."""
    marks = list(_FENCE.finditer(text))
    i = 0
    while i < len(marks):
        opening = marks[i]
        body_start = opening.end() + 1
        closing = next((m for m in marks[i + 1:] if m.group(1)[0] == opening.group(1)[0] and not m.group(2)), None)
        body = text[body_start:closing.start()] if closing else text[body_start:]
        yield text.count("\n", 0, body_start), body
        if closing is None:
            break
        i = marks.index(closing) + 1


def _is_manifest_text(chunk: str) -> bool:
    return bool((_SNIFF_API.search(chunk) and _SNIFF_KIND.search(chunk)) or _SNIFF_SERVICES.search(chunk))


def _parse_body(text: str, source: str, host: str | None, records: list[Record], problems: list[str]) -> None:
    if len(text) > MAX_CHARS:
        problems.append(f"container spec larger than {MAX_CHARS // 1048576} MiB: read its first {MAX_CHARS // 1048576} MiB")
        text = text[:MAX_CHARS]
    text = text.replace("\r\n", "\n")  # a CRLF file: the same lines (a `---\r` line is still a document marker)
    lines = text.split("\n")
    blocks: list[tuple[int, str]]
    first = next((ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), "")
    if _FENCE.search(text) and not _YAML_START.match(first):
        blocks = [(off, body) for off, body in _fenced(text) if _is_manifest_text(body)]
    else:
        blocks = [(0, text)]
    ndocs = 0
    for base, block in blocks:
        for off, chunk in _documents(block):
            if not chunk.strip():
                continue
            ndocs += 1
            if ndocs > MAX_DOCUMENTS:
                problems.append(f"more than {MAX_DOCUMENTS} YAML documents: the rest not read")
                return
            try:
                root = yaml.compose(chunk, Loader=_LOADER)
            except (yaml.YAMLError, RecursionError, ValueError) as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f" at line {base + off + int(mark.line) + 1}" if mark is not None else ""
                problems.append(f"broken YAML document{where}: {str(getattr(exc, 'problem', None) or exc)[:120]}")
                continue
            if root is None:
                continue
            doc = _Doc(lines, base + off, source, host, records)
            _read_document(doc, root)


def _read_document(doc: _Doc, root: _Node) -> None:
    top = _mapping(root)
    if "apiVersion" in top and "kind" in top:
        doc.spec = _scalar(top["kind"][1]) or ""
        doc.workload = _scalar(_get(root, "metadata", "name")) or ""
        _find_pods(doc, root, None, "", set(), [0])
    elif isinstance(_get(root, "services"), yaml.MappingNode):
        doc.spec = "compose"
        for name, (knode, svc) in _mapping(_get(root, "services")).items():
            if isinstance(svc, yaml.MappingNode):
                _read_service(doc, name, knode, svc)


def _find_pods(doc: _Doc, node: _Node, meta: _Node | None, path: str, seen: set[int], npods: list[int]) -> None:
    """Every pod spec under ``node`` (a mapping holding a ``containers`` list), with the ``metadata`` beside it."""
    if id(node) in seen or len(seen) > 200_000 or npods[0] >= MAX_PODS:
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _find_pods(doc, item, None, f"{path}[{i}]", seen, npods)
        return
    m = _mapping(node)
    if not m:
        return
    if isinstance(m.get("containers", (None, None))[1], yaml.SequenceNode):
        npods[0] += 1
        _read_pod(doc, node, meta, path or "spec")
        return
    for key, (_k, value) in m.items():
        if isinstance(value, yaml.MappingNode | yaml.SequenceNode):
            _find_pods(doc, value, m.get("metadata", (None, None))[1] if key == "spec" else None,
                       f"{path}.{key}" if path else key, seen, npods)


def _read_pod(doc: _Doc, pod: _Node, meta: _Node | None, where: str) -> None:
    pm = _mapping(pod)
    for key, fact in (("hostNetwork", "host_network"), ("hostIPC", "host_ipc")):
        if key in pm and _is_true(pm[key][1]):
            doc.fact(pm[key][0], where, "", fact, "true")
    annotations = _mapping(_get(meta, "annotations"))
    for key in _NETWORK_ANNOTATIONS:
        if key in annotations:
            doc.fact(annotations[key][0], where, "", "network_attachment", key)
    for claim in _items(pm.get("resourceClaims", (None, None))[1]):
        doc.fact(claim, where, "", "resource_claim", _scalar(_get(claim, "name")) or "")
    volumes: dict[str, _Node] = {}
    for vol in _items(pm.get("volumes", (None, None))[1]):
        name = _scalar(_get(vol, "name"))
        if name:
            volumes[name] = vol
    for ctr in _items(pm["containers"][1]):
        if isinstance(ctr, yaml.MappingNode):
            _read_container(doc, ctr, where, volumes)


def _read_container(doc: _Doc, ctr: _Node, pod: str, volumes: dict[str, _Node]) -> None:
    cm = _mapping(ctr)
    name = _scalar(_get(ctr, "name")) or ""
    anchor = cm["name"][0] if "name" in cm else ctr
    doc.fact(anchor, pod, name, "container", _scalar(_get(ctr, "image")) or "")
    for item in _items(cm.get("env", (None, None))[1]):
        im = _mapping(item)
        var = _scalar(im.get("name", (None, None))[1])
        if var is None or "value" not in im or "valueFrom" in im:
            continue
        value = _scalar(im["value"][1])
        if value is not None:
            doc.env(item, var, value)
    sc = _get(ctr, "securityContext")
    priv = _mapping(sc).get("privileged")
    if priv is not None and _is_true(priv[1]):
        doc.fact(priv[0], pod, name, "privileged", "true")
    for cap in _items(_get(sc, "capabilities", "add")):
        v = (_scalar(cap) or "").strip().upper()
        if v in _IPC_LOCK:
            doc.fact(cap, pod, name, "ipc_lock", _scalar(cap) or v)
    res = _get(ctr, "resources")
    seen: set[str] = set()
    for part in ("limits", "requests"):
        for rname, (knode, vnode) in _mapping(_get(res, part)).items():
            if rname in seen:
                continue
            seen.add(rname)
            if rname.startswith("rdma/") or _NVIDIA_RDMA.match(rname):
                doc.fact(knode, pod, name, "rdma_resource", rname, _count(vnode))
            elif rname == _EFA:
                doc.fact(knode, pod, name, "efa", rname, _count(vnode))
            elif rname == "nvidia.com/gpu":
                doc.fact(knode, pod, name, "gpu", rname, _count(vnode))
    for claim in _items(_get(res, "claims")):
        doc.fact(claim, pod, name, "resource_claim", _scalar(_get(claim, "name")) or "")
    for mount in _items(cm.get("volumeMounts", (None, None))[1]):
        path = (_scalar(_get(mount, "mountPath")) or "").rstrip("/")
        vol = volumes.get(_scalar(_get(mount, "name")) or "")
        host_path = (_scalar(_get(vol, "hostPath", "path")) or "").rstrip("/") if vol is not None else ""
        if path == "/dev/shm" and vol is not None:
            empty = _get(vol, "emptyDir")
            em = _mapping(empty)
            if "medium" in em and (_scalar(em["medium"][1]) or "") == "Memory":
                size = em.get("sizeLimit")
                nbytes = quantity_bytes(_scalar(size[1]) or "") if size else None
                if size is not None and nbytes is not None:
                    doc.fact(size[1], pod, name, "shm_size", _scalar(size[1]) or "", float(nbytes))
                else:
                    doc.fact(em["medium"][1], pod, name, "shm_memory", "Memory")
            elif host_path == "/dev/shm":
                doc.fact(mount, pod, name, "shm_host", host_path)
        elif path.startswith("/dev/infiniband") and host_path.startswith("/dev/infiniband"):
            doc.fact(mount, pod, name, "infiniband_device", host_path)


def _read_service(doc: _Doc, service: str, knode: _Node, svc: _Node) -> None:
    sm = _mapping(svc)
    name = _scalar(_get(svc, "container_name")) or service
    doc.fact(knode, service, name, "container", _scalar(_get(svc, "image")) or "")
    env = sm.get("environment", (None, None))[1]
    if isinstance(env, yaml.SequenceNode):
        for item in env.value:
            entry = _scalar(item)
            if entry and "=" in entry:
                var, _, value = entry.partition("=")
                doc.env(item, var.strip(), value)
    else:
        for var, (vk, vv) in _mapping(env).items():
            val = _scalar(vv)
            if val is not None and vv.tag != "tag:yaml.org,2002:null":
                doc.env(vk, var, val)
    for key, fact, want in (("network_mode", "host_network", "host"), ("ipc", "host_ipc", "host")):
        if key in sm and (_scalar(sm[key][1]) or "").strip() == want:
            doc.fact(sm[key][0], service, name, fact, "true")
    if "privileged" in sm and _is_true(sm["privileged"][1]):
        doc.fact(sm["privileged"][0], service, name, "privileged", "true")
    if "shm_size" in sm:
        raw = _scalar(sm["shm_size"][1]) or ""
        nbytes = compose_bytes(raw)
        if nbytes is not None:
            doc.fact(sm["shm_size"][1], service, name, "shm_size", raw, float(nbytes))
    for cap in _items(sm.get("cap_add", (None, None))[1]):
        v = (_scalar(cap) or "").strip().upper()
        if v in _IPC_LOCK:
            doc.fact(cap, service, name, "ipc_lock", _scalar(cap) or v)
    for key in ("devices", "volumes"):
        for item in _items(sm.get(key, (None, None))[1]):
            src = _scalar(item)
            if src is None:
                src = _scalar(_get(item, "source")) or ""
                dst = _scalar(_get(item, "target")) or ""
            else:
                parts = src.split(":")
                src, dst = parts[0], (parts[1] if len(parts) > 1 else parts[0])
            if src.startswith("/dev/infiniband"):
                doc.fact(item, service, name, "infiniband_device", src)
            elif key == "volumes" and src.rstrip("/") == "/dev/shm" and dst.rstrip("/") == "/dev/shm":
                doc.fact(item, service, name, "shm_host", src)
    for dev in _items(_get(svc, "deploy", "resources", "reservations", "devices")):
        caps = [(_scalar(c) or "") for c in _items(_get(dev, "capabilities"))]
        if "gpu" in caps:
            count = _get(dev, "count")
            doc.fact(dev, service, name, "gpu", "gpu", _count(count))


def parse(text: str, source: str, host: str | None = None) -> ParseResult:
    return guarded_parse(FORMAT, _parse_body, text, source, host)
