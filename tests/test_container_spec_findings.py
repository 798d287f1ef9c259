"""Kubernetes manifests and compose files (tests/data/container_spec, see its README) weighed by the rules the way a
``docker run`` line is: the same finding kinds, so host.shm_too_small and host.container_rdma_access read them
unchanged.

The NCCL log lines are quoted from public issues: NVIDIA/nccl#290 (the /dev/shm ``posix_fallocate`` failure of a
container) and NVIDIA/nccl#941 ("No device found in container": ``NET/IB : No device found`` then ``Using network
Socket``). The ibstat capture is tests/data/ibstat/gpud_ibstat.47.0.h100.all.active.2.txt (every HCA port Active)."""

from __future__ import annotations

from pathlib import Path

from diagnose.pipeline import gather, triage

DATA = Path(__file__).resolve().parent / "data"
SPECS = DATA / "container_spec"

NCCL_290_SHM = """\
gpu2-ru7:2144:2556 [2] NCCL INFO Ring 00 : 2[3d000] -> 3[3e000] via direct shared memory
gpu2-ru7:2143:2561 [1] NCCL INFO Ring 00 : 1[1b000] -> 2[3d000] via direct shared memory
gpu2-ru7:2145:2555 [3] NCCL INFO Ring 00 : 3[3e000] -> 0[1a000] via direct shared memory
gpu2-ru7:2142:2554 [0] NCCL INFO Ring 00 : 0[1a000] -> 1[1b000] via direct shared memory
gpu2-ru7:2145:2555 [3] NCCL INFO Ring 00 : 3[3e000] -> 2[3d000] via direct shared memory

gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device
gpu2-ru7:2143:2561 [1] NCCL INFO include/shm.h:41 -> 2
"""

NCCL_941_NO_DEVICE = """\
05-06-76-200:7839:7839 [0] NCCL INFO Bootstrap : Using ens5f0np0:10.220.178.201<0>
05-06-76-200:7839:7839 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v6 symbol.
05-06-76-200:7839:7839 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin (v5)
05-06-76-200:7839:7839 [0] NCCL INFO NET/Plugin: Failed to find ncclCollNetPlugin_v6 symbol.
05-06-76-200:7839:7839 [0] NCCL INFO NET/Plugin: Loaded coll plugin SHARP (v5)
05-06-76-200:7839:7839 [0] NCCL INFO cudaDriverVersion 12010
NCCL version 2.17.1+cuda12.1
05-06-76-200:7839:7839 [0] NCCL INFO Comm config CGA cluster size set to 2
05-06-76-200:7839:7911 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so
05-06-76-200:7839:7911 [0] NCCL INFO P2P plugin IBext
05-06-76-200:7839:7911 [0] NCCL INFO NET/IB : No device found.
05-06-76-200:7839:7911 [0] NCCL INFO NET/IB : No device found.
05-06-76-200:7839:7911 [0] NCCL INFO NET/Socket : Using [0]ens5f0np0:10.220.178.201<0> [1]ens3f0np0:192.17.3.33<0> \
[2]ens8f1np1:10.220.178.201<0> [3]bond0:10.220.178.201<0> [4]virbr0:192.168.122.1<0>
05-06-76-200:7839:7911 [0] NCCL INFO Using network Socket
"""


def _bundle(tmp: Path, manifest: str, text: str | None = None, log: str = "", ibstat: bool = False) -> Path:
    (tmp / "job.yaml").write_text(text if text is not None else (SPECS / manifest).read_text())
    if log:
        (tmp / "nccl.log").write_text(log)
    if ibstat:
        (tmp / "gpu-node-1").mkdir()
        (tmp / "gpu-node-1" / "ibstat.txt").write_bytes((DATA / "ibstat" / "gpud_ibstat.47.0.h100.all.active.2.txt")
                                                        .read_bytes())
    return tmp


def _ranked(bundle: Path) -> list[tuple[str, float, str]]:
    return [(c.id, c.score, c.verdict) for c in triage([bundle]).causes]


