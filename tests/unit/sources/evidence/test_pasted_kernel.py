"""Kernel text read for doctor (gputopo/sources/evidence/pasted_kernel.py): AER errors, the cause an Xid names,
the IOMMU's default domain, and command lines a terminal wrapped."""

from __future__ import annotations

from doctor_trees import capture

from gputopo.sources.evidence.pasted_health import parse_pasted

LONG_CMDLINE = ("BOOT_IMAGE=/vmlinuz-6.8.0-38-generic root=/dev/mapper/ubuntu--vg-ubuntu--lv ro quiet splash "
                "intel_iommu=on")


def test_a_command_line_a_terminal_wrapped_is_joined_as_it_was_cut():
    parsed = parse_pasted(capture("dmesg_grep_iommu_wrapped_cmdline_passthrough_last.txt"))
    assert "lockdown=confidentiality" in parsed.cmdline and "amdgpu.ppfeaturemask=0xffffffff" in parsed.cmdline
    assert parsed.cmdline.endswith("iommu=pt iommu.passthrough=1")
    assert "Kernel command line" not in parsed.cmdline  # the next record is not a continuation


def test_what_follows_a_command_line_is_no_part_of_it():
    for after in ("```", "[    0.013368] ACPI: DMAR 0x00000000781D2588", "root@vm:~# sudo dmesg | grep -i iommu",
                  "# found this", "00:01.0 PCI bridge: Intel Corporation Device", ""):
        assert parse_pasted(f"{LONG_CMDLINE}\n{after}\n").cmdline == LONG_CMDLINE, after
    for after in ("DMAR: IOMMU enabled", "AMD-Vi: Interrupt remapping enabled", "iommu: Default domain type: Translated"):
        parsed = parse_pasted(f"{LONG_CMDLINE}\n{after}\n")  # dmesg -t: a message with no time stamp
        assert parsed.cmdline == LONG_CMDLINE, after
    assert parse_pasted(f"{LONG_CMDLINE}\nDMAR: IOMMU enabled\n").iommu_active == "DMAR: IOMMU enabled"
    short = "BOOT_IMAGE=/vmlinuz ro iommu=pt"  # no terminal is this narrow: the next line is its own
    assert parse_pasted(f"{short}\nquiet splash\n").cmdline == short


def test_aer_errors_by_device_severity_and_layer():
    parsed = parse_pasted(capture("dmesg_aer_fatal_surprise_down_xid79_gpuburn.txt"))
    assert [(a.bdf, a.driver, a.severity, a.layer) for a in parsed.aer] == [
        ("0000:00:02.0", "pcieport", "corrected", "Data Link Layer"),
        ("0000:00:02.0", "pcieport", "uncorrected (fatal)", "Transaction Layer")]
    assert list(parsed.not_recovered) == ["0000:02:00.0"]  # "device has no AER-aware driver"
    laptop = ("pcieport 0000:00:1d.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n"
              "nvme 0000:03:00.0: AER: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, "
              "(Requester ID)\n")
    assert [(a.bdf, a.driver, a.severity) for a in parse_pasted(laptop).aer] == [
        ("0000:00:1d.0", "pcieport", "corrected"), ("0000:03:00.0", "nvme", "uncorrected (non-fatal)")]


def test_a_device_that_could_not_recover():
    parsed = parse_pasted(capture("dmesg_aer_fatal_cmpltto_gpu_cannot_recover_returnn.txt"))
    assert sorted(parsed.not_recovered) == ["0000:03:00.0", "0000:03:00.1"]


def test_the_xid_the_driver_names_as_the_cause():
    parsed = parse_pasted(capture("dmesg_xid45_caused_by_nvlink_xid149_145.txt"))
    assert [(x.pci, x.code, x.cause) for x in parsed.xids[:2]] == [("0000:dc:00", 45, 149), ("0000:ed:00", 45, 145)]
    assert [x.cause for x in parse_pasted(capture("dmesg_nvrm_xid32_twice.txt")).xids] == [None, None]


