"""The GPU table of `gputopo scan` (gputopo/views/gpu_table.py): here, the PCIe cell."""

from __future__ import annotations

import pytest
from linktable import table_machine

from gputopo.analysis.scan_result import scan_result
from gputopo.views.gpu_table import gpu_cells


@pytest.mark.parametrize(("state", "shown", "style"), [
    (0, "Gen1x16/Gen4x16 P0", "yellow"),   # at P0 a slower link trained down
    (8, "Gen1x16/Gen4x16 P8", "dim"),      # idle: lowered by design
    (2, "Gen1x16/Gen4x16 P2", "yellow"),   # cannot tell: shown as it is
    (None, "Gen1x16/Gen4x16", "yellow"),   # no state read with the link
])
def test_the_pcie_cell_names_the_state_the_link_was_read_in(state, shown, style):
    topo = table_machine("two-socket-4")
    gpu = topo.gpus[0]
    gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max = 1, 4, 16, 16
    gpu.performance_state = state
    (cell,) = [c for c in gpu_cells(scan_result(topo), gpu) if str(c).startswith("Gen")]
    assert str(cell) == shown and str(cell.style) == style
    gpu.pcie_width_current = 8  # a narrow link is a fault in any state
    (cell,) = [c for c in gpu_cells(scan_result(topo), gpu) if str(c).startswith("Gen")]
    assert str(cell.style) == "yellow"


def test_a_cpu_list_is_written_as_taskset_takes_it():
    """`taskset -c 48-63,176-191` pastes; `48-63, 176-191` does not. Where the terminal is too
    narrow, a line per range (each whole) instead of a space."""
    import subprocess
    import sys

    from conftest import REPO

    for columns, shown in (("120", "48-63,176-191"), ("60", "48-63,")):
        run = subprocess.run([sys.executable, "-m", "gputopo", "scan", "--machine", "dgx-a100"], cwd=REPO, text=True,
                             capture_output=True, timeout=120, env={**__import__("os").environ, "COLUMNS": columns})
        table = run.stdout.split("GPUs", 1)[1].split("\n\n", 2)[1]
        assert shown in table and ", 1" not in table, table


def test_the_nvlink_cell_is_never_cut_on_an_80_column_terminal():
    """Review 3: a GB200 tray's wide NUMA sets pushed the NVLink column past 80 columns, and the
    terminal's crop turned "? x>=18" into "? x>=1"."""
    import io

    from conftest import OWN_FIXTURES
    from rich.console import Console

    from gputopo.sources import TopologyRequest, resolve
    from gputopo.analysis.scan_result import scan_result
    from gputopo.views.gpu_table import gpu_table

    paste = OWN_FIXTURES / "corpus" / "topo" / "gb200_4gpu_nv18_grace_numa_sets_8nic.txt"
    topo = resolve(TopologyRequest(from_files=(str(paste),)))
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(gpu_table(scan_result(topo)))
    rows = [line for line in out.getvalue().splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 4 and all(line.rstrip().endswith("? x>=18") for line in rows), out.getvalue()
