"""The `recommend` screen as a person sees it at 80 columns: paste-ready lines stay whole, nothing
is cut, and the words about placement are right."""

from __future__ import annotations

import re

import pytest
from linktable import cube_mesh_8, nvl72, two_socket_4

from gputopo.analysis.recommend import recommend
from gputopo.sources.reference import load_reference
from gputopo.views.recommend import placement, render_recommendation


def _render(monkeypatch, capsys, machine: str, gpus: int, jobs: int = 1, width: int = 80) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    topo = {"cube-mesh-8": cube_mesh_8, "nvl72": nvl72}.get(machine, lambda: load_reference(machine))()
    render_recommendation(recommend(topo, gpus, jobs=jobs))
    return capsys.readouterr().out


def test_paste_ready_lines_are_not_broken_by_newlines(monkeypatch, capsys):
    """Copying a wrapped command from the terminal must give the command, not two halves."""
    text = _render(monkeypatch, capsys, "cube-mesh-8", 4, jobs=2)
    lines = text.splitlines()
    assert "  CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,1,2,3 numactl --cpunodebind=0 --membind=0 python train.py" in lines
    assert any(
        line.startswith("  strategy = tf.distribute.MirroredStrategy(") and line.endswith("NcclAllReduce())")
        for line in lines
    )
    assert "  job 2: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=4,5,6,7 numactl --cpunodebind=1 --membind=1 python train.py" in lines


def test_multi_host_group_gets_one_launch_line_per_host(monkeypatch, capsys):
    lines = _render(monkeypatch, capsys, "nvl72", 8).splitlines()
    assert "  on tray00: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,1,2,3" in lines
    assert "  on tray01: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,1,2,3" in lines


@pytest.mark.parametrize(("machine", "gpus"), [("dgx1", 4), ("gb200-nvl72", 8), ("gb200-nvl72", 16), ("pcie-8gpu", 3)])
def test_ranked_table_cuts_nothing_at_80_columns(monkeypatch, capsys, machine, gpus):
    text = _render(monkeypatch, capsys, machine, gpus)
    assert "…" not in text
    assert "all-reduce" in text
    if machine == "dgx1":
        # an op name folded in two cannot be pasted
        ops = set(re.findall(r"\w*AllReduce\b", text))
        assert ops and ops <= {"NcclAllReduce", "HierarchicalCopyAllReduce"}, ops


def test_placement_words():
    dgx1 = recommend(cube_mesh_8(), 4)
    assert placement(dgx1.groups[0]) == "one CPU socket, NUMA node 0"
    spread = next(g for g in dgx1.groups if not g.same_socket)
    # NVLinked across sockets: not "SYS paths", the GPU traffic does not cross the socket link.
    assert placement(spread) == "spread over 2 NUMA nodes / CPU sockets"
    rack = recommend(nvl72(), 8)
    assert placement(rack.groups[0]) == "spread over 2 hosts (tray00, tray01)"


def test_one_host_jobs_in_a_multi_host_topology_name_their_host(monkeypatch, capsys):
    from gputopo.views.recommend import format_env

    lines = _render(monkeypatch, capsys, "nvl72", 4, jobs=3).splitlines()
    assert any(line.startswith("  job 2: on tray01: CUDA_DEVICE_ORDER=PCI_BUS_ID") for line in lines)
    env = format_env(recommend(nvl72(), 4, jobs=3)).splitlines()
    assert env[env.index("# job 2 runs on tray01") + 1].startswith("export CUDA_VISIBLE_DEVICES_JOB2=")
    # One host only: no host names anywhere.
    single = _render(monkeypatch, capsys, "cube-mesh-8", 4, jobs=2)
    assert ": on " not in single and "  on " not in single
    assert "runs on" not in format_env(recommend(cube_mesh_8(), 4, jobs=2))


def test_a_slow_best_group_is_not_painted_green(monkeypatch, capsys):
    """On the two-socket box the best 4 GPUs cross QPI (~6 GB/s): red, as scan colours SYS, not green."""
    import io

    from rich.console import Console

    import gputopo.views.recommend as view

    console = Console(file=io.StringIO(), width=200, force_terminal=True, color_system="standard")
    monkeypatch.setattr(view, "out", lambda: console)
    view.render_recommendation(recommend(two_socket_4(), 4))
    best_line = console.file.getvalue().splitlines()[1]
    assert "\x1b[32m" not in best_line and "\x1b[1;32m" not in best_line
    assert "\x1b[31m   ring 0-1-2-3-0, slowest hop SYS" in best_line


def test_headline_counts_gpus_in_words(monkeypatch, capsys):
    assert _render(monkeypatch, capsys, "cube-mesh-8", 1).startswith("Best GPU to train on — ")
    assert _render(monkeypatch, capsys, "cube-mesh-8", 4).startswith("Best 4 GPUs to train on together — ")


def test_placement_without_numa_nodes_does_not_say_one_node():
    from gputopo.analysis.recommend import GroupAdvice

    group = GroupAdvice(gpus=[0, 4], same_socket=False, numa_domains=1)
    assert placement(group) == "spread over CPU sockets"


def test_the_cpu_column_names_known_numa_nodes_where_the_sockets_are_unknown(monkeypatch, capsys):
    """SYS between two NUMA nodes of a paste: one socket (NPS2, SNC) or two, the source does not say;
    the NUMA nodes it does give are said ("2 NUMA"), not "?" (a newcomer read "?" as "unknown")."""
    from conftest import OWN_FIXTURES

    from gputopo.sources.registry import read_text

    topo = read_text((OWN_FIXTURES / "doctor" / "constructed" / "topo_m.txt").read_text(), "topo_m.txt")
    monkeypatch.setenv("COLUMNS", "100")
    result = recommend(topo, 4)
    render_recommendation(result)
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines() if re.match(r"\s*\d+\s+\d", line)}
    spanning = next(g for g in result.groups if g.same_socket is None)
    assert spanning.numa_domains == 2 and "2 NUMA" in rows[",".join(map(str, spanning.gpus))]
    assert "1 socket" in rows["0,1,2,3"]
