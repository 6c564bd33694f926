"""lspci text read for doctor (gputopo/sources/evidence/pasted_lspci.py): every header shape lspci prints names
its device, so no line is handed to the device printed before it."""

from __future__ import annotations

import pytest
from doctor_trees import capture

from gputopo.sources.evidence.pasted_health import parse_pasted
from gputopo.sources.evidence.pasted_lspci import header_device


@pytest.mark.parametrize(("line", "device"), [
    ("40:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge", "0000:40:01.1"),
    # lspci -PP: the path from the root port; the device is the last element
    ("00:01.0/01:00.0/02:00.0 PCI bridge [0604]: Advanced Micro Devices, Inc. [AMD/ATI] Navi 10 XL", "0000:02:00.0"),
    # an IOMMU-group listing: indented, with the domain, as a path
    ("\t0000:00:1c.3/08:00.0/09:01.0 PCI bridge [0604]: Pericom Semiconductor PI7C9X2G404", "0000:09:01.0"),
    ("\t0000:00:1c.1 PCI bridge [0604]: Intel Corporation Device [8086:7a39] (rev 11)", "0000:00:1c.1"),
    ("0001:00:01.0/01:00.0 3D controller: NVIDIA Corporation", "0001:01:00.0"),  # the domain is the path's
    ("01:00.0 0302: 10de:1db6 (rev a1)", "0000:01:00.0"),  # lspci -n
    ("$ sudo lspci -vvv -s 3b:00.0", "0000:3b:00.0"),
    ("0000:03:00.0 (ecap 000d @2a0) @2a6 0000", None),  # NCCL's ACS script: a control word, not a header
    ("\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-", None),
])
def test_every_header_shape_names_its_device(line, device):
    assert header_device(line) == device


def test_acs_under_a_path_header_is_that_ports_not_the_device_printed_before_it():
    """lspci -PP prints the SPI controller 00:1f.5 just before the switch: its ACS is the switch's."""
    parsed = parse_pasted(capture("lspci_pp_vvv_amd_switch_downstream_port_acs_on.txt"))
    assert [(a.bdf, a.control) for a in parsed.acs] == [("0000:02:00.0", 0x1D), ("0000:03:00.0", 0)]


def test_an_iommu_group_listing_names_each_bridge():
    parsed = parse_pasted(capture("iommu_groups_acs_listing_pericom_switch.txt"))
    assert [a.bdf for a in parsed.acs] == ["0000:00:1c.1", "0000:00:1c.2", "0000:00:1c.3",
                                           "0000:09:01.0", "0000:09:02.0", "0000:09:03.0"]


def test_a_link_of_width_x0_is_no_link_not_a_narrow_one():
    """An empty root-port slot: LnkSta Width x0, DLActive-."""
    parsed = parse_pasted(capture("lspci_vvv_root_port_empty_slot_width_x0.txt"))
    assert parsed.links == []
    (down,) = parsed.links_down
    assert down.bdf == "0000:00:1c.0" and (down.link.current_width, down.link.max_width) == (0, 1)


def test_a_link_line_with_an_impossible_speed_or_width_is_no_link_and_no_traceback():
    parsed = parse_pasted("01:00.0 VGA compatible controller: NVIDIA Corporation\n"
                          "\t\tLnkSta:\tSpeed 1.2.3GT/s, Width x16\n"
                          f"\t\tLnkSta:\tSpeed 8GT/s, Width x{'9' * 5000}\n"
                          "\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x16\n")
    assert [(p.link.current_speed_gts, p.link.current_width) for p in parsed.links] == [(2.5, 16)]


def test_lspci_own_marks_are_kept_where_the_paste_has_no_lnkcap():
    """A fragment cut above LnkCap (raspberry-pi-pcie-devices#480): ``(downgraded)`` is lspci's own
    comparison with LnkCap, the only word left on how the link compares with its maximum."""
    (link,) = parse_pasted(capture("lspci_vvv_fragment_lnksta_5gt_x1_downgraded_no_header_geerling480.txt")).links
    assert (link.bdf, link.link.max_width, link.speed_mark, link.width_mark) == (None, None, "downgraded", "downgraded")
    assert link.narrow and link.slow
    ok = parse_pasted("\t\tLnkSta:\tSpeed 8GT/s (ok), Width x16 (ok)\n").links[0]
    assert (ok.speed_mark, ok.width_mark, ok.narrow, ok.slow) == ("ok", "ok", False, False)
    old = parse_pasted("\t\tLnkSta:\tSpeed 8GT/s, Width x8, TrErr- Train-\n").links[0]  # older pciutils: no marks
    assert (old.speed_mark, old.width_mark, old.narrow, old.slow) == (None, None, False, False)
    # Where LnkCap is there, it decides (the marks only repeat it).
    capped = parse_pasted("\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16\n\t\tLnkSta:\tSpeed 16GT/s (ok), Width x8 (ok)\n")
    assert capped.links[0].narrow and not capped.links[0].slow


def test_cesta_keeps_the_link_error_bits_only():
    """raspberry-pi-pcie-devices#4 diffed two lspci runs: CESta BadTLP+ BadDLLP+ Rollover+ Timeout+ (link
    errors); AdvNonFatalErr+ alone (common, says nothing of the link) is no link error."""
    parsed = parse_pasted(capture("lspci_vvv_diff_two_runs_lnksta_gen1_gen2_x1_no_lnkcap_geerling4.txt"))
    assert [(bdf, bits, line) for bdf, bits, line, _ in parsed.link_errors_logged] == [
        (None, ["BadDLLP"], 14), (None, ["BadTLP", "BadDLLP", "Rollover", "Timeout"], 16)]
    benign = parse_pasted("01:00.0 VGA compatible controller: NVIDIA Corporation\n"
                          "\t\tCESta:\tRxErr- BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr+\n")
    assert benign.link_errors_logged == [] and "lspci -vvv" in benign.kinds
