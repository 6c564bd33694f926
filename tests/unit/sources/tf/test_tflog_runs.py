"""Issue 31: separate runs are never merged. Two real logs of different machines pasted one after
the other, in both orders (a metamorphic variant built here from real files), split where a device
line names an ordinal the start-up knows as another GPU (another model or PCI bus id); the same
log twice is one machine started twice: two start-ups, read as the log alone (a log of nothing
but "Ignoring ... gpu device" lines shows no restart: one process may print them again)."""

from __future__ import annotations

import re

import pytest
from conftest import OWN_FIXTURES, corpus_known_gaps

from gputopo.sources.tf.tflog import parse_tf_log
from gputopo.sources.tf.tflog_lines import IGNORED, scan_lines
from gputopo.sources.tf.tflog_runs import split_startups

CORPUS = OWN_FIXTURES / "corpus" / "tf_logs"
VEGA = "rocm_tf20_found_devices_4gpu_vega_fe_gfx900_cut.log"  # Found device 0-3, cut before any Created line
A100 = "tf25_created_device_4gpu_a100_pcie.log"  # Created device 0-3 only
GTX_FOUND = "tf1x_found_device_1_to_6_only_1080ti_cut.log"  # Found device 1-6, GTX 1080 Ti
GTX_ISLANDS = "tf15_edge_matrix_two_islands_8gpu_1080ti.log"  # another 8x GTX 1080 Ti box
MANGLINGS = {
    "as is": lambda t: t,
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "quoted": lambda t: "\n".join("> " + line for line in t.split("\n")),
    "timestamps stripped": lambda t: re.sub(r"(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ", "", t),
    "shell prompt between": lambda t: t.replace("\n\n", "\n$ python train.py\n"),
}


def _text(name: str, first: int = 0) -> str:
    return "\n".join((CORPUS / name).read_text().rstrip("\n").split("\n")[first:])


def _runs(text: str) -> list[set[str | None]]:
    """The bus ids each start-up's view reads (a set per start-up)."""
    count = parse_tf_log(text, "two.log").startups
    return [{d.pci_bus_id for d in parse_tf_log(text, "two.log", run=k).devices} for k in range(1, count + 1)]


VEGA_BUSES = {"0000:0a:00.0", "0000:0d:00.0", "0000:45:00.0", "0000:48:00.0"}
A100_BUSES = {"0000:3b:00.0", "0000:5e:00.0", "0000:86:00.0", "0000:af:00.0"}


@pytest.mark.parametrize("mangling", sorted(MANGLINGS))
@pytest.mark.parametrize("order", ["vega first", "a100 first"])
def test_another_gpu_model_by_the_same_ordinals_is_another_run(order, mangling):
    """Four Vegas found, the log cut before TF created them, then an A100 box's Created lines: the
    Created lines named the same ordinals 0-3, and were read as the Vegas' devices."""
    first, second = (VEGA, A100) if order == "vega first" else (A100, VEGA)
    text = MANGLINGS[mangling](_text(first) + "\n\n" + _text(second))
    runs = _runs(text)
    assert runs == ([VEGA_BUSES, A100_BUSES] if order == "vega first" else [A100_BUSES, VEGA_BUSES])
    names = [{d.name for d in parse_tf_log(text, "two.log", run=k).devices} for k in (1, 2)]
    assert {"NVIDIA A100-PCIE-40GB"} in names and {"Vega 10 XTX [Radeon Vega Frontier Edition]"} in names


@pytest.mark.parametrize("mangling", sorted(MANGLINGS))
@pytest.mark.parametrize("order", ["found first", "created first"])
def test_the_same_model_at_another_bus_id_is_another_run(order, mangling):
    """GTX 1080 Tis found as 1-6 on one box; another box's log cut to start at its 'Created ...
    GPU:2' line: GPU 2 is at 08:00.0 there, at 06:00.0 in the first."""
    islands = _text(GTX_ISLANDS, first=14)
    assert "device:GPU:2 " in islands.split("\n")[0]
    first, second = (_text(GTX_FOUND), islands) if order == "found first" else (islands, _text(GTX_FOUND))
    text = MANGLINGS[mangling](first + "\n\n" + second)
    events = scan_lines(text.replace("\r\n", "\n"))
    startups = split_startups(events)
    assert len(startups) == 2
    found_run, created_run = sorted(startups, key=lambda s: bool(s.created))
    assert found_run.found == {1, 2, 3, 4, 5, 6} and not found_run.created
    assert created_run.created == {2, 3, 4, 5, 6, 7} and not created_run.found


@pytest.mark.parametrize("path", sorted(p for p in CORPUS.glob("*.log") if p.name not in corpus_known_gaps()),
                         ids=lambda p: p.name)
def test_the_same_log_twice_is_two_startups_read_as_the_log_alone(path):
    """One machine started twice (a job restarted, a log pasted twice): every start-up comes back
    whole, none merged with its repeat; the view is the one the log alone gives."""
    text = path.read_text().rstrip("\n")
    once, twice = parse_tf_log(text, "log"), parse_tf_log(text + "\n" + text, "log")
    if all(e.kind == IGNORED for e in scan_lines(text)):  # one process may repeat it (tensorflow#29): no restart shown
        assert twice.startups == once.startups
    else:
        assert twice.startups == 2 * once.startups

    def seen(view):
        return (view.era, view.gpu_count, view.gpu_count_at_least, view.peer, view.enable_failed,
                [(d.ordinal, d.name, d.pci_bus_id, d.tf_id, d.ignored) for d in view.devices])

    assert seen(twice) == seen(once)
