"""A pasted kernel log judged (gputopo/analysis/causes/xid_aer.py): AER errors by severity, and an Xid
said with the cause the driver names."""

from __future__ import annotations

from doctor_trees import capture

from gputopo.analysis.causes.doctor import doctor
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


def test_an_uncorrected_aer_error_is_an_error_naming_what_could_not_recover():
    report = _report(capture("dmesg_aer_fatal_cmpltto_gpu_cannot_recover_returnn.txt"))
    (finding,) = report.findings
    assert (finding.severity, finding.code) == ("error", "pcie-aer-uncorrected")
    assert "PCIe port 0000:00:03.0" in finding.message and "0000:03:00.0 and 0000:03:00.1 could not recover" in finding.message
    assert finding.effect == "every job using every device below 0000:00:03.0"


def test_corrected_aer_errors_are_a_warning_counted_per_device():
    report = _report(capture("dmesg_aer_corrected_flood_amd_root_port_popos.txt"))
    (finding,) = report.findings
    assert (finding.severity, finding.code) == ("warning", "pcie-aer-corrected")
    assert "0000:00:03.1 logged 3 corrected AER error(s) (Data Link Layer)" in finding.message


def test_a_device_lost_without_its_error_in_the_paste():
    report = _report("[  +0.000844] nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)\n")
    (finding,) = report.findings
    assert (finding.severity, finding.code) == ("error", "pcie-aer-not-recovered") and "0000:03:00.0" in finding.message


def test_an_xid_is_said_with_the_cause_the_driver_names_and_fixed_as_the_cause():
    report = _report(capture("dmesg_xid45_caused_by_nvlink_xid149_145.txt"))
    # Four GPUs cleaned up after NVLink Xids 145 and 149: one NVLink event, one finding naming all four.
    (first,) = report.findings
    assert first.code == "xid-45"
    assert ("4 GPUs, at PCI 0000:dc:00 (2 times), 0000:ed:00 (2 times), 0000:ba:00 (2 times) and 0000:97:00, "
            "caused (the driver says) by earlier Xids 145 and 149: NVLink errors") in first.message
    assert len(first.evidence) == 4 and "nvidia-smi nvlink -e" in first.fix and "79:" not in first.fix
    (xid32,) = _report(capture("dmesg_nvrm_xid32_twice.txt")).findings
    assert "earlier Xid" not in xid32.message and "Xid catalogue" in xid32.fix
    assert "for the GPU at PCI " in xid32.message and "(2 times)" in xid32.message


def test_xids_with_causes_fixed_differently_stay_apart():
    lines = ("kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=python3, Ch 00000001 caused by previous Xid 149\n"
             "kernel: NVRM: Xid (PCI:0000:ed:00): 45, pid=2, name=python3, Ch 00000001 caused by previous Xid 48\n")
    report = _report(lines)
    assert [f.code for f in report.findings] == ["xid-45", "xid-45"]
    assert "Xid 149: an NVLink error" in report.findings[0].message and "0000:ed:00" not in report.findings[0].message
    assert "Xid 48: a double-bit ECC error" in report.findings[1].message and "nvidia-smi -q -d ECC" in report.findings[1].fix


def test_an_xid_whose_address_the_paste_hides_is_said_of_an_unnamed_gpu():
    report = _report("NVRM: Xid (PCI:...): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)\n")
    assert "for a GPU whose PCI address the paste does not show: an NVLink error in the GPU's RLW block" in (
        report.findings[0].message)
    both = _report("NVRM: Xid (PCI:0000:dc:00): 79, GPU has fallen off the bus.\nNVRM: Xid (PCI:...): 79, GPU has fallen"
                   " off the bus.\nNVRM: Xid (PCI:...): 79, GPU has fallen off the bus.\n")
    (xid,) = [f for f in both.findings if f.code == "xid-79"]
    assert "the GPU at PCI 0000:dc:00 and a GPU whose PCI address the paste does not show (2 times)" in xid.message


def test_an_xid_79_after_a_fatal_aer_error_the_gpu_did_not_recover_from_is_that_error():
    """gpu-burn: a fatal AER at port 00:02.0, 02:00.0 could not recover, then Xid 79: one event."""
    report = _report(capture("dmesg_aer_fatal_surprise_down_xid79_gpuburn.txt"))
    (xid,) = [f for f in report.findings if f.code == "xid-79"]
    (aer,) = [f for f in report.findings if f.code == "pcie-aer-uncorrected"]
    assert report.causes[id(xid)] is aer and "see pcie-aer-uncorrected" in xid.message
    alone = _report(capture("dmesg_nvrm_fallen_off_bus.txt"))
    assert not alone.causes


