"""The input registry: kinds recognised by content, mixed pastes read part by part, unknown text
refused in one line naming what it looked like and what is read."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_FIXTURES

from gputopo.errors import InputError
from gputopo.sources.registry import READERS, Reader, kinds_read, read_file, read_text

DGX1 = SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt"
PCIE = SHARED_FIXTURES / "topo" / "pcie_8gpu_dual_socket_pix_node_sys.txt"


def test_every_reader_has_a_kind_and_recognises_no_empty_text():
    assert READERS and len({r.kind for r in READERS}) == len(READERS)
    for reader in READERS:
        assert not reader.sniff("") and not reader.sniff("hello\nworld\n")


def test_topo_matrix_is_recognised_by_content_whatever_the_file_is_called(tmp_path):
    path = tmp_path / "notes.log"
    path.write_bytes(DGX1.read_bytes())
    topology = read_file(str(path))
    assert topology.source == "nvidia-smi" and len(topology.gpus) == 8


def test_a_snapshot_is_read_as_a_snapshot(tmp_path):
    topology = read_file(str(DGX1))
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(topology.to_dict()))
    again = read_file(str(path))
    assert again.to_dict() == {**topology.to_dict(), "source_detail": again.source_detail}


def test_a_snapshot_whose_strings_look_like_a_matrix_is_still_a_snapshot():
    topology = read_text(DGX1.read_text(), "dgx1.txt")
    topology.gpus[0].name = "GPU0 X NV1"
    again = read_text(json.dumps(topology.to_dict()), "snap.json")
    assert again.gpus[0].name == "GPU0 X NV1" and again.source == "nvidia-smi"


@pytest.mark.parametrize(
    ("text", "looks"),
    [
        ("hello world\nthis is a note\n", "2 non-blank lines starting with 'hello world'"),
        ("[1, 2, 3]\n", "JSON that is not a gputopo snapshot"),
        ("\x00\x01\x02binary", "it looks binary"),
    ],
)
def test_unknown_text_is_one_line_naming_what_it_looked_like_and_the_kinds(text, looks):
    with pytest.raises(InputError) as info:
        read_text(text, "paste.txt")
    message = str(info.value)
    assert "\n" not in message and message.startswith("paste.txt is not a kind gputopo reads")
    assert looks in message
    for kind in kinds_read():
        assert kind in message


def test_empty_input_names_the_kinds():
    with pytest.raises(InputError, match="is empty: expected one of .*nvidia-smi topo -m"):
        read_text("  \n\n", "empty.txt")


def test_a_paste_of_several_outputs_is_read_by_every_matching_reader_and_merged(monkeypatch):
    """Two kinds in one paste: each reader reads its own part; the parts are merged as one host."""
    from gputopo.model import Gpu, Measurement, Topology, make_link
    from gputopo.sources import registry

    def sniff_bandwidth(text: str) -> bool:
        return "A FAKE BANDWIDTH TABLE" in text  # no real kind's words: only this fake reader matches

    def read_bandwidth(text: str, source: str) -> Topology:
        link = make_link(0, 1, "UNKNOWN", measured=Measurement(a_to_b_gbps=48.5, device_kind="GPU"))
        return Topology(gpus=[Gpu(index=0), Gpu(index=1)], links=[link], source="nvidia-smi")

    monkeypatch.setattr(registry, "READERS", (*READERS, Reader("a bandwidth test", sniff_bandwidth, read_bandwidth)))
    topology = read_text(DGX1.read_text() + "\nA FAKE BANDWIDTH TABLE\n", "both.txt")
    link = topology.link(0, 1)
    assert link.type == "NV1" and link.measured is not None and link.measured.a_to_b_gbps == 48.5
    assert topology.source_detail == "both.txt (nvidia-smi topo -m) + both.txt (a bandwidth test)"


def test_a_part_that_cannot_be_read_is_not_dropped(monkeypatch):
    from gputopo.sources import registry

    def refuse(text: str, source: str):
        raise InputError(f"{source}: the bandwidth table is cut")

    monkeypatch.setattr(registry, "READERS", (*READERS, Reader("a bandwidth test", lambda t: True, refuse)))
    with pytest.raises(InputError, match="holds several outputs; its a bandwidth test part cannot be read: .*is cut"):
        read_text(PCIE.read_text(), "both.txt")


def test_a_part_with_nothing_to_read_beside_a_readable_one_is_skipped_and_said():
    """nccl#901: NCCL's COLL trace lines (AllReduce: opCount ...) then `topo -m`: the log part names
    no rank or connection; the whole paste was refused for it, the matrix unread."""
    text = ("h:1:1 [2] NCCL INFO AllReduce: opCount 0 sendbuff 0xa0 recvbuff 0xa0 count 12288 datatype 6 op 0 root 0\n\n"
            + PCIE.read_text())
    topology = read_text(text, "issue.txt")
    assert len(topology.gpus) == 8 and topology.link(0, 1).type != "UNKNOWN"
    (note,) = [n for n in topology.reading_notes if n.code == "paste-part-empty"]
    assert note.facts["kind"] == "NCCL_DEBUG=INFO log" and "none that names a rank" in note.facts["reason"]
    with pytest.raises(InputError, match="none that names a rank"):  # alone, it is refused with its reason
        read_text(text.split("\n\n")[0], "log.txt")


def test_nvidia_smis_summary_table_is_refused_with_the_command_that_tells_the_wiring():
    from conftest import OWN_FIXTURES

    text = (OWN_FIXTURES / "hardware" / "2026-11-26-h200-firecracker-run1" / "nvidia-smi.txt").read_text(encoding="utf-8")
    with pytest.raises(InputError, match=r"nvidia-smi's summary table, which does not say how the GPUs are wired: "
                                         r"paste `nvidia-smi topo -m`"):
        read_text(text, "smi.txt")


@pytest.mark.parametrize("dress", [lambda t: t, lambda t: "\n".join("node-7: " + line for line in t.split("\n"))],
                         ids=["as pasted", "host prefix"])
def test_a_kernel_log_whose_every_line_shares_a_prefix_is_sent_to_doctor(dress):
    """Every line of ``journalctl -k`` reads ``kernel: NVRM: Xid ...``: the prefix the text readers take
    off as a decoration is what makes the paste health evidence, so scan names doctor, as for dmesg."""
    from conftest import OWN_FIXTURES

    name = "ogkm1150_dmesg_xid45_caused_by_xid145_149_4gpu_cut.txt"
    text = (OWN_FIXTURES / "corpus" / "doctor_pastes" / name).read_text()
    with pytest.raises(InputError, match=r"holds health evidence \(dmesg\), not a topology: `gputopo doctor"):
        read_text(dress(text), name)
