"""nvidia-smi (default table) and nvidia-smi -q parsers against the real samples in tests/data (see the READMEs)."""

from __future__ import annotations

from pathlib import Path

from diagnose.models.records import ParseResult
from diagnose.parsers import nvidia_smi, nvidia_smi_q
from diagnose.parsers._gpu import GpuInfo, GpuSummary
from diagnose.parsers._ib import ToolError

DATA = Path(__file__).resolve().parents[1] / "data"


def read(fmt: str, name: str) -> str:
    return (DATA / fmt / name).read_text(encoding="utf-8")


def summaries(res: ParseResult) -> list[GpuSummary]:
    return [r for r in res.records if isinstance(r, GpuSummary)]


def infos(res: ParseResult) -> list[GpuInfo]:
    return [r for r in res.records if isinstance(r, GpuInfo)]


# ----------------------------------------------------------------------------------------------- nvidia-smi


def test_nvidia_smi_550_h100x8() -> None:
    res = nvidia_smi.parse(read("nvidia_smi", "gpud_nvidia-smi.550.90.07.txt"), "smi.txt", host="node-a")
    assert res.format == "nvidia_smi" and res.problems == []
    rows = summaries(res)
    assert [r.index for r in rows] == list(range(8))
    assert [r.bus_id for r in rows] == [
        "0000:19:00", "0000:3b:00", "0000:4c:00", "0000:5d:00", "0000:9b:00", "0000:bb:00", "0000:cb:00", "0000:db:00",
    ]
    assert rows[0] == GpuSummary(
        source="smi.txt",
        line=9,
        text="|   0  NVIDIA H100 80GB HBM3          On  |   00000000:19:00.0 Off |                    0 |",
        host="node-a",
        index=0,
        name="NVIDIA H100 80GB HBM3",
        bus_id="0000:19:00",
        temperature_c=27.0,
        power_w=72.0,
        power_cap_w=700.0,
        memory_used_mib=1,
        memory_total_mib=81559,
        utilization_pct=0,
        driver_version="550.90.07",
        cuda_version="12.4",
        ecc_uncorrected=0,
        err_fields=(),
    )
    assert (rows[5].temperature_c, rows[5].power_w, rows[5].line) == (22.0, 74.0, 29)


def test_nvidia_smi_525_err_in_fan_column() -> None:
    res = nvidia_smi.parse(read("nvidia_smi", "gpud_nvidia-smi.525.125.06.txt"), "s")
    assert res.problems == []
    (r,) = summaries(res)
    assert (r.name, r.bus_id, r.temperature_c, r.power_w, r.power_cap_w) == (
        "NVIDIA GeForce ...",
        "0000:01:00",
        38.0,
        49.0,
        450.0,
    )
    assert (r.memory_used_mib, r.memory_total_mib, r.utilization_pct) == (2021, 23028, 0)
    assert (r.driver_version, r.cuda_version, r.err_fields) == ("525.125.06", "12.0", ("fan",))


def test_nvidia_smi_418_two_line_rows_and_processes_table() -> None:
    res = nvidia_smi.parse(read("nvidia_smi", "princeton_gpu_programming_intro_418.67_p100.txt"), "s")
    assert res.problems == []
    rows = summaries(res)
    assert [(r.index, r.bus_id, r.utilization_pct, r.memory_used_mib) for r in rows] == [
        (0, "0000:03:00", 74, 15757),
        (1, "0000:04:00", 9, 15753),
        (2, "0000:82:00", 0, 15719),
        (3, "0000:83:00", 74, 15757),
    ]
    assert {r.name for r in rows} == {"Tesla P100-PCIE..."}
    assert {(r.driver_version, r.cuda_version, r.power_cap_w) for r in rows} == {("418.67", "10.1", 250.0)}


def test_nvidia_smi_error_lines_become_tool_errors() -> None:
    res = nvidia_smi.parse(read("nvidia_smi", "xxd3vin_workspace_issue19_device_handle_unknown_error.txt"), "s")
    (err,) = res.records
    assert isinstance(err, ToolError)
    assert (err.tool, err.line, err.host) == ("nvidia-smi", 2, "bh174")
    assert err.message == "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error"
    res = nvidia_smi.parse(read("nvidia_smi", "ci-for-research_self-hosted-runners_issue40_driver_not_loaded.txt"), "s")
    (err,) = res.records
    assert isinstance(err, ToolError) and err.message.startswith("NVIDIA-SMI has failed because it couldn't")


def test_nvidia_smi_truncated() -> None:
    res = nvidia_smi.parse(read("nvidia_smi", "var_truncated_in_gpu3.txt"), "s")
    rows = summaries(res)
    assert [r.index for r in rows] == [0, 1, 2, 3]
    assert (rows[3].bus_id, rows[3].temperature_c, rows[3].memory_total_mib) == ("0000:5d:00", None, None)
    assert res.problems == ["truncated: GPU 3 row ends early"]


def test_nvidia_smi_crlf_and_ansi() -> None:
    text = read("nvidia_smi", "gpud_nvidia-smi.550.90.07.txt")
    key = [(r.index, r.line, r.bus_id, r.power_w) for r in summaries(nvidia_smi.parse(text, "s"))]
    crlf = nvidia_smi.parse(text.replace("\n", "\r\n"), "s")
    ansi = nvidia_smi.parse(text.replace("NVIDIA H100", "\x1b[1mNVIDIA H100\x1b[0m"), "s")
    assert key == [(r.index, r.line, r.bus_id, r.power_w) for r in summaries(crlf)]
    assert key == [(r.index, r.line, r.bus_id, r.power_w) for r in summaries(ansi)]
    assert crlf.problems == [] and ansi.problems == []


