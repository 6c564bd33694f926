"""The one wording of a PCIe link trained below what it can (gputopo/analysis/causes/pcie_link.py:
``pcie-link-narrow``, ``pcie-link-slow``, ``pcie-link-slow-idle``, ``pcie-link-slow-maybe-idle``,
``pcie-link-limited``), whichever door read it: sysfs, NVML (a container), a pasted lspci (a link that
never trained is no narrow link; LnkSta without LnkCap judged by lspci's marks, or not at all),
``nvidia-smi --query-gpu`` rows."""

from __future__ import annotations

import pytest
from doctor_trees import (
    THREE_GPU_BDFS,
    FakeHost,
    capture,
    real_acs_controls,
    real_links,
    three_gpu_report,
    two_gpus_under_root_ports,
)
from fake_nvml import FakeNvml
from linktable import GEN4_X16, link_table

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.doctor_report import PAIR_PROBLEMS
from gputopo.analysis.causes.pcie_link import DOWNTRAINED, narrow_link, slow_link
from gputopo.analysis.causes.pcie_pstate import StateRead
from gputopo.sources.doctor_input import evidence_of_host
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted
from gputopo.sources.reference import load_reference

A, B, C = THREE_GPU_BDFS
_three_gpus = three_gpu_report


def test_a_narrow_link_marks_its_gpus_and_every_pair_with_them_except_the_spared_ones():
    report = _three_gpus()
    narrow_link(report, "GPU 0", 8, 16, below=[A], affected="GPU 0", evidence=["e"], spared=[(B, A)])
    assert DOWNTRAINED in PAIR_PROBLEMS
    assert report.gpu_problems == {A: [DOWNTRAINED]}
    assert report.pair_problems == {(A, C): [DOWNTRAINED]}  # A-B spared (given in either order); B-C not behind it
    (finding,) = report.findings
    assert (finding.severity, finding.code, finding.gpus) == ("warning", "pcie-link-narrow", [0])
    assert "x8 of x16" in finding.message and finding.effect == "every copy to or from GPU 0"


def test_a_narrow_link_with_no_known_gpu_names_the_gpus_it_is_given():
    report = _three_gpus()
    narrow_link(report, "GPU 5", 4, 16, below=[], affected="GPU 5", evidence=[], gpus=[5])
    assert report.findings[0].gpus == [5] and report.pair_problems == {}


def test_a_slow_link_with_no_state_is_only_info_with_the_command_that_checks_it_under_load():
    report = _three_gpus()
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
    report = _three_gpus()
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
    report = _three_gpus()
    assert slow_link(report, "GPU 1", "Gen1", "Gen4", gpus=[1], evidence=["e"], bdf=B, state=_state(state), gen_now=1,
                     below=[B]) is False
    (finding,) = report.findings
    assert (finding.severity, finding.code) == ("info", "pcie-link-slow-idle")
    assert f"in P{state}: idle GPUs lower their link speed by design" in finding.message and "may" not in finding.message
    assert finding.fix.startswith("nothing to fix") and report.pair_problems == {} and report.gpu_problems == {}


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
        tails.add(finding.message.split(": ", 1)[1].split(" The port above", 1)[0].split(" Whether the slot", 1)[0])
        # What the port above says: sysfs read its LnkCap (x16: trained down); NVML and this paste did not.
        assert ("The port above it (0000:40:01.1) can do x16 (its LnkCap)" in finding.message if door == "sysfs"
                else "shows in the LnkCap of the port above the GPU: `sudo lspci -vvv -s <port> | grep LnkCap`"
                in finding.message), door
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


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


def test_a_link_that_never_trained_is_said_as_a_check_not_judged():
    report = _report(capture("lspci_vvv_root_port_empty_slot_width_x0.txt"))
    assert report.findings == []
    (check,) = [c for c in report.checks if c.name.startswith("pcie link")]
    assert check.name == "pcie link 0000:00:1c.0" and check.status == "not-made" and "no link trained" in check.detail


