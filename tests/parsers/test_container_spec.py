"""Tests for diagnose.parsers.container_spec (see tests/data/container_spec/README.md for the samples' sources)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import _common, by_format, container_spec
from diagnose.parsers._common import EnvSetting
from diagnose.parsers.container_spec import ContainerFact, compose_bytes, quantity_bytes

DATA = Path(__file__).resolve().parent.parent / "data"
OWN = DATA / "container_spec"
SAMPLES = sorted(p for p in OWN.rglob("*") if p.is_file() and p.name != "README.md")


def _parse(name: str, text: str | None = None):
    res = container_spec.parse(text if text is not None else (OWN / name).read_text(), f"cs/{name}", "node-a")
    facts = sorted((r.line, r.container, r.fact, r.value, r.number) for r in res.records if isinstance(r, ContainerFact))
    env = sorted((r.line, r.name, r.value, r.origin) for r in res.records if isinstance(r, EnvSetting))
    return res, facts, env


def test_registered_mixable_and_shared_env_record():
    assert by_format("container_spec") is container_spec
    assert container_spec.MIXABLE is True  # the env/launch readers still read a manifest's embedded mpirun lines
    assert container_spec.EnvSetting is _common.EnvSetting


# ---------------------------------------------------------------------------------------------------------------
# real samples


def test_rdma_shared_dev_plugin_test_pod():
    res, facts, env = _parse("k8s_rdma_shared_dev_plugin_test_hca_pod.yaml")
    assert res.problems == [] and env == []
    assert facts == [
        (9, "mofed-test-ctr", "container", "mellanox/rping-test", None),
        (12, "mofed-test-ctr", "ipc_lock", "IPC_LOCK", None),  # flow style: add: [ "IPC_LOCK" ]
        (15, "mofed-test-ctr", "rdma_resource", "rdma/hca_shared_devices_a", 1.0),
    ]
    rec = next(r for r in res.records if r.fact == "rdma_resource")
    assert rec.text == "        rdma/hca_shared_devices_a: 1" and rec.host == "node-a" and rec.source.startswith("cs/")
    assert (rec.spec, rec.workload, rec.pod) == ("Pod", "mofed-test-pod", "spec")


def test_network_operator_pod_limits_and_requests_once():
    _res, facts, _env = _parse("network_operator_rdma_gpu_test_pod1.yml")
    assert [(ln, f, v, n) for ln, _c, f, v, n in facts if f in ("gpu", "rdma_resource", "network_attachment")] == [
        (6, "network_attachment", "k8s.v1.cni.cncf.io/networks", None),  # the multus annotation, not the comments
        (27, "gpu", "nvidia.com/gpu", 1.0),
        (28, "rdma_resource", "rdma/rdma_shared_device_a", 1.0),  # the limits line; requests repeat it
    ]


def test_mpi_operator_mpijob_replicas_env_and_memory_dev_shm():
    res, facts, env = _parse("mixed/mpi_operator_nccl_tests.yaml")
    assert res.problems == []
    # OMPI_ALLOW_RUN_AS_ROOT is not a communication variable; the OMPI_MCA_ parameter is
    assert env == [(26, "OMPI_MCA_orte_base_help_aggregate", "0", "container_spec")]
    assert [(ln, f) for ln, _c, f, _v, _n in facts] == [
        (18, "container"), (20, "privileged"), (53, "shm_memory"), (57, "container"), (59, "privileged"), (62, "gpu")]
    pods = {r.pod for r in res.records if isinstance(r, ContainerFact)}
    assert pods == {"spec.mpiReplicaSpecs.Launcher.template.spec", "spec.mpiReplicaSpecs.Worker.template.spec"}


def test_gke_tcpx_two_pods_services_ignored():
    res, facts, _env = _parse("gke_gpudirect_tcpx_nccl_test.yaml")
    assert res.problems == []
    assert {r.workload for r in res.records} == {"nccl-test-host-1", "nccl-test-host-2"}  # not the Services
    assert [(ln, c, f) for ln, c, f, _v, _n in facts if ln < 90] == [
        (28, "", "host_network"), (31, "tcpx-daemon", "container"), (43, "tcpx-daemon", "privileged"),
        (52, "nccl-test", "container"), (65, "nccl-test", "ipc_lock"), (73, "nccl-test", "gpu")]
    assert len(facts) == 12  # the second pod states the same six facts


def test_gke_tcpxo_block_style_emptydir_and_env():
    res, facts, env = _parse("gke_gpudirect_tcpxo_nccl_test_latest_head.yaml")
    assert res.problems == []
    assert env == [(121, "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices", "container_spec")]
    assert (140, "nccl-test", "shm_size", "1Gi", float(1 << 30)) in facts
    assert not any(f == "host_network" for _l, _c, f, _v, _n in facts)  # `#  hostNetwork: true` is a comment
    assert not any(f == "privileged" for _l, _c, f, _v, _n in facts)
    assert not any(f == "ipc_lock" for _l, _c, f, _v, _n in facts)  # CAP_NET_ADMIN, CAP_NET_BIND_SERVICE only


def test_gke_rdma_duplicate_resources_key_last_wins_and_network_annotation():
    _res, facts, _env = _parse("gke_gpudirect_rdma_nccl_test_head.yaml")
    assert facts == [
        (41, "", "network_attachment", "networking.gke.io/interfaces", None),
        (64, "test", "shm_size", "250Gi", float(250 << 30)),
        (67, "test", "container", "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic:v1.1.1",
         None),
        (83, "test", "gpu", "nvidia.com/gpu", 8.0),
    ]


def test_oci_host_network_flow_style_volumes():
    _res, facts, _env = _parse("mixed/oci_hpc_oke_host_network_mpijob_h100.yaml")
    worker = [(ln, f, v) for ln, c, f, v, _n in facts if c == "mpi-worker" or (c == "" and ln > 60)]
    assert worker == [
        (68, "host_network", "true"), (74, "shm_size", "32Gi"), (76, "container", worker[2][2]),
        (80, "infiniband_device", "/dev/infiniband"), (83, "privileged", "true"), (85, "ipc_lock", "IPC_LOCK"),
        (93, "gpu", "nvidia.com/gpu")]


def test_oci_virtual_functions_rdma_vf_resource():
    _res, facts, _env = _parse("mixed/oci_hpc_oke_virtual_functions_mpijob_h100.yaml")
    assert (83, "mpi-worker", "rdma_resource", "nvidia.com/rdma-vf", 16.0) in facts
    assert (59, "", "network_attachment", "k8s.v1.cni.cncf.io/networks", None) in facts


def test_aws_efa_mpijob_host_dev_shm_and_efa_count():
    _res, facts, _env = _parse("aws_efa_mpijob_nccl_tests.yaml")
    assert [(ln, f, v, n) for ln, c, f, v, n in facts if c == "nccl-tests-worker"] == [
        (82, "container", "<account>.dkr.ecr.<region>.amazonaws.com/<image>:<tag>", None),
        (84, "shm_host", "/dev/shm", None),
        (88, "gpu", "nvidia.com/gpu", 8.0),
        (90, "efa", "vpc.amazonaws.com/efa", 32.0),  # hugepages-2Mi and memory are not facts
    ]


def test_compose_list_environment_shm_size_ipc_and_gpu_reservation():
    res, facts, env = _parse("dgx_spark_txt2kg_docker_compose_vllm.yml")
    assert res.problems == []
    assert env == [(104, "CUDA_VISIBLE_DEVICES", "0", "container_spec"), (105, "NCCL_DEBUG", "INFO", "container_spec"),
                   (106, "CUDA_MANAGED_FORCE_DEVICE_ALLOC", "1", "container_spec")]
    vllm = [(ln, f, v, n) for ln, c, f, v, n in facts if c == "vllm-service"]
    assert vllm == [(82, "container", "", None), (89, "host_ipc", "true", None),
                    (93, "shm_size", "16gb", float(16 << 30)), (120, "gpu", "gpu", 1.0)]
    assert {c for _l, c, f, _v, _n in facts if f == "container"} == {
        "app", "neo4j", "vllm-service", "sentence-transformers", "qdrant", "qdrant-init"}  # container_name wins


def test_manifest_pasted_in_an_issue_fence_keeps_the_file_lines():
    res, facts, _env = _parse("nccl_issue_1925_description_excerpt.md")  # an unclosed ```yaml fence
    assert res.problems == []
    assert facts == [(25, "", "host_ipc", "true", None),
                     (28, "nccl", "container", "lixd96/nccl-test:cuda-12.1.1-cudnn8-devel-ubuntu22.04", None),
                     (37, "nccl", "gpu", "nvidia.com/gpu", 4.0), (38, "nccl", "rdma_resource", "rdma/hca", 1.0)]
    # `privileged: false` is no fact
    assert res.records[0].text == "      hostIPC: true"


def test_env_parser_sample_mpijob_env_entries():
    text = (DATA / "env" / "coreweave_nccl-test-distributed-h100-64-mpijob.yaml").read_text()
    res = container_spec.parse(text, "x")
    facts = {(r.fact, r.value) for r in res.records if isinstance(r, ContainerFact)}
    assert ("rdma_resource", "rdma/ib") in facts and ("shm_memory", "Memory") in facts
    assert not [r for r in res.records if isinstance(r, EnvSetting)]  # OMPI_ALLOW_RUN_AS_ROOT* only


# ---------------------------------------------------------------------------------------------------------------
# units


@pytest.mark.parametrize(("text", "expected"), [
    ("64Mi", 64 << 20), ("1Gi", 1 << 30), ("250Gi", 250 << 30), ("32G", 32 * 10**9), ("500M", 500 * 10**6),
    ("67108864", 67108864), ("1.5Gi", 3 << 29), ("1e3", 1000), ("lots", None), ("", None)])
def test_quantity_bytes(text: str, expected: int | None):
    assert quantity_bytes(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("16gb", 16 << 30), ("2g", 2 << 30), ("512m", 512 << 20), ("1024kb", 1 << 20), ("2b", 2), ("8GB", 8 << 30),
    ("1048576", 1 << 20), ("big", None)])
def test_compose_bytes(text: str, expected: int | None):
    assert compose_bytes(text) == expected


# ---------------------------------------------------------------------------------------------------------------
# damage


def test_empty_and_garbage_yield_nothing():
    for text in ("", "\n\n", "---\n---\n", "\x00\x01garbage{{{\n", "hello world\n" * 50):
        res = container_spec.parse(text, "x")
        assert res.records == []


def test_crlf_gives_the_same_records():
    text = (OWN / "gke_gpudirect_tcpx_nccl_test.yaml").read_text()
    _r1, f1, e1 = _parse("gke_gpudirect_tcpx_nccl_test.yaml")
    _r2, f2, e2 = _parse("gke_gpudirect_tcpx_nccl_test.yaml", text.replace("\n", "\r\n"))
    assert (f1, e1) == (f2, e2)


def test_truncated_file_keeps_what_was_read():
    lines = (OWN / "gke_gpudirect_tcpx_nccl_test.yaml").read_text().split("\n")
    res, facts, _env = _parse("x", "\n".join(lines[:70]))
    assert [(ln, f) for ln, _c, f, _v, _n in facts] == [
        (28, "host_network"), (31, "container"), (43, "privileged"), (52, "container"), (65, "ipc_lock")]
    assert res.problems == []


def test_one_broken_document_is_a_problem_and_the_others_are_read():
    text = (OWN / "gke_gpudirect_tcpx_nccl_test.yaml").read_text()
    first, second = text.split("---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: nccl-test-host-2", 1)
    broken = first + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: [nccl-test-host-2" + second
    res, facts, _env = _parse("x", broken)
    assert len(res.problems) == 1 and res.problems[0].startswith("broken YAML document")
    assert {r.workload for r in res.records} == {"nccl-test-host-1"}
    assert len(facts) == 6


def test_helm_template_is_a_problem_not_a_crash():
    text = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  {{- range .Values.x }}\n  - name: {{ .name }}\n"
    res = container_spec.parse(text, "x")
    assert res.records == [] and res.problems


def test_alias_bomb_is_bounded():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    text = "apiVersion: v1\nkind: Pod\n" + "\n".join(lines) + "\nspec:\n  containers:\n  - name: c\n    image: i\n"
    res = container_spec.parse(text, "x")
    assert [r.fact for r in res.records] == ["container"]


def test_merge_keys_and_compose_map_environment():
    # the Compose file reference's map form of `environment` and a YAML merge key, as compose files use them
    text = ("x-env: &env\n  NCCL_IB_HCA: mlx5_0\nservices:\n  trainer:\n    image: img\n    environment:\n"
            "      <<: *env\n      NCCL_DEBUG: INFO\n      NCCL_IB_DISABLE: 0\n      EMPTY:\n")
    res = container_spec.parse(text, "x")
    env = sorted((r.line, r.name, r.value) for r in res.records if isinstance(r, EnvSetting))
    assert env == [(2, "NCCL_IB_HCA", "mlx5_0"), (8, "NCCL_DEBUG", "INFO"), (9, "NCCL_IB_DISABLE", "0")]


# ---------------------------------------------------------------------------------------------------------------
# sniff


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: str(p.relative_to(OWN)))
def test_sniff_claims_own_samples(path: Path):
    assert container_spec.sniff(path.read_text()[:65536]) >= 60


# a manifest in the env reader's samples is a manifest: this reader claims it too, by design
_BY_DESIGN = {("env", "coreweave_nccl-test-distributed-h100-64-mpijob.yaml")}


def _other_files():
    for d in sorted(p for p in DATA.iterdir() if p.is_dir() and p.name != "container_spec"):
        for f in sorted(d.rglob("*")):
            if f.is_file() and f.name != "README.md" and (d.name, f.name) not in _BY_DESIGN:
                yield f


@pytest.mark.parametrize("path", list(_other_files()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_rejects_other_formats(path: Path):
    assert container_spec.sniff(path.read_text(errors="replace")[:65536]) == 0


def test_sniff_rejects_yaml_that_is_no_manifest():
    root = Path(__file__).resolve().parent.parent.parent
    train = root / "fixtures" / "field" / "223-dynamic-padding-rank-forward-skew-ds2" / "train.yaml"
    assert container_spec.sniff(train.read_text()) == 0  # a LLaMA-Factory training config
    services_only = (OWN / "gke_gpudirect_tcpx_nccl_test.yaml").read_text().split("---\napiVersion: v1\nkind: Pod")[0]
    assert container_spec.sniff(services_only) == 0


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str):
    res = container_spec.parse(text, "fuzz")
    assert res.format == "container_spec"
    score = container_spec.sniff(text)
    assert isinstance(score, int) and 0 <= score <= 100


_LINES = [ln for p in SAMPLES for ln in p.read_text().split("\n")]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_LINES), max_size=80))
def test_never_raises_on_shuffled_manifest_lines(lines: list[str]):
    text = "apiVersion: v1\nkind: Pod\n" + "\n".join(lines)
    res = container_spec.parse(text, "fuzz")
    for r in res.records:
        assert 1 <= r.line <= text.count("\n") + 1
        assert not isinstance(r, EnvSetting) or _common.is_comm_env(r.name)
