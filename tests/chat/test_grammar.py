"""The chat grammar: strict commands, free text, mentions, unknown cause ids."""

from __future__ import annotations

import pytest

from diagnose.chat.grammar import BadCommand, Command, clean_text, closest_causes, parse, resolve_cause

IDS = ["link.bad_cable", "link.flapping", "link.port_down", "link.degraded", "fabric.congestion",
       "host.gdr_unavailable", "nccl.socket_fallback", "gpu.xid_error", "roce.gid_index"]


@pytest.mark.parametrize(("text", "expected"), [
    ("incident 12", Command("incident", incident_id=12)),
    ("incident #12", Command("incident", incident_id=12)),
    ("job 4412", Command("job", arg="4412")),
    ("host gpu-a003.cluster.local", Command("host", arg="gpu-a003.cluster.local")),
    ("why link.bad_cable", Command("why", arg="link.bad_cable")),
    ("why link.bad_cable 12", Command("why", arg="link.bad_cable", incident_id=12)),
    ("why link.bad_cable incident 12", Command("why", arg="link.bad_cable", incident_id=12)),
    ("playbook link.port_down", Command("playbook", arg="link.port_down")),
    ("PLAYBOOK bad_cable", Command("playbook", arg="link.bad_cable")),
    ("recent", Command("recent")),
    ("help", Command("help")),
    ("", Command("help")),
    ("feedback 7 right", Command("feedback", incident_id=7, verdict="right")),
    ("feedback 7 wrong", Command("feedback", incident_id=7, verdict="wrong")),
    ("feedback 7 wrong fabric.congestion", Command("feedback", incident_id=7, verdict="wrong", arg="fabric.congestion")),
])
def test_strict_commands(text: str, expected: Command) -> None:
    assert parse(text, IDS) == expected


def test_job_with_symptom_text_is_classified() -> None:
    cmd = parse("job 4412 AllReduce busbw dropped to 40 GB/s", IDS)
    assert isinstance(cmd, Command)
    assert (cmd.verb, cmd.arg, cmd.symptom) == ("job", "4412", "AllReduce busbw dropped to 40 GB/s")
    assert "collective_slow" in cmd.symptom_kinds


@pytest.mark.parametrize(("text", "verb", "arg", "kind"), [
    ("why is allreduce slow on job 4412?", "job", "4412", "collective_slow"),
    ("is slurm job 50213 hung? NCCL watchdog timed out", "job", "50213", "collective_timeout"),
    ("node gpu-b017 keeps flapping", "host", "gpu-b017", "link_errors"),
    ("lots of symbol errors on gpu-a003, cable?", "host", "gpu-a003", "link_errors"),
])
def test_free_text_becomes_scope_and_symptom(text: str, verb: str, arg: str, kind: str) -> None:
    cmd = parse(text, IDS)
    assert isinstance(cmd, Command), cmd
    assert (cmd.verb, cmd.arg, cmd.free_text) == (verb, arg, True)
    assert kind in cmd.symptom_kinds
    assert cmd.symptom == text


def test_free_text_naming_an_incident() -> None:
    assert parse("what did you find for incident 31?", IDS) == Command("incident", incident_id=31, free_text=True)


def test_free_text_without_scope_says_what_is_missing() -> None:
    bad = parse("allreduce is slow", IDS)
    assert isinstance(bad, BadCommand)
    assert bad.symptom_kinds == ("collective_slow",)
    assert "job <id>" in bad.reason


def test_unknown_cause_gets_the_closest_ids() -> None:
    bad = parse("why link.bad_cabel 3", IDS)
    assert isinstance(bad, BadCommand)
    assert bad.suggestions[0] == "link.bad_cable"
    bad = parse("playbook congestoin", IDS)
    assert isinstance(bad, BadCommand) and "fabric.congestion" in bad.suggestions
    assert isinstance(resolve_cause("nonsense.word", IDS), BadCommand)
    assert closest_causes("gid_index", IDS)[0] == "roce.gid_index"


def test_ambiguous_short_name_is_not_guessed() -> None:
    ids = [*IDS, "fabric.degraded"]
    res = resolve_cause("degraded", ids)
    assert isinstance(res, BadCommand)
    assert set(res.suggestions) >= {"link.degraded", "fabric.degraded"}


@pytest.mark.parametrize("text", ["frobnicate", "incident twelve", "job", "why", "feedback 3 maybe",
                                  "recent 5", "playbook"])
def test_bad_commands_are_explained(text: str) -> None:
    bad = parse(text, IDS)
    assert isinstance(bad, BadCommand)
    assert bad.reason


def test_chat_markup_is_stripped() -> None:
    assert clean_text("<@U0LAN0Z89> incident 3") == "incident 3"
    assert clean_text("<at>diagnose</at>&nbsp;playbook link.bad_cable\n") == "playbook link.bad_cable"
    assert clean_text("/diagnose job 4412") == "job 4412"
    assert clean_text("see <https://grafana.example/d/x|the dashboard> &amp; job 7") == "see the dashboard & job 7"
    assert parse("<@U0LAN0Z89> why is allreduce slow on job 4412?", IDS) == parse(
        "why is allreduce slow on job 4412?", IDS)
