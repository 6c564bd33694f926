"""The words of other tools' reading notes: what each note's facts say and no more (a waived
device-to-device test is a warning that the GPUs could not peer; wrong bytes in a host copy are not
called a GPU-to-GPU copy), read from real captures through the readers."""

from __future__ import annotations

from conftest import REPO

from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.analysis.notes.reading_notes_tools import TOOL_WORDINGS
from gputopo.model import ReadingNote
from gputopo.sources.tools import nccl_xml, nvbandwidth, p2pbw

CORPUS = REPO / "tests" / "fixtures" / "corpus"


def _one(notes, code):
    (finding,) = [f for f in note_findings(notes) if f.code == code]
    return finding


def test_every_tool_note_code_has_words_and_a_severity():
    for code, wording in TOOL_WORDINGS.items():
        severity, message, _ = wording({"source": "s", "tool": "nvbandwidth", "waived": [], "gpu_count": 1,
                                        "stopped": False, "tests": ["t"], "peer": False, "cut_gpu": None,
                                        "attached": 2, "listed": 1, "links_listed": [2], "fields": ["pcie_gen_max"], "lines": [3],
                                        "count": 1, "line": 3, "bus_id": "0000:01:00.0", "pairs": [[1, 2]],
                                        "nodes": 2, "hosts": ["h"], "header": True, "cpus": 0, "one_host": True,
                                        "processes": [["h", "1"], ["g", "2"]], "matrices": ["uni-off"],
                                        "kind": "NCCL_DEBUG=INFO log", "reason": "r", "options": "-g 1"}, [0])
        assert severity in ("info", "warning") and message.startswith("s"), code


def test_a_waived_device_to_device_test_is_a_warning_that_the_gpus_could_not_peer():
    """nvbandwidth#13: two 2080 Ti, the D2D test waived; no matrix at all."""
    (path,) = (CORPUS / "nvbandwidth").glob("nvbandwidth13_*")
    topo = nvbandwidth.read(path.read_text(), "n13")
    finding = _one(topo.reading_notes, "no-pair-measured")
    assert finding.severity == "warning" and "could not peer" in finding.message and finding.gpus == [0, 1]


def test_wrong_bytes_name_a_gpu_to_gpu_copy_only_where_every_stopped_test_was_one():
    facts = {"source": "s", "tests": ["device_to_device_memcpy_read_ce"], "peer": True}
    peer = _one([ReadingNote("nvbandwidth-wrong-data", facts, [0, 1])], "nvbandwidth-wrong-data")
    host = _one([ReadingNote("nvbandwidth-wrong-data", {**facts, "peer": False}, [0])], "nvbandwidth-wrong-data")
    assert "GPU-to-GPU copy delivered wrong data" in peer.message and "trust P2P" in peer.fix
    assert "GPU-to-GPU" not in host.message and "trust copies" in host.fix
    assert peer.severity == host.severity == "warning"


def test_a_p2pbw_output_cut_before_its_matrices_says_no_pair_was_measured():
    (path,) = (CORPUS / "p2pbw").glob("aikitoria29_*")
    finding = _one(p2pbw.read(path.read_text(), "a29").reading_notes, "no-pair-measured")
    assert finding.severity == "info" and "ends before its first matrix" in finding.message


def test_a_cut_nccl_xml_names_the_gpu_whose_nvlink_list_was_cut():
    (path,) = (CORPUS / "nccl_xml").glob("nccl1125_*")
    finding = _one(nccl_xml.read(path.read_text(), "x").reading_notes, "nccl-xml-cut")
    assert "GPU 0's NVLink list was cut" in finding.message
    whole = _one([ReadingNote("nccl-xml-cut", {"source": "x", "cut_gpu": None})], "nccl-xml-cut")
    assert "NVLink list" not in whole.message


def test_q_notes_say_what_the_paste_lacks_in_its_own_terms():
    """A vGPU host's README: `-q` cut by grep, then `nvidia-smi vgpu -q` repeating the GPU's line."""
    from gputopo.sources.smi import smi_q

    (path,) = (CORPUS / "smi_q").glob("rtx4088_*")
    notes = smi_q.read(path.read_text(), "readme").reading_notes
    assert "cut by grep ('--' at line 27)" in _one(notes, "smi-q-grep-gaps").message
    repeated = _one(notes, "smi-q-gpu-repeated")
    assert "line 281 starts another block of GPU 0000:01:00.0" in repeated.message and repeated.gpus == [0]
    listed = _one([ReadingNote("smi-q-gpus-not-listed", {"source": "q", "attached": 4, "listed": 1})],
                  "smi-q-gpus-not-listed")
    assert "4 GPUs are attached but the text lists 1" in listed.message and "without -i" in listed.fix
    unavailable = _one([ReadingNote("smi-q-unavailable", {"source": "q", "fields": ["pcie_gen_max"]}, [1])],
                       "smi-q-unavailable")
    assert unavailable.message == "q: `nvidia-smi -q` prints N/A for the maximum PCIe generation of GPU 1: unknown"
