"""Findings from measurements and tool outputs, checked against the topology, on real captures."""

from gputopo.analysis.causes.diagnose import diagnose
from gputopo.analysis.causes.observed_findings import observed_findings
from gputopo.model import CollectiveRow, CollectiveRun, Gpu, Measurement, Topology, make_link
from gputopo.sources.tools import nccl_log, p2pbw
from gputopo.sources.merge import merge_views
from gputopo.sources.registry import read_text
from unit.sources.readers_corpus import text_of


def _codes(topology):
    return {f.code for f in observed_findings(topology)}


def test_p2p_slower_than_staged_on_the_six_4090s_of_nccl_814():
    topo = p2pbw.read(text_of("p2pbw", "nccl814_6x_rtx4090_p2p_slower_than_staged_cut.txt"), "814")
    (finding,) = [f for f in observed_findings(topo) if f.code == "p2p-slower-than-staged"]
    assert finding.message.startswith("15 GPU pairs copy slower with P2P on")  # every pair of six
    assert "0-1 9.9 vs 20.1" in finding.message and "and 9 more" in finding.message
    assert "p2pBandwidthLatencyTest" in finding.message and "ACS" in finding.fix and finding.gpus == list(range(6))


def _slower_with_p2p(words: dict[tuple[int, int], str]) -> Topology:
    """Four GPUs whose measured pairs copy 4 GB/s with P2P on and 10 staged, on the given link words."""
    links = []
    for (a, b), word in words.items():
        link = make_link(a, b, word)
        link.measured = Measurement(a_to_b_gbps=4.0, b_to_a_gbps=4.0, p2p_enabled=True, p2p_off_a_to_b_gbps=10.0,
                                    p2p_off_b_to_a_gbps=10.0, method="p2pBandwidthLatencyTest")
        links.append(link)
    return Topology(gpus=[Gpu(index=i, name="GPU") for i in range(4)], links=links, source="t")


def test_p2p_slower_across_a_host_bridge_also_names_the_platform():
    """ACS or the IOMMU slow P2P anywhere; across the CPU's host bridge the root complex's own peer
    forwarding may be slower than host copies by design (an expert review found it left out)."""
    switch = _p2p_slower_fix_of(_slower_with_p2p({(0, 1): "PIX", (2, 3): "PXB"}))
    assert "ACS or the IOMMU" in switch and "root complex itself" not in switch
    bridge = _p2p_slower_fix_of(_slower_with_p2p({(0, 1): "PIX", (0, 2): "NODE", (1, 3): "SYS"}))
    assert "0-2, 1-3 cross the CPU's host bridge, where the root complex itself may forward" in bridge
    assert "no setting removes" in bridge and "faster for these pairs" in bridge
    unknown = _p2p_slower_fix_of(_slower_with_p2p({(0, 1): "UNKNOWN"}))
    assert "where a pair crosses the CPU's host bridge (PHB, NODE or SYS in `nvidia-smi topo -m`; this source does not say)" in unknown


def _p2p_slower_fix_of(topology: Topology) -> str:
    (finding,) = [f for f in observed_findings(topology) if f.code == "p2p-slower-than-staged"]
    return finding.fix


def test_healthy_p2p_gives_no_measurement_finding():
    topo = read_text(text_of("pairs", "asus_esc8000a_4x_rtx6000ada_topo.txt")
                     + text_of("pairs", "asus_esc8000a_4x_rtx6000ada_p2pbw.txt"), "asus")
    assert not _codes(topo) & {"p2p-slower-than-staged", "measured-below-expected"}


def test_a_pair_far_below_its_link_type_is_named_with_its_share():
    gpus = [Gpu(index=i, pcie_gen_max=4, pcie_width_current=16) for i in (2, 5)]
    m = Measurement(a_to_b_gbps=9.9, b_to_a_gbps=9.9, method="p2pBandwidthLatencyTest", test="P2P=Enabled")
    finding = next(f for f in diagnose(Topology(gpus=gpus, links=[make_link(2, 5, "PIX", measured=m)]))
                   if f.code == "measured-below-expected")
    assert "GPU 2\u21925: 9.9 GB/s, 40% of what PIX over PCIe Gen4 x16 gives" in finding.message
    assert finding.gpus == [2, 5]


