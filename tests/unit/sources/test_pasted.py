"""What the readers of pasted tool outputs share: the one line width their patterns look at."""

import pytest

from gputopo.errors import InputError
from gputopo.sources.pasted import LINE_CAP_CHARS, capped
from gputopo.sources.smi import nvlink
from gputopo.sources.tf.tflog import parse_tf_log
from gputopo.sources.tf.tflog_lines import LINE_CAP_CHARS as TF_LINE_CAP_CHARS
from gputopo.sources.tools import nccl_log, nvbandwidth, p2pbw


def _p2pbw_gpu_name(pad: str) -> str | None:
    text = ("[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n"
            f"{pad}Device: 0, Tesla V100, pciBusID: 1b, pciDeviceID: 0, pciDomainID:0\n"
            "Device: 1, B, pciBusID: 1c, pciDeviceID: 0, pciDomainID:0\n")
    return p2pbw.read(text, "s").gpus[0].name  # GPU 0 (known by index only where its line was not read)


def _nvbandwidth_gpu_name(pad: str) -> str | None:
    text = f"nvbandwidth Version: v0.7\n{pad}Device 0: NVIDIA H100 (00000000:1b:00)\nDevice 1: B\n"
    return nvbandwidth.read(text, "s").gpus[0].name


def _nvlink_gpu_name(pad: str) -> str | None:
    text = f"GPU 1: B\n{pad}GPU 0: NVIDIA A100\n\t Link 0: 25.781 GB/s\n"
    return min(nvlink.read(text, "s").gpus, key=lambda g: g.index).name


def _nccl_gpu_bus(pad: str) -> str | None:
    text = (f"h:1:1 [0] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 1 busId 1c000 - Init COMPLETE\n"
            f"{pad}h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE\n")
    gpus = nccl_log.read(text, "s").gpus
    return gpus[0].pci_bus_id if len(gpus) == 2 else None


def _tf_log_device(pad: str) -> str | None:
    text = f"{pad}I tensorflow/core/common_runtime/gpu/gpu_device.cc:1406] Created TensorFlow device " \
           "(/job:localhost/replica:0/task:0/device:GPU:0 with 10 MB memory) -> physical GPU (device: 0, " \
           "name: Tesla K80, pci bus id: 0000:05:00.0, compute capability: 3.7)\n"
    try:
        return parse_tf_log(text, "s").devices[0].name
    except InputError:  # "no GPU lines"
        return None


def test_the_cut_is_the_first_line_cap_chars():
    assert TF_LINE_CAP_CHARS == LINE_CAP_CHARS == 4096  # one width, the TF log reader's, shared
    assert capped("a" * 5000) == "a" * LINE_CAP_CHARS and capped("abc") == "abc"


@pytest.mark.parametrize(("reader", "read_whole"), [
    (_p2pbw_gpu_name, "Tesla V100"), (_nvbandwidth_gpu_name, "NVIDIA H100"), (_nvlink_gpu_name, "NVIDIA A100"),
    (_nccl_gpu_bus, "0000:1b:00.0"), (_tf_log_device, "Tesla K80"),
])
def test_each_line_reader_matches_its_patterns_within_the_cut_only(reader, read_whole):
    """A line's words are read where they start inside the first ``LINE_CAP_CHARS`` (blanks before
    them are no damage), and never where they start past it: the cut comes before any pattern."""
    assert reader(" " * 100) == read_whole
    assert reader(" " * (LINE_CAP_CHARS - 300)) == read_whole
    assert reader(" " * LINE_CAP_CHARS) != read_whole


@pytest.mark.parametrize(("dressed", "plain"), [
    ("> a\n>\n>     0  1.5\n", ["a", "", "    0  1.5", ""]),  # a quote's bare '>' is a blank line
    ("$ $ ./tool\n$ Device 0: X\n$     0  1.5\n", ["$ ./tool", "Device 0: X", "    0  1.5", ""]),  # the tool's own prompt stays
    ("node-7: Device 0: X\nnode-7:      0  1.5\n", ["Device 0: X", "     0  1.5", ""]),
    ("**Device 0: X**\n**     0  1.5**\n", ["Device 0: X", "     0  1.5", ""]),
])
def test_a_decoration_every_line_shares_is_taken_off(dressed, plain):
    from gputopo.sources.pasted import undecorated_lines

    assert undecorated_lines(dressed) == plain


@pytest.mark.parametrize("text", [
    "Device: 0, A, pciBusID: 1\nDevice: 1, B, pciBusID: 2\n",  # a tool's own 'word: digit' is no host label
    "NOTE: one\nmemcpy CE GPU(row) -> GPU(column)\n",  # a prefix some lines lack is the tool's text
    "h:1:2 [0] NCCL INFO a\nh:1:2 [0] NCCL INFO b\n",  # NCCL's host:pid:tid is read, not taken off
])
def test_what_is_not_a_shared_decoration_stays(text):
    from gputopo.sources.pasted import lines_of, undecorated_lines

    assert undecorated_lines(text) == lines_of(text)
