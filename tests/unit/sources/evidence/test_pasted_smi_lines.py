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


def test_the_gpus_own_top_generation_is_not_the_links():
    """`pcie.link.gen.gpumax` is the GPU's own top: a Gen5 card at Gen4 in a Gen4 slot is at the link's top.
    With `pcie.link.gen.hostmax` beside it the link's top is the lower; alone it says nothing of the slot."""
    both = parse_pasted("index, pstate, pcie.link.gen.gpucurrent, pcie.link.gen.gpumax, pcie.link.gen.hostmax\n"
                        "0, P0, 4, 5, 4\n").facts.smi_rows[0]
    assert (both.gen, both.gen_max) == (4, 4)
    alone = parse_pasted("index, pstate, pcie.link.gen.gpucurrent, pcie.link.gen.gpumax\n0, P0, 4, 5\n").facts.smi_rows[0]
    assert (alone.gen, alone.gen_max) == (4, None)
    from gputopo.analysis.causes.doctor import doctor
    from gputopo.sources.evidence.health import HealthEvidence

    text = "index, pstate, pcie.link.gen.gpucurrent, pcie.link.gen.gpumax\n0, P0, 4, 5\n"
    report = doctor(HealthEvidence(source="p", pasted=[("p", parse_pasted(text))]))
    assert not [f for f in report.findings if f.code == "pcie-link-slow"]  # never "trained down" from the GPU's top


def test_query_gpu_csv_with_a_digit_int_refuses_is_not_a_row():
    """'²' (and other Unicode "digits" such as '①') pass str.isdigit() but not int(): the paste's
    row is not one, never a ValueError traceback."""
    rows = parse_pasted("index, pstate, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current\n"
                        "0, P8, 1, 4, \u00b2\n1, P8, \u2460, 4, 16\n2, P8, 1, 4, 16").facts.smi_rows
    assert [(r.index, r.gen, r.width) for r in rows] == [(2, 1, 16)]


CORPUS = "tests/fixtures/corpus/doctor_pastes/"


def test_fabric_manager_built_for_another_driver():
    """gpu-operator#544 as posted, and the same refusal as other threads word it: no journal prefix,
    a typographic apostrophe inside quotes (nvtrust#55), "doesn't" / "does not", the full stop of the
    version glued to it. A line saying the versions match is not a refusal."""
    from pathlib import Path

    real = Path(CORPUS + "gpuoperator544_fm_interface_530_30_vs_driver_530_41_one_line.txt").read_text()
    versions = parse_pasted(real).facts.fabric_versions
    assert (versions.manager, versions.driver, versions.line) == ("530.30.02", "530.41.03", 1)
    for text in ('> "fabric manager NVIDIA GPU driver interface version 550.90.07 don\u2019t match with driver '
                 'version 550.107.02. Please update with matching NVIDIA driver package"',
                 "Nov 05 13:55:26 node1 nv-fabricmanager[104230]: fabric manager NVIDIA GPU driver interface "
                 "version 550.127.05 doesn't match with driver version 550.120. Please update\r",
                 "Fabric Manager NVIDIA GPU driver interface version 550.127.05 does not match with the driver "
                 "version 550.120."):
        versions = parse_pasted(text).facts.fabric_versions
        assert versions is not None and versions.driver in ("550.107.02", "550.120"), text
    assert parse_pasted("fabric manager driver interface version 550.120 matches with driver version "
                        "550.120").facts.fabric_versions is None


def test_a_mismatch_line_naming_one_version_twice_is_no_mismatch():
    """'interface version 530.30.02 don't match with driver version 530.30.02' contradicts itself (Fabric
    Manager compares the two): made into fabric-not-ready, an error whose message says the versions differ."""
    text = ("fabric manager NVIDIA GPU driver interface version 530.30.02 don't match with driver version "
            "530.30.02")
    assert parse_pasted(text).facts.fabric_versions is None