def test_an_xid_137_on_the_link_an_nvlink5_xid_names_is_one_event_caused_by_the_illegal_access():
    """nccl#2241 (B200): Xid 145 RLW_RXPIPE Nonfatal on link 11, then Xid 137 (NVLINK_PRIV_ERR), the RLW_RXPIPE
    interrupt on link 11: one event. NVIDIA's Xid catalog: 137 is a fault the remote MMU reported (an illegal NVLink
    peer access), typically the application's bug, immediate action IGNORE, investigated with cuda-gdb/memcheck."""
    report = _report(capture("dmesg_journal_xid145_137_pci_redacted_nccl2241.txt"))
    (event,) = report.findings
    assert event.code == "xid-145"
    assert "Xid 145 (NVLink5, the GPU's RLW block)" in event.message and "and Xid 137 for a GPU whose" in event.message
    assert "both name RLW_RXPIPE on link 11, one event (inferred from the lines)" in event.message
    assert "illegal NVLink peer-to-peer access" in event.message and "typically the application's bug" in event.message
    assert "which the driver calls non-fatal" in event.message
    assert len(event.evidence) == 2 and "137, RLW_RXPIPE interrupt" in event.evidence[1]
    assert "compute-sanitizer --tool memcheck" in event.fix and "XID 144-150 Decode" in event.fix
    assert "reseat" not in event.fix


def test_an_xid_137_alone_or_on_another_link_is_the_application_not_the_nvlink_hardware():
    alone = _report("NVRM: Xid (PCI:0000:18:00): 137, TLC RX PRIV Error on link 3\n")
    (priv,) = alone.findings
    assert priv.code == "xid-137" and "NVLink privilege error" in priv.message and "compute-sanitizer" in priv.fix
    apart = _report("NVRM: Xid (PCI:0000:18:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 2 (0x1 0x2)\n"
                    "NVRM: Xid (PCI:0000:18:00): 137, RLW_RXPIPE interrupt hit on link 11 on GPU0: PRIV Error\n"
                    "NVRM: Xid (PCI:0000:2a:00): 137, RLW_RXPIPE interrupt hit on link 2 on GPU1: PRIV Error\n")
    assert [f.code for f in apart.findings] == ["xid-145", "xid-137"]
    assert "XID 144-150 Decode" in apart.findings[0].fix and "Xid 154" in apart.findings[0].fix
    assert "2 GPUs" in apart.findings[1].message


def test_an_nvlink5_xid_without_a_137_of_its_own_is_not_joined_to_anothers_event():
    """Only the NVLink5 Xid that names the 137's GPU, unit and link is that event: another GPU's fatal 145 on
    another link was said as 'one event' caused by the 137's illegal access (no reset needed); and two lines
    that name no unit are no same unit ('both name None on link 11')."""
    report = _report("NVRM: Xid (PCI:0000:44:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (0x0 0x0)\n"
                     "NVRM: Xid (PCI:0000:44:00): 137, RLW_RXPIPE interrupt hit on link 11\n"
                     "NVRM: Xid (PCI:0000:55:00): 145, RLW_RXPIPE Fatal XC0 i0 Link 3 (0x0 0x0)\n")
    event, other = sorted(report.findings, key=lambda f: "Xid 137" not in f.message)
    assert "the GPU at PCI 0000:44:00: both name RLW_RXPIPE on link 11" in event.message
    assert "0000:55:00" not in event.message + " ".join(event.evidence)
    assert other.code == "xid-145" and "0000:55:00" in other.message and "Xid 137" not in other.message
    unnamed = _report("NVRM: Xid (PCI:0000:44:00): 145, pid=1, Link 11 (0x0)\n"
                      "NVRM: Xid (PCI:0000:44:00): 137, pid=3, on link 11\n")
    assert sorted(f.code for f in unnamed.findings) == ["xid-137", "xid-145"]
    assert not any("None" in f.message for f in unnamed.findings)


def test_an_xid_45_after_an_nvlink5_xid_is_fixed_by_decoding_that_xid():
    (cleanup,) = _report(capture("dmesg_xid45_caused_by_nvlink_xid149_145.txt")).findings
    assert "earlier Xids 145 and 149: NVLink errors in the GPU's RLW and NETIR blocks" in cleanup.message
    assert "XID 144-150 Decode" in cleanup.fix and "nvidia-smi nvlink -e" in cleanup.fix


def test_an_application_xid_alone_is_a_warning_of_the_job_not_an_error_of_the_gpu():
    """Xid 13, 31 and 43 are, by NVIDIA's catalog, most often the application's own fault (restart
    it): alone they warn, so `--fail-on error` in a prolog does not drain a node for a user's bug; an
    Xid 48 beside them stays an error."""
    from gputopo.analysis.causes.doctor import doctor
    from gputopo.sources.evidence.health import HealthEvidence
    from gputopo.sources.evidence.pasted_health import parse_pasted

    log = ("[ 100.1] NVRM: Xid (PCI:0000:3b:00): 43, pid=4242, name=python3, Ch 00000008\n"
           "[ 100.2] NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python3, Ch 00000008, intr 00000000. "
           "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f4e_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_READ\n"
           "[ 100.3] NVRM: Xid (PCI:0000:3b:00): 48, pid=4242, name=python3, An uncorrectable double bit error\n")
    report = doctor(HealthEvidence(pasted=[("dmesg.txt", parse_pasted(log))]))
    severity = {f.code: f.severity for f in report.findings if f.code.startswith("xid-")}
    assert severity == {"xid-43": "warning", "xid-31": "warning", "xid-48": "error"}, severity
    (app,) = [f for f in report.findings if f.code == "xid-43"]
    assert "restart it" in app.fix and "compute-sanitizer" in app.fix
