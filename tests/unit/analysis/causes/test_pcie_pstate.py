"""The performance state read with a PCIe link (gputopo/analysis/causes/pcie_pstate.py: NVML, a
gathered archive's ``nvidia-smi -q``) deciding what a speed below max means: put on a sysfs speed only
where it was read at that speed; at P0 a link read at its own max is the slot's best."""

from __future__ import annotations

import shutil

from conftest import OWN_FIXTURES
from doctor_trees import (
    THREE_GPU_BDFS,
    FakeHost,
    real_acs_controls,
    real_links,
    three_gpu_report,
    two_gpus_under_root_ports,
)
from fake_nvml import FakeNvml
from linktable import GEN4_X16, link_table

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.pcie_link import DOWNTRAINED, slow_link
from gputopo.analysis.causes.pcie_pstate import StateRead
from gputopo.sources.doctor_input import evidence_from_files, evidence_of_host

A, B, C = THREE_GPU_BDFS
_three_gpus = three_gpu_report


def _state(state: int, gen: int | None = 1, gen_max: int | None = 4) -> StateRead:
    return StateRead(state, gen, gen_max, f"state {state} read with Gen{gen}")


def test_an_intermediate_state_or_a_state_read_at_another_speed_stays_maybe():
    report = _three_gpus()
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
    report = _three_gpus()
    assert slow_link(report, "GPU 0", "Gen3", "Gen4", gpus=[0], evidence=["e"], bdf=A, state=_state(0, 3, 3),
                     gen_now=3, below=[A]) is False
    assert report.findings == [] and report.gpu_problems == {}


def test_at_p0_a_link_whose_max_the_state_source_does_not_give_is_only_maybe():
    """A Gen4 GPU under a Gen5 port: sysfs reads the port at Gen4 of Gen5, its own max. NVML (a VM, a
    container) gave no Max: P0 cannot tell a link that trained down from one at the GPU's best."""
    report = _three_gpus()
    assert slow_link(report, "0000:40:01.1", "Gen4", "Gen5", gpus=[0], evidence=["e"], bdf="0000:40:01.1",
                     state=_state(0, 4, None), gen_now=4, below=[A]) is False
    (finding,) = report.findings
    assert finding.code == "pcie-link-slow-maybe-idle" and report.gpu_problems == {}


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


def test_a_performance_state_is_p_and_ascii_digits_only():
    from gputopo.analysis.causes.pcie_pstate import pstate_number

    assert [pstate_number(t) for t in ("P0", "P8", "P12", "P²", "P①", "P", "p8", "P123", None)] == [
        0, 8, 12, None, None, None, None, None, None]  # fmt: skip


def test_doctor_on_a_query_gpu_paste_with_a_superscript_state_is_not_a_traceback(tmp_path):
    from typer.testing import CliRunner

    from gputopo.cli import app

    paste = tmp_path / "x.txt"
    paste.write_text("index, pstate, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current\n"
                     "0, P\u00b2, 1, 4, 16\n1, P0, 4, 4, 16\n", encoding="utf-8")  # fmt: skip
    result = CliRunner().invoke(app, ["doctor", "--from", str(paste)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