def _findings(bundle: Path, kind: str) -> list[dict[str, object]]:
    return [dict(f.attrs, refs=[(e.file, e.line) for e in f.evidence]) for f in gather([bundle]).findings
            if f.kind == kind]


# ------------------------------------------------------------------------------------------------- /dev/shm size


def test_pod_with_a_64mi_dev_shm_and_an_nccl_shm_error_ranks_shm_too_small(tmp_path: Path) -> None:
    # the GKE TCPXO nccl-test pod (its block-style emptyDir, which the catalog cannot read line by line) with the
    # sizeLimit of 1Gi replaced by 64Mi, the container default the NCCL troubleshooting guide warns about
    text = (SPECS / "gke_gpudirect_tcpxo_nccl_test_latest_head.yaml").read_text()
    assert text.count("sizeLimit: 1Gi") == 1
    b = _bundle(tmp_path, "", text.replace("sizeLimit: 1Gi", "sizeLimit: 64Mi"), NCCL_290_SHM)
    (shm,) = _findings(b, "container_shm_size")
    assert shm["size_mib"] == 64.0 and shm["containers"] == "nccl-test" and shm["refs"] == [("job.yaml", 140)]
    ranked = _ranked(b)
    assert ranked[0][0] == "host.shm_too_small" and ranked[0][2] == "confirmed", ranked
    cause = next(c for c in triage([b]).causes if c.id == "host.shm_too_small")
    assert ("job.yaml", 140) in {(e.file, e.line) for e in cause.evidence}


