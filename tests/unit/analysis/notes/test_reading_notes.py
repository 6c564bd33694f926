"""The one place reading notes become words: every code a reader notes, its severity, message and fix,
on the same inputs the readers' tests read (they check the facts; this file checks the words)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES

from gputopo.analysis import with_findings
from gputopo.analysis.notes.reading_notes import (
    NOTE_CODES,
    add_reading_findings,
    note_finding,
    note_findings,
    paste_repair_words,
    vm_line,
)
from gputopo.model import Finding, ReadingNote, Topology
from gputopo.model.reading_notes import VM_EVIDENCE, worded_note
from gputopo.sources.host import nvml_notes
from gputopo.sources.smi.smi_text import parse_topo_matrix

SOURCES = Path(__file__).resolve().parents[4] / "gputopo" / "sources"
CORPUS = OWN_FIXTURES / "corpus"


def _words(notes: list[ReadingNote], code: str) -> Finding:
    (finding,) = [f for f in note_findings(notes) if f.code == code]
    return finding


def _noted_codes() -> set[str]:
    """The code of every ``ReadingNote(...)`` a module under gputopo/sources/ makes: a string, or a
    name the module holds (``TF_LOG_CUT``)."""
    codes = set()
    for path in sorted(SOURCES.rglob("*.py")):
        module = None
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ReadingNote" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant):
                    codes.add(first.value)
                else:
                    module = module or importlib.import_module(".".join(path.relative_to(SOURCES.parent.parent).with_suffix("").parts))
                    codes.add(getattr(module, ast.unparse(first)))
    return codes


def test_every_code_a_reader_notes_has_its_words():
    noted = _noted_codes()
    assert len(noted) >= 20 and noted <= NOTE_CODES, sorted(noted - NOTE_CODES)
    assert NOTE_CODES - noted <= {"worded"}, sorted(NOTE_CODES - noted)  # no words for a note nobody makes


# --- nvidia-smi topo -m text ----------------------------------------------------------------------


def _repaired(topology: Topology) -> str:
    finding = _words(topology.reading_notes, "repaired-paste")
    assert finding.severity == "info" and finding.fix is None
    assert finding.message.startswith(f"{topology.source_detail}: the paste was damaged; ")
    return finding.message


def _corpus(name: str) -> Topology:
    return parse_topo_matrix((CORPUS / "topo" / name).read_text(), name)


def test_repairs_of_a_damaged_paste_in_words():
    assert "the header's cells ran together (line 1: 'GPU0GPU1GPU2" in _repaired(_corpus("dgx1_p100_8gpu_nv1_mangled_header_soc.txt"))
    assert "the columns were read from the rows" in _repaired(_corpus("dgx1_p100_8gpu_nv1_mangled_header_soc.txt"))
    rows = "GPU0\t X \tNV2\tPHB\t0-7\nGPU1\tNV2\t X \tPHB\t0-7\nmlx5_0\tPHB\tPHB\t X \n"
    assert "the header's cells ran together" in _repaired(parse_topo_matrix("\tGPU0GPU1mlx5_0\tCPU Affinity\n" + rows, "glued"))
    other = parse_topo_matrix("\tGPU0GPU1mlx5_9\tCPU Affinity\n" + rows, "glued")
    assert "the header (line 1) does not match the rows" in _repaired(other)
    message = _repaired(_corpus("h100_8gpu_nv18_rows_only_no_header.txt"))
    assert "no header line above the rows" in message and "12 NIC columns left out" in message
    assert "no header line" in _repaired(parse_topo_matrix("GPU0\t X \tNV1\nGPU1\tNV1\t X \n", "rows"))
    merged = _corpus("cloud_vm_8xa100_nv12_all_phb_cpu_affinity_merged_mangled.txt")
    assert "the NIC7 cell and the CPU Affinity ran together in 8 rows ('PH0-115')" in _repaired(merged)
    assert "lost their ESC byte" in _repaired(_corpus("h100_8gpu_nv18_9nic_bond_ansi_escape_stripped.txt"))


@pytest.mark.parametrize(
    ("repair", "words"),
    [
        ({"repair": "line-prefix", "prefix": "# "}, "every line of the matrix began with '# ': taken off"),
        ({"repair": "cell-from-mirror", "row": "GPU0", "column": "NIC0", "cell": "NODNODE"},
         "the unreadable GPU0/NIC0 cell ('NODNODE') was read from the NIC0 row"),
        ({"repair": "nic-cells-left-out", "cells": [["GPU0", f"NIC{k}", "?"] for k in range(8)]},
         ("NIC cells that could not be read were left out: GPU0/NIC0 ('?'), GPU0/NIC1 ('?'), GPU0/NIC2 ('?'), "
         "GPU0/NIC3 ('?'), GPU0/NIC4 ('?'), GPU0/NIC5 ('?') and 2 more (those GPU-NIC paths are unknown)")),
        ({"repair": "header-ran-together", "line": 4, "cell": "GPU0GPU1GPU2GPU3GPU4GPU5GPU6GPU7"},
         "the header's cells ran together (line 4: 'GPU0GPU1GPU2GPU3GPU4G...'); the columns were read from the rows"),
        ({"repair": "rows-without-header", "header_line": None, "line": 3, "gpus": ["GPU0", "GPU3"], "unnamed_nics": 1,
          "attributes": ["CPU Affinity", "NUMA Affinity"]},
         ("no header line above the rows (line 3): the columns GPU0..GPU3 were read from the rows; 1 NIC column left out "
         "(no header names them); the cells after the links read as CPU Affinity, NUMA Affinity (nvidia-smi's order)")),
        ({"repair": "header-wrapped", "lines": 2, "line": 5}, "the header was wrapped over 2 lines (line 5); they were joined"),
        ({"repair": "blank-lines", "lines": 1}, "1 blank line between the rows were skipped"),
        ({"repair": "affinity-unplaced", "rows": ["GPU2", "GPU3"]},
         ("the affinity cells of GPU2, GPU3 are fewer than the titles and stand under none of them (an empty cell in a "
         "re-spaced paste?): read as unknown")),
        ({"repair": "rows-wrapped", "lines": 3}, "rows wrapped over several lines were joined (3 continuation lines)"),
        ({"repair": "cells-ran-together", "cell": "NODENODE", "row": "GPU5"},
         "cells that ran together ('NODENODE' in row GPU5) were split into their words"),
    ],
)
def test_each_repair_in_words(repair, words):
    assert paste_repair_words(repair) == words


def test_a_cut_paste_says_the_rowless_gpus_links_came_from_the_other_rows():
    words = paste_repair_words({"repair": "rows-missing", "rows": ["GPU6", "GPU7"], "gpus": [6, 7], "apart_line": None})
    assert words == ("the paste has no row for GPU6, GPU7 (cut short?): their links to the GPUs that have rows were "
                     "read from those rows; the pair 6-7 and their CPU and NUMA affinity are unknown")


def test_rows_without_a_header_name_the_gpu_columns_found_by_their_nvlink_cells():
    words = paste_repair_words({"repair": "rows-without-header", "header_line": None, "line": 1, "gpus": ["GPU0", "GPU7"],
                                "gpus_by_nvlink": ["GPU6", "GPU7"], "unnamed_nics": 12, "attributes": []})
    assert words.startswith("no header line above the rows (line 1): the columns GPU0..GPU7 were read from the rows "
                            "(GPU6, GPU7, which have no row, by their NVLink cells: only GPUs have NVLinks)")


def test_a_header_split_into_its_names_says_so():
    words = paste_repair_words({"repair": "header-ran-together", "line": 2, "cell": "NIC11NIC12", "split": True})
    assert words == "the header's cells ran together (line 2: 'NIC11NIC12'); split into their names"


def test_cells_that_ran_together_in_many_rows_are_one_clause():
    glued = [{"repair": "cells-ran-together", "cell": cell, "row": row}
             for cell, row in [("SYSSYS", "GPU0"), ("SYSSYS", "GPU1"), ("PXBSYS", "GPU6"), ("SYSPIX", "NIC9")]]
    note = ReadingNote("repaired-paste", {"source": "p", "repairs": [{"repair": "bare-escapes"}, *glued]})
    assert note_finding(note).message == (
        "p: the paste was damaged; underline escapes that had lost their ESC byte ('[4m', '[0m') were removed; cells "
        "that ran together in 4 rows were split into their words ('SYSSYS' in row GPU0, 'PXBSYS' in row GPU6, "
        "'SYSPIX' in row NIC9)")


def test_the_same_repair_is_said_once():
    note = ReadingNote("repaired-paste", {"source": "p", "repairs": [{"repair": "bare-escapes"}] * 2})
    assert note_finding(note).message == ("p: the paste was damaged; underline escapes that had lost their ESC byte "
                                          "('[4m', '[0m') were removed")


def test_a_matrix_that_disagrees_with_itself_is_a_warning_with_a_fix():
    topology = parse_topo_matrix((OWN_FIXTURES / "topo" / "asymmetric.txt").read_text(), "asym")
    asym = [f for f in note_findings(topology.reading_notes) if f.code == "asymmetric-matrix"]
    assert sorted(f.gpus for f in asym) == [[0, 1], [0, 2]] and all(f.severity == "warning" for f in asym)
    assert asym[0].message == "the matrix disagrees with itself: GPU0->GPU1 is NV1 but GPU1->GPU0 is NV2; using the worse, NV1"
    assert asym[0].fix == "capture `nvidia-smi topo -m` again; a real matrix is symmetric"


def test_p2p_notes_in_words():
    assumed = note_finding(ReadingNote("p2p-capability-assumed", {"line": 14}))
    assert assumed.severity == "info" and assumed.message.startswith("the `nvidia-smi topo -p2p` matrix at line 14: it has no")
    assert assumed.fix == "paste the command line (`nvidia-smi topo -p2p r`, `w`, `a` or `n`) with its output"
    several = note_finding(ReadingNote("p2p-capability-assumed", {"line": 2, "asked": "rw"}))
    assert "asks for `rw`, several capabilities" in several.message and "no command line" not in several.message
    assert several.fix.startswith("run one capability per command")
    asym = note_finding(ReadingNote("asymmetric-p2p-matrix", {"capability": "w", "from": "GPU0", "to": "GPU1",
                                                              "forward": "OK", "backward": "CNS", "kept": "CNS"}, [0, 1]))
    assert (asym.severity, asym.message, asym.gpus) == ("warning", "P2P write is OK for GPU0->GPU1 but CNS for GPU1->GPU0; using CNS", [0, 1])


def test_what_a_paste_shows_beyond_the_matrix_in_words():
    text = "Hypervisor vendor:                   KVM\n\n" + (CORPUS / "topo" / "h100_8gpu_nv18_ht_affinity.txt").read_text()
    topology = parse_topo_matrix(text, "vm")
    (note,) = [n for n in topology.reading_notes if n.code == VM_EVIDENCE]
    assert vm_line(note) == "line 1 of vm says 'Hypervisor vendor: KVM'" == note_finding(note).message
    soc = _words(_corpus("k80_4gpu_soc_header_and_legend_unindented.txt").reading_notes, "soc-between-sockets")
    assert soc.severity == "info" and "between CPU sockets: GPUs joined by SOC are read as on different CPU sockets" in soc.message
    assert "unless the matrix is a virtual machine's flat view" in soc.message
    mp = note_finding(ReadingNote("pcie-only-matrix"))
    assert mp.message.startswith("the matrix is `nvidia-smi topo -mp` (PCIe paths only)") and mp.fix == "paste `nvidia-smi topo -m` as well"
    several = note_finding(ReadingNote("several-topo-matrices", {"source": "t.txt", "matrices": 2, "line": 3}))
    assert several.message == "t.txt holds 2 `nvidia-smi topo -m` matrices; the first (line 3) is used"
    rows = note_finding(ReadingNote("nic-rows-missing", {"nics": ["NIC6", "NIC7"]}))
    assert rows.message == "the text has no rows for NIC6, NIC7 (cut short?); their paths were read from the GPU rows"


# --- other tools, the resolver, the NVML probe -----------------------------------------------------


def test_other_tools_notes_in_words():
    ordinals = note_finding(ReadingNote("cuda-ordinals-only", {"source": "p2p.txt"}))
    assert ordinals.message.startswith("p2p.txt: no `Device: N, ..., pciBusID` lines") and "PCI_BUS_ID" in ordinals.message
    none = note_finding(ReadingNote("no-pair-measured", {"source": "nvb.json"}))
    assert none.message.startswith("nvb.json: nvbandwidth measured no GPU pair") and "device_to_device" in none.fix
    nccl = note_finding(ReadingNote("nccl-gpus-by-bus-id", {"source": "z"}))
    assert nccl.message.startswith("z: GPUs are numbered in PCI bus-id order") and nccl.fix is None
    alone = note_finding(ReadingNote("tf-log-alone"))
    assert alone.message.startswith("NVML is not available here (no NVIDIA driver)") and "--from SNAPSHOT" in alone.fix


def test_nvml_failures_in_words():
    notes = nvml_notes.failure_notes({
        "cpu-affinity": {g: "not supported" for g in range(8)},
        "pcie-width": {3: "no permission"},
        "_board": {(0, 1): "INTERNAL"},
        "p2p": {(0, 3): "not supported", (1, 3): "not supported", (0, 1): "unknown status 42", (2, 3): "lost"},
        "nvlink-remote": {0: "not in this driver"},
    }, {2: "0000:3a:00.0"})
    by_code = {f.code: f for f in note_findings(notes)}
    assert list(by_code) == ["gpu-lost", "multi-gpu-board", "nvml-cpu-affinity-unavailable",
                             "nvml-pcie-width-unavailable", "nvml-p2p-unavailable", "nvml-nvlink-remote-unavailable"]
    lost = by_code["gpu-lost"]
    assert (lost.severity, lost.gpus) == ("warning", [2])
    assert lost.message == "GPU 2 (0000:3a:00.0) fell off the bus (NVML: GPU is lost); its remaining fields and links are unknown"
    assert "nvidia-smi -r -i 2" in lost.fix
    assert by_code["multi-gpu-board"].message == "GPU pairs 0-1 sit on one multi-GPU board (NVML: INTERNAL); shown as PIX"
    cpu = by_code["nvml-cpu-affinity-unavailable"]  # GPU 2 is lost: its failure is its own finding's
    assert (cpu.severity, cpu.fix) == ("info", None) and cpu.gpus == [0, 1, 3, 4, 5, 6, 7]
    assert cpu.message == "NVML could not report the CPU affinity of GPUs 0,1,3,4,5,6,7 (not supported); shown as unknown"
    width = by_code["nvml-pcie-width-unavailable"]
    assert width.severity == "warning" and "GPU 3" in width.message and "no permission" in width.message
    assert width.fix.startswith("run gputopo as a user with access to /dev/nvidia*")
    p2p = by_code["nvml-p2p-unavailable"]
    assert "pairs 0-1, 0-3, 1-3 (not supported; unknown status 42)" in p2p.message and p2p.severity == "warning"
    assert by_code["nvml-nvlink-remote-unavailable"].fix == "a newer NVIDIA driver / nvidia-ml-py reports this field"
    unknown_bus = note_finding(nvml_notes.failure_notes({}, {1: "?"})[0])
    assert unknown_bus.message.startswith("GPU 1 fell off the bus")


# --- notes from older snapshots, notes that cannot be worded, the order -----------------------------


def test_a_note_that_carries_its_words_is_that_finding():
    finding = Finding("warning", "doctor-acs", "ACS redirects", [0, 1], "turn it off", ["config: ACS"], "0-1 slow")
    assert note_finding(worded_note(finding)) == finding
    vm = worded_note(Finding("info", VM_EVIDENCE, "line 2 of old.txt says 'KVM'"))
    assert vm_line(vm) == "line 2 of old.txt says 'KVM'"


def test_a_note_this_version_cannot_word_is_left_out():
    assert note_finding(ReadingNote("a-newer-code", {"x": 1})) is None
    assert note_finding(ReadingNote("repaired-paste", {})) is None  # a hand-edited snapshot's
    assert note_finding(ReadingNote("tf-log-cut", {"source": "x", "cuts": [{"cut": "nonsense"}]})) is None
    assert vm_line(ReadingNote(VM_EVIDENCE, {"source": "s", "line": 7, "text": "KVM"})) == "line 7 of s says 'KVM'"
    assert vm_line(ReadingNote(VM_EVIDENCE, {"line": 7})) is None
    topology = Topology(reading_notes=[ReadingNote("repaired-paste", {}), ReadingNote("pcie-only-matrix")])
    assert [f.code for f in with_findings(topology).diagnostics] == ["pcie-only-matrix"]


def test_notes_come_after_the_findings_already_made_in_their_order_each_once():
    topology = Topology(diagnostics=[Finding("info", "carried", "from a snapshot")], reading_notes=[
        ReadingNote("pcie-only-matrix"),
        ReadingNote("asymmetric-matrix", {"from": "GPU0", "to": "NIC0", "forward": "PIX", "backward": "SYS", "kept": "SYS"}, [0]),
        ReadingNote("asymmetric-matrix", {"from": "GPU0", "to": "NIC1", "forward": "PIX", "backward": "SYS", "kept": "SYS"}, [0]),
        ReadingNote("pcie-only-matrix"),
    ])
    add_reading_findings(topology)
    assert [f.code for f in topology.diagnostics] == ["carried", "pcie-only-matrix", "asymmetric-matrix"]
    assert "GPU0->NIC0" in topology.diagnostics[2].message  # the first of one code and GPUs is kept
    assert len(topology.reading_notes) == 4  # the facts stay as read


@pytest.mark.parametrize("words", [
    {"severity": ["error"], "message": "m"},  # an unhashable severity: sorting findings raised TypeError
    {"severity": "fatal", "message": "m"},  # no severity of a finding
    {"severity": "error", "message": 5},
    {"severity": "error", "message": "m", "fix": {"a": 1}},
    {"severity": "error", "message": "m", "evidence": "not a list"},
    {"severity": "error", "message": "m", "evidence": [1]},
])
def test_a_worded_note_whose_words_are_of_the_wrong_type_is_left_out(words):
    """A snapshot's ``reading_notes`` may be hand-edited: its worded notes are checked as the
    snapshot's findings are, and one that would not pass as a finding is not a finding."""
    assert note_finding(ReadingNote("hand-edited", {"worded": words}, [0])) is None


def test_a_worded_note_is_the_finding_it_words():
    words = {"severity": "warning", "message": "m", "fix": "f", "evidence": ["e"], "effect": None}
    assert note_finding(ReadingNote("c", {"worded": words}, [1])) == Finding("warning", "c", "m", [1], "f", ["e"])


@pytest.mark.parametrize("query", ["x\x1b]0;title\x07", "a\nb", "$(id)", "Pcie Width", ["pcie-width"], 5])
def test_a_failed_nvml_query_of_no_query_word_is_left_out(query):
    """The query names the finding's code (``nvml-<query>-unavailable``), a one-line word that a
    saved snapshot must read back: a hand-edited note's query with control characters made a code
    that ``scan --save`` wrote and could not read again."""
    failed = [{"gpu": 0, "reason": "not supported"}]
    assert note_finding(ReadingNote("nvml-query-failed", {"query": query, "failed": failed}, [0])) is None
    named = note_finding(ReadingNote("nvml-query-failed", {"query": "pcie-width", "failed": failed}, [0]))
    assert named is not None and named.code == "nvml-pcie-width-unavailable"
