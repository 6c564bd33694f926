"""GPU pairs an NCCL log shows connected through host memory, on the real logs of the corpus
(tests/fixtures/corpus/nccl_log/EXPECTED.json ``host_memory_pairs``, written before the finding) and
merged with the same host's `nvidia-smi topo -m`: the link word names the likely cause, as an inference."""

import pytest

from gputopo.analysis.causes.nccl_paths import host_memory_findings, host_memory_pairs
from gputopo.analysis.causes.observed_findings import observed_findings
from gputopo.model import Gpu, Topology, make_link
from gputopo.sources.tools import nccl_log
from gputopo.sources.merge import merge_views
from gputopo.sources.registry import read_text
from unit.sources.readers_corpus import CORPUS, cases, text_of

VASTAI = "vastai_4x_a100_shm_between_nvlink_pairs_p2p_cumem_read.log"


def _pairs(topology):
    return sorted(p for entry in host_memory_pairs(topology).values() for p in entry.pairs)


def _with_words(log_text, words, **log_lines):
    """The log merged with a topology of these link words (``{(a, b): word}``), as `scan --from` does."""
    topo = Topology(gpus=[Gpu(index=k) for k in range(4)], links=[make_link(a, b, w) for (a, b), w in words.items()],
                    source="nvidia-smi", source_detail="topo.txt")
    return merge_views([topo, nccl_log.read(log_text, "nccl.log")], ["topo.txt", "nccl.log"])


def _vastai_words(cross):
    return {(0, 1): "NV12", (2, 3): "NV10", (0, 2): cross, (0, 3): cross, (1, 2): cross, (1, 3): cross}


@pytest.mark.parametrize(("name", "want"), cases("nccl_log"))
def test_real_logs_name_the_pairs_the_expert_names(name, want):
    topology = nccl_log.read(text_of("nccl_log", name), name)
    assert _pairs(topology) == [tuple(p) for p in want.get("host_memory_pairs", [])]
    findings = host_memory_findings(topology)
    assert [f.severity for f in findings] == ([want["host_memory_severity"]] if want.get("host_memory_pairs") else [])


def test_the_log_alone_names_the_causes_and_what_tells_them_apart():
    (finding,) = host_memory_findings(nccl_log.read(text_of("nccl_log", VASTAI), "v"))
    assert finding.message.startswith("NCCL sends between GPUs 0-3, 1-2 through host memory (SHM/direct/direct), not "
                                      "P2P, while it uses P2P between 0-1, 2-3")
    assert "The log does not say why" in finding.message and "NCCL_P2P_LEVEL" in finding.message
    assert "`nvidia-smi topo -m`" in finding.fix and "PIX or PXB at P2P turned off or unavailable" in finding.fix
    assert finding.evidence == ["GPU 3 -> GPU 0 via SHM/direct/direct (channel 02)",
                                "GPU 1 -> GPU 2 via SHM/direct/direct (channel 02)"]


def test_merged_with_its_own_topo_m_node_points_at_nccls_p2p_level_as_an_inference():
    """The same README's topo -m: NODE between the SHM pairs, NV12/NV10 where NCCL used P2P."""
    want = dict(cases("nccl_log"))[VASTAI]["with_topo"]
    text = (CORPUS / want["file"]).read_text(encoding="utf-8") + "\n" + text_of("nccl_log", VASTAI)
    merged = read_text(text, "paste")
    assert {f"{a}-{b}": merged.link(a, b).type for a, b in _pairs(merged)} == want["host_memory_links"]
    assert list(host_memory_pairs(merged)) == [want["cause"]]
    (finding,) = [f for f in observed_findings(merged) if f.code == "nccl-shm-between-gpus"]
    assert finding.severity == want["severity"] and "GPUs 0-3, 1-2 (NODE)" in finding.message
    assert "which NCCL counts as PHB" in finding.message and "likely NCCL's own rule, not a fault (inferred" in finding.message
    assert "NCCL_P2P_LEVEL=PHB" in finding.fix and "measure P2P faster" in finding.fix
    assert not [f for f in observed_findings(merged) if f.code == "nccl-not-p2p"]  # no NVLinked pair went SHM


@pytest.mark.parametrize(("cross", "cause", "severity", "says"), [
    ("SYS", "sockets", "info", "SYS between them (across NUMA nodes"),
    ("PHB", "host-bridge", "info", "PHB between them (through a CPU's host bridge"),
    ("PIX", "switch", "warning", "every NCCL uses P2P on such a path by default"),
    ("PXB", "switch", "warning", "P2P is turned off for the job"),
])
def test_each_link_word_points_at_its_own_cause(cross, cause, severity, says):
    merged = _with_words(text_of("nccl_log", VASTAI), _vastai_words(cross))
    assert list(host_memory_pairs(merged)) == [cause]
    (finding,) = host_memory_findings(merged)
    assert finding.severity == severity and says in finding.message and "inferred" in finding.message


