"""sys-within-numa-node (gputopo/analysis/causes/sys_within_numa.py): SYS between GPUs that their
affinity puts on one NUMA node is said, as a note, once; a VM's flat view and SYS across NUMA nodes
are not this."""

from __future__ import annotations

from conftest import OWN_FIXTURES

from gputopo.analysis.causes.diagnose import diagnose
from gputopo.sources.reference import load_reference
from gputopo.sources.registry import read_text

TOPO = OWN_FIXTURES / "corpus" / "topo"


def _codes_and(name: str):
    topology = read_text((TOPO / name).read_text(encoding="utf-8"), name)
    return topology, diagnose(topology)


def test_sys_between_gpus_of_one_numa_node_is_one_note_naming_the_pairs_and_what_would_tell():
    # A 2-socket RTX 4090 box whose nvidia-smi prints SYS for every pair, GPUs 0-3 on node 0, 4-7 on 1.
    _, findings = _codes_and("rtx4090_8gpu_all_sys_same_numa_2nic_tabs.txt")
    (note,) = [f for f in findings if f.code == "sys-within-numa-node"]
    assert note.severity == "info" and note.gpus == list(range(8))
    assert note.message.startswith("GPU pairs 0-1, 0-2, 0-3, 1-2, 1-3, 2-3, 4-5")
    assert "0-4" not in note.message  # across the two nodes SYS is what it says: cross-socket's
    assert "the same NUMA node (nodes 0 and 1)" in note.message and "not in the source" in note.message
    assert "lspci -tv" in note.fix
    assert [f.code for f in findings].count("cross-socket") == 1


def test_a_virtual_machines_flat_view_and_sys_across_sockets_are_not_this():
    _, findings = _codes_and("vm_4xa10_all_sys_one_cpuset_spaces.txt")
    assert "sys-within-numa-node" not in [f.code for f in findings]
    assert "virtual-machine" in [f.code for f in findings]
    assert "sys-within-numa-node" not in [f.code for f in diagnose(load_reference("dgx1"))]
