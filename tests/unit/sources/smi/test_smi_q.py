"""`nvidia-smi -q` text: every real capture of the corpus read to what an expert concludes
(tests/fixtures/corpus/smi_q/EXPECTED.json, written before the reader), the same after the manglings
pastes suffer (or unknown where a mangling loses the information, never a different value), any
text one InputError line or a Topology, and merged with the `topo -m` of the same machine."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputopo.errors import InputError
from gputopo.model import Topology
from gputopo.sources.smi import smi_q
from gputopo.sources.registry import read_text
from unit.sources.readers_corpus import CORPUS, cases, text_of

KIND = "smi_q"
CASES = cases(KIND)
IDS = [name for name, _ in CASES]
FIELDS = ("name", "pci_bus_id", "memory_total_bytes", "memory_used_bytes", "pcie_gen_current", "pcie_gen_max",
          "pcie_width_current", "pcie_width_max", "mig_mode", "utilization_percent", "performance_state")
EXAMPLES = settings(max_examples=3, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _expected_gpus(expected: dict) -> list[dict]:
    gpus = []
    for k, bus in enumerate(expected["bus_ids"]):
        gpu = {**expected["all"], **expected.get("per_gpu", {}).get(str(k), {}), "bus_id": bus}
        gpus.append(gpu)
    return gpus


def _facts(topology: Topology) -> list[tuple]:
    return [tuple(getattr(g, name) for name in FIELDS) + (None if g.processes is None else len(g.processes),)
            for g in topology.gpus]


@pytest.mark.parametrize(("name", "expected"), CASES, ids=IDS)
def test_every_capture_reads_to_what_the_expert_concludes(name, expected):
    text = text_of(KIND, name)
    assert smi_q.sniff(text)
    topology = read_text(text, name)  # through the one door: recognised by content, -q alone
    assert topology.source == "nvidia-smi-q" and topology.links == []
    assert topology.driver_version == expected["driver_version"]
    assert [g.index for g in topology.gpus] == list(range(expected["gpus"]))
    for gpu, want in zip(topology.gpus, _expected_gpus(expected)):
        mib = 1024 * 1024
        assert gpu.pci_bus_id == want["bus_id"] and gpu.name == want["name"], name
        assert gpu.memory_total_bytes == (None if want["memory_total_mib"] is None else want["memory_total_mib"] * mib)
        assert gpu.memory_used_bytes == (None if want["memory_used_mib"] is None else want["memory_used_mib"] * mib)
        pcie = [gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max]
        assert pcie == want["pcie"], (name, gpu.index)
        assert gpu.mig_mode is want["mig_mode"] and gpu.utilization_percent == want["utilization_percent"]
        assert (None if gpu.processes is None else len(gpu.processes)) == want["processes"]
        assert gpu.performance_state == (None if want["pstate"] is None else int(want["pstate"][1:])), (name, gpu.index)
    vm = [note for note in topology.reading_notes if note.code == "vm-evidence"]
    assert bool(vm) == (expected["all"]["virtualization"] in ("Pass-Through", "VGPU")), name


def test_a_vgpu_host_grep_paste_is_one_gpu_and_the_vgpus_memory_is_not_the_gpus():
    topology = smi_q.read(text_of(KIND, "rtx4088_host_vgpu_525_grep_paste_readme.txt"), "readme")
    (gpu,) = topology.gpus
    assert gpu.memory_total_bytes is None and gpu.pci_bus_id == "0000:01:00.0"  # vgpu -q's 2048 MiB, 00:00.0 not taken
    codes = {note.code: note for note in topology.reading_notes}
    assert codes["smi-q-grep-gaps"].facts["lines"] == [27]
    assert codes["smi-q-gpu-repeated"].facts == {"source": "readme", "bus_id": "0000:01:00.0", "line": 281}
    assert "vm-evidence" not in codes  # "Host VGPU" is the host, not a guest


def test_a_paste_that_lists_fewer_gpus_than_attached_numbers_them_listed_not_nvml():
    text = text_of(KIND, "a100_sxm4_4gpu_555_q.txt")
    second = text.index("GPU 00000000:9E:00.0")
    topology = smi_q.read(text[:second], "first")  # `-i 0`, or a paste cut after the first GPU
    assert len(topology.gpus) == 1 and topology.gpu_numbering == "listed"
    (note,) = [n for n in topology.reading_notes if n.code == "smi-q-gpus-not-listed"]
    assert note.facts == {"source": "first", "attached": 4, "listed": 1}


def test_na_values_are_unknown_and_noted_and_a_damaged_bus_id_is_said():
    text = ("Attached GPUs : 1\nGPU 00000000:3B:00\n    Product Name : N/A\n    PCI\n        GPU Link Info\n"
            "            PCIe Generation\n                Max : N/A\n                Current : 3\n")
    topology = smi_q.read(text, "t")
    (gpu,) = topology.gpus
    assert gpu.pci_bus_id is None and gpu.name is None and gpu.pcie_gen_max is None and gpu.pcie_gen_current == 3
    notes = {note.code: note for note in topology.reading_notes}
    assert notes["smi-q-unavailable"].facts["fields"] == ["name", "pcie_gen_max"]
    assert notes["smi-q-no-bus-id"].facts["lines"] == [2] and notes["smi-q-no-bus-id"].gpus == [0]


@pytest.mark.parametrize(("printed", "state"), [
    ("P0", 0), ("P2", 2), ("P8", 8), ("P12", 12), ("P15", 15),
    ("Unknown", None), ("N/A", None), ("[Not Supported]", None), ("P16", None), ("P", None), ("P-1", None), ("8", None),
])
def test_the_performance_state_is_kept_as_its_number_and_anything_else_is_unknown(printed, state):
    """nvidia-smi prints NVML's nvmlPstates_t: P0 (the most performance) to P15; NVML_PSTATE_UNKNOWN
    (32) and a GPU that does not say are unknown, never a guessed state."""
    text = (f"GPU 00000000:41:00.0\n    Product Name : NVIDIA GeForce RTX 3090\n"
            f"    Performance State : {printed}\n    Utilization\n        Gpu : 0 %\n")
    (gpu,) = smi_q.read(text, "t").gpus
    assert gpu.performance_state == state and gpu.utilization_percent == 0
    assert not [n for n in smi_q.read(text, "t").reading_notes if n.code == "smi-q-unavailable"]  # live state: no note


def test_a_performance_state_nested_under_another_title_is_not_the_gpus():
    text = ("GPU 00000000:41:00.0\n    Product Name : A\n    vGPU ID : 1\n        Performance State : P0\n")
    assert smi_q.read(text, "t").gpus[0].performance_state is None


def test_topo_m_and_q_of_one_machine_merge_links_and_locality_with_names_and_pcie():
    """The H200 of our own device run: `topo -m` and `-q` taken the same minute on the same VM."""
    topo_text = text_of(KIND, "h200_firecracker_passthrough_580_topo_m.txt")
    q_text = text_of(KIND, "h200_firecracker_passthrough_580_q.txt")
    from gputopo.sources.merge import merge_views

    merged = merge_views([read_text(topo_text, "topo"), read_text(q_text, "q")])
    (gpu,) = merged.gpus
    assert (gpu.name, gpu.pci_bus_id, gpu.pcie_gen_max, gpu.pcie_width_current) == ("NVIDIA H200", "0000:00:06.0", 5, 16)
    assert gpu.cpu_affinity == "0-15" and gpu.numa_node == 0 and merged.disagreements == []
    pasted = read_text(topo_text + "\n" + q_text, "paste")  # one paste holding both: both readers, merged
    assert pasted.gpus[0].name == "NVIDIA H200" and pasted.gpus[0].cpu_affinity == "0-15"


def test_a_gathered_archive_reads_its_q_txt_into_the_gpu_table(tmp_path):
    import io
    import tarfile

    from gputopo.sources.archives.archive import GATHER_MARK
    from gputopo.sources.registry import read_file

    members = {GATHER_MARK: "gputopo test gather\n",
               "gputopo/nvidia-smi/topo-m.txt": text_of(KIND, "h200_firecracker_passthrough_580_topo_m.txt"),
               "gputopo/nvidia-smi/q.txt": text_of(KIND, "h200_firecracker_passthrough_580_q.txt")}
    path = tmp_path / "box.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, payload in members.items():
            data = payload.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (gpu,) = read_file(str(path)).gpus
    assert (gpu.name, gpu.pci_bus_id, gpu.memory_total_bytes, gpu.pcie_gen_current) == (
        "NVIDIA H200", "0000:00:06.0", 143771 * 1024 * 1024, 5)


# --- pastes mangled --------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    return text.split("\n")


LOSSLESS = {
    "trailing spaces": lambda t: "\n".join(line + "   " for line in _lines(t)),
    "CRLF": lambda t: t.replace("\n", "\r\n"),
    "markdown quote": lambda t: "\n".join(("> " + line) if line.strip() else ">" for line in _lines(t)),
    "tabs for indentation": lambda t: "\n".join(re.sub(r"^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), line)
                                                for line in _lines(t)),
    "shell comment": lambda t: "\n".join("# " + line for line in _lines(t)),
    "code block indent": lambda t: "\n".join("    " + line for line in _lines(t)),
}


@pytest.mark.parametrize("mangling", sorted(LOSSLESS))
@pytest.mark.parametrize(("name", "expected"), CASES, ids=IDS)
def test_a_mangled_paste_reads_the_same(name, expected, mangling):
    text = text_of(KIND, name)
    before = _facts(smi_q.read(text, name))
    mangled = LOSSLESS[mangling](text)
    assert smi_q.sniff(mangled), (name, mangling)
    assert _facts(smi_q.read(mangled, name)) == before, (name, mangling)


def _never_different(name: str, part: str) -> None:
    before = _facts(smi_q.read(text_of(KIND, name), name))
    try:
        after = _facts(smi_q.read(part, name))
    except InputError:
        return  # nothing left of any GPU block
    assert len(after) <= len(before)
    for was, now in zip(before, after):
        for field, old, new in zip((*FIELDS, "processes"), was, now):
            assert new is None or new == old or (field == "processes" and new <= old), (name, field, old, new)


@EXAMPLES
@given(data=st.data())
@pytest.mark.parametrize(("name", "expected"), CASES, ids=IDS)
def test_a_paste_cut_anywhere_never_invents_a_value(name, expected, data):
    text = text_of(KIND, name)
    lines = _lines(text)
    cut_line = data.draw(st.integers(1, len(lines)))
    _never_different(name, "\n".join(lines[:cut_line]) + "\n")
    cut_char = data.draw(st.integers(1, len(text)))
    _never_different(name, text[:cut_char])  # mid-line: '81' of '81559 MiB', 'NVIDIA H10'
    start = data.draw(st.integers(0, len(lines) - 1))  # the head lost (banner, first GPU lines)
    part = "\n".join(lines[start:]) + "\n"
    try:
        smi_q.read(part, name)
    except InputError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([*"GPU 0:1.aF\n\t >%#-:xMiBN/A", "Product Name", "    ", "Total", "FB Memory Usage",
                                 "GPU 0000:01:00.0\n", "GPU 00000000:02:00.0\n"]), max_size=120).map("".join))
def test_any_text_is_one_error_line_or_a_topology(text):
    try:
        topology = smi_q.read(text, "t")
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert topology.gpus and all(g.index == k for k, g in enumerate(topology.gpus))


def test_work_stays_bounded_on_hostile_input():
    deep = "GPU 0000:01:00.0\n" + "".join(" " * (k + 1) + "Section\n" for k in range(2_000))
    assert len(smi_q.read(deep, "deep").gpus) == 1  # nesting capped: no path grows with the text
    spaces = "GPU 0000:01:00.0\n" + (">" + " " * 100_000 + "x\n") * 3
    smi_q.read(spaces, "spaces")
    many = "".join(f"GPU 0000:{b // 32:02x}:{b % 32:02x}.0\n    Product Name : A\n" for b in range(smi_q.MAX_GPUS + 1))
    with pytest.raises(InputError, match="more than 1024 GPU blocks"):
        smi_q.read(many, "many")


def test_other_kinds_captures_are_not_taken_for_q_output():
    for path in sorted(CORPUS.rglob("*.txt")):
        if path.parent.name != KIND:
            assert not smi_q.sniff(path.read_text(errors="replace")), path


RUNNING = """GPU 00000000:3B:00.0
    Product Name                          : Tesla V100-SXM2-16GB
    Processes
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 41735
            Type                          : C
            Name                          : python
            Used GPU Memory               : 310 MiB
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 2210
            Type                          : G
            Name                          : /usr/lib/xorg/Xorg
            Used GPU Memory               : 4 MiB
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 41790
            Type                          : C+G
            Name                          : ./train
            Used GPU Memory               : 1024 MiB

