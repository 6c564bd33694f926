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
