"""Issue 31: ROCm's "Ignoring visible gpu device" lines are read exactly as their CUDA twins, on real
logs (tests/fixtures/corpus/tf_logs/SOURCES.md) and on the same logs pasted the usual ways."""

from __future__ import annotations

import re

import pytest
from conftest import OWN_FIXTURES

from gputopo.analysis.causes.tf_crosscheck import tf_findings
from gputopo.sources.tf.tflog import parse_tf_log, topology_from_tf_view
from gputopo.sources.tf.tflog_lines import IGNORED, scan_lines

CORPUS = OWN_FIXTURES / "corpus" / "tf_logs"
ROCM_214 = "rocm_tf214_ignoring_visible_gpu_gfx1100_rx7900xtx.log"
ROCM_211 = "rocm_tf211_ignoring_visible_gpu_gfx1100_no_name_w7900.log"
ROCM_111 = "rocm_tf111_found_device_ignoring_visible_gfx801_apu.log"  # Found device 0, then Ignoring
CUDA_TWIN = "tf1x_found_device_ignoring_visible_cc30_gt750m.log"  # the same two messages from a CUDA build
MANGLINGS = {
    "as is": lambda t: t,
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "quoted": lambda t: "\n".join("> " + line for line in t.split("\n")),
    "timestamps stripped": lambda t: re.sub(r"(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ", "", t),
    "shell prompt first": lambda t: "$ python3 -c 'import tensorflow as tf; tf.config.list_physical_devices()'\n" + t,
}


def _read(name: str, mangling: str = "as is"):
    return parse_tf_log(MANGLINGS[mangling]((CORPUS / name).read_text()), name)


def _counted(view):
    """What the view counts, whatever the GPU: start-ups, era, the count, which GPUs TF ignores."""
    return (view.startups, view.era, view.gpu_count, view.gpu_count_at_least,
            [(d.ordinal, d.ignored is not None, d.pci_bus_id is not None) for d in view.devices])


@pytest.mark.parametrize("mangling", sorted(MANGLINGS))
def test_rocm_found_then_ignored_counts_exactly_as_its_cuda_twin(mangling):
    rocm, cuda = _read(ROCM_111, mangling), _read(CUDA_TWIN, mangling)
    assert _counted(rocm) == _counted(cuda) == (1, cuda.era, 1, True, [(0, True, True)])
    (device,) = rocm.devices
    assert device.ignored == "AMDGPU ISA gfx801 (TensorFlow needs gfx803)"
    assert cuda.devices[0].ignored == "compute capability 3.0 (TensorFlow needs 3.5)"
    # The Found lines give the whole name; the Ignoring line's copy stops at its comma.
    assert device.name == "AMD A10-8700P Radeon R6, 10 Compute Cores 4C+6G" and device.pci_bus_id == "0000:00:01.0"


@pytest.mark.parametrize("mangling", sorted(MANGLINGS))
def test_a_lone_rocm_ignoring_line_names_the_gpu_and_why(mangling):
    view = _read(ROCM_214, mangling)
    (device,) = view.devices
    assert (device.ordinal, device.name, device.pci_bus_id) == (0, "Radeon RX 7900 XTX", "0000:03:00.0")
    assert device.ignored == ("AMDGPU version gfx1100 (TensorFlow supports gfx1030gfx1100, gfx900, gfx906, "
                              "gfx908, gfx90a, gfx940, gfx941, gfx942)")  # TF's missing comma, as printed
    assert (view.gpu_count, view.gpu_count_at_least) == (1, True)


def test_an_empty_rocm_name_is_no_name():
    (device,) = _read(ROCM_211).devices
    assert device.name is None and device.pci_bus_id == "0000:23:00.0"
    assert device.ignored == "AMDGPU version gfx1100 (TensorFlow supports gfx1030, gfx900, gfx906, gfx908, gfx90a)"


@pytest.mark.parametrize("name", [ROCM_214, ROCM_211, ROCM_111, CUDA_TWIN])
def test_an_ignored_gpu_is_no_gpu_to_train_on_and_a_warning_says_why(name):
    view = _read(name)
    topology = topology_from_tf_view(view)
    assert topology.gpus == []
    (finding,) = [f for f in tf_findings(topology) if f.code == "tf-gpu-ignored"]
    assert finding.severity == "warning" and finding.gpus == [0]
    assert view.devices[0].ignored in finding.message


def test_the_same_ignoring_line_three_times_in_one_process_is_one_startup():
    """tensorflow#29 (TF 0.5): one process printed its Ignoring line three times."""
    events = scan_lines((CORPUS / "tf0_gpu_init_dma_ignoring_repeated_grid_k520.log").read_text())
    assert [e.ordinals for e in events if e.kind == IGNORED] == [[0], [0], [0]]
    view = _read("tf0_gpu_init_dma_ignoring_repeated_grid_k520.log")
    assert view.startups == 1 and (view.gpu_count, view.gpu_count_at_least) == (1, False)
    assert view.devices[0].name == "GRID K520"


def test_an_edge_matrix_header_over_no_gpu_is_an_empty_header_not_a_missing_one():
    (matrix,) = scan_lines("I gpu_device.cc:1180] Device interconnect StreamExecutor with strength 1 edge matrix:\n"
                           "2020-08-08 00:50:57.183129: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1186]      \n")
    assert (matrix.ordinals, matrix.header_missing, matrix.empty_header) == ([], False, True)
