"""Prompt commands that name the partition formats."""

from __future__ import annotations

from diagnose.bundle.session import prompt_of


def test_smpquery_pkeys_and_partitions_conf_prompts() -> None:
    assert prompt_of("[root@sm01 ~]# smpquery pkeys 743") == ("smpquery", "smpquery_pkeys")
    assert prompt_of("expert@net21:~$ smpquery PKeyTable 2") == ("smpquery", "smpquery_pkeys")
    assert prompt_of("[root@sm01 ~]# smpquery portinfo 743 1") == ("smpquery", "smpquery")
    assert prompt_of("[root@sm01 ~]# cat /etc/opensm/partitions.conf") == ("cat", "opensm_partitions")
    assert prompt_of("[root@sm01 ~]# cat /etc/opensm/opensm.conf") == ("cat", None)
