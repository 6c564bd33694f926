"""``gpu-slow-to-every-peer``: one GPU slower than the others to every peer, from any measured matrix."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from linktable import GEN4_X16, PCIE_8, QUADS, link_table, no_p2p_on, pcie_8, rows_of

from gputopo.analysis.expect.measured import measured_links
from gputopo.analysis.causes.slow_gpu_findings import SLOW_RATIO, slow_gpu_findings
from gputopo.model import Measurement, Topology

# Staged copies of a two-socket PCIe box: ~11 GB/s within a switch or socket, ~10 across.
TYPICAL = {"PIX": 11.4, "NODE": 11.0, "SYS": 10.2}


def _measured(topology: Topology, figure, staged: bool = True) -> Topology:
    for link in topology.links:
        value = figure(link)
        if staged:  # P2P on broken everywhere (ACS): only the staged figures tell GPUs apart
            link.measured = Measurement(a_to_b_gbps=2.4, b_to_a_gbps=2.4, p2p_enabled=True, p2p_off_a_to_b_gbps=value,
                                        p2p_off_b_to_a_gbps=value, method="p2pBandwidthLatencyTest", test="P2P=Enabled")
        else:
            link.measured = Measurement(a_to_b_gbps=value, b_to_a_gbps=value, method="bench-p2p")
    return topology


def _findings(topology: Topology):
    return slow_gpu_findings(topology, measured_links(topology))


def test_the_gpu_whose_staged_copies_are_slow_to_every_peer_is_named():
    topo = _measured(pcie_8(), lambda link: TYPICAL[link.type] * (0.6 if 5 in (link.a, link.b) else 1.0))
    (finding,) = _findings(topo)
    assert finding.code == "gpu-slow-to-every-peer" and finding.gpus == [5] and "P2P off" in finding.message


def test_a_healthy_matrix_and_one_slow_pair_name_no_gpu():
    assert _findings(_measured(pcie_8(), lambda link: TYPICAL[link.type])) == []
    one_pair = _measured(pcie_8(), lambda link: TYPICAL[link.type] * (0.5 if (link.a, link.b) == (0, 1) else 1.0))
    assert _findings(one_pair) == []  # GPU 0's and 1's other pairs are fine: a pair, not a GPU


def test_a_slow_socket_is_not_a_slow_gpu():
    """Half the box slow (a whole socket): no one GPU's pairs share the fault, so none is named."""
    assert _findings(_measured(pcie_8(), lambda link: TYPICAL[link.type] * (0.5 if link.a >= 4 or link.b >= 4 else 1))) == []


def test_headline_figures_serve_where_no_staged_copies_were_measured():
    topo = _measured(pcie_8(), lambda link: TYPICAL[link.type] * (0.5 if 2 in (link.a, link.b) else 1.0), staged=False)
    (finding,) = _findings(topo)
    assert finding.gpus == [2] and "as measured" in finding.message


@settings(max_examples=40, deadline=None)
@given(slow=st.integers(0, 7), permutation=st.permutations(range(8)),
       noise=st.lists(st.floats(-0.05, 0.05), min_size=28, max_size=28))
def test_renumbering_the_gpus_renumbers_the_finding_and_noise_changes_nothing(slow, permutation, noise):
    """Metamorphic: the same box with its GPUs numbered otherwise (GPU g is called permutation[g]),
    its figures within 5% noise: the same GPU is named, by its new number."""
    words = rows_of(PCIE_8)
    renamed = [[words[permutation.index(i)][permutation.index(j)] for j in range(8)] for i in range(8)]
    numa = [QUADS[permutation.index(g)] for g in range(8)]
    pairs = [(a, b) for a in range(8) for b in range(a + 1, 8)]
    jitter = dict(zip(pairs, noise))

    def figure(link):
        a, b = sorted((permutation.index(link.a), permutation.index(link.b)))  # the pair in the first numbering
        return TYPICAL[link.type] * (1 + jitter[(a, b)]) * (SLOW_RATIO * 0.8 if slow in (a, b) else 1.0)

    topo = _measured(link_table(renamed, numa=numa, p2p=no_p2p_on(renamed, "SYS"), gpu=GEN4_X16), figure)
    assert [f.gpus for f in _findings(topo)] == [[permutation[slow]]]


def test_a_finding_on_the_gpus_own_link_is_its_cause():
    from gputopo.analysis.causes.slow_gpu_findings import link_slow_gpu_causes
    from gputopo.model import Finding

    slow = Finding("warning", "gpu-slow-to-every-peer", "GPU 5 copies slower ...", gpus=[5], fix="read GPU 5's link")
    other = Finding("warning", "gpu-slow-to-every-peer", "GPU 2 copies slower ...", gpus=[2], fix="read GPU 2's link")
    narrow = Finding("warning", "doctor-pcie-link-narrow", "GPU 5's link runs at x8 of x16", gpus=[5])
    link_slow_gpu_causes([slow, other], [narrow])
    assert slow.caused_by == "doctor-pcie-link-narrow" and slow.fix == "see doctor-pcie-link-narrow"
    assert "found that link: the cause" in slow.message
    assert other.caused_by is None and other.fix == "read GPU 2's link"  # nothing found on GPU 2's link