"""


def test_the_compute_processes_listed_are_read_not_dropped():
    """The Processes section as nvidia-smi -q prints it for a GPU in use (C, G and C+G types): the
    compute ones are the GPU's processes. An empty list (\"no process\") was read instead: the first
    process was appended to a throw-away list, so a busy GPU looked free to recommend."""
    (gpu,) = smi_q.read(RUNNING, "running").gpus
    assert [(p.pid, p.name, p.used_memory_bytes) for p in gpu.processes] == [
        (41735, "python", 310 * 1024 * 1024), (41790, "./train", 1024 * 1024 * 1024)]


@pytest.mark.parametrize("digits", ["\u00b2", "\u0661\u0666", "\uff11"])
def test_numbers_in_other_scripts_are_not_read_and_are_no_traceback(digits):
    """Only ASCII digits are figures (docs/security.md). A superscript two passed str.isdigit() and
    then failed int(): a ValueError traceback from 'Process ID : ²' or 'Attached GPUs : ²'; Arabic-Indic
    digits were read as a memory size."""
    text = (f"Attached GPUs : {digits}\nGPU 00000000:3B:00.0\n    Product Name : A\n    FB Memory Usage\n"
            f"        Total : {digits} MiB\n    Processes\n        Process ID : {digits}\n            Type : C\n\n")
    topology = smi_q.read(text, "digits")
    (gpu,) = topology.gpus
    assert gpu.memory_total_bytes is None and gpu.processes in (None, [])
    assert topology.gpu_numbering != "listed"
