"""opensm_conf parser against tests/data/opensm_conf (see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.parsers import opensm_conf
from diagnose.parsers._fabric import SmConfigOption

DATA = Path(__file__).resolve().parents[1] / "data"
HERE = DATA / "opensm_conf"


def read(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


def opts(res: object) -> dict[str, str]:
    return {r.key: r.value for r in res.records if isinstance(r, SmConfigOption)}  # type: ignore[attr-defined]


def test_create_config_file_reads_routing_qos_and_partition_lines() -> None:
    text = read("weiny2_SCinet10-IB-configs_opensm.conf")
    assert opensm_conf.sniff(text) >= 90
    res = opensm_conf.parse(text, "opensm.conf", host="sm01")
    assert res.problems == []
    o = opts(res)
    assert o["routing_engine"] == "minhop"
    assert o["partition_config_file"] == "/etc/opensm/partitions.conf"
    assert o["qos"] == "FALSE" and o["qos_policy_file"] == "/etc/opensm/qos-policy.conf"
    assert o["qos_sl2vl"] == "0,1,15,15,15,15,15,15,15,15,15,15,15,15,15,15"
    assert o["hop_weights_file"] == "(null)"
    eng = next(r for r in res.records if r.key == "routing_engine")
    assert eng.host == "sm01" and eng.text == "routing_engine minhop"
    assert text.split("\n")[eng.line - 1] == "routing_engine minhop"
    assert not any(r.key.startswith("#") for r in res.records)


def test_ufm_fragment_ar_engine_and_trailing_spaces() -> None:
    text = read("kobibar_OpenAI.recipe.md@0256f3d_ufm_opensm_conf.conf")
    assert opensm_conf.sniff(text) >= 80
    o = opts(opensm_conf.parse(text, "opensm.conf"))
    assert o["routing_engine"] == "ar_updn"
    assert o["use_optimized_slvl"] == "TRUE"  # trailing space dropped
    assert o["long_transaction_timeout"] == "500"
    assert len(o) == 15


def test_prompt_names_host_and_inline_comment_dropped() -> None:
    res = opensm_conf.parse(read("var_prompt_grep_ar_lines.txt"), "x.txt", host="hint")
    eng = [r for r in res.records if r.key == "routing_engine"]
    assert [(r.host, r.value) for r in eng] == [("ufm-sm01", "updn")]
    res2 = opensm_conf.parse("routing_engine ar_ftree,ar_updn   # AR engines\nar_mode 0\n", "c")
    assert opts(res2) == {"routing_engine": "ar_ftree,ar_updn", "ar_mode": "0"}


def test_cut_and_damaged_lines_are_problems_not_records() -> None:
    text = read("weiny2_SCinet10-IB-configs_opensm.conf")
    cut = text[: text.index("routing_engine minhop") + len("routing_eng")]
    res = opensm_conf.parse(cut, "c")
    assert "routing_engine" not in opts(res)
    assert any("not a 'key value'" in p for p in res.problems)


@pytest.mark.parametrize("fmt", ["env", "nccl_log", "sminfo", "opensm_log", "ibstat", "nccl_tests", "smpquery",
                                 "perfquery", "ibdiagnet_log", "slurm", "ulimit", "mlxlink"])
def test_sniff_zero_on_other_formats(fmt: str) -> None:
    d = DATA / fmt
    if not d.is_dir():
        pytest.skip(f"no samples for {fmt}")
    for f in sorted(d.iterdir()):
        if f.name == "README.md" or not f.is_file():
            continue
        head = f.read_text(encoding="utf-8", errors="replace")[:65536]
        assert opensm_conf.sniff(head) == 0, f.name


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=400))
def test_never_raises_on_garbage(text: str) -> None:
    res = opensm_conf.parse(text, "g")
    assert res.format == "opensm_conf"
    for r in res.records:
        assert isinstance(r, SmConfigOption) and r.key == r.key.lower() and r.value.strip() == r.value and r.value


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True),
                          st.from_regex(r"[A-Za-z0-9_/.,:()-]{1,30}", fullmatch=True)), max_size=12))
def test_round_trip_key_value_lines(pairs: list[tuple[str, str]]) -> None:
    text = "\n".join(f"# comment {i}\n{k} {v}\n" for i, (k, v) in enumerate(pairs))
    res = opensm_conf.parse(text, "g")
    assert [(r.key, r.value) for r in res.records] == pairs
    assert res.problems == []