def test_a_large_dev_shm_argues_against_shm_too_small(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    text = (SPECS / "gke_gpudirect_tcpxo_nccl_test_latest_head.yaml").read_text()
    small = _ranked(_bundle(tmp_path / "a", "", text.replace("sizeLimit: 1Gi", "sizeLimit: 64Mi"), NCCL_290_SHM))
    large = _ranked(_bundle(tmp_path / "b", "gke_gpudirect_rdma_nccl_test_head.yaml", log=NCCL_290_SHM))
    s_small = next(s for i, s, _v in small if i == "host.shm_too_small")
    s_large = next((s for i, s, _v in large if i == "host.shm_too_small"), 0.0)
    assert s_large < s_small  # 250Gi: the shm_large clause argues against


# ----------------------------------------------------------------------------------------------- RDMA access


def test_pod_without_rdma_devices_and_no_ib_device_ranks_container_rdma_access(tmp_path: Path) -> None:
    # GKE's TCPX nccl-test pods: the NCCL container has IPC_LOCK and GPUs but neither /dev/infiniband, an RDMA
    # resource nor privileged mode (only its tcpx-daemon sidecar is privileged, which gives the NCCL container nothing)
    b = _bundle(tmp_path, "gke_gpudirect_tcpx_nccl_test.yaml", log=NCCL_941_NO_DEVICE, ibstat=True)
    (ctx,) = _findings(b, "context_container")
    assert ctx["rdma_access"] == "no" and ctx["without_rdma"] == "nccl-test"
    assert ctx["refs"] == [("job.yaml", 52), ("job.yaml", 115)]
    assert _findings(b, "container_rdma_device") == []  # the sidecar's privileged mode is not the job's
    ranked = _ranked(b)
    assert ranked[0][0] == "host.container_rdma_access" and ranked[0][2] == "confirmed", ranked


def test_without_ibstat_the_manifest_without_rdma_puts_container_access_first(tmp_path: Path) -> None:
    # the spec passes in no RDMA device: NCCL's missing IB device is the container's, not a socket-only host
    b = _bundle(tmp_path, "gke_gpudirect_tcpx_nccl_test.yaml", log=NCCL_941_NO_DEVICE)
    assert [i for i, _s, _v in _ranked(b)][0] == "host.container_rdma_access"


def test_pod_on_the_host_network_with_rdma_devices_does_not_rank_container_access(tmp_path: Path) -> None:
    # oci-hpc-oke's host-network MPIJob: hostNetwork, a /dev/infiniband hostPath and privileged workers
    b = _bundle(tmp_path, "mixed/oci_hpc_oke_host_network_mpijob_h100.yaml", log=NCCL_941_NO_DEVICE)
    assert {f["via"] for f in _findings(b, "container_rdma_device")} == {"/dev/infiniband", "privileged"}
    assert _findings(b, "container_host_network")  # the catalog's, from the `hostNetwork: true` lines
    (ctx,) = _findings(b, "context_container")
    assert ctx["rdma_access"] == "yes"
    ranked = _ranked(b)
    assert "host.container_rdma_access" not in [i for i, _s, _v in ranked], ranked
    assert ranked[0][0] == "nccl.socket_fallback"


def test_rdma_resource_in_a_pasted_deployment_does_not_rank_container_access(tmp_path: Path) -> None:
    # NVIDIA/nccl#1925: `rdma/hca: 1` and hostIPC in a Deployment pasted into the issue
    b = _bundle(tmp_path, "nccl_issue_1925_description_excerpt.md", log=NCCL_941_NO_DEVICE)
    assert "host.container_rdma_access" not in [i for i, _s, _v in _ranked(b)]


def test_with_ibstat_rdma_devices_still_lower_the_container_access_score(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    without = _ranked(_bundle(tmp_path / "a", "gke_gpudirect_tcpx_nccl_test.yaml", log=NCCL_941_NO_DEVICE, ibstat=True))
    given = _ranked(_bundle(tmp_path / "b", "mixed/oci_hpc_oke_host_network_mpijob_h100.yaml", log=NCCL_941_NO_DEVICE,
                            ibstat=True))
    score = {i: s for i, s, _v in without}["host.container_rdma_access"]
    assert {i: s for i, s, _v in given}["host.container_rdma_access"] < score


# -------------------------------------------------------------------------------------- no double counting


def test_lines_the_catalog_reads_are_not_counted_twice(tmp_path: Path) -> None:
    b = _bundle(tmp_path, "mixed/oci_hpc_oke_host_network_mpijob_h100.yaml")
    shm = _findings(b, "container_shm_size")
    # the flow-style `emptyDir: { medium: Memory, sizeLimit: 32Gi }` line is the catalog's finding only
    assert len(shm) == 1 and shm[0]["message"] == "container.k8s.emptydir_memory_size" and shm[0]["size_mib"] == 32768
    lock = _findings(b, "container_ipc_lock")
    assert sorted(str(f.get("via", f.get("message"))) for f in lock) == ["container.k8s.ipc_lock", "privileged"]


def test_compose_service_shm_and_ipc_host(tmp_path: Path) -> None:
    b = _bundle(tmp_path, "dgx_spark_txt2kg_docker_compose_vllm.yml")
    (shm,) = _findings(b, "container_shm_size")
    assert shm["size_mib"] == 16384.0  # the catalog's compose entry reads `shm_size: '16gb'`
    (ctx,) = _findings(b, "context_container")
    assert ctx["rdma_access"] == "no" and ctx["without_rdma"] == "vllm-service"  # the GPU service is the job


def test_efa_resource_and_host_dev_shm(tmp_path: Path) -> None:
    b = _bundle(tmp_path, "aws_efa_mpijob_nccl_tests.yaml")
    (rdma,) = _findings(b, "container_rdma_device")
    assert rdma["efa"] is True and rdma["containers"] == "nccl-tests-worker" and rdma["refs"] == [("job.yaml", 90)]
    (ipc,) = _findings(b, "container_ipc_host")
    assert ipc["via"] == "host /dev/shm" and ipc["refs"] == [("job.yaml", 84)]
    (ctx,) = _findings(b, "context_container")
    assert ctx["rdma_access"] == "yes"  # the launcher asks for no GPU: it is not the job's container


def test_extra_networks_leave_rdma_access_open(tmp_path: Path) -> None:
    # GKE RDMA: the NICs come with the pod's networking.gke.io/interfaces networks, not a device or resource
    b = _bundle(tmp_path, "gke_gpudirect_rdma_nccl_test_head.yaml")
    (ctx,) = _findings(b, "context_container")
    assert ctx["rdma_access"] == "maybe" and ctx["without_rdma"] == ""
