"""Merging several views of one host: unknowns filled, disagreements recorded (first source
kept), GPUs joined by PCI bus id, or by index with the assumption said."""

from __future__ import annotations

import copy

import pytest

from gputopo.errors import InputError
from gputopo.model import Gpu, Measurement, Nic, NicLink, Topology, make_link
from gputopo.sources.merge import merge_views


def smi(bus_ids: list[str] | None = None) -> Topology:
    gpus = [Gpu(index=k, name="Tesla V100-SXM2-16GB", pci_bus_id=bus_ids[k] if bus_ids else None) for k in range(3)]
    links = [make_link(0, 1, "NV2", nvswitch=False), make_link(0, 2, "SYS", nvswitch=False), make_link(1, 2, "PIX")]
    return Topology(gpus=gpus, links=links, source="nvidia-smi", source_detail="topo.txt",
                    nics=[Nic(name="mlx5_0")], nic_links=[NicLink(gpu=0, nic="mlx5_0", type="PIX")])


def measured(a: int, b: int, gbps: float, bus_ids: list[str] | None = None, source: str = "p2pBandwidthLatencyTest") -> Topology:
    gpus = [Gpu(index=k, pci_bus_id=bus_ids[k] if bus_ids else None) for k in range(3)]
    link = make_link(a, b, "UNKNOWN", measured=Measurement(a_to_b_gbps=gbps, latency_us=None if a < b else 2.0))
    if a > b:  # make_link orders the pair: the figure measured a->b is b_to_a of the stored link
        link.measured = Measurement(b_to_a_gbps=gbps)
    return Topology(gpus=gpus, links=[link], source=source, source_detail="p2p.txt")


def test_measurements_join_the_links_and_unknowns_are_filled():
    merged = merge_views([smi(), measured(0, 1, 48.3)])
    link = merged.link(0, 1)
    assert link.type == "NV2" and link.nvlink_count == 2 and link.measured.a_to_b_gbps == 48.3
    assert merged.source == "nvidia-smi" and merged.source_detail == "topo.txt + p2p.txt"
    (join,) = merged.disagreements  # joined by index, said, naming the files without bus ids
    assert join.subject == "GPU numbering" and join.kept == "by index (topo.txt and p2p.txt without PCI bus ids)"


def test_a_cuda_ordered_source_with_bus_ids_joins_by_bus_order():
    """p2pBandwidthLatencyTest numbers GPUs the CUDA way (FASTEST_FIRST): its device 0 here is the
    GPU at 3d:00.0, which nvidia-smi (PCI bus order) calls 2."""
    from gputopo.analysis.causes.disagreements import disagreement_findings

    bus = ["0000:3d:00.0", "0000:1a:00.0", "0000:1b:00.0"]
    merged = merge_views([smi(), measured(0, 1, 48.3, bus_ids=bus)])
    assert [g.pci_bus_id for g in merged.gpus] == ["0000:1a:00.0", "0000:1b:00.0", "0000:3d:00.0"]
    link = merged.link(0, 2)  # its 0->1 is nvidia-smi's 2->0
    assert link.type == "SYS" and link.measured.b_to_a_gbps == 48.3 and merged.link(0, 1).measured is None
    (join,) = merged.disagreements
    assert join.kept == "by PCI bus order (every GPU of the host assumed to be in both)"
    (finding,) = disagreement_findings(merged)
    assert finding.code == "gpus-joined-by-index" and "by PCI bus order" in finding.message


def test_different_counts_numbered_differently_are_refused_with_the_way_out():
    """A CUDA program that saw 2 of 4 GPUs, without bus ids: which two cannot be told."""
    two = measured(0, 1, 9.9)
    two.gpus = two.gpus[:2]
    with pytest.raises(InputError, match="number their GPUs differently and neither says their PCI bus ids"):
        merge_views([smi(), two])


def test_the_refusal_names_the_one_source_without_bus_ids():
    """A CUDA program that saw 2 of 4 GPUs, with their bus ids, and a topo -m without: only the
    topo -m lacks them, and the refusal says so (not "neither")."""
    two = measured(0, 1, 9.9, bus_ids=["0000:1a:00.0", "0000:1b:00.0", "0000:3d:00.0"])
    two.gpus = two.gpus[:2]
    with pytest.raises(InputError, match=r"differently and .* does not say every GPU's PCI bus id, so"):
        merge_views([smi(), two], ["topo.txt", "p2pbw.txt"])


