"""mlxlink parser against tests/data/mlxlink (see its README)."""

from __future__ import annotations

from pathlib import Path

from diagnose.models.records import ParseResult
from diagnose.parsers import mlxlink
from diagnose.parsers._host import MlxlinkInfo
from diagnose.parsers._ib import ToolError

DATA = Path(__file__).resolve().parents[1] / "data" / "mlxlink"
BF3 = "sigcomm26-tutorial-bluefield_README_md@5803c33_lines99-287_bf3_m_c.txt"
FORUM = "nvidia_forums_206063_cx4_100g_c_and_e.txt"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def runs(res: ParseResult) -> list[MlxlinkInfo]:
    return [r for r in res.records if isinstance(r, MlxlinkInfo)]


def test_bluefield3_two_runs_module_and_counters() -> None:
    res = mlxlink.parse(read(BF3), "mlxlink.txt", host="ignored")
    assert res.format == "mlxlink" and res.problems == []
    first, second = runs(res)
    assert first == MlxlinkInfo(
        source="mlxlink.txt",
        line=1,
        text="ubuntu@bluefield-1:~/sigcomm26-tutorial-bluefield$ sudo mlxlink -d /dev/mst/mt41692_pciconf0 -p 1 -m -c",
        host="bluefield-1",
        device="/dev/mst/mt41692_pciconf0",
        state="Active",
        physical_state="LinkUp",
        speed="100G",
        width="4x",
        fec="Standard RS-FEC - RS(528,514)",
        effective_ber=15e-255,
        raw_ber=15e-255,
        effective_errors=0,
        symbol_errors=0,
        link_down_counter=0,
        link_error_recovery_counter=0,
        status_opcode=0,
        recommendation="No issue was observed",
        temperature_c=None,  # `Temperature [C] : N/A` on a passive DAC
        rx_power=None,
        tx_power=None,
        eye_grades=None,
    )
    assert (second.line, second.device, second.speed, second.effective_ber) == (
        96,
        "/dev/mst/mt41692_pciconf0.1",
        "100G",
        15e-255,
    )


def test_forum_capture_collapsed_spacing_c_and_e() -> None:
    res = mlxlink.parse(read(FORUM), "f")
    assert res.problems == []
    c, e = runs(res)
    assert (c.line, c.host, c.device, c.speed, c.fec) == (
        1,
        "localhost",
        "/dev/mst/mt4115_pciconf0",
        "100GbE",
        "Standard RS-FEC - RS(528,514)",
    )
    assert (c.raw_ber, c.effective_ber, c.effective_errors, c.link_down_counter) == (3e-12, 15e-255, 0, None)
    assert c.recommendation == "No issue was observed."
    assert (e.line, e.eye_grades, e.raw_ber, e.status_opcode) == (56, "3065, 3367, 4371, 2932", None, 0)


def test_pci_device_ib_ansi_crlf_module_info() -> None:
    raw = (DATA / "var_pci_device_ib_ndr_ansi_crlf_bad_signal.txt").read_bytes().decode("utf-8")
    assert "\r\n" in raw and "\x1b[31m" in raw
    res = mlxlink.parse(raw, "m")
    assert res.problems == []
    (r,) = runs(res)
    assert (r.device, r.host, r.speed, r.width) == ("0000:1a:00.0", "gpu-node-07", "IB-NDR", "4x")
    assert r.recommendation == "Bad signal integrity"
    assert (r.effective_errors, r.symbol_errors, r.link_down_counter, r.link_error_recovery_counter) == (42, 17, 3, 7)
    assert (r.effective_ber, r.raw_ber) == (1e-12, 2e-9)
    assert r.temperature_c == 54.0
    assert r.rx_power == "1.886,1.989,2.281,1.976 [-10.41..6]"
    assert r.tx_power == "1.562,1.427,1.559,1.761 [-8.508..5]"
    assert mlxlink.sniff(raw) >= 40


def test_truncated_run() -> None:
    res = mlxlink.parse(read("var_truncated_in_counters.txt"), "m")
    (r,) = runs(res)
    assert (r.state, r.effective_errors, r.effective_ber) == ("Active", None, None)
    assert res.problems == ["truncated: run at line 1 ends early (line 89: 'Effective Physical Errors          :')"]
    title_only = mlxlink.parse("Operational Info\n----------------\nState : Active\n\nModule Info\n-----------\n", "m")
    assert len(runs(title_only)) == 1 and title_only.problems[0].startswith("truncated:")


def test_json_output() -> None:
    res = mlxlink.parse(read("var_json_output.json"), "j")
    assert res.problems == []
    (r,) = runs(res)
    assert (r.state, r.physical_state, r.speed, r.width, r.fec) == ("Active", "LinkUp", "IB-EDR", "4x", "No FEC")
    assert (r.effective_ber, r.raw_ber, r.link_down_counter, r.status_opcode) == (15e-255, 1e-13, 1, 0)
    assert mlxlink.sniff(read("var_json_output.json")) >= 40
    broken = mlxlink.parse(read("var_json_output.json")[:200], "j")
    assert runs(broken) == [] and broken.problems[0].startswith("truncated or invalid mlxlink JSON")


def test_error_lines() -> None:
    res = mlxlink.parse("# mlxlink -d mlx5_9\n-E- Failed to open device: mlx5_9, No such file or directory\n", "m")
    assert [(e.tool, e.line) for e in res.records if isinstance(e, ToolError)] == [("mlxlink", 2)]
    assert res.problems == ["line 1: mlxlink command with no output"]
