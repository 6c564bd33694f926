from gputopo.sources.evidence.pasted_health import parse_pasted


def test_nvml_all_links_inactive_for_the_gpu_before():
    facts = parse_pasted("GPU 2: NVIDIA B200 (UUID: GPU-x)\nNVML: Unable to retrieve NVLink information as all "
                         "links are inActive").facts
    assert list(facts.nvml_no_links) == [2]


def test_inactive_links_without_their_header():
    facts = parse_pasted("Link 0: <inactive>\nLink 1: <inactive>").facts
    assert sorted(facts.links_inactive[None]) == [0, 1]


def test_query_gpu_csv_with_header_or_from_the_command():
    rows = parse_pasted("index, pstate, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current\n"
                        "0, P8, 1, 4, 16").facts.smi_rows
    assert [(r.index, r.pstate, r.gen, r.gen_max, r.width) for r in rows] == [(0, "P8", 1, 4, 16)]
    rows = parse_pasted("$ nvidia-smi --query-gpu=index,pcie.link.width.current,pcie.link.width.max "
                        "--format=csv,noheader\n0, 8, 16").facts.smi_rows
    assert [(r.width, r.width_max) for r in rows] == [(8, 16)]


def test_nvtop_and_fabric_manager():
    facts = parse_pasted("Device 1 [GeForce GTX 1080 Ti] _**PCIe GEN 1@16x**_\n"
                         "nv-fabricmanager[1]: ... [NV_WARN_NOTHING_TO_DO]").facts
    assert [(r.index, r.gen, r.width) for r in facts.smi_rows] == [(1, 1, 16)]
    assert facts.fabric_nothing_to_do is not None
