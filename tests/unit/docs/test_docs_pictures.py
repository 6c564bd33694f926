"""What the docs show is what the tool draws and says now (issue 24): the screenshots in docs/ are
of the current drawing, and the README's first screen is a real capture's current findings."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys

import pytest
from conftest import REPO

from gputopo.analysis import with_findings
from gputopo.analysis.recommend import recommend
from gputopo.sources import TopologyRequest, resolve
from gputopo.views.svg import render_svg

# (picture, reference machine or a capture in the corpus, GPUs of the outlined group or None), as
# docs/report.md shows them.
SCREENSHOTS = [("report-dgx1.png", "dgx1", 4), ("report-dgx-h100.png", "dgx-h100", None),
               ("report-pcie-8gpu.png", "pcie-8gpu", None),
               ("report-workstation-4gpu.png", "tests/fixtures/corpus/topo/mixed_4gpu_4090_a6000_5090_all_phb_fedora.txt", None)]


def request_of(source: str) -> TopologyRequest:
    """A reference machine by name, a capture by its path in the repository (as --from gives it)."""
    return TopologyRequest(from_files=(source,)) if "/" in source else TopologyRequest(machine=source)


def _png_size(path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


@pytest.mark.parametrize(("picture", "machine", "gpus"), SCREENSHOTS)
def test_each_screenshot_is_of_the_current_drawing(picture, machine, gpus, monkeypatch):
    """Headless Chromium's screenshot of `render_svg` at the SVG's own size (docs/report.md says
    how): a drawing that changed size (more NICs, another layout) needs a new picture."""
    monkeypatch.chdir(REPO)  # (a capture's path, relative to the repository, is in its drawing's title)
    topology = with_findings(resolve(request_of(machine)))
    best = recommend(topology, gpus).best.gpus if gpus else []
    svg = render_svg(topology, best=best)
    width, height = (int(float(v)) for v in re.search(r'width="([0-9.]+)" height="([0-9.]+)"', svg).groups())
    assert _png_size(REPO / "docs" / picture) == (width, height)


def test_the_readme_first_screen_shows_a_real_captures_current_findings():
    text = (REPO / "README.md").read_text()
    block = re.search(r"```console\n\$ gputopo scan --from (\S+)[^\n]*\n(.*?)```", text, re.S)
    assert block and text.index(block.group(0)) < 2500, "the findings should be on the README's first screen"
    capture = REPO / "tests" / "fixtures" / "shared" / "topo" / block.group(1)
    assert capture.exists()
    run = subprocess.run([sys.executable, "-m", "gputopo", "scan", "--from", str(capture)], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "COLUMNS": "100"}, cwd=REPO)
    shown = run.stdout[run.stdout.index("Findings ─"):]
    assert block.group(2).strip() == shown.strip()
