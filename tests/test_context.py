"""What the symptom says about the setting, and the busbw it reports against the hardware it names."""

from __future__ import annotations

from diagnose.pipeline import gather, triage


def _kinds(symptom: str) -> dict[str, dict[str, object]]:
    ev = gather([], symptom)
    return {f.kind: f.attrs for f in ev.findings}


def test_the_setting_a_report_states_is_read() -> None:
    k = _kinds("Two-node all_reduce_perf over 200G HDR InfiniBand inside a Docker container on Azure VMs")
    assert k["context_fabric"]["fabric"] == "ib"
    assert {"context_container", "context_vm", "context_multi_node"} <= set(k)
    assert k["context_link_rate"]["gbps"] == 200
    assert "context_single_node" not in k


def test_a_roce_report_is_not_an_infiniband_one() -> None:
    assert _kinds("nccl-tests between two RoCE servers fail")["context_fabric"]["fabric"] == "roce"


def test_a_reported_busbw_is_weighed_against_the_nics_the_report_names() -> None:
    k = _kinds("Two-node (16x A100) all_reduce_perf reaches only ~30 GB/s busbw on 4x HDR")
    bw = k["busbw_measured"]
    assert bw["busbw_gbs"] == 30.0 and bw["expected_gbs"] == 100.0 and bw["nodes"] == 2


def test_a_stated_expectation_wins_over_the_nic_count() -> None:
    k = _kinds("2 nodes reach 30 GB/s busbw against ~100 GB/s theoretical, 8x 200G IB")
    assert k["busbw_measured"]["expected_gbs"] == 100.0


def test_a_workaround_in_the_report_is_not_the_jobs_configuration() -> None:
    d = triage([], "2-node training over InfiniBand gives NaN gradients; with NCCL_IB_DISABLE=1 it works but slower")
    ib_off = [f for c in d.causes for f in c.evidence if f.finding == "nccl_ib_disabled_env"]
    assert not d.causes or d.causes[0].id != "nccl.socket_fallback"
    assert "nccl.socket_fallback" not in [c.id for c in d.causes if c.verdict == "confirmed"]
    assert all(e.file == "<symptom>" for e in ib_off)


def test_a_symptom_alone_gives_a_ranked_differential_with_what_to_collect() -> None:
    d = triage([], "multi-node NCCL job hangs at init")
    assert len(d.causes) >= 3
    assert all(c.verdict == "inconclusive" for c in d.causes)
    assert d.missing_evidence


def test_a_busbw_given_as_a_fraction_of_the_expected_one_is_measured() -> None:
    k = _kinds("4-node x 8 V100 all_reduce_perf over one 100G EDR HCA per node reaches only about half of the ~12 GB/s"
               " the card should deliver.")
    assert k["busbw_measured"]["busbw_gbs"] == 6.0 and k["busbw_measured"]["expected_gbs"] == 12.0
    assert _kinds("all_reduce_perf gives 30% of the expected 100 GB/s")["busbw_measured"]["ratio"] == 0.3


def test_a_failure_that_comes_and_goes_is_read_as_intermittent() -> None:
    assert "context_intermittent" in _kinds(
        "MPI ring test over RoCE on a 24-node cluster fails intermittently with retry exceeded")
    assert "context_intermittent" in _kinds("the job sometimes hangs at the first allreduce")
    # 'sometimes' that qualifies when, not whether: not an intermittent failure
    assert "context_intermittent" not in _kinds("NaN after a few iterations (sometimes at the second iteration)")


def test_wrong_results_are_read_from_the_report() -> None:
    assert "context_wrong_results" in _kinds("copying a tensor from cuda:0 to cuda:1 silently yields zeros")
    assert "context_wrong_results" in _kinds("MirroredStrategy training produces NaN losses within a few iterations")
    assert "context_wrong_results" not in _kinds("ncclSocketInit connecting to an address with a garbage address family")


def test_gpudirect_not_in_use_is_read_but_a_gdr_workaround_is_not_that() -> None:
    assert "context_gdr_missing" in _kinds(
        "NCCL traffic over the NICs does not use the direct GPU-to-NIC RDMA path; what is missing?")
    k = _kinds("training succeeds when GDR is disabled, crashes when it is on")
    assert "context_gdr_missing" not in k and k["context_workaround"]["path"] == "gdr"


