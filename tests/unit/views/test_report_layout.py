"""The drawing's geometry, read back from the SVG as a browser would draw it (issue 35): only
NVLinks are edges, no edge passes through a GPU box, no two labels overlap, for every reference
machine and every real capture. Headless Chromium checks the same on the rendered page
(tests/system/test_report_browser.py)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from conftest import OWN_FIXTURES, SHARED_FIXTURES
from linktable import cube_mesh_8
from gputopo.model import Finding, Measurement
from gputopo.sources.registry import read_file
from gputopo.sources.reference import load_reference, machine_names
from gputopo.views.svg import render_svg
from gputopo.views.svg_links import FAULT_HEX, VERDICT_HEX

NS = "{http://www.w3.org/2000/svg}"
CORPUS = OWN_FIXTURES / "corpus" / "topo"
CAPTURES = sorted(CORPUS.glob("*.txt")) + sorted((SHARED_FIXTURES / "topo").glob("*.txt"))
Rect = tuple[float, float, float, float]  # x, y, w, h


def _cases():
    for name in machine_names():
        yield pytest.param(lambda name=name: load_reference(name), id=name)
    for path in CAPTURES:
        yield pytest.param(lambda path=path: read_file(str(path)), id=path.name)


def _rect(element: ET.Element) -> Rect:
    return tuple(float(element.attrib[k]) for k in ("x", "y", "width", "height"))  # type: ignore[return-value]


def gpu_boxes(root: ET.Element) -> dict[int, Rect]:
    return {int(g.attrib["data-gpu"]): _rect(g.find(NS + "rect")) for g in root.iter(NS + "g") if "data-gpu" in g.attrib}


def label_boxes(root: ET.Element) -> list[Rect]:
    return [_rect(g.find(NS + "rect")) for g in root.iter(NS + "g") if g.attrib.get("class") == "lbl"]


def edges(root: ET.Element) -> dict[str, list[tuple[float, float]]]:
    """Each drawn edge's path, sampled along its cubic Bezier: ``"a-b"`` -> points."""
    out = {}
    for g in root.iter(NS + "g"):
        path = g.find(NS + "path")
        if "data-link" not in g.attrib or path is None:
            continue
        x0, y0, x1, y1, x2, y2, x3, y3 = map(float, re.findall(r"-?[0-9.]+", path.attrib["d"]))
        points = []
        for k in range(1, 60):
            t, u = k / 60, 1 - k / 60
            points.append((u**3 * x0 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t**3 * x3,
                           u**3 * y0 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t**3 * y3))
        out[g.attrib["data-link"]] = points
    return out


def _inside(point: tuple[float, float], rect: Rect, inset: float = 1.0) -> bool:
    x, y, w, h = rect
    return x + inset < point[0] < x + w - inset and y + inset < point[1] < y + h - inset


def _apart(a: Rect, b: Rect) -> bool:
    return a[0] + a[2] <= b[0] + 0.01 or b[0] + b[2] <= a[0] + 0.01 or a[1] + a[3] <= b[1] + 0.01 or b[1] + b[3] <= a[1] + 0.01


@pytest.mark.parametrize("load", list(_cases()))
def test_no_edge_crosses_a_gpu_box_and_no_labels_overlap(load):
    topo = load()
    root = ET.fromstring(render_svg(topo))
    boxes = gpu_boxes(root)
    rects = list(boxes.values())
    for i, a in enumerate(rects):
        assert all(_apart(a, b) for b in rects[i + 1 :])
    for pair, points in edges(root).items():
        for g, rect in boxes.items():
            assert not any(_inside(p, rect) for p in points), f"edge {pair} crosses GPU {g}"
    labels = label_boxes(root)
    for i, a in enumerate(labels):
        assert all(_apart(a, b) for b in labels[i + 1 :]), ("labels overlap", a)
        assert all(_apart(a, b) for b in rects), ("label on a GPU box", a)


@pytest.mark.parametrize("load", list(_cases()))
def test_only_nvlinks_are_edges(load):
    topo = load()
    drawn = set(edges(ET.fromstring(render_svg(topo))))
    assert all(lk.type.startswith("NV") for lk in topo.links if f"{lk.a}-{lk.b}" in drawn)