def test_nccl_shm_between_gpus_the_topology_says_can_peer():
    log = nccl_log.read(text_of("nccl_log", "nccl1190_2x2080ti_direct_shared_memory_cut.log"), "log")
    wired = Topology(gpus=[Gpu(index=0, pci_bus_id="0000:3d:00.0"), Gpu(index=1, pci_bus_id="0000:89:00.0")],
                     links=[make_link(0, 1, "NV2", p2p_read="ok", p2p_write="ok")], source="nvml")
    merged = merge_views([wired, log], ["nvml", "log"])
    finding = next(f for f in observed_findings(merged) if f.code == "nccl-not-p2p")
    assert "NCCL uses SHM (direct shared memory) between GPU 1 and GPU 0 although they are NV2" in finding.message
    assert "NCCL_P2P_DISABLE or NCCL_P2P_LEVEL?" in finding.message
    merged.nccl.settings["NCCL_P2P_DISABLE"] = "1"
    assert "the log shows NCCL_P2P_DISABLE=1" in next(f.message for f in observed_findings(merged) if f.code == "nccl-not-p2p")


def test_nccl_refused_p2p_and_inactive_nvlinks_and_wrong_collectives():
    refused = nccl_log.read(text_of("nccl_log", "pytorch130113_3gpu_p2p_disabled_between_connected_cut.log"), "r")
    assert "nccl-p2p-refused" in _codes(refused)
    nvl = read_text(text_of("nvlink", "nccl1608_3x_h100nvl_topo_then_status_six_inactive_cut.txt"), "nvl")
    inactive = next(f for f in observed_findings(nvl) if f.code == "nvlink-inactive")
    assert inactive.severity == "info" and "4, 5, 10, 11, 16, 17" in inactive.message  # NV12 bridge, 12 up
    assert "normal for this card" in inactive.message and inactive.fix is None  # no bridge to reseat: all 12 are up
    nvl.link(0, 1).type, nvl.link(0, 1).nvlink_count = "NV18", 18
    assert next(f for f in observed_findings(nvl) if f.code == "nvlink-inactive").severity == "warning"
    run = CollectiveRun("all_reduce", gpus=[0, 1], rows=[CollectiveRow(size_bytes=8, out_wrong=0, in_wrong=2)])
    bad = Topology(gpus=[Gpu(index=0), Gpu(index=1)], collectives=[run])
    assert next(f for f in observed_findings(bad) if f.code == "collective-wrong-results").severity == "error"


def test_nccl_p2p_that_cuda_refused_says_the_job_fails_and_what_gets_it_going():
    topo = nccl_log.read(text_of("nccl_log", "raylightning24_2gpu_ray_pid_prefix_p2p_ipc_open_failed_217_cut.log"), "r")
    (failed,) = [f for f in observed_findings(topo) if f.code == "nccl-p2p-ipc-failed"]
    assert failed.severity == "warning" and failed.gpus == [0, 1]
    assert "NCCL set up P2P between GPU 0 and GPU 1 and CUDA refused it" in failed.message
    assert "217 peer access is not supported" in failed.message and "NCCL_P2P_DISABLE=1" in failed.fix


def test_p2p_turned_off_by_the_environment_is_said_where_no_connection_line_says_more():
    topo = nccl_log.read(text_of("nccl_log", "nccl428_2x_t4_p2p_disable_level_loc_nccltests_header_cut.log"), "t4")
    (off,) = [f for f in observed_findings(topo) if f.code == "nccl-p2p-off-by-setting"]
    assert off.severity == "info" and "NCCL_P2P_LEVEL=LOC" in off.message
    topo.nccl.settings = {"NCCL_P2P_LEVEL": "PHB"}  # a level above LOC still lets near pairs peer
    assert not [f for f in observed_findings(topo) if f.code == "nccl-p2p-off-by-setting"]


