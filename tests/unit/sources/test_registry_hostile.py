"""Every registered reader, the door (``read_text``) and doctor's paste reader on hostile lines: each
either reads the text or refuses it with one ``InputError``; no other exception (a traceback) ever.

The lines are what an attacker review pasted (issue 36): runs of blanks, digits, ``| `` and ``[``; a
line start repeated (``GPU 0: ``, ``Device: ``, ``<pci ``, ...); deep and cut XML; huge JSON numbers.
Sizes stay modest so the test runs in seconds; how the time grows with size is measured, not
asserted, by ``benchmarks/hostile_inputs.py``."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gputopo.errors import InputError
from gputopo.sources.evidence.pasted_health import parse_pasted
from gputopo.sources.registry import READERS, read_text

XML_LEAD = '<system version="1"><cpu numaid="0">'
# What makes each reader look further: a line start of its kind (or nothing).
LEADS = ["", "GPU 0: x", "GPU0\tGPU1", "GPU 00000000:01:00.0", "Device: 0, x", "Device 0: x", "Device=0 CAN Access Peer",
         "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)", "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
         "nvbandwidth Version: v0.7", '{"nvbandwidth": ', '{"schema": "gputopo.topology/1", "gpus": ', XML_LEAD,
         "x:1:2 [0] NCCL INFO ", "#  size count type redop root time algbw busbw #wrong", "\t Link 0: ",
         "    Product Name : ", "01:00.0 x", "LnkSta: Speed 8GT/s", "lspci -s", "DMAR: [DMA Read", "NVRM: Xid (PCI:",
         "Command line: ", "I tensorflow/core/x.cc:1] ", "> "]
# The run repeated after it.
UNITS = [" ", "\t", "7", "0 ", "| ", "[", "{", "<pci ", "<pci>", "<a", "GPU 0: ", "GPU0 ", "Device: ", "Device 0: ",
         "Link 0: Remote ", "NCCL INFO ", "P2P=Enabled ", "lspci -s ", "\n", " \n", ": ", "x", "\u00e9", "\x00", "\r"]


@st.composite
def hostile_texts(draw: st.DrawFn) -> str:
    lead = draw(st.sampled_from(LEADS))
    unit = draw(st.sampled_from(UNITS))
    times = draw(st.integers(min_value=1, max_value=3000))
    tail = draw(st.text(alphabet=" \t\nx0:)>]}", max_size=8))
    before = draw(st.sampled_from(["", "GPU 0: x\n", XML_LEAD + "\n"]))
    return before + lead + unit * times + tail


def _read_or_refuse(text: str) -> None:
    for reader in READERS:
        assert reader.sniff(text) in (True, False), reader.kind
        try:
            reader.read(text, "hostile.txt")
        except InputError as exc:
            assert str(exc) and "Traceback" not in str(exc), reader.kind
    try:
        read_text(text, "hostile.txt")
    except InputError:
        pass
    parse_pasted(text)  # doctor's paste reader ignores what it does not recognise


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_texts())
@example(XML_LEAD + '<pci busid="0000:01:00.0">' * 1000)  # issue 36: a RecursionError traceback
@example(XML_LEAD + "<pci>" * 1500 + "</pci>" * 1500 + "</cpu></system>")
@example('{"nvbandwidth": {"testcases": [' + "7" * 5000 + "]}}")  # json's ValueError past 4300 digits
@example('{"schema": "gputopo.topology/1", "gpus": ' + "7" * 5000 + "}")
@example('{"nvbandwidth": ' + "[" * 5000)
@example(">  ")  # a quote mark alone: nothing left to describe once it is taken off (an IndexError)
def test_every_reader_reads_a_hostile_line_or_refuses_it_in_one_error(text):
    _read_or_refuse(text)


def test_names_with_control_characters_are_one_line_and_the_saved_snapshot_reads_back(tmp_path):
    """(A NIC in a ``topo -m`` legend or an NCCL XML ``<net name>`` kept its escape, C1 and newline
    characters: ``scan --save`` wrote them, and reading that snapshot back refused it: ``nics[0].device:
    control character``.)"""
    from gputopo.sources.registry import read_file
    from gputopo.sources.snapshot import parse_snapshot

    topo_m = ("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV4\tSYS\t0-3\t0\n"
              "GPU1\tNV4\t X \tPHB\t0-3\t0\nNIC0\tSYS\tPHB\t X \t\t\n\nNIC Legend:\n\n  NIC0: mlx5_0\u009b31m\x1b]0;x\x07\n")
    xml = ('<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0"><gpu dev="0"/></pci><pci busid="0000:03:00.0">'
           '<nic><net name="mlx5_0&#x9b;31m&#10;export X=1&#13;" dev="0"/></nic></pci>'
           '<pci busid="0000:02:00.0"><gpu dev="1"/></pci></cpu></system>')
    for name, text in (("topo.txt", topo_m), ("topo.xml", xml)):
        path = tmp_path / name
        path.write_text(text)
        topology = read_file(str(path))
        again = parse_snapshot(topology.to_json_text(), "saved.json")
        nic = again.nics[0]
        assert nic.name.startswith(("mlx5_0", "NIC0")) and "31m" in (nic.device or nic.name)
        assert not any(ch in (nic.device or "") + nic.name for ch in "\x1b\x07\u009b\n\r")