def test_the_pcie_server_has_no_edge_and_the_dgx1_its_sixteen_nvlinks():
    assert edges(ET.fromstring(render_svg(load_reference("pcie-8gpu")))) == {}
    dgx1 = load_reference("dgx1")
    nvlinks = {f"{lk.a}-{lk.b}" for lk in dgx1.links if lk.nvlink_count}
    assert len(nvlinks) == 16 and set(edges(ET.fromstring(render_svg(dgx1)))) == nvlinks


def test_the_dgx1_cube_mesh_is_two_quads_facing_each_other():
    """Each socket's four GPUs in a row, the other socket's under them, cross links straight down."""
    root = ET.fromstring(render_svg(load_reference("dgx1")))
    boxes = gpu_boxes(root)
    assert {boxes[g][1] for g in range(4)} != {boxes[g][1] for g in range(4, 8)}
    assert len({boxes[g][1] for g in range(4)}) == 1 and len({boxes[g][1] for g in range(4, 8)}) == 1
    for a in range(4):
        assert boxes[a][0] == boxes[a + 4][0]


@pytest.mark.parametrize("name", ["dgx1", "dgx-h100", "pcie-8gpu", "two-socket-4gpu", "workstation-2x4090"])
def test_a_machine_of_up_to_sixteen_gpus_fits_a_page_at_full_size(name):
    """Text is never scaled down in the page: the drawing must fit a page of about 1280 px."""
    svg = render_svg(load_reference(name))
    assert float(re.search(r'width="([0-9.]+)"', svg).group(1)) <= 1280


def _group(root: ET.Element, attr: str, value: str) -> ET.Element:
    return next(g for g in root.iter(NS + "g") if g.attrib.get(attr) == value)


def test_faults_are_drawn_where_they_are():
    """A fault that names a GPU marks that GPU (its words on hover); an NVLink doctor found down is
    drawn red and dashed; a measured edge is coloured by measured/expected, expected in its tooltip."""
    topo = cube_mesh_8()
    topo.diagnostics = [Finding("warning", "pcie-link-narrow", "GPU 2's PCIe link trained at x8 of x16", gpus=[2], kind="fault"),
                        Finding("warning", "cross-socket", "GPUs 0-3 and 4-7 are on two sockets", gpus=list(range(8)), kind="design")]
    topo.link(0, 3).health = ["nvlink-down"]
    topo.link(0, 1).measured = Measurement(a_to_b_gbps=4.0, b_to_a_gbps=4.1)
    root = ET.fromstring(render_svg(topo))
    marked = [g.attrib["data-gpu"] for g in root.iter(NS + "g") if "fault" in g.attrib.get("class", "").split()]
    assert sorted(marked) == ["0", "2", "3"]  # the x8 link's GPU and the down NVLink's two ends, not the design note
    mark = _group(root, "data-gpu", "2").find(f"{NS}g[@class='fault-mark']/{NS}title")
    assert "trained at x8" in mark.text
    down = _group(root, "data-link", "0-3")
    assert down.find(NS + "path").attrib["stroke"] == FAULT_HEX and "nvlink-down" in down.find(NS + "title").text
    slow = _group(root, "data-link", "0-1")
    assert slow.find(NS + "path").attrib["stroke"] == VERDICT_HEX["far-below"]
    assert "expected ~" in slow.find(NS + "title").text and "far-below" in slow.find(NS + "title").text


def test_a_switch_with_acs_redirect_is_drawn_at_fault():
    """doctor's ACS problem on a PIX pair: the switch the pair goes through is outlined red."""
    topo = load_reference("pcie-8gpu")
    topo.link(0, 1).health = ["acs"]
    root = ET.fromstring(render_svg(topo))
    switches = [g for g in root.iter(NS + "g") if g.attrib.get("class", "").startswith("box box-switch")]
    at_fault = [g for g in switches if "fault" in g.attrib["class"].split()]
    assert len(at_fault) == 1 and "GPU 0 - GPU 1: acs" in at_fault[0].find(NS + "title").text
    assert {g.attrib["data-gpu"] for g in root.iter(NS + "g") if "fault" in g.attrib.get("class", "").split()
            and "data-gpu" in g.attrib} == {"0", "1"}
