"""The scan screen of a domain larger than MAX_LISTED_GPUS: kinds of GPUs and layouts of hosts, no
row per GPU and no matrix; --json keeps every GPU."""

from __future__ import annotations

import io
import json

from rich.console import Console

from gputopo.model import Gpu, Topology, make_link
from gputopo.views.topology import render_topology
from gputopo.views.topology_large import MAX_LISTED_GPUS


def _domain(n: int) -> Topology:
    gpus = [Gpu(index=i, name="NVIDIA GB200", host=f"tray{i // 4:03d}", numa_node=(i % 4) // 2,
                cpu_affinity="0-71" if (i % 4) < 2 else "72-143", pci_bus_id=f"0000:0{i % 2 + 1}:00.0")
            for i in range(n)]
    links = [make_link(a, b, "NV18", nvswitch=True) for a in range(n) for b in range(a + 1, n)]
    return Topology(gpus=gpus, links=links, source="snapshot")


def test_a_large_domain_is_summarised():
    n = MAX_LISTED_GPUS + 4
    buffer = io.StringIO()
    render_topology(_domain(n), Console(file=buffer, width=120, color_system=None))
    text = buffer.getvalue()
    assert f"GPUs ({n}, 2 kinds" in text
    assert f"{n // 4} hosts laid out alike" in text
    assert "NUMA node 0 (CPUs 0-71): 2 GPUs" in text
    assert f"Links between {n} GPUs (summary)" in text
    assert len(text.splitlines()) < 60  # not a row per GPU, not a matrix
    assert "0-1,4-5,8-9, ..." in text


def test_json_keeps_every_gpu(cli, tmp_path):
    n = MAX_LISTED_GPUS + 4
    path = tmp_path / "domain.json"
    path.write_text(json.dumps(_domain(n).to_dict()))
    result = cli("scan", "--from", str(path), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert len(data["gpus"]) == n and len(data["links"]) == n * (n - 1) // 2