def test_an_inactive_link_of_an_sxm_module_is_a_fault_not_a_spare_bridge_slot():
    from gputopo.sources.smi import nvlink

    topo = nvlink.read(text_of("nvlink", "azhpc73_v100_status_elided_gpu3_links_3_5_inactive.txt"), "a")
    (down,) = [f for f in observed_findings(topo) if f.code == "nvlink-inactive"]
    assert down.severity == "warning" and "SXM2 module: its board wires every NVLink" in down.message
    assert "no bridge to reseat" in down.fix
    card = nvlink.read("GPU 0: NVIDIA RTX A6000 (UUID: GPU-1)\n\t Link 0: 14.062 GB/s\n\t Link 1: <inactive>\n", "c")
    (spare,) = [f for f in observed_findings(card) if f.code == "nvlink-inactive"]
    assert spare.severity == "info" and "more link slots than its bridge uses" in spare.message


def test_a_pair_slow_with_and_without_p2p_is_a_narrow_path_not_p2p():
    """tinygrad#44: two RTX 4090 copy 6.6 GB/s with P2P and 6.3 without (a Gen4 x16 link gives ~25)."""
    topo = p2pbw.read(text_of("p2pbw", "tinygrad44_2x_rtx4090_visible_0_1_p2p_6gbps_prompt_cut.txt"), "t")
    (narrow,) = [f for f in observed_findings(topo) if f.code == "pcie-path-narrow"]
    assert narrow.gpus == [0, 1] and "0-1 6.6 with P2P, 6.3 without" in narrow.message
    assert "P2P is not the cause" in narrow.message
    # a command nvidia-smi runs: 580 has no PCIE display type for `-q -d` (pcie_link says so too)
    assert "-d PCIE" not in narrow.fix and "pcie.link.width.current,pcie.link.width.max --format=csv" in narrow.fix
    healthy = p2pbw.read(text_of("p2pbw", "asus_esc8000a_bandwidthtest_then_p2pbw_session.txt"), "a")
    slower = p2pbw.read(text_of("p2pbw", "aikitoria9_2x_rtx5090_p2p_writes_asymmetric_no_device_lines.txt"), "s")
    assert "pcie-path-narrow" not in _codes(healthy) | _codes(slower)  # 22 GB/s staged; 42 staged, P2P the culprit


def test_a_pair_where_p2p_is_the_slower_way_is_not_also_called_a_narrow_path():
    """tinygrad#44 with its P2P figures lowered to 4.6 (below the 6.3 staged): P2P is the cause there,
    so pcie-path-narrow ("P2P is not the cause") must not contradict p2p-slower-than-staged."""
    text = text_of("p2pbw", "tinygrad44_2x_rtx4090_visible_0_1_p2p_6gbps_prompt_cut.txt")
    text = text.replace("1015.27   6.60", "1015.27   4.60").replace("1   6.60 945.63", "1   4.60 945.63")
    codes = _codes(p2pbw.read(text, "t"))
    assert "p2p-slower-than-staged" in codes and "pcie-path-narrow" not in codes


def test_a_narrow_path_says_it_assumes_gen3_and_is_not_claimed_for_a_gen2_card():
    """tinygrad#44's figures: p2pBandwidthLatencyTest does not give the PCIe generation, so the Gen3
    floor is named as an assumption; where the GPUs' links are known to be Gen2 (~6 GB/s is what a
    Gen2 x16 link carries), there is no finding at all."""
    topo = p2pbw.read(text_of("p2pbw", "tinygrad44_2x_rtx4090_visible_0_1_p2p_6gbps_prompt_cut.txt"), "t")
    (narrow,) = [f for f in observed_findings(topo) if f.code == "pcie-path-narrow"]
    assert "assuming PCIe Gen3 or newer" in narrow.message
    for gpu in topo.gpus:
        gpu.pcie_gen_max = 4
    (known,) = [f for f in observed_findings(topo) if f.code == "pcie-path-narrow"]
    assert "assuming" not in known.message and "are PCIe Gen3 or newer" in known.message
    for gpu in topo.gpus:
        gpu.pcie_gen_max = 2
    assert "pcie-path-narrow" not in _codes(topo)