def test_the_default_domain_and_an_iommu_at_work():
    parsed = parse_pasted(capture("cmdline_and_dmesg_default_domain_translated_vm.txt"))
    assert parsed.default_domain[0] == "translated" and parsed.iommu_active is None
    assert parsed.cmdline.startswith("BOOT_IMAGE=/vmlinuz-6.8.0-38-generic")
    at_work = parse_pasted("[    0.620000] pci 0000:00:00.2: AMD-Vi: Found IOMMU cap 0x40\n"
                           "[    0.640000] iommu: Default domain type: Passthrough (set via kernel command line)\n")
    assert at_work.default_domain[0] == "passthrough" and "Found IOMMU" in at_work.iommu_active


def test_megabyte_lines_without_spaces_are_read_at_once_and_what_follows_is_still_read():
    """A driver name searched as ``(\\S+) `` along a line without spaces tried every start and length
    (hours on 1 MB); a wrapped command line's next line started with ``\\S+@\\S+``."""
    after = "pcieport 0000:00:01.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n"
    for line in ("0000:" * 200_000, "a" * 1_000_000, "0." * 500_000, "[" * 1_000_000,
                 "x PCIe Bus Error " + "0000:" * 200_000, "can't recover " + "0000:" * 200_000):
        parsed = parse_pasted(line + "\n" + after)
        assert [(a.bdf, a.severity) for a in parsed.aer] == [("0000:00:01.0", "corrected")]
    wrapped = parse_pasted(LONG_CMDLINE + "\n" + "a@" * 500_000 + "!\n")  # no parameter: not joined
    assert wrapped.cmdline == LONG_CMDLINE


def test_numbers_of_thousands_of_digits_are_no_xid_and_no_traceback():
    nines = "9" * 5000
    parsed = parse_pasted(f"NVRM: Xid (PCI:0000:01:00): {nines}, pid=1\n"
                          f"NVRM: Xid (PCI:0000:02:00): 45, pid=1, caused by previous Xid {nines}\n")
    assert [(x.pci, x.code, x.cause) for x in parsed.xids] == [("0000:02:00", 45, None)]


def test_an_xid_address_the_poster_blanked_out_names_no_gpu():
    """nccl#2241: `Xid (PCI:...): 145`: the address is unknown, never the string '...'."""
    parsed = parse_pasted(capture("dmesg_journal_xid145_137_pci_redacted_nccl2241.txt"))
    assert [(x.pci, x.code) for x in parsed.xids] == [(None, 145), (None, 137)]


def test_the_nvlink_unit_link_and_fatality_an_xid_names():
    parsed = parse_pasted(capture("dmesg_journal_xid145_137_pci_redacted_nccl2241.txt"))
    assert [(x.unit, x.link, x.fatal) for x in parsed.xids] == [("RLW_RXPIPE", 11, False), ("RLW_RXPIPE", 11, None)]
    other = parse_pasted("NVRM: Xid (PCI:0000:01:00): 149, NETIR_LINK_DOWN Fatal XC0 i0 Link 04 (0x1)\n"
                         "NVRM: Xid (PCI:0000:01:00): 45, pid=1, name=python3, Ch 00000001\n")
    assert [(x.unit, x.link, x.fatal) for x in other.xids] == [("NETIR_LINK_DOWN", 4, True), (None, None, None)]


def test_the_kernels_boot_time_bandwidth_line_is_a_link_with_the_port_that_limits_it():
    """amdgpu_top#33: a Gen4 x16 card held to Gen3 by port 00:03.1; raspberry-pi-pcie-devices#712: x1 of x16."""
    (gen3,) = parse_pasted(capture("dmesg_pci_bandwidth_limited_gen3_slot_gen4_card_amdgputop33.txt")).links
    assert (gen3.bdf, gen3.limited_at) == ("0000:0b:00.0", "0000:00:03.1")
    assert (gen3.link.current_speed_gts, gen3.link.max_speed_gts, gen3.link.current_width, gen3.link.max_width) == (8.0, 16.0, 16, 16)
    assert gen3.slow and not gen3.narrow
    parsed = parse_pasted(capture("dmesg_boot_pci_bandwidth_limited_x1_of_x16_pi_vega_geerling712.txt"))
    (x1,) = parsed.links
    assert (x1.bdf, x1.limited_at, x1.narrow, x1.slow) == ("0000:01:00.0", "0000:00:00.0", True, False)
    assert "dmesg" in parsed.kinds
