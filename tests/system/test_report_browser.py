"""The report in a real browser: headless Chromium renders each page; the rendered DOM has one
element per GPU, GPU pair link and NIC, nothing is loaded from outside the page, and the
screenshot is a picture (many colours), not a blank page.

Skipped, with one line saying so, where Chromium is not installed (`.ci/run` installs it)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from conftest import OWN_FIXTURES
from gputopo.sources.registry import read_file
from gputopo.sources.reference import load_reference, machine_names
from gputopo.views.report import render_report

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-headless-shell")) if p), None)
if CHROMIUM is None and Path("/usr/bin/chromium").exists():
    CHROMIUM = "/usr/bin/chromium"

CAPTURES = ["h100_nv18_empty_cpu_affinity_cells.txt", "spaces_nicn_legend_gpu_numa_id.txt", "asymmetric.txt"]
SCREENSHOTS = ["dgx1", "dgx-h100", "pcie-8gpu", "gb200-nvl72"]


@pytest.fixture(autouse=True)
def _need_chromium():
    if CHROMIUM is None:
        pytest.skip("chromium not installed: browser test skipped (apt-get install chromium)")


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--hide-scrollbars", f"--user-data-dir={profile}", *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _page(tmp_path: Path, topo) -> Path:
    path = tmp_path / "box.html"
    path.write_text(render_report(topo), encoding="utf-8")
    return path


def _cases():
    for name in machine_names():
        yield pytest.param(lambda name=name: load_reference(name), id=name)
    for capture in CAPTURES:
        yield pytest.param(lambda c=capture: read_file(str(OWN_FIXTURES / "topo" / c)), id=capture)


@pytest.mark.parametrize("load", list(_cases()))
def test_rendered_dom_has_every_gpu_link_and_nic(load, tmp_path):
    topo = load()
    page = _page(tmp_path, topo)
    result = chromium(tmp_path, "--dump-dom", page.as_uri())
    dom = result.stdout
    assert "</html>" in dom, result.stderr[-2000:]
    assert len(re.findall(r'\sdata-gpu="\d+"', dom)) == len(topo.gpus)
    links = re.findall(r'\sdata-link="(\d+)-(\d+)"', dom)
    assert sorted((int(a), int(b)) for a, b in links) == sorted((lk.a, lk.b) for lk in topo.links)
    assert len(re.findall(r'\sdata-nic="', dom)) == len(topo.nics)
    assert not re.search(r'\s(?:src|href)="(?:https?:)?//', dom), "the page loads something from outside"


def png_colours(path: Path, stride: int = 7) -> int:
    """How many distinct colours a (non-interlaced, 8-bit RGB/RGBA) PNG has, sampling every
    ``stride``-th pixel of every ``stride``-th row. Standard library only."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour_type = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour_type in (2, 6), (depth, colour_type)
            channels = 3 if colour_type == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    row_len = width * channels
    previous = bytearray(row_len)
    colours = set()
    for y in range(height):
        start = y * (row_len + 1)
        kind, row = raw[start], bytearray(raw[start + 1 : start + 1 + row_len])
        for i in range(row_len):
            left = row[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                row[i] = (row[i] + left) & 0xFF
            elif kind == 2:
                row[i] = (row[i] + up) & 0xFF
            elif kind == 3:
                row[i] = (row[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                row[i] = (row[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        if y % stride == 0:
            for x in range(0, width, stride):
                colours.add(bytes(row[x * channels : x * channels + 3]))
        previous = row
    return len(colours)


@pytest.mark.parametrize("name", SCREENSHOTS)
def test_screenshot_is_a_picture_not_a_blank_page(name, tmp_path):
    page = _page(tmp_path, load_reference(name))
    shot = tmp_path / f"{name}.png"
    result = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", page.as_uri())
    assert shot.exists(), result.stderr[-2000:]
    assert png_colours(shot) > 24