def test_a_geforce_40_series_board_has_no_p2p_to_block() -> None:
    d = triage([], "Two-GPU (2x RTX 4090D, one host) TensorRT-LLM run fails: peer access is not supported between"
                   " these two devices")
    ids = [c.id for c in d.causes]
    assert ids[0] == "nccl.p2p_or_nvls_config"
    assert "context_no_p2p_sku" not in _kinds("2x RTX A6000 workstation, P2P writes slow")


def test_a_failure_at_setup_is_an_init_failure() -> None:
    ev = gather([], "NCCL allreduce benchmark between two nodes fails at setup with an OFI error")
    assert "init_failure" in {s.kind for s in ev.symptoms}


_SYS_ERR = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8\n"


def test_a_system_error_on_one_host_points_at_shared_memory(tmp_path) -> None:
    (tmp_path / "console.txt").write_text(_SYS_ERR)
    symptom = "4-GPU training on one Ubuntu 18.04 box aborts at start with NCCL 'unhandled system error'"
    ev = gather([tmp_path], symptom)
    assert "nccl_system_error_single_node" in {f.kind for f in ev.findings}
    d = triage([tmp_path], symptom)
    assert d.causes[0].id == "host.shm_too_small"
    assert any(e.file == "console.txt" for e in d.causes[0].evidence)


def test_a_system_error_on_one_host_across_two_nodes_is_not_read_so(tmp_path) -> None:
    (tmp_path / "console.txt").write_text(_SYS_ERR)
    ev = gather([tmp_path], "training across two nodes aborts at start with 'unhandled system error'")
    assert "nccl_system_error_single_node" not in {f.kind for f in ev.findings}


def test_other_system_calls_in_play_on_one_host_keep_the_differential_open(tmp_path) -> None:
    symptom = "single-node all_reduce_perf fails at init with 'unhandled system error'"
    (tmp_path / "console.txt").write_text(_SYS_ERR)
    (tmp_path / "cmd.txt").write_text("NCCL_SHM_DISABLE=1 ./all_reduce_perf -g 2\n")  # traffic forced onto the NIC
    assert "nccl_system_error_single_node" not in {f.kind for f in gather([tmp_path], symptom).findings}
    (tmp_path / "cmd.txt").unlink()
    (tmp_path / "nccl.log").write_text("h1:648288:648307 [1] NCCL INFO Loading topology file /opt/vendor/topo.xml\n")
    assert "nccl_system_error_single_node" not in {f.kind for f in gather([tmp_path], symptom).findings}


def test_a_passing_perftest_is_read_and_a_failing_one_is_not() -> None:
    assert "context_perftest_ok" in _kinds("collectives time out, but I tested with ib_write_bw and it worked fine")
    assert "context_perftest_ok" in _kinds("ib_read_bw between the same NICs reaches the full line rate")
    assert "context_perftest_ok" not in _kinds("ib_write_bw does not work either between the two hosts")
    assert "context_perftest_ok" not in _kinds("ib_send_bw fails with retry exceeded")


def test_a_change_to_the_switches_dates_the_failure() -> None:
    assert "context_fabric_change" in _kinds("after the switch ports were reconfigured to 25 Gbps the job times out")
    assert "context_fabric_change" in _kinds("hangs since we upgraded the switch firmware")
    assert "context_fabric_change" not in _kinds("after a reboot of the node the job hangs")
    assert "context_fabric_change" not in _kinds("after upgrading NCCL to 2.20 the job hangs")


def test_error_12_on_a_reported_roce_fabric_with_a_pinned_gid_weighs_the_pin(tmp_path) -> None:
    # no NCCL device list, no port dump: the report says RoCE, the launch line pins the GID index
    (tmp_path / "cmd.txt").write_text("mpirun -np 8 -x NCCL_IB_GID_INDEX=3 -x NCCL_DEBUG=INFO ./all_reduce_perf -g 1\n")
    (tmp_path / "nccl.log").write_text(
        "g1:36849:36850 [0] transport/net_ib.cc:840 NCCL WARN NET/IB : Got completion with error 12, opcode 32736,"
        " len 32736, vendor err 129\n")
    ev = gather([tmp_path], "all_reduce_perf over RoCE times out")
    kinds = {f.kind: f.attrs for f in ev.findings}
    assert kinds["gid_index_set"]["value"] == "3"
    assert kinds["ib_completion_error"]["roce"] is True


