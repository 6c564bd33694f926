"""The `scan` screen as a person sees it: at 80 and 120 columns, with odd strings and odd topologies."""

from __future__ import annotations

import io

import pytest
from linktable import cube_mesh_8, table_machine, two_socket_4
from rich.console import Console

from gputopo.model import Finding, Gpu, Link, Nic, NicLink, Topology
from gputopo.sources.reference import load_reference, machine_names
from gputopo.views.topology import link_legend_rows, render_topology

MARKUP = "[bold]x[/bold] [/]"


def render(topo: Topology, width: int = 80) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    render_topology(topo, console)
    return console.file.getvalue()


def test_user_strings_print_literally():
    """GPU names, bus ids, CPU lists, hosts and NIC names come from users' files: never rich markup."""
    topo = Topology(
        gpus=[
            Gpu(0, name=f"GPU {MARKUP}", pci_bus_id="[b]", cpu_affinity="[dim]0-3", numa_node=0, host="h[red]"),
            Gpu(1, name="plain", numa_node=0, host="h2"),
        ],
        links=[Link(0, 1, "PHB")],
        nics=[Nic("nic[/]", numa_node=0)],
        nic_links=[NicLink(0, "nic[/]", "PIX"), NicLink(1, "nic[/]", "PIX")],
        host="[red]box",
        diagnostics=[Finding("warning", "x", f"message {MARKUP}", fix=MARKUP)],
    )
    text = render(topo, width=120)
    for literal in (f"GPU {MARKUP}", "[b]", "[dim]0-3", "h[red]", "nic[/]", "[red]box", f"message {MARKUP}"):
        assert literal in text, literal


def test_missing_link_and_unknown_word_do_not_crash():
    """A hand-edited snapshot may lack a pair or carry a word we don't know: show '?', explain the word."""
    topo = Topology(gpus=[Gpu(0), Gpu(1), Gpu(2)], links=[Link(0, 1, "WEIRD"), Link(1, 2, "NV1")])
    text = render(topo)
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.strip().startswith("GPU")}
    assert rows["GPU0"][:3] == ["X", "WEIRD", "?"]
    assert "WEIRD  = a link word gputopo does not know" in text
    assert "NV1    = a single NVLink" in text


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", machine_names())
def test_matrices_never_cut_labels_or_columns(name, width):
    """16 GPUs (DGX-2) or 8 GPUs + 8 NICs (DGX H100) at 80 columns: every row label and every column
    header is shown whole (the matrix is split into column blocks rather than cut)."""
    topo = load_reference(name)
    text = render(topo, width)
    assert "…" not in text
    assert all(len(line) <= width for line in text.splitlines())
    if len(topo.gpus) > 16:
        return
    for g in topo.gpus:
        assert f" GPU{g.index} " in text
    header_cells = {cell for line in text.splitlines() for cell in line.split()}
    for g in topo.gpus:
        assert str(g.index) in header_cells
    for k in range(len(topo.nics)):
        assert f"NIC{k}" in header_cells


def test_wide_matrix_split_into_blocks_at_80_columns():
    topo = table_machine("nvswitch-16-nv6")
    text = render(topo, 80)
    assert "columns 0..7" in text and "columns 8..15" in text
    wide = render(topo, 120)
    assert "columns 0..7" not in wide


def _legend(topo: Topology, speeds: bool = False) -> dict[str, str]:
    from gputopo.analysis.scan_result import scan_result

    return {word: meaning.plain.replace("\u00a0", " ") for word, meaning in link_legend_rows(scan_result(topo), speeds)}


def test_legend_gives_speeds_with_units_and_the_colour_key():
    legend = _legend(cube_mesh_8(), speeds=True)
    assert legend["NV1"] == "a single NVLink, ~20 GB/s per direction"
    assert legend["NV2"] == "a bonded set of 2 NVLinks, ~40 GB/s per direction"
    assert legend["colour"].startswith("expected GB/s per direction: bold green >= 100")
    assert legend["colour"].endswith("red < 8")


