"""ACS redirect (gputopo/analysis/causes/acs.py): which pairs a bridge hits, and who set it (the kernel
for an IOMMU that is on, the firmware with the IOMMU off, not known without IOMMU evidence)."""

from __future__ import annotations

from doctor_trees import DOCTOR_FIXTURES

from gputopo.analysis.causes.acs import gpus_in_range, pairs_hit
from gputopo.analysis.causes.doctor import doctor
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted

LSPCI = (DOCTOR_FIXTURES / "constructed" / "lspci_vvv.txt").read_text()


GPUS = ["0000:1a:00.0", "0000:1b:00.0", "0000:88:00.0", "0000:89:00.0"]


def test_a_switch_port_reroutes_the_pairs_within_its_switch_another_bridge_the_crossing_pairs():
    assert gpus_in_range(GPUS, "0000:87:10.0", (0x89, 0x89)) == ["0000:89:00.0"]
    assert gpus_in_range(GPUS, "0000:86:00.0", (0x87, 0x89)) == ["0000:88:00.0", "0000:89:00.0"]
    # The switch under upstream port 86:00.0 holds 88 and 89: only their traffic turned inside it.
    assert pairs_hit(["0000:89:00.0"], GPUS, switch=["0000:88:00.0", "0000:89:00.0"]) == [("0000:88:00.0", "0000:89:00.0")]
    # Where the evidence does not show the switch: one GPU below, one elsewhere.
    assert len(pairs_hit(["0000:89:00.0"], GPUS)) == 3
    upstream = pairs_hit(["0000:88:00.0", "0000:89:00.0"], GPUS)
    assert ("0000:88:00.0", "0000:89:00.0") not in upstream and len(upstream) == 4


def _judge(*texts: str):
    return doctor(HealthEvidence(source="t", pasted=[(f"p{k}", parse_pasted(t)) for k, t in enumerate(texts)]))


def test_without_iommu_evidence_who_set_it_is_unknown_and_the_gpus_have_no_index():
    report = _judge(LSPCI)
    acs = [f for f in report.findings if f.code == "acs-redirect"]
    assert len(acs) == 2 and all("Who set it is not known" in f.message for f in acs)
    assert not report.causes and all("`sudo setpci -s 0000:" in f.fix for f in acs)
    assert "GPU 0000:1a:00.0 <-> GPU 0000:1b:00.0" in acs[0].effect  # the GPUs lspci lists, by bus id


def test_with_the_iommu_off_the_firmware_set_it():
    report = _judge(LSPCI, "BOOT_IMAGE=/vmlinuz-6.8.0 root=/dev/sda1 ro intel_iommu=off\n")
    acs = [f for f in report.findings if f.code == "acs-redirect"]
    assert all("the BIOS or the switch's firmware did" in f.message and "turn ACS off in the BIOS" in f.fix for f in acs)


def test_in_passthrough_the_kernel_set_it_and_each_finding_carries_the_whole_fix():
    report = _judge(LSPCI, "BOOT_IMAGE=/vmlinuz-6.8.0 root=/dev/sda1 ro intel_iommu=on iommu=pt\n")
    acs = [f for f in report.findings if f.code == "acs-redirect"]
    assert all("Linux set it: the IOMMU is on (passthrough)" in f.message for f in acs) and not report.causes
    assert all("`pci=disable_acs_redir=0000:19:08.0;0000:87:10.0`" in f.fix for f in acs)


def test_a_command_line_passing_devices_to_vms_keeps_the_iommu_on():
    """proc_cmdline_amd_iommu_pt.txt binds a GPU to vfio-pci for a VM: no `amd_iommu=off` in the fix."""
    cmdline = (DOCTOR_FIXTURES / "proc_cmdline_amd_iommu_pt.txt").read_text()
    report = _judge(LSPCI, cmdline)
    acs = [f for f in report.findings if f.code == "acs-redirect"]
    assert acs and all("iommu=off" not in f.fix and "vfio-pci.ids=10de:128b,10de:0e0f" in f.fix for f in acs)
    assert all("`pci=disable_acs_redir=0000:19:08.0;0000:87:10.0`" in f.fix for f in acs)
    report = _judge(LSPCI, "BOOT_IMAGE=/vmlinuz-6.8.0 ro intel_iommu=on vfio-pci.ids=10de:1b80\n")
    (iommu,) = [f for f in report.findings if f.code == "iommu-translating"]
    assert "iommu=off" not in iommu.fix and "keep the IOMMU on" in iommu.fix
    assert all("iommu=off" not in f.fix for f in report.findings if f.code == "acs-redirect")


