"""The drawing (SVG) and the page of `gputopo report`, parsed as XML; the commands are tests/unit/cli/test_report.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from conftest import OWN_FIXTURES, SHARED_FIXTURES

from gputopo.analysis.scan_result import scan_result
from gputopo.errors import InputError
from gputopo.model import Topology, make_link
from gputopo.sources.reference import load_reference, machine_names
from gputopo.sources.registry import read_file
from gputopo.views.report import render_report
from gputopo.views.svg import render_svg
from gputopo.views.svg_layout import build_layout

SHARED = SHARED_FIXTURES / "topo"  # the shared captures as copied into the repository
CAPTURES = [
    p
    for p in sorted((OWN_FIXTURES / "topo").glob("*.txt")) + sorted(SHARED.glob("*.txt"))
    if p.stem not in {"garbage", "truncated_mid_row", "truncated_rows", "unknown_word"}
]


def _topologies():
    for name in machine_names():
        yield pytest.param(lambda name=name: load_reference(name), id=name)
    for path in CAPTURES:
        yield pytest.param(lambda path=path: read_file(str(path)), id=path.name)


def _attrs(root: ET.Element, name: str) -> list[str]:
    return [e.attrib[name] for e in root.iter() if name in e.attrib]


def assert_drawing_matches(root: ET.Element, topo: Topology) -> None:
    assert sorted(map(int, _attrs(root, "data-gpu"))) == sorted(topo.gpu_indices)
    links = dict(zip(_attrs(root, "data-link"), _attrs(root, "data-type")))
    assert len(_attrs(root, "data-link")) == len(topo.links)
    assert links == {f"{lk.a}-{lk.b}": lk.type for lk in topo.links}
    assert sorted(_attrs(root, "data-nic")) == sorted(n.name for n in topo.nics)


@pytest.mark.parametrize("load", list(_topologies()))
def test_svg_is_xml_with_one_element_per_gpu_link_and_nic(load):
    topo = load()
    root = ET.fromstring(render_svg(topo))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert_drawing_matches(root, topo)


@pytest.mark.parametrize("load", list(_topologies()))
def test_page_is_xml_and_embeds_the_snapshot(load, tmp_path):
    topo = load()
    page = render_report(topo)
    root = ET.fromstring(page.replace("<!DOCTYPE html>", "", 1))
    assert_drawing_matches(root, topo)
    for element in root.iter():
        for attr in ("src", "href"):
            assert not element.attrib.get(attr, "").startswith(("http:", "https:", "//")), element.attrib
    path = tmp_path / "box.html"
    path.write_text(page, encoding="utf-8")
    assert read_file(str(path)).to_dict() == topo.to_dict()


@pytest.mark.parametrize("name", ["dgx2", "dgx-a100", "dgx-h100", "hgx-b200", "gb200-nvl72"])
def test_nvswitch_machines_get_one_hub_with_a_spoke_per_gpu(name):
    topo = load_reference(name)
    root = ET.fromstring(render_svg(topo))
    assert len(_attrs(root, "data-nvswitch")) == 1
    assert sorted(map(int, _attrs(root, "data-spoke"))) == topo.gpu_indices
    drawn = [e for e in root.iter() if "data-link" in e.attrib and e.find("{http://www.w3.org/2000/svg}path") is not None]
    assert drawn == []  # pairs through the hub are not drawn as edges


def test_nvidia_smi_text_with_nv18_everywhere_is_drawn_as_a_hub():
    topo = read_file(str(OWN_FIXTURES / "topo" / "h100_nv18_empty_cpu_affinity_cells.txt"))
    root = ET.fromstring(render_svg(topo))
    assert _attrs(root, "data-nvswitch") == ["inferred"]


def test_boxes_nest_numa_and_pcie_switch_around_their_gpus():
    layout = build_layout(scan_result(load_reference("dgx1")))
    kinds = [b.kind for b in layout.boxes]
    assert kinds.count("host") == 1 and kinds.count("numa") == 2 and kinds.count("switch") == 4
    def inner(box):
        for child in box.children:
            yield from inner(child) if hasattr(child, "children") else [child]

    for box in layout.boxes:
        for item in inner(box):
            assert box.x <= item.x and item.x + item.w <= box.x + box.w
            assert box.y <= item.y and item.y + item.h <= box.y + box.h


def test_untrusted_names_are_escaped_and_read_back_exactly(tmp_path):
    topo = load_reference("two-socket-4gpu")
    topo.gpus[0].name = '</script><script>alert("x")</script> & \x07bell'
    topo.nics = []
    topo.source_detail = "<img src=http://evil.example/x>"
    page = render_report(topo)
    assert "<script>alert" not in page and "<img" not in page
    root = ET.fromstring(page.replace("<!DOCTYPE html>", "", 1))
    assert len(root.findall(".//script")) == 2  # the snapshot and the hover script, nothing else
    path = tmp_path / "evil.html"
    path.write_text(page, encoding="utf-8")
    # A name is one line of text: the bell is refused on reading back, naming the field (security.md).
    with pytest.raises(InputError, match=r"gpus\[0\]\.name: control character '\\x07'"):
        read_file(str(path))
    topo.gpus[0].name = '</script><script>alert("x")</script> & bell'
    path.write_text(render_report(topo), encoding="utf-8")
    assert read_file(str(path)).to_dict() == topo.to_dict()


def test_unknown_and_missing_links_are_said_not_guessed():
    topo = load_reference("two-socket-4gpu")
    topo.links = [lk for lk in topo.links if (lk.a, lk.b) != (0, 3)]
    topo.links[0] = make_link(0, 1, "UNKNOWN")
    page = render_report(topo)
    root = ET.fromstring(page.replace("<!DOCTYPE html>", "", 1))
    assert_drawing_matches(root, topo)
    assert "No link is known between GPUs 0-3" in page
    assert "The kind of link between GPUs 0-1 is not known" in page


def test_one_gpu_still_draws():
    topo = load_reference("workstation-2x4090")
    topo.gpus, topo.links, topo.nic_links = topo.gpus[:1], [], []
    root = ET.fromstring(render_report(topo).replace("<!DOCTYPE html>", "", 1))
    assert _attrs(root, "data-gpu") == ["0"] and _attrs(root, "data-link") == []


def _section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start:page.index("</section>", start)]


def test_findings_are_listed_worst_first_faults_before_design_before_notes():
    from gputopo.model import Finding

    topo = load_reference("two-socket-4gpu")
    topo.diagnostics = [Finding("info", "virtual-machine", "NOTE-INFO"), Finding("warning", "cross-socket", "DESIGN-WARN"),
                        Finding("warning", "pcie-width-degraded", "FAULT-WARN", gpus=[1]),
                        Finding("error", "gpus-missing", "FAULT-ERROR"), Finding("info", "cross-socket", "DESIGN-INFO")]
    findings = _section(render_report(topo), "findings")
    shown = [word for word in ("FAULT-ERROR", "FAULT-WARN", "DESIGN-WARN", "DESIGN-INFO", "NOTE-INFO") if word in findings]
    assert sorted(shown, key=findings.index) == ["FAULT-ERROR", "FAULT-WARN", "DESIGN-WARN", "DESIGN-INFO", "NOTE-INFO"]
    assert '<li data-kind="fault"><span class="sev sev-error">' in findings


def test_not_known_lists_what_the_estimates_assume():
    paste = OWN_FIXTURES / "corpus" / "topo" / "a100_4gpu_nv4_restricted_cpuset_nic_legend.txt"
    unknown = _section(render_report(read_file(str(paste))), "unknown")
    assert "Estimates of NV4 rest on an assumption: NVLink generation not in the source" in unknown
    paste = OWN_FIXTURES / "doctor" / "constructed" / "topo_m.txt"
    unknown = _section(render_report(read_file(str(paste))), "unknown")
    assert "Estimates of PIX, NODE, SYS rest on an assumption: PCIe generation not in the source" in unknown
    assert "rest on an assumption" not in _section(render_report(load_reference("dgx1")), "unknown")


def test_the_plans_lines_wrap_instead_of_running_off_the_page():
    from gputopo.analysis.recommend import recommend

    topo = load_reference("dgx1")
    page = render_report(topo, recommend(topo, 4))
    assert '<pre id="plan-lines">' in _section(page, "plan")
    assert "#plan pre{white-space:pre-wrap;overflow-wrap:anywhere}" in page


def test_not_known_names_topo_m_only_where_the_source_is_topo_m():
    """A p2pBandwidthLatencyTest output is not `nvidia-smi topo -m`: its P2P sentence says what tells."""
    from conftest import OWN_FIXTURES

    from gputopo.analysis.scan_result import scan_result
    from gputopo.sources import TopologyRequest, resolve
    from gputopo.views.report import unknowns

    paste = OWN_FIXTURES / "corpus" / "p2pbw" / "nccl814_6x_rtx4090_p2p_slower_than_staged_cut.txt"
    said = unknowns(scan_result(resolve(TopologyRequest(from_files=(str(paste),)))))
    assert "P2P support is not in the source (`nvidia-smi topo -p2p r` says it)." in said
    assert not any("topo -m" in line for line in said)