def test_a_p2p_level_the_log_shows_explains_the_paths_beyond_it_and_only_those():
    line = "dbaaa2700fd2:1890:1890 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to PXB\n"
    merged = _with_words(line + text_of("nccl_log", VASTAI), _vastai_words("NODE"))
    (finding,) = host_memory_findings(merged)
    assert "The log shows NCCL_P2P_LEVEL=PXB" in finding.message and "NODE is beyond it" in finding.message
    level_sys = _with_words(line.replace("PXB", "SYS") + text_of("nccl_log", VASTAI), _vastai_words("NODE"))
    assert list(host_memory_pairs(level_sys)) == ["allowed"]  # SYS allows NODE: the setting is not why


@pytest.mark.parametrize(("level", "cross", "severity"), [("SYS", "SYS", "info"), ("SYS", "NODE", "info"),
                                                           ("PHB", "PHB", "info"), ("PXB", "PIX", "warning")])
def test_a_p2p_level_the_log_shows_that_allows_the_path_is_not_called_nccls_default_rule(level, cross, severity):
    """NCCL_P2P_LEVEL=SYS set and SHM across SYS: NCCL's level let P2P through, so its default level
    cannot be why, nor is setting NCCL_P2P_LEVEL=SYS the fix: the pair cannot peer."""
    line = f"dbaaa2700fd2:1890:1890 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to {level}\n"
    merged = _with_words(line + text_of("nccl_log", VASTAI), _vastai_words(cross))
    (finding,) = host_memory_findings(merged)
    assert finding.severity == severity
    assert f"The log shows NCCL_P2P_LEVEL={level}, which lets NCCL use P2P on {cross}" in finding.message
    assert "NCCL's own rule" not in finding.message and "default P2P level stops" not in finding.message
    assert "NCCL_P2P_LEVEL=" not in finding.fix and "`nvidia-smi topo -p2p r`" in finding.fix


def test_p2p_off_by_setting_is_not_said_twice_where_connection_lines_say_more():
    line = "dbaaa2700fd2:1890:1890 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC\n"
    topology = nccl_log.read(line + text_of("nccl_log", VASTAI), "v")
    codes = [f.code for f in observed_findings(topology)]
    assert codes == ["nccl-shm-between-gpus"]
    assert "P2P turned off for the job" in host_memory_findings(topology)[0].message


def test_a_pair_nccl_logged_as_p2p_disabled_is_the_drivers_refusal():
    log = ("h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 - Init COMPLETE\n"
           "h:2:2 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 1c000 - Init COMPLETE\n"
           "h:1:1 [0] NCCL INFO P2P is disabled between connected GPUs 0 and 1. You can repress this message with "
           "NCCL_IGNORE_DISABLED_P2P=1.\n"
           "h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n")
    topology = nccl_log.read(log, "r")
    assert list(host_memory_pairs(topology)) == ["refused"]
    assert "the driver (NVML) reports they cannot peer" in host_memory_findings(topology)[0].message


def test_net_counts_only_between_gpus_the_log_places_on_one_host():
    one = ("h:1:1 [0] NCCL INFO Channel 00 : 0[1b000] -> 1[1c000] via NET/Socket/0\n"
           "h:1:2 [1] NCCL INFO Channel 00 : 1[1c000] -> 0[1b000] via NET/Socket/0\n")
    assert _pairs(nccl_log.read(one, "one")) == [(0, 1)]
    two = one.replace("h:1:2", "g:1:2")
    assert _pairs(nccl_log.read(two, "two")) == []  # the network between hosts is no host-memory path


def test_an_nvlinked_pair_over_shm_stays_nccl_not_p2p_alone():
    log = nccl_log.read(text_of("nccl_log", "nccl1190_2x2080ti_direct_shared_memory_cut.log"), "log")
    wired = Topology(gpus=[Gpu(index=0, pci_bus_id="0000:3d:00.0"), Gpu(index=1, pci_bus_id="0000:89:00.0")],
                     links=[make_link(0, 1, "NV2")], source="nvml")
    merged = merge_views([wired, log], ["nvml", "log"])
    assert [f.code for f in observed_findings(merged)] == ["nccl-not-p2p"]


def test_the_p2p_setting_is_read_by_the_one_rule_recommend_uses():
    """NCCL disables P2P only for NCCL_P2P_DISABLE=1 (strtol), and strcmp()s NCCL_P2P_LEVEL's names:
    nccl_paths read '2' as disabled and 'pxb' as PXB, unlike recommend's figures (one rule now)."""
    from gputopo.analysis.causes.nccl_paths import _p2p_level

    assert _p2p_level({"NCCL_P2P_DISABLE": "1"}) == "LOC"
    assert _p2p_level({"NCCL_P2P_DISABLE": "2"}) is None and _p2p_level({"NCCL_P2P_DISABLE": "0"}) is None
    assert _p2p_level({"NCCL_P2P_LEVEL": "pxb"}) is None and _p2p_level({"NCCL_P2P_LEVEL": "PXB"}) == "PXB"
    assert _p2p_level({"NCCL_P2P_LEVEL": "2"}) == "PXB"  # the old numbers, as NCCL maps them