def test_a_kernel_older_than_5_1_gets_the_loop_not_the_option_it_lacks(cli):
    """Newcomer review: the V100 box runs Linux 4.15 (dmesg's first line), which has no
    pci=disable_acs_redir=; the fix says so and gives the setpci loop at every boot, outside GRUB."""
    import json

    from conftest import OWN_FIXTURES

    box = OWN_FIXTURES / "doctor" / "constructed"
    data = json.loads(cli("doctor", "--from", str(box / "lspci_vvv.txt"), "--from", str(box / "dmesg.txt"),
                          "--json").output)
    (iommu,) = [f for f in data["findings"] if f["code"] == "iommu-translating"]
    assert "predates `pci=disable_acs_redir=`" in iommu["fix"] and "4.15.0-112-generic" in iommu["fix"]
    assert "systemd oneshot" in iommu["fix"] and "ONE `pci=disable_acs_redir=" not in iommu["fix"]
    # Review 3: no option with `;` goes in GRUB on this kernel, and the loop's unit is said once.
    assert "written `\\;`" not in iommu["fix"] and iommu["fix"].count("oneshot") == 1
    assert "the IOMMU option goes in GRUB_CMDLINE_LINUX" in iommu["fix"]


def test_kernel_releases_are_compared_as_versions():
    from gputopo.analysis.causes.acs import _older_than

    assert _older_than("4.15.0-112-generic", (5, 1)) and _older_than("5.0.21", (5, 1))
    assert not _older_than("5.15.0-91-generic", (5, 1)) and not _older_than("6.8.0", (5, 1))
    assert not _older_than(None, (5, 1)) and not _older_than("garbage", (5, 1))


def test_a_kernel_of_5_1_or_newer_gets_one_option_for_every_bridge(cli, tmp_path):
    import json

    from conftest import OWN_FIXTURES

    box = OWN_FIXTURES / "doctor" / "constructed"
    newer = tmp_path / "dmesg.txt"
    newer.write_text((box / "dmesg.txt").read_text().replace("Linux version 4.15.0-112-generic", "Linux version 5.15.0-91-generic", 1))
    data = json.loads(cli("doctor", "--from", str(box / "lspci_vvv.txt"), "--from", str(newer), "--json").output)
    (iommu,) = [f for f in data["findings"] if f["code"] == "iommu-translating"]
    assert "ONE `pci=disable_acs_redir=0000:19:08.0;0000:87:10.0`" in iommu["fix"] and "predates" not in iommu["fix"]


def test_many_bridges_are_listed_once_not_in_every_bridges_fix():
    """(Every acs-redirect finding's fix listed every bridge, twice: a 1 MB lspci paste of 4,000
    bridges made 4,000 fixes of 4,000 bus ids each, and doctor ran for minutes printing them.)"""
    paste = "".join(
        f"{k >> 3:02x}:{k & 7:02x}.0 PCI bridge: PLX Technology, Inc. PEX 8747\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
        for k in range(300))
    report = _judge(paste)
    fixes = [f.fix for f in report.findings if f.code == "acs-redirect"]
    assert len(fixes) == 300 and fixes[0].count("0000:25:") >= 8  # the first: every bridge
    assert sum(map(len, fixes)) < 300 * 2000
    assert "0000:00:00.0" in fixes[-1] and "listing all 300 bridges" in fixes[-1]


def test_a_kernel_release_of_odd_digits_is_no_known_release():
    """(A gathered ``proc/sys/kernel/osrelease`` of "².15.0" - ``isdigit`` says yes, ``int`` refuses -
    beside a bridge with ACS on ended doctor in a ValueError traceback, exit 1.)"""
    from gputopo.analysis.causes.acs import _older_than

    for release in ("\u00b2.15.0-generic", "5.\u00b2", "1" * 5000 + ".4", "\u0663.4"):
        assert _older_than(release, (5, 1)) is False
    assert _older_than("4.15.0-112-generic", (5, 1)) is True


def test_the_grub_advice_escapes_the_semicolon_for_grubs_own_script(cli):
    """grub-mkconfig copies GRUB_CMDLINE_LINUX unquoted into grub.cfg, where GRUB's script ends a
    command at a bare `;`: quoting for the shell alone would hand the kernel only the first bridge."""
    import json

    from conftest import OWN_FIXTURES

    paste = OWN_FIXTURES / "doctor" / "lspci_acsctl_grep_plx_nccl629.txt"
    data = json.loads(cli("doctor", "--from", str(paste), "--json").output)
    (first, *_) = [f for f in data["findings"] if f["code"] == "acs-redirect"]
    assert "`;`-separated" in first["fix"] and "with each `;` written `\\;`" in first["fix"]
    assert "in quotes: `;` ends a shell command" not in first["fix"]


def test_only_the_redirect_and_egress_bits_reroute_peer_traffic():
    """ReqRedir, CmpltRedir and EgressCtrl send peer TLPs up to the root complex (or block them);
    TransBlk blocks only ATS-translated requests, UpstreamFwd forwards upward what comes from below,
    SrcValid checks bus numbers: a port with only those on reroutes nothing (an expert review)."""
    on = "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    assert on in LSPCI
    for control, redirect in (("SrcValid+ TransBlk+ ReqRedir- CmpltRedir- UpstreamFwd+ EgressCtrl- DirectTrans-", False),
                              ("SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl+ DirectTrans-", True),
                              ("SrcValid- TransBlk- ReqRedir+ CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-", True)):
        report = doctor(HealthEvidence(pasted=[("lspci.txt", parse_pasted(LSPCI.replace(on, "ACSCtl:\t" + control)))]))
        assert any(f.code == "acs-redirect" for f in report.findings) is redirect, control