# ----------------------------------------------------------------------------------------------- nvidia-smi -q


def test_nvidia_smi_q_h100_power_brake_and_replays() -> None:
    res = nvidia_smi_q.parse(read("nvidia_smi_q", "gpud_nvidia-smi-q.535.161.08.h100x8.first_gpu_excerpt.txt"), "q")
    assert res.format == "nvidia_smi_q" and res.problems == []
    (g,) = infos(res)
    assert g == GpuInfo(
        source="q",
        line=9,
        text="GPU 00000000:19:00.0",
        host=None,
        pci="0000:19:00",
        product="NVIDIA H100 80GB HBM3",
        serial="1650124031592",
        uuid="GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa",
        driver_version="535.161.08",
        cuda_version="12.2",
        pcie_gen_max=5,
        pcie_gen_current=5,
        pcie_width_max=16,
        pcie_width_current=16,
        replays=67,
        throttle_active=("HW Slowdown", "HW Power Brake Slowdown"),
        ecc_uncorrected_volatile=0,
        remap_pending=False,
        remap_failure=False,
        remap_uncorrectable=0,
        fabric_state="Completed",
        fabric_status="Success",
        temperature_c=29.0,
    )


def test_nvidia_smi_q_a10_remap_pending() -> None:
    res = nvidia_smi_q.parse(read("nvidia_smi_q", "gpud_nvidia-smi-q.535.129.03.a10.remap_pending.txt"), "q")
    assert res.problems == []
    (g,) = infos(res)
    assert (g.pci, g.product, g.remap_uncorrectable, g.remap_pending, g.remap_failure) == (
        "0000:07:00",
        "NVIDIA A10",
        4,
        True,
        False,
    )
    assert (g.pcie_gen_max, g.pcie_gen_current, g.throttle_active, g.temperature_c) == (4, 4, (), 33.0)
    assert (g.fabric_state, g.fabric_status, g.ecc_uncorrected_volatile) == (None, None, 0)


def test_nvidia_smi_q_three_h100_blocks_with_thermal_and_power_cap() -> None:
    res = nvidia_smi_q.parse(read("nvidia_smi_q", "gpud_nvidia-smi-q.535.183.01.h100x8.lines1-628.txt"), "q")
    assert res.problems == []
    gs = infos(res)
    assert [(g.pci, g.line, g.replays) for g in gs] == [
        ("0000:53:00", 8, 120),
        ("0000:64:00", 213, 111),
        ("0000:75:00", 418, 58),
    ]
    # only the HW Power Brake sub-reason is Active under a Not Active HW Slowdown
    assert gs[2].throttle_active == ("SW Power Cap", "HW Power Brake Slowdown", "SW Thermal Slowdown")
    assert gs[0].throttle_active == ()  # `Idle : Active` is not a throttle


def test_nvidia_smi_q_titan_v_old_ecc_and_na_remap() -> None:
    res = nvidia_smi_q.parse(read("nvidia_smi_q", "gpud_nvidia-smi-q.560.35.03.titanv.txt"), "q")
    assert res.problems == []
    (g,) = infos(res)
    assert (g.product, g.pcie_gen_max, g.pcie_gen_current, g.ecc_uncorrected_volatile) == (
        "NVIDIA TITAN V",
        3,
        1,
        None,
    )
    assert (g.remap_pending, g.remap_uncorrectable, g.fabric_state, g.temperature_c) == (None, None, None, 44.0)


def test_nvidia_smi_q_418_power9_throttle_reasons_and_degraded_width() -> None:
    res = nvidia_smi_q.parse(read("nvidia_smi_q", "princeton_gpu_programming_intro_418.67_v100_power9.txt"), "q")
    assert res.problems == []
    (g,) = infos(res)
    assert (g.pci, g.line, g.product, g.driver_version, g.cuda_version) == (
        "0004:04:00",
        10,
        "Tesla V100-SXM2-32GB",
        "418.67",
        "10.1",
    )
    assert (g.pcie_width_max, g.pcie_width_current) == (16, 2)
    assert (g.ecc_uncorrected_volatile, g.throttle_active, g.remap_pending) == (0, (), None)


def test_nvidia_smi_q_real_truncated_capture() -> None:
    res = nvidia_smi_q.parse(read("nvidia_smi_q", "gpud_nvidia-smi-q.535.183.01.invalid_truncated.txt"), "q")
    (g,) = infos(res)
    assert (g.pci, g.product, g.replays, g.temperature_c) == ("0000:53:00", "NVIDIA H100 80GB HBM3", 120, None)
    assert g.throttle_active == ()  # the capture's `Invalid HW Slowdown` keys are not reasons
    assert res.problems == ["truncated: GPU 0000:53:00 block ends early (no Processes section)"]


def test_nvidia_smi_q_crlf_and_error_line() -> None:
    text = read("nvidia_smi_q", "gpud_nvidia-smi-q.535.129.03.a10.remap_pending.txt")
    crlf = nvidia_smi_q.parse(text.replace("\n", "\r\n"), "q")
    assert crlf.problems == [] and infos(crlf)[0].remap_pending is True
    err = nvidia_smi_q.parse("Unable to determine the device handle for GPU0000:07:00.0: Unknown Error\n", "q")
    assert [type(r).__name__ for r in err.records] == ["ToolError"]


def test_a_gpu_row_cut_to_a_bare_bar_is_a_truncation_not_a_parser_error() -> None:
    from diagnose.parsers import nvidia_smi as smi

    res = smi.parse("|   0  NVIDIA GeForce ...  Off  | 00000000:01:00.0 Off |                    0 |\n|", "f.txt", host="h")
    assert res.problems == ["truncated: GPU 0 row ends early"]
    assert len(res.records) == 1