def test_sources_that_number_like_nvml_join_by_index_whatever_their_counts():
    from gputopo.model import NvLinkState

    nvlinks = Topology(gpus=[Gpu(index=2)], nvlinks=[NvLinkState(gpu=2, link=0, active=False)], source="nvidia-smi-nvlink")
    merged = merge_views([smi(), nvlinks])
    assert merged.disagreements == [] and merged.nvlinks[0].gpu == 2


def test_the_inputs_are_not_modified():
    first, second = smi(), measured(0, 1, 48.3)
    merge_views([first, second])
    assert first.link(0, 1).measured is None and first.disagreements == []


def test_a_disagreement_keeps_the_first_source_and_is_recorded():
    other = smi()
    other.source_detail = "old-topo.txt"
    other.links[0].type = "NV1"
    other.gpus[2].numa_node = 1
    base = smi()
    base.gpus[2].numa_node = 0
    merged = merge_views([base, other])
    assert merged.link(0, 1).type == "NV2" and merged.gpu(2).numa_node == 0
    subjects = {d.subject: d for d in merged.disagreements}
    assert set(subjects) == {"link 0-1 type", "GPU 2 numa_node"}
    d = subjects["link 0-1 type"]
    assert (d.kept, d.kept_from, d.other, d.other_from, d.gpus) == ("NV2", "topo.txt", "NV1", "old-topo.txt", [0, 1])


def test_join_by_pci_bus_id_maps_another_numbering():
    """A CUDA program in FASTEST_FIRST order numbered the GPUs 2,0,1: the bus ids put them right."""
    bus = ["0000:1a:00.0", "0000:1b:00.0", "0000:3d:00.0"]
    base = smi(bus)
    other = measured(0, 1, 9.5, bus_ids=[bus[2], bus[0], bus[1]])  # its GPU 0 is our 2, its 1 our 0
    merged = merge_views([base, other])
    link = merged.link(0, 2)
    assert link.type == "SYS" and link.measured.b_to_a_gbps == 9.5 and link.measured.a_to_b_gbps is None
    assert merged.disagreements == []


def test_a_bus_id_the_first_source_lacks_is_refused():
    bus = ["0000:1a:00.0", "0000:1b:00.0", "0000:3d:00.0"]
    base = smi(bus)
    with pytest.raises(InputError, match="PCI bus id 0000:99:00.0, which topo.txt does not have"):
        merge_views([base, measured(0, 1, 1.0, bus_ids=[bus[0], bus[1], "0000:99:00.0"])])


def test_a_gpu_index_the_first_source_lacks_is_refused():
    extra = measured(0, 1, 1.0, source="nvidia-smi")
    extra.gpus.append(Gpu(index=7))
    with pytest.raises(InputError, match="names GPU 7, which topo.txt does not have"):
        merge_views([smi(), extra])


def test_two_hosts_are_not_merged():
    a, b = smi(), smi()
    a.host, b.host = "node1", "node2"
    with pytest.raises(InputError, match="is of host node1, topo.txt of host node2"):
        merge_views([a, b])


def test_same_numbering_sources_join_by_index_without_a_note():
    snapshot = smi()
    snapshot.source, snapshot.source_detail = "snapshot", "box.json"
    assert merge_views([smi(), snapshot]).disagreements == []


def test_nics_and_their_links_are_united():
    other = smi()
    other.nics = [Nic(name="mlx5_0"), Nic(name="mlx5_1")]
    other.nic_links = [NicLink(gpu=1, nic="mlx5_1", type="PXB")]
    merged = merge_views([smi(), other])
    assert [n.name for n in merged.nics] == ["mlx5_0", "mlx5_1"]
    assert {(l.gpu, l.nic) for l in merged.nic_links} == {(0, "mlx5_0"), (1, "mlx5_1")}


def test_two_machines_are_not_merged_as_one():
    """Review finding: an 8-GPU NVSwitch snapshot and a 4-GPU PCIe text were merged with only a warning."""
    other = smi()
    other.source_detail = "other.txt"
    for link in other.links:
        link.type, link.nvlink_count = "NV12", 12
    with pytest.raises(InputError, match="disagree on how 3 of 3 GPU pairs are wired: they are not captures of the same host"):
        merge_views([smi(), other])
    one_down = smi()
    one_down.links[0].type, one_down.links[0].nvlink_count = "NV1", 1  # one link down: same host, said
    assert [d.subject for d in merge_views([smi(), one_down]).disagreements] == ["link 0-1 type"]


