"""Pasted terminal sessions: the prompt names the tool, each command's output goes to its parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.bundle.session import prompt_of, segments
from diagnose.pipeline import gather


@pytest.mark.parametrize(("line", "want"), [
    ("$ lsmod | grep nv_peer_mem ", ("lsmod", "lsmod")),
    ("# lspci -vvv | grep ACSCtl", ("lspci", "lspci")),
    ("/export/home/me/mscclpp# ibstat", ("ibstat", "ibstat")),
    ("user@gpu01:~$ nvidia-smi topo -m", ("nvidia-smi", "nvidia_smi_topo")),
    ("user@gpu01:~$ sudo nvidia-smi nvlink -s", ("nvidia-smi", "nvidia_smi_nvlink")),
    ("[root@node1 ~]# ibv_devinfo -v", ("ibv_devinfo", "ibv_devinfo")),
    ("(venv) me@box:~/x$ ./example", ("example", None)),
    ("# Out of bounds values : 0 OK", None),       # nccl-tests' own comment lines
    ("#  Avg bus bandwidth    : 33.3227", None),
    ("> quoted from the thread", None),
    ("NCCL INFO Using network IB", None),
])
def test_prompt_lines(line: str, want: tuple[str, str | None] | None) -> None:
    assert prompt_of(line) == want


def test_segments_keep_the_files_line_numbers() -> None:
    text = "notes\n$ ibstat\nCA 'mlx5_0'\n$ lsmod\nnvidia 1 0\n"
    segs = segments(text)
    assert [(s.first_line, s.fmt) for s in segs] == [(1, None), (2, "ibstat"), (4, "lsmod")]
    assert segs[2].text == "$ lsmod\nnvidia 1 0\n"


def test_a_session_of_two_commands_is_read_by_both_tools(tmp_path: Path) -> None:
    (tmp_path / "commands.txt").write_text(
        "me@gpu07:~$ ibstat\n"
        "CA 'mlx5_1'\n\tCA type: MT4123\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Down\n"
        "\t\tPhysical state: Disabled\n\t\tRate: 40\n\t\tLink layer: InfiniBand\n"
        "me@gpu07:~$ lsmod | grep nvidia\n"
        "nvidia              39021421  283 nv_peer_mem,nvidia_modeset,nvidia_uvm\n")
    ev = gather([tmp_path], None, keep_records=True)
    (entry,) = ev.files
    assert set(entry.format.split("+")) >= {"ibstat", "lsmod"}
    ports = [r for r in ev.records if type(r).__name__ == "IbPort"]
    mods = [r for r in ev.records if type(r).__name__ == "KernelModule"]
    assert ports and ports[0].state == "Down"
    assert [(m.name, m.line) for m in mods] == [("nvidia", 11)]
    kinds = {f.kind for f in ev.findings}
    assert "port_not_active" in kinds
    assert "peermem_not_loaded" not in kinds  # a grep of lsmod that shows nvidia used by nv_peer_mem


def test_a_quoted_fenced_paste_reads_as_the_log_with_its_own_line_numbers(tmp_path: Path) -> None:
    from diagnose.bundle.normalize import clean_pasted

    text = "> ```\n> > host1:1:1 [0] NCCL INFO NET/IB : No device found.\n> ```\n> it fails &gt; twice\n"
    assert clean_pasted(text) == "\nhost1:1:1 [0] NCCL INFO NET/IB : No device found.\n\nit fails > twice\n"
    plain = "host1:1:1 [0] NCCL INFO Using network IB\n10.0.0.1<0> &gt;\n"
    assert clean_pasted(plain) is plain  # a log is left alone
    (tmp_path / "reply.txt").write_text(text)
    ev = gather([tmp_path], None)
    hit = [f for f in ev.findings if f.kind == "nccl_ib_no_device"]
    assert hit and hit[0].evidence[0].line == 2 and hit[0].location.host == "host1"


def test_every_command_names_a_format_a_parser_reads() -> None:
    from diagnose.bundle.session import COMMANDS
    from diagnose.parsers import formats

    assert {cmd: fmt for cmd, fmt in COMMANDS.items() if fmt not in set(formats())} == {}