def test_legend_wraps_under_itself_and_keeps_figures_with_their_units():
    lines = render(cube_mesh_8(), 80).splitlines()
    k = next(k for k, line in enumerate(lines) if line.startswith("  SYS    = across the SMP interconnect"))
    continuation = []
    for line in lines[k + 1 :]:
        if not line.startswith(" " * 11):
            break
        continuation.append(line)
    assert continuation, "the SYS meaning wraps under itself"
    assert "~6\u00a0GB/s per direction" in continuation[-1]  # the figure stays with its unit


def test_legend_sorts_nvlink_words_by_count():
    topo = Topology(gpus=[Gpu(0), Gpu(1), Gpu(2)], links=[Link(0, 1, "NV12"), Link(0, 2, "NV2"), Link(1, 2, "NV4")])
    assert list(_legend(topo)) == ["NV2", "NV4", "NV12"]


@pytest.mark.parametrize("gpus", [0, 1])
def test_zero_and_one_gpu(gpus):
    text = render(Topology(gpus=[Gpu(i) for i in range(gpus)]))
    assert ("No GPUs." in text) == (gpus == 0)
    assert "No findings." in text


def test_wrapped_findings_hang_under_their_severity_as_doctor_prints_them():
    from gputopo.analysis import with_findings

    text = render(with_findings(two_socket_4()), 80)
    lines = text.split("Findings", 1)[1].splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("WARNING cross-socket (design): GPUs 0,1 and 2,3"))
    body = lines[start + 1 : start + 4]  # the message's continuation and its fix
    for line in body:
        assert line.startswith("  ") and line[2] != " ", line
    assert any(line.startswith("  fix:      train on GPUs within one group") for line in body)


def test_header_names_the_file_once():
    from conftest import TOPO_FIXTURES

    from gputopo.sources import TopologyRequest, resolve

    path = str(TOPO_FIXTURES[0])
    text = render(resolve(TopologyRequest(from_files=(path,))), 200)
    header = text.split("GPUs", 1)[0]
    assert header.count(path) == 1
    assert "source: nvidia-smi" in header
    assert "source: reference (dgx1)" in render(load_reference("dgx1"), 120)


def test_large_topology_summary_gives_the_range_of_each_word():
    """Over 16 GPUs the matrix becomes a summary; NV18 pairs of an older GPU are slower than the rest."""
    gpus = [Gpu(i, nvlink_version="2.0" if i == 0 else "5.0", nvlink_active_links=18) for i in range(17)]
    links = [Link(a, b, "NV18", nvlink_count=18) for a in range(17) for b in range(a + 1, 17)]
    links[-1] = Link(15, 16, "UNKNOWN")
    text = render(Topology(gpus=gpus, links=links), 80)
    nv_row = next(line for line in text.splitlines() if "│ NV18" in line)
    low, high = nv_row.split("~")[1].split()[0].split("-")
    assert float(low) < float(high)
    assert "UNKNOWN" not in text.split("Findings")[0]


def test_p2p_matrix_the_source_did_not_give_is_one_line_not_a_matrix_of_question_marks():
    from conftest import OWN_FIXTURES

    from gputopo.sources import TopologyRequest, resolve

    text = render(resolve(TopologyRequest(from_files=(str(OWN_FIXTURES / "topo" / "with_p2p_matrices.txt"),))), 80)
    assert "P2P read" in text and "P2P atomics" in text
    assert "P2P write: not in the source" in text
    assert "\nP2P write " not in text  # no all-'?' matrix titled 'P2P write'
    # Wrapped meanings stay under themselves.
    tns = text.splitlines().index(next(line for line in text.splitlines() if line.startswith("  TNS = ")))
    assert text.splitlines()[tns + 1].startswith("        IOH")


