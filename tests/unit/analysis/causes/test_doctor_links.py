"""The one wording of a PCIe link trained below what it can (``pcie-link-narrow``, ``pcie-link-slow``,
``pcie-link-slow-idle``, ``pcie-link-slow-maybe-idle``), whichever door read it: sysfs, NVML (a
container), a pasted lspci; and the performance state read with the link (NVML, a gathered archive's
``nvidia-smi -q``) deciding what a speed below max means."""

from __future__ import annotations

import shutil

import pytest
from conftest import OWN_FIXTURES
from doctor_trees import (
    FakeHost,
    real_acs_controls,
    real_links,
    two_gpus_under_root_ports,
)
from fake_nvml import FakeNvml
from linktable import GEN4_X16, link_table

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.doctor_common import PAIR_PROBLEMS, DoctorReport
from gputopo.analysis.causes.doctor_links import DOWNTRAINED, StateRead, narrow_link, slow_link
from gputopo.sources.doctor_input import evidence_from_files, evidence_of_host
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted
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


def test_a_slow_link_with_no_state_is_only_info_with_the_command_that_checks_it_under_load():
    report = _report()
    assert slow_link(report, "GPU 1", "Gen1", "Gen4", gpus=[1], evidence=["e"], bdf=B) is False
    (finding,) = report.findings
    assert (finding.severity, finding.code) == ("info", "pcie-link-slow-maybe-idle") and "Gen1 of Gen4" in finding.message
    assert f"lspci -vv -s {B}" in finding.fix and report.pair_problems == {}
    assert "pstate" in finding.fix and "-q -d PCIE" not in finding.fix  # no such display type (a real 580 refused it)
    slow_link(report, "a device", "Gen1", "Gen4", gpus=[], evidence=[], bdf=None)
    assert "-s <bdf>" in report.findings[1].fix


def _state(state: int, gen: int | None = 1, gen_max: int | None = 4) -> StateRead:
    return StateRead(state, gen, gen_max, f"state {state} read with Gen{gen}")


def test_at_p0_a_slow_link_trained_down_marks_its_pairs_and_says_it_is_inferred():
    report = _report()
    fault = slow_link(report, "GPU 0", "Gen1", "Gen4", gpus=[0], evidence=["e"], bdf=A, state=_state(0), gen_now=1,
                      below=[A], spared=[(A, B)])
    (finding,) = report.findings
    assert fault is True and (finding.severity, finding.code, finding.gpus) == ("warning", "pcie-link-slow", [0])
    assert "in P0" in finding.message and "trained down (inferred from the performance state" in finding.message
    assert finding.evidence == ["e", "state 0 read with Gen1"] and finding.effect == f"every copy to or from GPU 0 ({A})"
    assert "BIOS" in finding.fix and "riser" in finding.fix
    assert report.gpu_problems == {A: [DOWNTRAINED]} and report.pair_problems == {(A, C): [DOWNTRAINED]}


@pytest.mark.parametrize("state", [8, 12, 15])
def test_at_p8_or_lower_power_a_slow_link_is_idle_by_design_not_maybe(state):
    report = _report()
    assert slow_link(report, "GPU 1", "Gen1", "Gen4", gpus=[1], evidence=["e"], bdf=B, state=_state(state), gen_now=1,
                     below=[B]) is False
    (finding,) = report.findings
    assert (finding.severity, finding.code) == ("info", "pcie-link-slow-idle")
    assert f"in P{state}: idle GPUs lower their link speed by design" in finding.message and "may" not in finding.message
    assert finding.fix.startswith("nothing to fix") and report.pair_problems == {} and report.gpu_problems == {}