def test_a_dgx_spark_is_no_nvswitch_system_and_a_freeze_is_a_hang() -> None:
    from diagnose.symptoms import classify

    assert "context_nvswitch" not in _kinds("4-node TP4 inference over RoCE on DGX Spark boxes")
    assert "context_nvswitch" in _kinds("two DGX H100 nodes over InfiniBand")
    assert "collective_timeout" in classify("the engine freezes for minutes and then stalls")
    assert "collective_timeout" not in classify("no stalls, no freezes, just slow")


def test_the_aws_network_plugin_is_no_cloud_vm() -> None:
    assert "context_vm" not in _kinds("GH200 cluster on HPE Slingshot via aws-ofi-nccl: sendrecv slow on 8 nodes")
    assert "context_vm" in _kinds("two p4d instances on AWS with EFA")


def test_nvlink_said_to_misbehave_is_read_and_nvlink_said_fine_is_not() -> None:
    assert "context_nvlink_fault" in _kinds("two RTX 2080 Ti with an NVLink bridge; NVML NVLink queries take seconds on one GPU")
    assert "context_nvlink_fault" in _kinds("nvidia-smi nvlink -s shows links inactive on GPU 3")
    assert "context_nvlink_fault" not in _kinds("NVLink is fine but the job hangs at init")
    assert "context_nvlink_fault" not in _kinds("with no NVLink errors the job hangs")


def test_slow_collectives_between_vms_point_at_the_passthrough_path() -> None:
    sym = "Two-node all_reduce_perf between A100 VMs with SR-IOV passthrough reaches only ~56% of the expected bandwidth"
    assert "context_vm_internode_slow" in _kinds(sym)
    assert "context_vm_internode_slow" not in _kinds("Two-node all_reduce_perf between A100 VMs hangs at init")
    assert "context_vm_internode_slow" not in _kinds("all_reduce_perf on one VM reaches only 56% of NVLink bandwidth")


def test_dataparallel_is_a_peer_copy_path_and_a_failure_others_cannot_reproduce_follows_the_machine() -> None:
    k = _kinds("DataParallel over several GPUs crashes with a CUDA error on the first step, while others cannot"
               " reproduce it")
    assert {"context_p2p_path", "context_machine_specific"} <= set(k)
    assert "context_machine_specific" in _kinds("the same script works fine on other machines but hangs here")
    assert "context_machine_specific" not in _kinds("the job hangs on every machine we tried")


def test_one_collective_working_and_another_failing_is_read() -> None:
    assert "context_partial_collectives" in _kinds(
        "On 7+ HGX nodes over RoCE v2, ring allreduce works but gather-type traffic (checkpoint save) fails at QP setup")
    assert "context_partial_collectives" in _kinds("alltoall_perf hangs while all_reduce_perf passes on the same nodes")
    assert "context_partial_collectives" not in _kinds("allreduce does not work but broadcast fails too")
    assert "context_partial_collectives" not in _kinds("all_reduce_perf fails on 2 nodes")


def test_one_box_whose_queue_pairs_fail_is_using_the_fabric() -> None:
    from diagnose.symptoms import classify

    sym = "GIN communication on a 16-GPU box with 8x ConnectX-7 RoCE NICs hangs after a TRANSPORT_RETRY_EXC_ERR on a QP"
    assert "context_single_node" not in _kinds(sym)
    assert "connection_error" in classify(sym)
    assert "context_single_node" in _kinds("all_reduce_perf on a 16-GPU box hangs at init")


def test_a_failure_with_a_size_threshold_is_read() -> None:
    assert "context_size_dependent" in _kinds("IPoIB pings larger than ~400 bytes get 'Destination Host Unreachable'")
    assert "context_size_dependent" in _kinds("small messages work but large ones hang")
    assert "context_size_dependent" not in _kinds("message sizes up to 1GB are fine")
    assert "context_size_dependent" not in _kinds("the 8 GB test runs for more than 30 seconds")


def test_a_report_that_gdr_is_loaded_and_acs_off_is_read_and_a_negation_is_not() -> None:
    k = _kinds("all_reduce_perf reaches only ~30 GB/s; GPUDirect RDMA is loaded and ACS is disabled.")
    assert {"context_gdr_present", "context_acs_off"} <= set(k)
    k = _kinds("all_reduce_perf is slow; nv_peer_mem is not loaded and ACS is enabled on the switches")
    assert "context_gdr_present" not in k and "context_acs_off" not in k


