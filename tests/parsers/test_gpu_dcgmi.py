"""dcgmi diag / dcgmi health parser against the samples in tests/data/dcgmi (see its README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.parsers import dcgmi
from diagnose.parsers._gpu import DcgmResult

DATA = Path(__file__).resolve().parents[1] / "data" / "dcgmi"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def results(text: str) -> list[DcgmResult]:
    return [r for r in dcgmi.parse(text, "d").records if isinstance(r, DcgmResult)]


def test_diag_r3_dcgm_3_3_9() -> None:
    res = dcgmi.parse(read("gnosia93_slurm-on-aws_lesson_5-system-diag_md_lines85-140_dcgmi_diag_r3.txt"), "d")
    assert res.format == "dcgmi" and res.problems == []
    rs = [r for r in res.records if isinstance(r, DcgmResult)]
    assert len(rs) == 2 * 15  # the table is printed twice in the capture; metadata rows are not results
    first = rs[:15]
    assert [(r.test, r.result, r.gpus) for r in first] == [
        ("Denylist", "Pass", None),
        ("NVML Library", "Pass", None),
        ("CUDA Main Library", "Pass", None),
        ("Permissions and OS Blocks", "Pass", None),
        ("Persistence Mode", "Pass", None),
        ("Environment Variables", "Pass", None),
        ("Page Retirement/Row Remap", "Pass", None),
        ("Graphics Processes", "Pass", None),
        ("Inforom", "Pass", None),
        ("PCIe", "Skip", "All"),
        ("GPU Memory", "Skip", "All"),
        ("Targeted Stress", "Skip", "All"),
        ("Targeted Power", "Skip", "All"),
        ("Memory Bandwidth", "Skip", "All"),
        ("EUD Test", "Skip", "All"),
    ]
    assert (first[0].line, first[9].line, first[0].kind) == (11, 21, "diag")
    assert all(r.detail is None for r in rs)


def test_diag_gpu0_fail_with_wrapped_warning() -> None:
    res = dcgmi.parse(read("stas00_ml-engineering_debug_md_lines225-232_dcgmi_diag_r2_gpu0_fail.txt"), "d")
    rs = [r for r in res.records if isinstance(r, DcgmResult)]
    assert [(r.test, r.result, r.gpus, r.line) for r in rs] == [
        ("GPU Memory", "Pass", "GPU1,GPU2,GPU3,GPU4,GPU5,GPU6,GPU7", 1),
        ("GPU Memory", "Fail", "GPU0", 2),
    ]
    assert rs[0].detail is None
    assert rs[1].detail == (
        "GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test for GPU 0 Verify "
        "that the cooling on this machine is functional, including external, thermal material interface, fans, "
        "and any other components."
    )
    assert res.problems == ["truncated: table ends at line 8 without its closing border"]


def test_diag_deployment_error_row() -> None:
    (r,) = results(read("stas00_ml-engineering_debug_md_lines212-217_dcgmi_diag_row_remap_error.txt"))
    assert (r.test, r.result, r.gpus, r.line) == ("Deployment", "Error", "GPU3", 5)
    assert r.detail == "GPU 3 has uncorrectable memory errors and row remappings are pending"


def test_diag_dcgm4_entity_rows() -> None:
    # DCGM 4.x layout, rows built with the stencil of NVIDIA/DCGM dcgmi/Diag.cpp (DIAG_DATA, 45-char wrap)
    text = "\n".join(
        [
            "+---------------------------+------------------------------------------------+",
            "| Diagnostic                | Result                                         |",
            "+===========================+================================================+",
            "+-----  Hardware  ----------+------------------------------------------------+",
            "| memory                    | Fail                                           |",
            "|                           | GPU0: Pass                                     |",
            "|                           | GPU1: Fail                                     |",
            "| Warning: GPU1             | GPU 1 had uncorrectable memory errors and row  |",
            "|                           |  remapping failed.                             |",
            "+---------------------------+------------------------------------------------+",
        ]
    )
    rs = results(text)
    assert [(r.test, r.result, r.gpus) for r in rs] == [
        ("memory", "Fail", None),
        ("memory", "Pass", "GPU0"),
        ("memory", "Fail", "GPU1"),
    ]
    assert rs[2].detail == "GPU 1 had uncorrectable memory errors and row remapping failed."


def test_health_healthy() -> None:
    res = dcgmi.parse(read("nvidia_dcgm_issue313_dcgmi_health_healthy.txt"), "h")
    assert res.problems == []
    (r,) = res.records
    assert isinstance(r, DcgmResult)
    assert (r.test, r.result, r.gpus, r.detail, r.kind, r.line) == ("Overall Health", "Healthy", None, None,
                                                                    "health", 8)


def test_health_incidents() -> None:
    res = dcgmi.parse(read("var_health_failure_nvlink_pcie_constructed.txt"), "h")
    assert res.problems == []
    rs = [r for r in res.records if isinstance(r, DcgmResult)]
    assert [(r.test, r.result, r.gpus, r.line) for r in rs] == [
        ("Overall Health", "Failure", None, 5),
        ("PCIe system", "Warning", "GPU0", 9),
        ("NVLINK system", "Failure", "GPU1", 14),
        ("Memory system", "Warning", "GPU1", 17),
    ]
    assert rs[1].detail == "Detected more than 8 PCIe replays per minute for GPU 0 : 13"
    assert rs[2].detail == "GPU 1's NvLink link 4 is currently down, GPU 1's NvLink link 5 is currently down"
    assert {r.kind for r in rs} == {"health"}


def test_health_dcgm1_layout() -> None:
    text = "\n".join(
        [
            "+----------------------------------------------------------------------------+",
            "| Group 1          | Overall Health: Warning                                 |",
            "+==================+=========================================================+",
            "| GPU ID: 0        | Warning                                                 |",
            "|                  | PCIe system: Warning - Detected more than 8 PCIe        |",
            "|                  | replays per minute for GPU 0: 13                        |",
            "+------------------+---------------------------------------------------------+",
        ]
    )
    rs = results(text)
    assert [(r.test, r.result, r.gpus) for r in rs] == [("Overall Health", "Warning", None),
                                                         ("PCIe system", "Warning", "GPU0")]
    assert rs[1].detail == "Detected more than 8 PCIe replays per minute for GPU 0: 13"


def test_crlf_and_tool_error() -> None:
    text = read("stas00_ml-engineering_debug_md_lines225-232_dcgmi_diag_r2_gpu0_fail.txt")
    assert [(r.result, r.detail) for r in results(text.replace("\n", "\r\n"))] == [
        (r.result, r.detail) for r in results(text)
    ]
    res = dcgmi.parse("Error: Health watches not enabled. Please enable watches. \n", "h")
    assert [(type(r).__name__, r.tool) for r in res.records] == [("ToolError", "dcgmi")]


def test_other_tables_in_a_job_log_are_not_results() -> None:
    smi = (DATA.parent / "nvidia_smi" / "gpud_nvidia-smi.550.90.07.txt").read_text(encoding="utf-8")
    assert dcgmi.parse(smi, "job.out").records == []
    diag = read("gnosia93_slurm-on-aws_lesson_5-system-diag_md_lines85-140_dcgmi_diag_r3.txt")
    mixed = smi + "Error: something unrelated failed\n" + diag + smi
    res = dcgmi.parse(mixed, "job.out")
    assert len(res.records) == 30 and res.problems == []
    assert {r.test for r in res.records if isinstance(r, DcgmResult)} >= {"Denylist", "EUD Test"}