def test_an_intermediate_state_or_a_state_read_at_another_speed_stays_maybe():
    report = _report()
    slow_link(report, "GPU 1", "Gen3", "Gen4", gpus=[1], evidence=["e"], bdf=B, state=_state(2, gen=3), gen_now=3)
    slow_link(report, "GPU 2", "Gen1", "Gen4", gpus=[2], evidence=["e"], bdf=C, state=_state(0, gen=4), gen_now=1)
    p2, moved = report.findings
    assert p2.code == moved.code == "pcie-link-slow-maybe-idle" and report.pair_problems == {}
    assert "in P2, an intermediate state" in p2.message and p2.evidence == ["e", "state 2 read with Gen3"]
    assert "P0" not in moved.message and moved.evidence == ["e"]  # read at Gen4: the state changed between the reads
    slow_link(report, "GPU 0", "20.0 GT/s", "Gen4", gpus=[0], evidence=["e"], bdf=A, state=_state(0, gen=None), gen_now=None)
    assert "intermediate" not in report.findings[2].message and report.findings[2].evidence == ["e"]  # no generation to match


def test_at_p0_a_link_its_state_source_read_at_its_max_is_the_slots_best_and_no_finding():
    """sysfs's max_link_speed of a GPU is the GPU's own (Gen4); NVML read Gen3 of Max 3 (a Gen3 slot)."""
    report = _report()
    assert slow_link(report, "GPU 0", "Gen3", "Gen4", gpus=[0], evidence=["e"], bdf=A, state=_state(0, 3, 3),
                     gen_now=3, below=[A]) is False
    assert report.findings == [] and report.gpu_problems == {}


def test_at_p0_a_link_whose_max_the_state_source_does_not_give_is_only_maybe():
    """A Gen4 GPU under a Gen5 port: sysfs reads the port at Gen4 of Gen5, its own max. NVML (a VM, a
    container) gave no Max: P0 cannot tell a link that trained down from one at the GPU's best."""
    report = _report()
    assert slow_link(report, "0000:40:01.1", "Gen4", "Gen5", gpus=[0], evidence=["e"], bdf="0000:40:01.1",
                     state=_state(0, 4, None), gen_now=4, below=[A]) is False
    (finding,) = report.findings
    assert finding.code == "pcie-link-slow-maybe-idle" and report.gpu_problems == {}


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


def _two_gpus_at(gen: list[int], states: dict[int, int], gen_max: int = 4):
    """The NVML view of the two GPUs of two_gpus_under_root_ports: their link generations and states."""
    topo = link_table([["X", "SYS"], ["SYS", "X"]], numa=[0, 1],
                      gpu={**GEN4_X16, "pci_bus_id": [A, B], "pcie_gen_current": gen, "pcie_gen_max": gen_max})
    return FakeNvml(topo, performance_state=states)


def test_live_sysfs_speeds_are_judged_by_the_state_nvml_read_with_the_same_speed(tmp_path):
    """GPU 0 idle at P8, GPU 1 at P0, both at the RTX 3090's real Gen1 of Gen4: idle, and trained down."""
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"], gpu_link=real_links()["idle"])
    report = doctor(evidence_of_host(str(tmp_path), {}, nvml=_two_gpus_at([1, 1], {0: 8, 1: 0})))
    by_code = {f.code: f for f in report.findings if f.code.startswith("pcie-link")}
    assert set(by_code) == {"pcie-link-slow-idle", "pcie-link-slow"}
    assert by_code["pcie-link-slow-idle"].gpus == [0] and by_code["pcie-link-slow"].gpus == [1]
    assert by_code["pcie-link-slow"].evidence[0].startswith(f"/sys/bus/pci/devices/{B}/current_link_speed: 2.5 GT/s")
    assert "nvmlDeviceGetPerformanceState(GPU 1): 0 (P0)" in by_code["pcie-link-slow"].evidence[1]
    assert report.gpu_problems == {B: [DOWNTRAINED]} and report.pair_problems == {(A, B): [DOWNTRAINED]}
    assert next(c for c in report.checks if c.name == "pcie-links").status == "problem"


def test_a_state_nvml_read_at_another_speed_is_not_put_on_the_sysfs_speed(tmp_path):
    """sysfs read Gen1, NVML then read Gen4 at P0: the GPU woke between the reads; only "maybe"."""
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"], gpu_link=real_links()["idle"])
    report = doctor(evidence_of_host(str(tmp_path), {}, nvml=_two_gpus_at([4, 4], {0: 0, 1: 0})))
    codes = [f.code for f in report.findings if f.code.startswith("pcie-link")]
    assert codes == ["pcie-link-slow-maybe-idle"] * 2 and report.gpu_problems == {}


