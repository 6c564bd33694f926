"""sources.reference: the reference machines as data, tested once here. Each machine is checked
against the public facts it is built from (GPU count, the link word of every pair, NVSwitch, the
sockets, P2P where the white papers and NVIDIA's P2P rules say); other tests build their machines
from link tables (tests/linktable.py), so correcting a reference machine changes only this file."""

from collections import Counter

import pytest

from gputopo.errors import InputError
from gputopo.sources.reference import ALIASES, MACHINES, load_reference, machine_names


@pytest.mark.parametrize("name", list(MACHINES))
def test_reference_machines_have_a_link_for_every_pair(name):
    topo = load_reference(name)
    n = len(topo.gpus)
    assert len(topo.links) == n * (n - 1) // 2
    assert topo.is_reference and "reference machine" in topo.label


# name: (GPUs, {link word: pairs}, every NVLink through NVSwitch, GPUs per CPU socket)
FACTS = {
    # DGX-1 V100 white paper: hybrid cube-mesh, 6 NVLinks per GPU; two Xeon sockets, 4 GPUs each.
    "dgx1": (8, {"NV2": 8, "NV1": 8, "SYS": 12}, False, [4, 4]),
    # DGX-2: 16 V100 SXM3, 12 NVSwitches, 6 NVLinks per GPU into the fabric; two Xeon sockets.
    "dgx2": (16, {"NV6": 120}, True, [8, 8]),
    # DGX A100: 8 A100 SXM4, 6 NVSwitches, 12 NVLinks per GPU; two EPYC sockets.
    "dgx-a100": (8, {"NV12": 28}, True, [4, 4]),
    # DGX H100: 8 H100 SXM5, 4 NVSwitches, 18 NVLinks per GPU; two Xeon sockets.
    "dgx-h100": (8, {"NV18": 28}, True, [4, 4]),
    # HGX B200: 8 B200, 18 NVLink 5 links per GPU through NVSwitch.
    "hgx-b200": (8, {"NV18": 28}, True, [4, 4]),
    # GB200 NVL72: 72 B200 in one NVLink domain, 18 compute trays of 2 Grace + 4 B200.
    "gb200-nvl72": (72, {"NV18": 72 * 71 // 2}, True, None),
    # A dual-socket PCIe server: two GPUs per switch (PIX), four per socket (NODE), SYS across.
    "pcie-8gpu": (8, {"PIX": 4, "NODE": 8, "SYS": 16}, False, [4, 4]),
    # The classic TF log's box: 0,1 and 2,3 on a PCIe switch each, one per socket.
    "two-socket-4gpu": (4, {"PIX": 2, "SYS": 4}, False, [2, 2]),
    # Two RTX 4090 under one host bridge.
    "workstation-2x4090": (2, {"PHB": 1}, False, [2]),
}


def test_every_machine_has_its_facts_here():
    assert set(FACTS) == set(MACHINES) == set(machine_names())


@pytest.mark.parametrize("name", list(FACTS))
def test_each_machine_is_what_its_public_facts_say(name):
    gpus, words, nvswitch, per_socket = FACTS[name]
    topo = load_reference(name)
    assert len(topo.gpus) == gpus and topo.gpu_indices == list(range(gpus))
    assert Counter(link.type for link in topo.links) == words
    nvlinks = [link for link in topo.links if link.is_nvlink]
    assert all(link.nvswitch is nvswitch for link in nvlinks)
    if per_socket is not None:
        assert sorted(Counter(g.socket for g in topo.gpus).values()) == per_socket
    assert topo.source == "reference" and topo.source_detail == name


def test_gb200_nvl72_is_eighteen_trays_of_four():
    topo = load_reference("gb200-nvl72")
    assert sorted(Counter(g.host for g in topo.gpus).values()) == [4] * 18


@pytest.mark.parametrize(
    ("name", "can_peer_on"),
    [
        ("dgx1", {"NV1", "NV2"}),  # Intel does not route PCIe peer traffic across QPI
        ("pcie-8gpu", {"PIX", "NODE"}),
        ("two-socket-4gpu", {"PIX"}),
        ("workstation-2x4090", set()),  # no P2P on GeForce 40-series
        ("dgx-h100", {"NV18"}),
    ],
)
def test_p2p_follows_the_link_words(name, can_peer_on):
    for link in load_reference(name).links:
        assert link.can_peer is (link.type in can_peer_on), link


def test_aliases_and_unknown_names():
    for alias, name in ALIASES.items():
        assert load_reference(alias).source_detail == name
    assert load_reference("DGX1").source_detail == "dgx1"
    with pytest.raises(InputError, match="unknown reference machine 'dgx9'; known: dgx1, "):
        load_reference("dgx9")
