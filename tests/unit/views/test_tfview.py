"""TensorFlow's view on the scan screen: the log's file name and TF's device names print as they are."""

from __future__ import annotations

import io

from rich.console import Console

from gputopo.model import Gpu, TfDevice, TfView, Topology
from gputopo.views.tfview import render_tf_view


def test_log_name_and_device_names_are_not_markup():
    view = TfView(
        devices=[TfDevice(0, name="Tesla [bold]V100[/bold] [/]", pci_bus_id="0000:[b]:00.0", memory_mb=1)],
        peer=[[None]],
        era="tf2-created-device",
        source="/logs/[red]run[x].log",
    )
    topology = Topology(gpus=[Gpu(0)], tf=view)
    console = Console(file=io.StringIO(), width=120, color_system=None)
    render_tf_view(topology, console)
    text = console.file.getvalue()
    assert "(from [red]run[x].log, tf2-created-device)" in text
    assert "Tesla [bold]V100[/bold] [/]" in text
    assert "0000:[b]:00.0" in text


def test_sixteen_gpu_peer_matrix_fits_80_columns():
    n = 16
    view = TfView(
        devices=[TfDevice(i, name="Tesla V100-SXM3-32GB", pci_bus_id=f"0000:{i:02x}:00.0", memory_mb=1) for i in range(n)],
        peer=[[i != j for j in range(n)] for i in range(n)],
        era="tf2-created-device",
        source="a.log",
    )
    console = Console(file=io.StringIO(), width=80, color_system=None)
    render_tf_view(Topology(gpus=[Gpu(i) for i in range(n)], tf=view), console)
    text = console.file.getvalue()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    cells = text.split()
    for i in range(n):
        assert cells.count(f"GPU:{i}") >= 3  # device table, row label, column header


def test_a_process_that_sees_one_gpu_shows_tfs_own_number_and_the_device():
    """PocketFlow#86: 'device:GPU:0 ... -> physical GPU (device: 4, ...)': TF calls it GPU:0."""
    view = TfView(devices=[TfDevice(ordinal=4, tf_id=0, name="Graphics Device", pci_bus_id="0000:0c:00.0")],
                  peer=[[None] * 5 for _ in range(5)], source="pf.log")
    console = Console(file=io.StringIO(), width=100, color_system=None)
    render_tf_view(Topology(gpus=[Gpu(index=4)], source="tf-log", tf=view), console)
    row = next(line for line in console.file.getvalue().splitlines() if "Graphics Device" in line)
    assert "GPU:0 (device 4)" in row


def _count_line(view: TfView) -> str:
    console = Console(file=io.StringIO(), width=120, color_system=None)
    render_tf_view(Topology(gpus=[Gpu(d.ordinal) for d in view.devices if not d.ignored], tf=view), console)
    return next(line for line in console.file.getvalue().splitlines() if line.startswith("TensorFlow had"))


def test_a_cut_log_says_at_least_how_many_gpus_and_which_it_names():
    view = TfView(devices=[TfDevice(7, name="GeForce GTX 1080 Ti")], peer=[[None] * 8 for _ in range(8)],
                  source="cut.log", gpu_count=8, gpu_count_at_least=True)
    assert _count_line(view) == "TensorFlow had at least 8 GPUs; the log names GPU 7"


def test_a_whole_log_says_its_count_and_the_gpus_tf_ignores():
    whole = TfView(devices=[TfDevice(i) for i in range(4)], peer=[[None] * 4 for _ in range(4)], gpu_count=4)
    assert _count_line(whole) == "TensorFlow had 4 GPUs"
    ignored = TfView(devices=[TfDevice(0), TfDevice(1, ignored="compute capability 2.0 (TensorFlow needs 3.5)")],
                     peer=[[None] * 2 for _ in range(2)], gpu_count=2)
    assert _count_line(ignored) == "TensorFlow had 2 GPUs; it ignores GPU 1"
