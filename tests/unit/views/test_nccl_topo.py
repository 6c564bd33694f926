"""NCCL's topology XML from a topology, read back by gputopo's own NCCL XML reader."""

import xml.etree.ElementTree as ET

import pytest

from gputopo.errors import InputError
from gputopo.model import Gpu, Topology, make_link
from gputopo.sources.tools import nccl_xml
from gputopo.sources.reference import load_reference, machine_names
from gputopo.views.nccl_topo import nccl_topology_xml


def same_word(word):
    """NCCL's XML has no host bridge of its own: PHB comes back as NODE (the module says so)."""
    return "NODE" if word == "PHB" else word


@pytest.mark.parametrize("name", machine_names())
def test_every_reference_machine_round_trips_through_the_reader(name):
    machine = load_reference(name)
    host = machine.gpus[0].host
    gpus = [g for g in machine.gpus if g.host == host]
    back = nccl_xml.read(nccl_topology_xml(machine, host), "round trip")
    local = {g.index: position if host else g.index for position, g in enumerate(gpus)}
    assert [g.index for g in back.gpus] == sorted(local.values())
    for gpu in gpus:
        read = back.gpu(local[gpu.index])
        assert (read.pci_bus_id, read.numa_node, read.pcie_gen_current) == (gpu.pci_bus_id, gpu.numa_node,
                                                                            gpu.pcie_gen_current)
    for link in machine.links:
        if link.a in local and link.b in local:
            read = back.link(local[link.a], local[link.b])
            assert (same_word(link.type), bool(link.nvswitch)) == (read.type, bool(read.nvswitch)), (link, read)
            if link.pcie_path:
                assert same_word(link.pcie_path) == read.pcie_path, (link, read)


def test_nvswitch_is_one_link_per_gpu_to_a_switch_and_cpus_are_a_cpumask():
    text = nccl_topology_xml(load_reference("dgx-h100"))
    assert text.count('tclass="0x068000"') == 8 and 'count="18"' in text
    cpus = [cpu.get("affinity") for cpu in ET.fromstring(text).iter("cpu")]
    assert len(cpus) == 2 and all(cpus)


def test_the_cpumask_is_the_kernels_format():
    from gputopo.views.nccl_topo import _cpumask

    assert _cpumask([0, 1, 2, 3, 32, 40]) == "00000101,0000000f"


def test_a_rack_needs_the_host_named():
    with pytest.raises(InputError, match="name one with --node"):
        nccl_topology_xml(load_reference("gb200-nvl72"))


def test_strings_from_the_input_stay_attribute_values():
    gpus = [Gpu(index=0, pci_bus_id='0000:01:00.0"/><evil a="'), Gpu(index=1, pci_bus_id="0000:02:00.0")]
    topology = Topology(gpus=gpus, links=[make_link(0, 1, "NV2")], source="test", source_detail="x --><evil/>")
    text = nccl_topology_xml(topology)
    assert not list(ET.fromstring(text).iter("evil")) and text.count("-->") == 1
    back = nccl_xml.read(text, "t")
    assert back.link(0, 1).type == "NV2"
    gpus[0].pci_bus_id = "0000:01:00.0\n"
    with pytest.raises(InputError, match="control character"):
        nccl_topology_xml(topology)


def test_gpus_without_bus_ids_get_made_up_ones_said_in_a_comment():
    topology = Topology(gpus=[Gpu(index=0), Gpu(index=1)], links=[make_link(0, 1, "PIX")], source="test")
    text = nccl_topology_xml(topology)
    assert "have made-up bus ids" in text
    assert nccl_xml.read(text, "t").link(0, 1).type == "PIX"


def test_a_crafted_snapshots_bus_id_and_capability_are_no_traceback():
    """Security review: a bus id without colons and a compute capability of "1.2.3", "²" or 5,000
    digits passed the snapshot checks and raised in the XML writer (exit 1)."""
    from gputopo.sources.reference import load_reference
    from gputopo.views.nccl_topo import nccl_topology_xml

    for capability in ("1.2.3", "\u00b2.0", "9" * 5000):
        topo = load_reference("dgx1")
        topo.gpus[0].pci_bus_id = "abc"
        topo.gpus[0].compute_capability = capability
        text = nccl_topology_xml(topo)
        assert text.count("<gpu ") == 8 and 'sm="' in text


def test_every_nvlink_names_its_far_end_class_as_nccl_requires():
    """Review 3: direct GPU-GPU <nvlink> had no tclass; NCCL's ncclTopoAddNvLinks reads it with
    xmlGetAttrStr, which fails ("Attribute tclass of node nvlink not found") where it is missing."""
    for name in ("dgx1", "dgx-h100"):
        links = list(ET.fromstring(nccl_topology_xml(load_reference(name))).iter("nvlink"))
        assert links and all(link.get("tclass") in ("0x030200", "0x068000") for link in links), name
    dgx1 = ET.fromstring(nccl_topology_xml(load_reference("dgx1")))
    assert {link.get("tclass") for link in dgx1.iter("nvlink")} == {"0x030200"}
