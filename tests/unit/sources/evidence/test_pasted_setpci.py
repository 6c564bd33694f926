"""The setpci shapes come from NCCL's own troubleshooting guide (docs.nvidia.com/deeplearning/nccl/
user-guide/docs/troubleshooting.html, "PCI Access Control Services"): `setpci -v -s ${BDF}
ECAP_ACS+0x6.w` over every device, and the issue's `for d in ...; do setpci -s $d f2a.w; done`.
No real paste of the raw loop output was found: these texts are shaped from the docs."""

from gputopo.sources.evidence.pasted_health import parse_pasted


def _acs(text):
    return [(a.bdf, a.control) for a in parse_pasted(text).acs]


def test_a_loop_printing_bare_words_gives_unnamed_control_words():
    assert _acs("$ for d in 40:01.1 40:01.2; do sudo setpci -s $d f2a.w; done\n001d\n0000\n") == [
        (None, 0x1D), (None, 0)]


def test_devices_named_on_the_line_or_the_line_before():
    assert _acs("for d in a b; do echo $d; setpci -s $d ECAP_ACS+6.w; done\n40:01.1\n001d\n41:00.0: 0011\n") == [
        ("0000:40:01.1", 0x1D), ("0000:41:00.0", 0x11)]
    assert _acs("sudo setpci -s 40:01.1 ECAP_ACS+0x6.w\n001d") == [("0000:40:01.1", 0x1D)]


def test_a_write_is_no_reading_and_a_bare_word_without_a_read_is_nothing():
    assert _acs("sudo setpci -s 40:01.1 ECAP_ACS+6.w=0000\n001d") == []
    assert _acs("001d") == []


def test_acsctl_in_hex():
    assert _acs("ACSCtl: 0x001d = SrcValid+, ReqRedir+") == [(None, 0x1D)]
