"""GPU-side parsers: record schemas, shared helpers, cross-format sniffing and never-raise properties."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.models.records import ParseResult
from diagnose.parsers import (
    dcgmi,
    flight_recorder,
    nccl_topo_xml,
    nvidia_smi,
    nvidia_smi_nvlink,
    nvidia_smi_q,
    nvidia_smi_topo,
    registry,
)
from diagnose.parsers._gpu import (
    DcgmResult,
    FlightRecorderEntry,
    FlightRecorderPg,
    GpuInfo,
    GpuSummary,
    NcclTopoNode,
    NvlinkErrorCounter,
    NvlinkStatus,
    TopoDevice,
    TopoEntry,
    norm_pci,
    shell_line,
)

DATA = Path(__file__).resolve().parents[1] / "data"
MODULES = (nvidia_smi, nvidia_smi_q, nvidia_smi_topo, nvidia_smi_nvlink, dcgmi, nccl_topo_xml, flight_recorder)
MY_FOLDERS = {m.FORMAT for m in MODULES}


def sample_files(folder: str) -> list[Path]:
    return sorted(p for p in (DATA / folder).iterdir() if p.is_file() and p.suffix != ".md")


def head_of(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")[:65536]


def score(mod, path: Path) -> int:
    """What the pipeline would see: text sniff, and for binary parsers also the byte sniff."""
    s = int(mod.sniff(head_of(path))) if hasattr(mod, "sniff") else 0
    if getattr(mod, "BINARY", False):
        s = max(s, int(mod.sniff_bytes(path.read_bytes())))
    return s


# ----------------------------------------------------------------------------------------------- schema


def test_record_schemas() -> None:
    def tail(cls) -> list[str]:
        names = [f.name for f in dataclasses.fields(cls)]
        assert names[:4] == ["source", "line", "text", "host"]
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen and hasattr(cls, "__slots__")
        return names[4:]

    assert tail(GpuInfo) == [
        "pci", "product", "serial", "uuid", "driver_version", "cuda_version", "pcie_gen_max", "pcie_gen_current",
        "pcie_width_max", "pcie_width_current", "replays", "throttle_active", "ecc_uncorrected_volatile",
        "remap_pending", "remap_failure", "remap_uncorrectable", "fabric_state", "fabric_status", "temperature_c",
    ]
    assert tail(GpuSummary)[:11] == [
        "index", "name", "bus_id", "temperature_c", "power_w", "power_cap_w", "memory_used_mib", "memory_total_mib",
        "utilization_pct", "driver_version", "cuda_version",
    ]
    assert tail(TopoEntry) == ["row", "col", "relation"]
    assert tail(TopoDevice) == ["name", "device", "cpu_affinity", "numa_affinity"]
    assert tail(NvlinkStatus) == ["gpu", "gpu_uuid", "link", "speed_gbs", "active"]
    assert tail(NvlinkErrorCounter) == ["gpu", "link", "counter", "value"]
    assert tail(DcgmResult)[:4] == ["test", "result", "gpus", "detail"]
    assert tail(NcclTopoNode)[:3] == ["kind", "attrs", "parent_busid"]
    assert tail(FlightRecorderEntry)[:10] == [
        "rank", "pg_id", "pg_desc", "collective_seq_id", "p2p_seq_id", "op", "state", "input_sizes",
        "time_created_ns", "timeout_ms",
    ]
    assert tail(FlightRecorderPg)[:2] == ["rank", "pg_id"]


def test_norm_pci_joins_nvidia_smi_and_dmesg_forms() -> None:
    assert norm_pci("00000000:19:00.0") == "0000:19:00"
    assert norm_pci("00000000:3B:00.0") == "0000:3b:00"
    assert norm_pci("PCI:0000:3b:00") == "0000:3b:00"  # dmesg NVRM Xid form
    assert norm_pci("00000004:04:00.0") == "0004:04:00"  # POWER9 domain
    assert norm_pci("0000:06:00.0") == "0000:06:00"
    assert norm_pci("3b:00.0") == "0000:3b:00"
    assert norm_pci("not a bus id") is None and norm_pci(None) is None


def test_shell_line_recognises_prompts_and_echoes() -> None:
    assert shell_line("((sglang-0.5.9) ) [dcbsr_dev@tpgds-aihub0007 ~]$ nvidia-smi topo -m") == (
        "tpgds-aihub0007",
        "nvidia-smi topo -m",
    )
    assert shell_line("[root@bh174 chenyang]# nvidia-smi ") == ("bh174", "nvidia-smi")
    assert shell_line("$ nvidia-smi -q") == (None, "nvidia-smi -q")
    assert shell_line("GPU 0: NVIDIA H100") is None


# ----------------------------------------------------------------------------------------------- sniffing


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_sniff_claims_own_samples(mod) -> None:
    files = sample_files(mod.FORMAT)
    assert files
    for path in files:
        assert score(mod, path) >= 40, path.name


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.FORMAT)
def test_sniff_rejects_every_other_sample_folder(mod) -> None:
    others = [d for d in sorted(DATA.iterdir()) if d.is_dir() and d.name != mod.FORMAT]
    assert others
    for folder in others:
        for path in sample_files(folder.name):
            assert score(mod, path) < 40, f"{mod.FORMAT} claims {folder.name}/{path.name}"


def test_other_parsers_do_not_claim_gpu_samples() -> None:
    mine = {m.FORMAT for m in MODULES}
    for mod in registry():
        if mod.FORMAT in mine:
            continue
        for folder in sorted(MY_FOLDERS):
            for path in sample_files(folder):
                try:
                    s = score(mod, path)
                except Exception:  # noqa: BLE001 - another parser's sniff bug is theirs; the pipeline counts it as 0
                    s = 0
                assert s < 40, f"{mod.FORMAT} claims {folder}/{path.name}"


def test_formats_are_registered() -> None:
    fmts = {m.FORMAT for m in registry()}
    assert MY_FOLDERS <= fmts


# ----------------------------------------------------------------------------------------------- properties

_TEXT_MODULES = tuple(m for m in MODULES)
_SAMPLE_LINES = sorted(
    {
        line
        for fmt in MY_FOLDERS - {"pytorch_flight_recorder"}
        for p in sample_files(fmt)
        for line in p.read_text(encoding="utf-8").split("\n")
    }
)
_mixed_text = st.lists(st.one_of(st.sampled_from(_SAMPLE_LINES), st.text(max_size=40)), max_size=40).map("\n".join)


@pytest.mark.parametrize("mod", _TEXT_MODULES, ids=lambda m: m.FORMAT)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(), _mixed_text))
def test_parse_never_raises_and_sniff_is_bounded(mod, text: str) -> None:
    s = mod.sniff(text)
    assert isinstance(s, int) and 0 <= s <= 100
    res = mod.parse(text, "f.txt", host="h")
    assert isinstance(res, ParseResult) and res.format == mod.FORMAT
    assert not any(p.startswith("parser error") for p in res.problems), res.problems
    nlines = text.count("\n") + 1
    assert all(r.source == "f.txt" and 1 <= r.line <= nlines for r in res.records)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=300), st.binary(max_size=200).map(lambda b: b"\x80\x02" + b)))
def test_flight_recorder_bytes_never_raise(data: bytes) -> None:
    s = flight_recorder.sniff_bytes(data)
    assert isinstance(s, int) and 0 <= s <= 100
    res = flight_recorder.parse_bytes(data, "nccl_trace_rank_3", host="h")
    assert isinstance(res, ParseResult) and res.format == flight_recorder.FORMAT
    assert not any(p.startswith("parser error") for p in res.problems), res.problems


def test_job_log_with_nvidia_smi_table_keeps_the_nccl_lines() -> None:
    """nvidia-smi / topo printed at the top of a job's stdout must not hide the NCCL log that follows."""
    from diagnose.bundle.sniff import sniff_file

    smi = (DATA / "nvidia_smi" / "gpud_nvidia-smi.550.90.07.txt").read_text(encoding="utf-8")
    topo = (DATA / "nvidia_smi_topo" / "slurmv4_3-12.sh_lines972-1019_topo-m_h100_12nic.txt").read_text(
        encoding="utf-8"
    )
    nccl = (DATA / "nccl_log" / "slurmv4_nccl2.27.5_roce_init.log").read_text(encoding="utf-8")
    text = smi + topo + nccl
    formats = sniff_file("job-1234.out", text).formats
    assert {"nvidia_smi", "nvidia_smi_topo", "nccl_log"} <= set(formats)
    rows = [r for r in nvidia_smi.parse(text, "job-1234.out").records if isinstance(r, GpuSummary)]
    assert len(rows) == 8 and rows[0].line == 9
    devs = [r for r in nvidia_smi_topo.parse(text, "job-1234.out").records if isinstance(r, TopoDevice)]
    assert len(devs) == 20 and devs[0].line == smi.count("\n") + 3