def test_a_fragment_without_lnkcap_is_judged_by_lspcis_marks_and_unnamed():
    report = _report(capture("lspci_vvv_fragment_lnksta_5gt_x1_downgraded_no_header_geerling480.txt"))
    (narrow,) = [f for f in report.findings if f.code == "pcie-link-narrow"]
    assert narrow.severity == "warning" and "a device (not named in the paste) runs at x1 of its maximum" in narrow.message
    assert "LnkCap line with the maximum is not in the paste" in narrow.message and "xNone" not in narrow.message
    # The speed, downgraded too, is said apart: maybe idle (no performance state in an lspci paste).
    (slow,) = [f for f in report.findings if f.code == "pcie-link-slow-maybe-idle"]
    assert slow.severity == "info" and "runs at Gen2 of its maximum" in slow.message
    (check,) = [c for c in report.checks if c.name == "pcie-links"]
    assert check.status == "problem" and "without their LnkCap line" in check.detail


def test_links_read_at_their_maximum_make_the_check_instead_of_saying_none_were_pasted():
    """Every link of this paste is at its LnkCap: the check is made and ok, never 'no LnkCap/LnkSta lines'."""
    report = _report(capture("lspci_pp_vvv_amd_switch_downstream_port_acs_on.txt"))
    (check,) = [c for c in report.checks if c.name == "pcie-links"]
    assert check.status == "ok" and check.detail.startswith("3 link reading(s) (LnkSta")


def test_lnksta_without_lnkcap_or_marks_is_not_judged_and_cesta_link_errors_are_a_warning():
    report = _report(capture("lspci_vvv_diff_two_runs_lnksta_gen1_gen2_x1_no_lnkcap_geerling4.txt"))
    (check,) = [c for c in report.checks if c.name == "pcie-links"]
    assert check.status == "not-made" and "not what they can do" in check.detail
    assert not [f for f in report.findings if f.code.startswith("pcie-link")]
    (logged,) = report.findings
    assert (logged.severity, logged.code) == ("warning", "pcie-errors-logged")
    assert "devices the paste does not name (2 lines) has BadDLLP+, BadTLP+, Rollover+ and Timeout+ set" in logged.message
    named = _report("0000:01:00.0 VGA compatible controller: NVIDIA Corporation GA102\n"
                    "\t\tCESta:\tRxErr+ BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr-\n")
    assert "(CESta) of GPU 0000:01:00.0 has RxErr+ set" in named.findings[0].message


def test_a_link_held_down_at_boot_names_the_port_and_is_no_idle_guess():
    (limited,) = _report(capture("dmesg_pci_bandwidth_limited_gen3_slot_gen4_card_amdgputop33.txt")).findings
    assert (limited.severity, limited.code) == ("info", "pcie-link-limited")
    assert "0000:0b:00.0 held to Gen3 of its Gen4 by the PCIe link at 0000:00:03.1" in limited.message
    assert "idle" not in limited.message and "sudo lspci -vv -s 0000:00:03.1" in limited.fix
    (narrow,) = _report(capture("dmesg_boot_pci_bandwidth_limited_x1_of_x16_pi_vega_geerling712.txt")).findings
    assert narrow.code == "pcie-link-narrow" and "(limited at boot by the link at 0000:00:00.0) runs at x1 of x16" in narrow.message


def test_idle_gen1_in_p8_is_quiet_and_p0_below_max_warns():
    head = "index, pstate, pcie.link.gen.current, pcie.link.gen.max\n"
    assert {f.severity for f in _report(head + "0, P8, 1, 4").findings} <= {"info"}
    assert [f.code for f in _report(head + "0, P0, 3, 4").findings] == ["pcie-link-slow"]
    report = _report("index, pstate, pcie.link.gen.current\n0, P8, 1")
    assert report.findings == [] and any(c.name == "pcie-links" and c.status == "not-made" for c in report.checks)