def test_slow_internode_busbw_with_gdr_in_place_keeps_the_nics_pcie_reads_in_the_differential(tmp_path) -> None:
    # NVIDIA/nccl-tests#152, verbatim pastes: lsmod shows nv_peer_mem as a user of nvidia, grep ACSCtl shows ACS off
    (tmp_path / "lsmod.out").write_text(
        "$ lsmod | grep nv_peer_mem \nnvidia              39021421  283 nv_peer_mem,nvidia_modeset,nvidia_uvm\n")
    (tmp_path / "acs.out").write_text("# lspci -vvv | grep ACSCtl \nACSCtl: SrcValid- ... \n")
    sym = "Two-node (16x A100) all_reduce_perf reaches only ~30 GB/s busbw against ~100 GB/s theoretical for 4x HDR"
    d = triage([tmp_path], sym)
    ranked = [c.id for c in d.causes]
    assert "host.nic_driver_firmware" in ranked[:3]
    gdr = next(c for c in d.causes if c.id == "host.gdr_unavailable")
    assert "peermem_loaded" in {a.finding for a in gdr.against}
    assert "ACS off" in {r.id: r.why for r in d.ruled_out}["host.pcie_acs_iommu"]
    # without the module and ACS evidence, host staging (no GPUDirect RDMA) is the first suspect, and likelier
    bare = triage([], sym).causes[0]
    assert bare.id == "host.gdr_unavailable" and bare.score > gdr.score


def test_the_same_gpu_indices_slower_than_the_rest_point_at_their_nic_pairing() -> None:
    # NVIDIA/nccl#820's setting, as an on-call engineer types it
    sym = ("On 2 nodes x 8 A100 with 8x 200G IB, eight concurrent per-GPU-index allreduce groups run at different"
           " speeds: the groups of GPU 0 and GPU 1 take ~0.44 s while the others take ~0.28 s.")
    assert "context_gpu_index_slow" in _kinds(sym)
    assert "context_gpu_index_slow" in _kinds("local rank 0,1 only get 10 GB/s while the rest get 20")
    assert "context_gpu_index_slow" not in _kinds("GPU 0 fails while others work")
    assert "context_gpu_index_slow" not in _kinds("2 GPUs are slower than 8 GPUs")
    assert triage([], sym).causes[0].id == "host.topology_misdetect"


def test_a_job_that_fails_at_one_gpu_count_and_works_at_another_is_read() -> None:
    # NVIDIA/nccl#1706's title, verbatim, and the on-call wording of it
    k = _kinds("./build/all_reduce_perf -b 8 -e 128M -f 2 -g 4 stuck, but it's normal when g=2")
    assert k["context_gpu_count_dependent"]["counts"] == "2,4"
    sym = ("Single-node all_reduce_perf with 4 GPUs hangs right after channel/tree setup, while the same test on 2"
           " GPUs of the same host completes normally.")
    assert _kinds(sym)["context_gpu_count_dependent"]["single_node"] is True
    assert "context_gpu_count_dependent" not in _kinds("with 8 GPUs it hangs and with 4 GPUs it also hangs")
    assert "context_gpu_count_dependent" not in _kinds("2 GPUs are slower than 8 GPUs")
    ranked = [c.id for c in triage([], sym).causes]
    assert ranked[0] == "nccl.p2p_or_nvls_config" and "host.pcie_acs_iommu" in ranked[:3]


def test_containers_on_several_hosts_bring_their_bridge_network_into_the_differential() -> None:
    sym = ("Two nodes, 4 GPUs each, each node running the training inside a docker container; the other node fails"
           " at the first barrier with 'NCCL error ... unhandled system error'")
    k = _kinds(sym)
    assert "context_container_multi_node" in k
    assert "context_container_multi_node" not in _kinds("one node, 8 GPUs, inside a docker container: NCCL error")
    ranked = [c.id for c in triage([], sym).causes]
    assert {"nccl.interface_selection", "host.shm_too_small"} <= set(ranked[:3])


def test_alert_and_metric_names_are_symptoms_unless_denied() -> None:
    from diagnose.symptoms import classify

    assert classify("symbol_error rising on leaf07 port 12") == ["link_errors"]
    assert classify("InfinibandLinkDowned firing") == ["link_errors"]
    assert classify("DCGM_FI_DEV_XID_ERRORS > 0 on gpu-a003") == ["gpu_error"]
    assert classify("NCCLTimeout") == ["collective_timeout"]
    assert classify("no symbol_error at all") == []
    d = triage([], "symbol_error rising on gpu-a003 mlx5_2")
    assert d.causes[0].id.startswith("link.") and d.missing_evidence
