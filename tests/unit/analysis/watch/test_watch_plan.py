"""The verdict on a plan and its likely causes: the environment, links down, the topology, other GPUs."""

from __future__ import annotations

from linktable import link_table

from gputopo.analysis.watch.watch import Frame, LinkRate, PcieRate
from gputopo.analysis.watch.watch_plan import judge_plan
from gputopo.analysis.watch.watch_summary import Summary
from gputopo.sources.host.nvml_counters import WatchedGpu, WatchedLink

GPUS = [WatchedGpu(i, "V100", None, "2.0", 3, 16, (WatchedLink(i, 0, "gpu", i ^ 1),)) for i in range(4)]


def summary_of(nvlink_gbps: dict[int, float], pcie_gbps: dict[int, float]) -> Summary:
    frame = Frame(2.0, [{"index": i} for i in range(4)],
                  links=[LinkRate(i, 0, f"GPU {i ^ 1}", i ^ 1, nvlink_gbps.get(i, 0.0), 0.0, 25.0, 0.0) for i in range(4)],
                  pcie=[PcieRate(i, pcie_gbps.get(i, 0.0), 0.0, 16.0, 0.0) for i in range(4)])
    summary = Summary()
    summary.add(frame)
    return summary


def codes(judged) -> list[str]:
    return [f.code for f in judged.findings]


def test_pcie_with_p2p_off_in_the_environment_is_caused_by_the_setting():
    judged = judge_plan(summary_of({}, {0: 5.0, 1: 5.0}), [0, 1], "--planned-gpus", GPUS, {"NCCL_P2P_DISABLE": "1"})
    assert judged.verdict == "pcie" and codes(judged) == ["watch-plan-p2p-off-by-setting", "watch-plan-nvlink-idle"]
    assert judged.findings[1].caused_by == "watch-plan-p2p-off-by-setting"
    assert judged.to_dict()["causes"] == ["watch-plan-p2p-off-by-setting"] and judged.to_dict()["pcie_bytes"] == 20e9
    unset = judge_plan(summary_of({}, {0: 5.0}), [0, 1], "x", GPUS, {"NCCL_P2P_DISABLE": "0"})
    assert codes(unset) == ["watch-plan-nvlink-idle"] and unset.findings[0].caused_by is None


def test_a_down_link_and_the_topology_name_their_cause():
    down = [WatchedGpu(0, "V100", None, "2.0", 3, 16, (), (0,))] + GPUS[1:]
    judged = judge_plan(summary_of({}, {0: 5.0}), [0, 1], "x", down, {})
    assert codes(judged)[0] == "watch-plan-nvlink-down" and "GPU 0 NVLink 0 down" in judged.findings[0].message
    topology = link_table("X SYS\nSYS X")
    judged = judge_plan(summary_of({}, {0: 5.0}), [0, 1], "x", GPUS, {}, topology)
    assert codes(judged) == ["watch-plan-no-p2p", "watch-plan-nvlink-idle"] and "(SYS)" in judged.findings[0].message


def test_nvlink_verdict_keeps_only_what_is_wrong_with_the_links():
    judged = judge_plan(summary_of({0: 20.0}, {}), [0, 1], "x", GPUS, {"NCCL_P2P_DISABLE": "1"})
    assert judged.verdict == "nvlink" and codes(judged) == []


def test_traffic_on_other_gpus_than_planned():
    judged = judge_plan(summary_of({2: 20.0, 3: 20.0}, {}), [0, 1], "x", GPUS, {})
    assert judged.verdict == "idle" and codes(judged) == ["watch-plan-traffic-elsewhere"]
    assert judged.findings[0].gpus == [2, 3]
