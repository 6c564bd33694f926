"""``scan --from`` / ``doctor --from`` a ``gputopo gather`` archive (gputopo/sources/archives/gathered.py), on
the real archive of a one-GPU H200 microVM (tests/hardware/README.md, 2026-11-26)."""

from __future__ import annotations

import json

from conftest import REPO

from gputopo.sources.doctor_input import evidence_from_files
from gputopo.sources.registry import read_file

H200 = REPO / "tests/fixtures/hardware/2026-11-26-h200-firecracker-run2"


def test_each_gathered_output_is_read_as_its_own_file_and_merged():
    """With one GPU, ``topo -p2p r``'s matrix holds only "X": read as one text with ``topo -m``, it was
    taken for a second topo -m matrix ("holds 2 matrices; the first is used")."""
    topology = read_file(str(H200 / "gather.tar.gz"))
    assert [n.code for n in topology.reading_notes] == ["vm-evidence"]  # from -q: "Virtualization Mode : Pass-Through"
    assert topology.diagnostics == []
    [gpu] = topology.gpus
    assert (gpu.numa_node, gpu.cpu_affinity, gpu.socket) == (0, "0-15", 0)
    assert (gpu.name, gpu.pci_bus_id, gpu.pcie_gen_max, gpu.pcie_width_max) == ("NVIDIA H200", "0000:00:06.0", 5, 16)
    assert topology.source_detail == "gather.tar.gz"


def test_the_archive_reads_as_its_three_files_given_one_by_one(cli, tmp_path):
    whole = json.loads(cli("scan", "--from", str(H200 / "gather.tar.gz"), "--json").stdout)
    files = json.loads(cli("scan", "--from", str(H200 / "topo-m.txt"), "--from", str(H200 / "topo-p2p-r.txt"),
                           "--from", str(H200 / "nvidia-smi-q.txt"), "--json").stdout)
    def socketless(gpus):
        return [{k: v for k, v in g.items() if k != "socket"} for g in gpus]

    assert socketless(whole["gpus"]) == socketless(files["gpus"]) and whole["links"] == files["links"] == []
    assert whole["gpus"][0]["socket"] == 0  # the archive's sysfs adds what the texts cannot say
    assert [d["code"] for d in whole["diagnostics"]] == [d["code"] for d in files["diagnostics"]]
    assert [n["code"] for n in whole["reading_notes"]] == [n["code"] for n in files["reading_notes"]] == ["vm-evidence"]


def test_doctor_reads_the_gathered_topology():
    with evidence_from_files([str(H200 / "gather.tar.gz")]) as evidence:
        assert evidence.topology is not None and len(evidence.topology.gpus) == 1
        assert [n.code for n in evidence.topology.reading_notes] == ["vm-evidence"]
