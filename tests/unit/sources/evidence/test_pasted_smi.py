"""nvidia-smi text read for doctor (gputopo/sources/evidence/pasted_smi.py): NVLink error counters and the
Fabric section of nvidia-smi -q, nested by indentation."""

from __future__ import annotations

from conftest import OWN_FIXTURES
from doctor_trees import capture

from gputopo.sources.evidence.pasted_health import parse_pasted


def test_nvlink_error_counters_per_gpu_and_link():
    parsed = parse_pasted(capture("nvlink_e_v100_replay_and_crc_errors.txt"))
    assert parsed.kinds == ["nvidia-smi nvlink -e"]
    # "Links 0-2, 4-5: Replay/Recovery/CRC Errors: 0" is the author's condensing, not nvidia-smi's
    assert parsed.nvlink_errors == {0: {3: {"replay": 2353}}, 2: {0: {"replay": 148, "crc": 65535}}}


def test_a_fabric_section_cut_by_grep():
    parsed = parse_pasted(capture("smi_q_grep_fabric_completed_unhealthy.txt"))
    (fabric,) = parsed.fabric
    assert fabric.gpu is None and fabric.fields == {
        "State": "Completed", "Status": "Success", "CliqueId": "2",
        "ClusterUUID": "dc6e40c4-d722-4357-9ba6-5291dd461278", "Health/Summary": "Unhealthy", "Health/Bandwidth": "Full"}


def test_fabric_sections_of_a_whole_query_belong_to_their_gpus():
    parsed = parse_pasted((OWN_FIXTURES / "corpus/smi_q/h100_sxm_8gpu_565_q.txt").read_text())
    assert len(parsed.fabric) == 8 and len({f.gpu for f in parsed.fabric}) == 8
    assert all(f.gpu and f.gpu.startswith("0000:") for f in parsed.fabric)
    assert {(f.fields["State"], f.fields["Status"], f.fields["Health/Bandwidth"]) for f in parsed.fabric} == {
        ("Completed", "Success", "N/A")}
    assert "Processes" not in parsed.fabric[0].fields  # the next section of the query is not the fabric's


def test_megabyte_lines_of_spaces_in_a_fabric_section_or_a_link_line_are_read_at_once():
    """``\\s*(.*?)\\s*$`` before trailing spaces was quadratic: minutes on a 1 MB line."""
    spaces = " " * 1_000_000
    parsed = parse_pasted(f"GPU 0: NVIDIA A100\n  Link 1: <inactive>{spaces}x\n  Link 2: 25 GB/s{spaces}\n"
                          f"Fabric\n  A{spaces}b\n  B{spaces}:{spaces}c{spaces}\n  State : Completed\n")
    assert [n for n, _ in parsed.nvlink_status] == [0, 2, 3]  # kept whole for sources.smi.nvlink, bounded by it
    assert parsed.fabric[0].fields == {"B": "c", "State": "Completed"}


def test_numbers_of_thousands_of_digits_are_no_gpu_link_or_count_and_no_traceback():
    nines = "9" * 5000
    parsed = parse_pasted(f"GPU {nines}: NVIDIA A100\nGPU 0: NVIDIA A100\n  Link {nines}: <inactive>\n"
                          f"  Link 1: Replay Errors: {nines}\n  Link 2: Replay Errors: 3\n")
    assert parsed.nvlink_errors == {0: {2: {"replay": 3}}} and parsed.nvlink_status == []
