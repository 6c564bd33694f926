from gputopo.sources.evidence.pasted_health import parse_pasted
from gputopo.sources.evidence.pasted_text import MAX_LINE_CHARS, plain_lines, unprefixed


def test_a_tickets_dressing_is_removed_and_line_numbers_kept():
    text = "```text\n$ printenv | grep NCCL\n**NCCL_P2P_DISABLE=1**\n```\n"
    assert plain_lines(text) == ["", "$ printenv | grep NCCL", "NCCL_P2P_DISABLE=1", ""]


def test_a_prefix_on_every_line_is_removed_but_not_a_gpu_line():
    assert unprefixed(plain_lines("node-7: a=1\nnode-7: b=2")) == ["a=1", "b=2"]
    assert unprefixed(plain_lines("GPU 2: NVIDIA B200\nNVML: Unable")) is None
    assert unprefixed(plain_lines("$ lspci\r\n$ dmesg\r\n")) == ["lspci", "dmesg"]
    # NVRM: on every line is dmesg's own: read with it, since that recognises more
    assert parse_pasted("NVRM: Xid (PCI:0000:02:00): 45, pid=1\nNVRM: Xid (PCI:0000:02:00): 45, pid=2").xids
    assert parse_pasted("node-7: export NCCL_P2P_DISABLE=1\nnode-7: export NCCL_SHM_DISABLE=1").facts.env
    assert plain_lines("BOOT_IMAGE=/vmlinuz\n# found this") == ["BOOT_IMAGE=/vmlinuz", "# found this"]


def test_a_huge_line_is_kept_whole_here():
    assert len(plain_lines("x" * (MAX_LINE_CHARS * 10))[0]) == MAX_LINE_CHARS * 10