def test_findings_come_in_the_order_of_the_sources_whether_made_or_noted():
    """A paste's reading notes become findings in analysis, a snapshot's findings are made already:
    merged either way round, the first source's come first."""
    from gputopo.analysis import with_findings
    from gputopo.model import Finding, ReadingNote

    paste = smi()
    paste.reading_notes = [ReadingNote("pcie-only-matrix")]
    snapshot = measured(0, 1, 48.3)
    snapshot.diagnostics = [Finding("info", "carried", "made when the snapshot was saved", [0, 1], evidence=["e"])]
    snapshot.reading_notes = [ReadingNote("cuda-ordinals-only", {"source": "p2p.txt"})]

    def codes(parts: list[Topology]) -> list[str]:
        return [f.code for f in with_findings(merge_views(parts)).diagnostics]

    assert codes([paste, snapshot])[:3] == ["pcie-only-matrix", "carried", "cuda-ordinals-only"]
    assert codes([snapshot, paste])[:3] == ["carried", "cuda-ordinals-only", "pcie-only-matrix"]
    merged = merge_views([paste, snapshot])
    carried = [n for n in merged.reading_notes if n.code == "carried"]  # kept in words, evidence and all
    assert carried[0].facts["worded"]["evidence"] == ["e"] and merged.diagnostics == []
    assert snapshot.diagnostics[0].code == "carried" and paste.reading_notes == [ReadingNote("pcie-only-matrix")]


def test_host_memory_measured_on_cpu_devices_is_never_merged_onto_gpus():
    """issue 32: a bench of logical CPU devices joined to GPUs by index would lay host-memory figures on GPU links."""
    from conftest import OWN_FIXTURES

    from gputopo.errors import InputError
    from gputopo.sources.reference import load_reference
    from gputopo.sources.registry import read_file

    bench = read_file(str(OWN_FIXTURES / "snapshots" / "bench_cpu4.json"))
    box = load_reference("two-socket-4gpu")  # as many GPUs as the bench has devices: an index join would go
    with pytest.raises(InputError, match="host memory on logical CPU devices"):
        merge_views([box, bench], ["box.json", "bench.json"])


def test_a_later_sources_fabric_is_kept_with_its_gpus_numbered_as_the_merge_numbers_them():
    # NCCL's topology XML gives the tree and NVLink edges; a first source without a fabric (as
    # `topo -m` text) numbers the same GPUs otherwise: the fabric's GPUs follow the merged numbers.
    from conftest import OWN_FIXTURES

    from gputopo.model import normalize_pci_bus_id
    from gputopo.sources.tools import nccl_xml

    xml = OWN_FIXTURES / "corpus" / "nccl_xml" / "ibm_gx3d_8xh100_nvswitch_8nic_topo.xml"
    with_fabric = nccl_xml.read(xml.read_text(encoding="utf-8"), "topo.xml")
    assert with_fabric.fabric is not None and with_fabric.fabric.edges
    last = max(g.index for g in with_fabric.gpus)
    first = copy.deepcopy(with_fabric)
    first.fabric = None
    for gpu in first.gpus:
        gpu.index = last - gpu.index
    for link in first.links:
        link.a, link.b = last - link.a, last - link.b

    merged = merge_views([first, with_fabric], ["topo-m.txt", "topo.xml"])

    index_by_bus = {normalize_pci_bus_id(g.pci_bus_id): g.index for g in merged.gpus}
    gpu_nodes = [node for node in merged.fabric.nodes if node.kind == "gpu"]
    assert len(gpu_nodes) == len(merged.gpus)
    assert all(index_by_bus[normalize_pci_bus_id(node.bdf)] == node.gpu for node in gpu_nodes)
    assert len(merged.fabric.edges) == len(with_fabric.fabric.edges)
    a, b = (node for node in gpu_nodes[:2])
    assert merged.fabric.nvlink_count(a.id, b.id) == with_fabric.fabric.nvlink_count(
        next(n.id for n in with_fabric.fabric.nodes if n.bdf == a.bdf), next(n.id for n in with_fabric.fabric.nodes if n.bdf == b.bdf))
