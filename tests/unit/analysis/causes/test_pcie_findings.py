"""Scan's findings on each GPU's own PCIe link: a width below max is a warning in any state; a
generation below max is a trained-down link at P0 (warning, inferred), an idle GPU at P8 or lower
power (info, by design), unknown otherwise (info, as before the state was read). Checked on link
tables and on every real `nvidia-smi -q` capture against what an expert concluded of it
(tests/fixtures/corpus/smi_q/EXPECTED.json `gen_below_max`, written before gputopo read the state)."""

from __future__ import annotations

import pytest
from linktable import pcie_8

from gputopo.analysis.causes.diagnose import diagnose
from gputopo.analysis.causes.pcie_findings import pcie_degraded
from gputopo.model import Disagreement
from gputopo.sources.registry import read_text
from unit.sources.readers_corpus import cases, text_of

CODES = {"top": "pcie-link-slow", "idle": "pcie-link-slow-idle", "unknown": "pcie-link-slow-maybe-idle"}


def _slow(states: dict[int, int | None], gen: tuple[int, int] = (1, 4)):
    topo = pcie_8()
    for index, state in states.items():
        topo.gpu(index).pcie_gen_current, topo.gpu(index).pcie_gen_max = gen
        topo.gpu(index).performance_state = state
    return topo


def _by_code(topo) -> dict:
    findings = pcie_degraded(topo)
    assert len({f.code for f in findings}) == len(findings)
    return {f.code: f for f in findings}


def test_a_p0_gpu_below_its_max_generation_trained_down_and_says_it_is_inferred():
    found = _by_code(_slow({2: 0}, gen=(3, 4)))
    assert list(found) == ["pcie-link-slow"]
    finding = found["pcie-link-slow"]
    assert (finding.severity, finding.gpus) == ("warning", [2])
    assert finding.message.startswith("GPU 2 runs at PCIe Gen3 (max Gen4) in P0: ")
    assert "trained down (inferred from the performance state" in finding.message and "maybe" not in finding.message
    assert "BIOS" in finding.fix and "riser" in finding.fix and "pstate" in finding.fix


def test_an_idle_gpu_below_its_max_generation_is_idle_by_design_not_maybe():
    finding = _by_code(_slow({0: 8, 1: 12}))["pcie-link-slow-idle"]
    assert (finding.severity, finding.gpus) == ("info", [0, 1])
    assert "GPU 0 runs at PCIe Gen1 (max Gen4) in P8; GPU 1 runs at PCIe Gen1 (max Gen4) in P12" in finding.message
    assert "by design" in finding.message and "no sign of a fault" in finding.message and "maybe" not in finding.message
    assert finding.fix.startswith("nothing to fix")


def test_no_state_keeps_the_wording_of_before_and_an_intermediate_state_is_named_but_not_judged():
    none = _by_code(_slow({3: None}))["pcie-link-slow-maybe-idle"]
    assert none.message == ("GPU 3 runs at PCIe Gen1 (max Gen4): idle GPUs drop the link generation to save power, "
                            "so this is only a problem if it stays low under load")
    p2 = _by_code(_slow({3: 2}, gen=(3, 4)))["pcie-link-slow-maybe-idle"]
    assert p2.severity == "info" and "Gen3 (max Gen4) in P2" in p2.message and "intermediate" in p2.message


def test_states_split_one_machine_into_one_finding_per_reading():
    found = _by_code(_slow({0: 0, 1: 8, 2: None, 3: 5}))
    assert {code: f.gpus for code, f in found.items()} == {
        "pcie-link-slow": [0], "pcie-link-slow-idle": [1], "pcie-link-slow-maybe-idle": [2, 3]}


def test_a_gpu_at_its_max_says_nothing_whatever_its_state_and_width_stays_a_fault_in_any_state():
    topo = _slow({0: 0, 1: 8}, gen=(4, 4))
    topo.gpu(1).pcie_width_current = 8  # idle does not excuse lanes: the wording of before stands
    found = _by_code(topo)
    assert list(found) == ["pcie-link-narrow"] and found["pcie-link-narrow"].gpus == [1]


@pytest.mark.parametrize("subject", ["performance_state", "pcie_gen_current", "pcie_gen_max"])
def test_a_state_from_one_source_is_not_put_on_another_sources_link(subject):
    """Merged views (a snapshot and a later -q): where the sources disagree on the GPU's state or
    generation, the two kept values may come from two moments; the state is not used."""
    topo = _slow({4: 0})
    topo.disagreements.append(Disagreement(f"GPU 4 {subject}", "1", "a", "4", "b", [4]))
    assert list(_by_code(topo)) == ["pcie-link-slow-maybe-idle"]
    topo.disagreements = [Disagreement("GPU 5 pcie_gen_current", "1", "a", "4", "b", [5])]  # another GPU's
    assert list(_by_code(topo)) == ["pcie-link-slow"]


@pytest.mark.parametrize(("name", "expected"), cases("smi_q"), ids=[name for name, _ in cases("smi_q")])
def test_every_real_q_capture_gets_the_experts_reading_of_its_link_speeds(name, expected):
    topology = read_text(text_of("smi_q", name), name)
    got: dict[str, list[int]] = {}
    for finding in diagnose(topology):
        for reading, code in CODES.items():
            if finding.code == code:
                got[reading] = finding.gpus
    assert got == expected["gen_below_max"], name
    assert [g.index for g in topology.gpus if g.index in got.get("top", [])] == expected["below_max_under_load"]
    assert not any(f.code == "pcie-link-narrow" for f in diagnose(topology)), name
