"""gres.conf and topology.conf as text: one valid line per GPU / block whatever the input's strings."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from linktable import cube_mesh_8, link_table, nvl72, pcie_8

from gputopo.analysis.slurm.slurm_blocks import block_topology
from gputopo.analysis.slurm.slurm_gres import gres_nodes
from gputopo.views.slurm_files import format_block_topology, format_gres

GPU_LINE = re.compile(r"(NodeName=[A-Za-z0-9_][A-Za-z0-9._-]* )?Name=gpu( Type=[a-z_][a-z0-9_.-]*)? "
                      r"File=/dev/nvidia\d+( Cores=\d+(-\d+)?(,\d+(-\d+)?)*)? Links=-?\d+(,-?\d+)*")


def gpu_lines(text):
    """The file's lines that are not comments or blank, checked to be what Slurm reads."""
    lines = text.split("\n")
    assert lines[-1] == "" and all("\r" not in line for line in lines)
    assert text.splitlines() == lines[:-1]  # no other character any reader takes as a line break
    settings_lines = [line for line in lines if line and not line.startswith("#")]
    assert all("#" not in line for line in settings_lines)
    return settings_lines


def test_the_dgx1_file():
    text = format_gres(gres_nodes([cube_mesh_8(name="Tesla V100-SXM2-16GB", host="node1",
                                               cpus=["0-19,40-59"] * 4 + ["20-39,60-79"] * 4)]))
    lines = gpu_lines(text)
    assert lines[0] == "AutoDetect=off"
    assert lines[1] == ("NodeName=node1 Name=gpu Type=tesla_v100-sxm2-16gb File=/dev/nvidia0 Cores=0-19 "
                        "Links=-1,1,1,2,2,0,0,0")
    assert lines[8] == ("NodeName=node1 Name=gpu Type=tesla_v100-sxm2-16gb File=/dev/nvidia7 Cores=20-39 "
                        "Links=0,0,0,1,2,1,2,-1")
    assert "# node node1: 8 GPUs; in slurm.conf: NodeName=node1 Gres=gpu:tesla_v100-sxm2-16gb:8" in text
    assert all(len(line) <= 110 for line in text.splitlines() if line.startswith("#"))


def test_without_a_host_the_lines_have_no_node_name():
    lines = gpu_lines(format_gres(gres_nodes([pcie_8()])))
    assert lines[1].startswith("Name=gpu Type=test_gpu File=/dev/nvidia0 Cores=0-7 Links=")


def test_one_block_per_node():
    text = format_gres(gres_nodes([nvl72(trays=2)]))
    lines = gpu_lines(text)
    assert len(lines) == 1 + 8
    assert lines[1].startswith("NodeName=tray00 ") and lines[5].startswith("NodeName=tray01 ")
    assert "in slurm.conf: NodeName=tray01 Gres=gpu:test_gpu:4" in text


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=2, max_size=4))
def test_any_gpu_names_give_one_valid_line_per_gpu(names):
    n = len(names)
    table = "\n".join(" ".join("X" if a == b else "NV2" for b in range(n)) for a in range(n))
    topology = link_table(table, name=names, host="n1")
    lines = gpu_lines(format_gres(gres_nodes([topology])))
    assert lines[0] == "AutoDetect=off"
    assert len(lines) == 1 + n
    for line in lines[1:]:
        assert GPU_LINE.fullmatch(line), line
        keys = [word.split("=", 1)[0] for word in line.split(" ")]
        assert keys[0] == "NodeName" and keys.count("Name") == 1 and len(keys) == len(set(keys))


def test_block_topology_text():
    text = format_block_topology(block_topology([nvl72(trays=3), pcie_8(host="login1")]))
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == ["BlockName=b1 Nodes=tray00,tray01,tray02", "BlockName=b2 Nodes=login1", "BlockSizes=1"]
    assert "# b2: one host:" in text
