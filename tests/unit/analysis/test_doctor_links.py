"""The one wording of a PCIe link trained below what it can (``pcie-link-narrow``,
``pcie-link-slow-maybe-idle``), whichever door read it: sysfs, NVML (a container), a pasted lspci."""

from __future__ import annotations

from doctor_trees import real_acs_controls, real_links, two_gpus_under_root_ports
from fake_nvml import FakeNvml

from gputopo.analysis.doctor import doctor
from gputopo.analysis.doctor_common import PAIR_PROBLEMS, DoctorReport
from gputopo.analysis.doctor_links import DOWNTRAINED, narrow_link, slow_link_maybe_idle
from gputopo.sources.doctor_input import evidence_of_host
from gputopo.sources.health import HealthEvidence
from gputopo.sources.pasted_health import parse_pasted
from gputopo.sources.reference import load_reference

A, B, C = "0000:41:00.0", "0000:61:00.0", "0000:81:00.0"


def _report() -> DoctorReport:
    report = DoctorReport(source="test")
    report.gpus = {A: 0, B: 1, C: 2}
    return report


def test_a_narrow_link_marks_its_gpus_and_every_pair_with_them_except_the_spared_ones():
    report = _report()
    narrow_link(report, "GPU 0", 8, 16, below=[A], affected="GPU 0", evidence=["e"], spared=[(B, A)])
    assert DOWNTRAINED in PAIR_PROBLEMS
    assert report.gpu_problems == {A: [DOWNTRAINED]}
    assert report.pair_problems == {(A, C): [DOWNTRAINED]}  # A-B spared (given in either order); B-C not behind it
    (finding,) = report.findings
    assert (finding.severity, finding.code, finding.gpus) == ("warning", "pcie-link-narrow", [0])
    assert "x8 of x16" in finding.message and finding.effect == "every copy to or from GPU 0"


def test_a_narrow_link_with_no_known_gpu_names_the_gpus_it_is_given():
    report = _report()
    narrow_link(report, "GPU 5", 4, 16, below=[], affected="GPU 5", evidence=[], gpus=[5])
    assert report.findings[0].gpus == [5] and report.pair_problems == {}


def test_a_slow_link_is_only_info_with_the_command_that_checks_it_under_load():
    report = _report()
    slow_link_maybe_idle(report, "GPU 1", "Gen1", "Gen4", gpus=[1], evidence=["e"], bdf=B)
    (finding,) = report.findings
    assert finding.severity == "info" and "Gen1 of Gen4" in finding.message
    assert f"lspci -vv -s {B}" in finding.fix and report.pair_problems == {}
    slow_link_maybe_idle(report, "a device", "Gen1", "Gen4", gpus=[], evidence=[], bdf=None)
    assert "-s <bdf>" in report.findings[1].fix


def _narrow_by_door(tmp_path) -> dict:
    """The x8-of-x16 GPU link of the real captures, read through each door."""
    x8 = real_links()["gpu-x8"]
    sysfs = tmp_path / "sysfs"
    two_gpus_under_root_ports(sysfs, real_acs_controls()["off"], gpu_link=x8)
    by_sysfs = doctor(evidence_of_host(str(sysfs), {}))

    topo = load_reference("pcie-8gpu")
    topo.gpu(1).pcie_width_current, topo.gpu(1).pcie_width_max = x8.current_width, x8.max_width
    container = tmp_path / "container"
    container.mkdir()
    (container / ".dockerenv").write_text("")
    by_nvml = doctor(evidence_of_host(str(container), {}, nvml=FakeNvml(topo)))

    bus = topo.gpu(1).pci_bus_id
    paste = (f"{bus} 3D controller: NVIDIA Corporation Device 20b0\n"
             f"\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x{x8.max_width}, ASPM not supported\n"
             f"\t\tLnkSta:\tSpeed 16GT/s, Width x{x8.current_width} (downgraded)\n")
    evidence = HealthEvidence(source="paste", pasted=[("lspci.txt", parse_pasted(paste))])
    by_paste = doctor(evidence, {g.pci_bus_id: g.index for g in topo.gpus})
    return {"sysfs": (by_sysfs, None), "nvml": (by_nvml, bus), "paste": (by_paste, bus)}


def test_every_door_words_a_narrow_link_alike_and_marks_its_pairs_downtrained(tmp_path):
    doors = _narrow_by_door(tmp_path)
    fixes, tails = set(), set()
    for door, (report, bus) in doors.items():
        narrow = [f for f in report.findings if f.code == "pcie-link-narrow"]
        assert narrow, door
        finding = narrow[0]
        assert finding.severity == "warning" and "x8 of x16" in finding.message, door
        fixes.add(finding.fix)
        tails.add(finding.message.split(": ", 1)[1])
        marked = bus or next(iter(report.gpu_problems))
        assert report.gpu_problems[marked] == [DOWNTRAINED], door
        pairs = [pair for pair, words in report.pair_problems.items() if marked in pair]
        assert pairs and all(report.pair_problems[p] == [DOWNTRAINED] for p in pairs), door
    assert len(fixes) == 1 and len(tails) == 1  # one wording, whoever read it