def test_p2p_question_mark_is_explained():
    topo = Topology(gpus=[Gpu(0), Gpu(1), Gpu(2)], links=[Link(0, 1, "PIX", p2p_read="ok", p2p_write="ok",
                    p2p_atomics="ok"), Link(0, 2, "SYS"), Link(1, 2, "SYS")])
    assert "  ?   = the source does not say" in render(topo, 80)


def test_memory_below_one_gib_is_not_zero():
    from gputopo.views.topology import _fmt_bytes

    assert _fmt_bytes(512 * 1024**2) == "512M"
    assert _fmt_bytes(80 * 1024**3) == "80G"
    assert _fmt_bytes(None) == "?"


def test_socket_tree_tells_sockets_apart_by_cpu_list_without_a_numa_column():
    """The DGX-1 capture has CPU Affinity but no NUMA column: GPUs 4-7 are not on CPUs 0-11,24-35."""
    from conftest import SHARED_FIXTURES

    from gputopo.sources import TopologyRequest, resolve

    topo = resolve(TopologyRequest(from_files=(str(SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt"),)))
    tree = render(topo, 120).split("Links between", 1)[0]
    lines = [line for line in tree.splitlines() if "NUMA node" in line or "GPUs" in line or "NICs" in line]
    assert any("(CPUs 0-11,24-35)" in line for line in lines)
    k = next(k for k, line in enumerate(lines) if "(CPUs 12-23,36-47)" in line)
    assert lines[k + 1].strip("│├└─ ") == "GPUs 4, 5, 6, 7"
    assert "NICs mlx5_0 (NUMA node not known)" in tree  # not silently dropped


def test_socket_tree_multi_host_does_not_repeat_nics_under_every_host():
    topo = Topology(
        gpus=[Gpu(0, numa_node=0, host="a"), Gpu(1, numa_node=0, host="b")],
        links=[Link(0, 1, "NV18")],
        nics=[Nic("mlx5_0", numa_node=0)],
    )
    tree = render(topo, 120).split("Links between", 1)[0]
    assert tree.count("mlx5_0") == 1


def _wide_gpus() -> Topology:
    gpus = [
        Gpu(i, name="NVIDIA H100 80GB HBM3", pci_bus_id="0000:1b:00.0", memory_total_bytes=80 * 1024**3,
            numa_node=0, cpu_affinity="0-55,112-167", pcie_gen_current=4, pcie_gen_max=5, pcie_width_current=8,
            pcie_width_max=16, nvlink_version="4.0", nvlink_active_links=18, mig_mode=True,
            host=f"node-000{i}.cluster.example.com")
        for i in range(2)
    ]
    return Topology(gpus=gpus, links=[Link(0, 1, "NV18", nvlink_count=18)])


def test_gpu_table_never_pushes_columns_off_an_80_column_terminal():
    """MIG and long host names used to be cut off at 80 columns ('node-000', no MIG column)."""
    text = render(_wide_gpus(), 80)
    table = text.split("\nGPUs", 1)[1].split("├──", 1)[0]
    assert "MIG" in table and "hosts: see the tree below" in table
    assert "node-000" not in table
    assert "node-0001.cluster.example.com / NUMA node 0" in text
    wide = render(_wide_gpus(), 120)
    assert "node-0001.cluster.example.com \n" in wide.replace("│", "")  # the host column, whole


def test_matrix_title_is_one_line_over_a_small_matrix():
    assert "Links between GPUs (nvidia-smi words, coloured by expected speed)\n" in render(_wide_gpus(), 80)


def test_socket_tree_root_counts_the_hosts():
    text = render(load_reference("gb200-nvl72"), 120)
    assert "\n18 hosts\n" in text.replace(" \n", "\n")


def test_socket_tree_orders_places_by_their_first_gpu_not_by_cpu_text():
    topo = Topology(gpus=[Gpu(0, cpu_affinity="8-15"), Gpu(1, cpu_affinity="16-23")], links=[Link(0, 1, "SYS")])
    text = render(topo, 120)
    assert text.index("(CPUs 8-15)") < text.index("(CPUs 16-23)")