def test_pairs_nccl_found_connected_but_refused_are_one_fault_not_also_a_design():
    # "P2P is disabled between connected GPUs 0 and 1": NCCL's topology says the pair can peer, CUDA
    # refuses it. One fault naming the GPUs, not also a p2p-ns saying the machine is built without P2P.
    topo = nccl_log.read(text_of("nccl_log", "pytorch130113_3gpu_p2p_disabled_between_connected_cut.log"), "x.log")
    assert all(link.p2p_read == "NS" for link in topo.links)  # the reader keeps what CUDA answered
    findings = diagnose(topo)  # with the observed findings
    (refused,) = [f for f in findings if f.code == "nccl-p2p-refused"]
    assert refused.gpus == [0, 1, 2] and "the driver's P2P status for them" in refused.message and "CUDA refuses" not in refused.message
    assert not [f for f in findings if f.code.startswith("p2p-")]
    # A pair that cannot peer and that NCCL did not call connected is still the machine's design.
    topo.links.append(make_link(0, 3, "SYS"))
    topo.gpus.append(Gpu(index=3))
    topo.links[-1].p2p_read = topo.links[-1].p2p_write = "NS"
    (design,) = [f for f in diagnose(topo) if f.code == "p2p-ns"]
    assert "0-3" in design.message and "0-1" not in design.message


def test_pairs_refused_where_another_source_says_gns_are_the_machines_design():
    """NCCL's log alone cannot say why the driver refused P2P: a fault to look into. Where another
    source gives every refused pair one design word (GNS: a GeForce card), it is how the box is built."""
    from gputopo.analysis.causes.finding_kinds import kind_of

    topo = nccl_log.read(text_of("nccl_log", "pytorch130113_3gpu_p2p_disabled_between_connected_cut.log"), "x.log")
    (alone,) = [f for f in diagnose(topo) if f.code == "nccl-p2p-refused"]
    assert (alone.severity, kind_of(alone)) == ("warning", "fault") and "does not say why" in alone.fix
    for link in topo.links:
        link.p2p_read = link.p2p_write = "GNS"
    (designed,) = [f for f in diagnose(topo) if f.code == "nccl-p2p-refused"]
    assert (designed.severity, kind_of(designed), designed.fix) == ("info", "design", None)
    assert "status for them is GNS (the GPU model does not support P2P" in designed.message and designed.gpus == [0, 1, 2]
    topo.links[0].p2p_write = "CNS"  # two reasons: not one design fact
    assert next(f for f in diagnose(topo) if f.code == "nccl-p2p-refused").severity == "warning"


def test_a_logs_cannot_peer_is_not_given_nvidia_smis_reason_and_said_once():
    # Old NCCL's "Could not enable P2P between dev a and dev b" numbers the log's own GPUs: one fault.
    topo = nccl_log.read(text_of("nccl_log", "nccl833_4gpu_could_not_enable_p2p_cut.log"), "x.log")
    codes = [f.code for f in diagnose(topo)]
    assert "nccl-p2p-refused" in codes and "p2p-ns" not in codes
    # A TF log says which pairs cannot peer, not why: no "NS = not supported" claimed for it.
    from gputopo.sources.tf.tflog import parse_tf_log, topology_from_tf_view

    view = parse_tf_log(text_of("tf_logs", "tf15_edge_matrix_two_islands_8gpu_1080ti.log"), "tf.log")
    (p2p,) = [f for f in diagnose(topology_from_tf_view(view)) if f.code == "p2p-ns"]
    assert "the log says they cannot peer" in p2p.message and "NS = not supported" not in p2p.message


def test_a_refused_pair_another_source_calls_ok_or_says_nothing_of_keeps_the_refusal_a_fault():
    """The design word must be every refused pair's: a pair the other source says peers (OK), or says
    nothing of, was left out of the count, so one GNS pair made the whole refusal 'as this machine is
    built' (info, no fix), hiding a refusal where the driver says P2P works."""
    from gputopo.model import P2P_OK

    topo = nccl_log.read(text_of("nccl_log", "pytorch130113_3gpu_p2p_disabled_between_connected_cut.log"), "x.log")
    for other in (P2P_OK, None):
        for link in topo.links:
            link.p2p_read = link.p2p_write = "GNS"
        topo.links[1].p2p_read = topo.links[1].p2p_write = other
        refused = next(f for f in diagnose(topo) if f.code == "nccl-p2p-refused")
        assert refused.severity == "warning" and refused.fix, other