def test_a_bridge_above_the_port_of_the_gpu_is_no_gpus_own_link_and_stays_maybe(tmp_path):
    host = FakeHost(tmp_path)
    idle = real_links()["idle"]
    host.device(["pci0000:40", "0000:40:01.1"], acs=0, link=idle)  # root port: the switch's uplink, not the GPU's
    host.device(["pci0000:40", "0000:40:01.1", "0000:41:00.0"], acs=0)  # switch upstream port, at its best
    host.device(["pci0000:40", "0000:40:01.1", "0000:41:00.0", "0000:42:08.0"], acs=0, link=idle)  # port above the GPU
    gpu = host.device(["pci0000:40", "0000:40:01.1", "0000:41:00.0", "0000:42:08.0", "0000:43:00.0"], gpu=True, link=idle)
    topo = link_table([["X"]], numa=[0], gpu={**GEN4_X16, "pci_bus_id": [gpu], "pcie_gen_current": 1})
    report = doctor(evidence_of_host(str(tmp_path), {}, nvml=FakeNvml(topo, performance_state={0: 8})))
    reading = {f.message.split()[4]: f.code for f in report.findings if f.code.startswith("pcie-link")}
    assert reading == {gpu: "pcie-link-slow-idle", "0000:42:08.0": "pcie-link-slow-idle",  # both ends of its link
                       "0000:40:01.1": "pcie-link-slow-maybe-idle"}


@pytest.mark.parametrize(("state", "code", "marked"), [
    (0, "pcie-link-slow", True), (8, "pcie-link-slow-idle", False), (2, "pcie-link-slow-maybe-idle", False),
    (None, "pcie-link-slow-maybe-idle", False),
])
def test_in_a_container_nvmls_own_link_and_state_are_judged_alike(tmp_path, state, code, marked):
    (tmp_path / ".dockerenv").write_text("")
    states = {} if state is None else {1: state}
    report = doctor(evidence_of_host(str(tmp_path), {}, nvml=_two_gpus_at([4, 3], states)))
    (finding,) = [f for f in report.findings if f.code.startswith("pcie-link")]
    assert (finding.code, finding.gpus) == (code, [1]) and "Gen3 of Gen4" in finding.message
    assert bool(report.gpu_problems) is marked and (report.pair_problems == {(A, B): [DOWNTRAINED]}) is marked


def test_a_gathered_archive_judges_its_sysfs_speeds_by_its_own_nvidia_smi_q(tmp_path):
    """The real RTX 3090 -q capture (P8, Gen1 of Gen4) beside sysfs files showing the RTX 3090's real
    Gen1 link at the same bus ids, as `gputopo gather` packs them (a derived tree: the two captures
    come from two machines; the topo -m is another real 2-GPU RTX 3090 capture)."""
    host = FakeHost(tmp_path)
    for port, gpu in (("0000:40:01.1", "0000:41:00.0"), ("0000:80:01.1", "0000:81:00.0")):
        host.device([f"pci0000:{port[5:7]}", port], acs=0)
        host.device([f"pci0000:{port[5:7]}", port, gpu], gpu=True, link=real_links()["idle"])
    smi = tmp_path / "gputopo" / "nvidia-smi"
    smi.mkdir(parents=True)
    shutil.copy(OWN_FIXTURES / "corpus/smi_q/rtx3090_2gpu_560_idle_q.txt", smi / "q.txt")
    shutil.copy(OWN_FIXTURES / "corpus/topo/rtx3090_2gpu_nv4_bridge_ryzen5900x.txt", smi / "topo-m.txt")
    with evidence_from_files([str(tmp_path)]) as evidence:
        report = doctor(evidence)
    slow = [f for f in report.findings if f.code.startswith("pcie-link")]
    assert [f.code for f in slow] == ["pcie-link-slow-idle"] * 2
    assert "Performance State P8, PCIe Generation Current 1, Max 4" in slow[0].evidence[1]
    assert not [f for f in report.findings if f.severity in ("warning", "error") and f.code.startswith("pcie")]
