"""`gputopo doctor` / `gather` on the command line: exit codes (docs/exit-codes.md), one-line errors,
--json, --fail-on as a Slurm prolog uses it, and no TensorFlow import."""

from __future__ import annotations

import json

import pytest
from conftest import assert_one_error_line
from doctor_trees import DOCTOR_FIXTURES, capture, real_acs_controls, real_links, two_gpus_under_root_ports
from unit.test_cli_imports import imported_by, loaded


def _healthy(root):
    host = two_gpus_under_root_ports(root, real_acs_controls()["off"])
    host.iommu_group(3, "identity", ["0000:41:00.0", "0000:61:00.0"])
    host.proc("cmdline", capture("proc_cmdline_amd_iommu_pt.txt"))
    host.proc("mounts", "shm /dev/shm tmpfs rw,size=8388608k 0 0\n")
    return host


def test_healthy_fake_host_exits_0_even_with_fail_on(cli, tmp_path):
    _healthy(tmp_path)
    result = cli("doctor", "--root", str(tmp_path), "--fail-on", "warning")
    assert result.exit_code == 0, result.output
    assert "Nothing wrong found" in result.output


def test_fail_on_warning_exits_1_for_a_narrow_link_but_error_does_not(cli, tmp_path):
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"], gpu_link=real_links()["gpu-x8"])
    assert cli("doctor", "--root", str(tmp_path), "--fail-on", "warning").exit_code == 1
    assert cli("doctor", "--root", str(tmp_path), "--fail-on", "error").exit_code == 0


@pytest.mark.parametrize("args", [
    ["doctor", "--fail-on", "fatal"],
    ["doctor", "--from", "/nonexistent/lspci.txt"],
    ["doctor", "--from", "x.txt", "--root", "/"],
])
def test_bad_input_is_one_line_exit_2(cli, args):
    assert_one_error_line(cli(*args), 2)


def test_pasted_text_on_stdin_and_json_schema(cli):
    result = cli("doctor", "--from", "-", "--json", input=capture("lspci_vvv_amd_starship_root_port_acs_on.txt"))
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["schema"] == "gputopo.doctor/1"
    finding = report["findings"][0]
    assert {"severity", "code", "message", "gpus", "fix", "evidence", "effect"} <= set(finding)
    assert finding["code"] == "acs-redirect" and "setpci -s 0000:40:01.1 ECAP_ACS+6.w=0000" in finding["fix"]


def test_terminal_output_escapes_what_the_evidence_carries(cli, tmp_path):
    paste = tmp_path / "evil.txt"
    paste.write_text("[bold red]x[/]\x1b]0;pwned\x07 ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+\n")
    result = cli("doctor", "--from", str(paste))
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output and "[bold red]x[/]" in result.output


def test_gather_writes_an_archive_doctor_reads(cli, tmp_path):
    host = tmp_path / "host"
    _healthy(host)
    out = tmp_path / "box.tar.gz"
    result = cli("gather", "-o", str(out), "--no-smi", "--root", str(host))
    assert result.exit_code == 0, result.output
    read = cli("doctor", "--from", str(out), "--fail-on", "warning")
    assert read.exit_code == 0, read.output


def test_gather_to_stdout_pipes_into_doctor_from_stdin(tmp_path):
    """`gputopo gather -o - | gputopo doctor --from -`: the archive on standard input is read as one."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    host = tmp_path / "host"
    _healthy(host)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    gathered = subprocess.run([sys.executable, "-m", "gputopo", "gather", "-o", "-", "--no-smi", "--root", str(host)],
                              capture_output=True, timeout=120, env=env, check=True).stdout
    read = subprocess.run([sys.executable, "-m", "gputopo", "doctor", "--from", "-", "--json"], input=gathered,
                          capture_output=True, timeout=120, env=env)
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["schema"] == "gputopo.doctor/1"
    pasted = subprocess.run([sys.executable, "-m", "gputopo", "doctor", "--from", "-"], capture_output=True, timeout=120,
                            input=(DOCTOR_FIXTURES / "dmesg_nvrm_fallen_off_bus.txt").read_bytes(), env=env)
    assert pasted.returncode == 0 and b"standard input" in pasted.stdout, pasted.stderr


def test_doctor_imports_no_tensorflow(tmp_path):
    _healthy(tmp_path / "root")
    modules = imported_by(tmp_path, "doctor", "--root", str(tmp_path / "root"), "--json")
    assert "gputopo.cli.doctor" in modules
    assert loaded(modules, "tensorflow", "keras", "pynvml", "rich", "gputopo.tfruntime") == []
    live = imported_by(tmp_path, "doctor", "--from", str(DOCTOR_FIXTURES / "dmesg_nvrm_fallen_off_bus.txt"))
    assert loaded(live, "tensorflow", "keras", "gputopo.tfruntime", "gputopo.bench", "gputopo.train") == []


def test_save_puts_pair_health_on_the_snapshot_and_recommend_reads_it(cli, tmp_path):
    from gputopo.model import Topology

    two_gpus_under_root_ports(tmp_path / "root", real_acs_controls()["on"])
    snapshot = tmp_path / "in.json"
    assert cli("scan", "--machine", "pcie-8gpu", "--save", str(snapshot)).exit_code == 0
    data = json.loads(snapshot.read_text())
    data["gpus"][0]["pci_bus_id"], data["gpus"][1]["pci_bus_id"] = "0000:41:00.0", "0000:61:00.0"
    snapshot.write_text(json.dumps(data))
    out = tmp_path / "out.json"
    result = cli("doctor", "--root", str(tmp_path / "root"), "--topology", str(snapshot), "--save", str(out))
    assert result.exit_code == 0, result.output
    topo = Topology.from_dict(json.loads(out.read_text()))
    assert topo.link(0, 1).health == ["acs"]
    acs = [f for f in topo.diagnostics if f.code == "doctor-acs-redirect" and f.evidence]
    assert len(acs) == 2 and all(f.gpus == [0, 1] for f in acs)  # both ports; GPUs numbered as the snapshot
    plan = json.loads(cli("recommend", "--from", str(out), "--gpus", "2", "--require", "0,1", "--json").output)
    assert "doctor: acs" in json.dumps(plan)
    assert_one_error_line(cli("doctor", "--topology", str(snapshot)), 2)


def test_a_pasted_narrow_gpu_link_lands_on_that_gpu_and_recommend_avoids_it(cli, tmp_path):
    """Review finding: a pasted lspci's x4 GPU link was saved with no GPU, so recommend picked it.
    And a saved report whose evidence holds a tab (lspci's) must read back."""
    import json

    topo = tmp_path / "box.json"
    assert cli("scan", "--machine", "pcie-8gpu", "--save", str(topo), "--json").exit_code == 0
    gpus = json.loads(topo.read_text())["gpus"]
    bus = gpus[0]["pci_bus_id"]
    paste = tmp_path / "lspci.txt"
    paste.write_text(f"{bus} 3D controller: NVIDIA Corporation Device 20b0\n"
                     "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported\n"
                     "\t\tLnkSta:\tSpeed 16GT/s, Width x4 (downgraded)\n")
    saved = tmp_path / "health.json"
    result = cli("doctor", "--from", str(paste), "--topology", str(topo), "--save", str(saved), "--json")
    (narrow,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "pcie-link-narrow"]
    assert narrow["gpus"] == [0] and "GPU 0" in narrow["message"]
    rec = cli("recommend", "--from", str(saved), "--gpus", "2", "--json")
    assert rec.exit_code == 0, rec.output
    assert 0 not in json.loads(rec.stdout)["groups"][0]["gpus"]


CORPUS = DOCTOR_FIXTURES.parent / "corpus"


def test_a_failing_nccl_log_given_to_doctor_is_judged_as_scan_reads_it(cli):
    """A real NCCL log (ray_lightning#24: CUDA refused the P2P connection NCCL set up) is no lspci or
    dmesg text, but doctor names its cause rather than "nothing wrong found"."""
    (log,) = (CORPUS / "nccl_log").glob("raylightning24_*.log")
    result = cli("doctor", "--from", str(log), "--json", "--fail-on", "warning")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert "nccl-p2p-ipc-failed" in [f["code"] for f in report["findings"]]
    (check,) = [c for c in report["checks"] if c["name"] == f"recognise {log.name}"]
    assert check["status"] == "ok" and "nccl-log" in check["detail"]


def test_text_nothing_reads_is_one_line_exit_2_and_beside_evidence_a_check_not_made(cli, tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("we rebooted the box and it still hangs\n")
    result = cli("doctor", "--from", str(junk))
    assert_one_error_line(result, 2)
    assert "notes.txt" in result.stderr
    lspci = DOCTOR_FIXTURES / "lspci_vvv_amd_starship_root_port_acs_on.txt"
    both = cli("doctor", "--from", str(junk), "--from", str(lspci), "--json")
    assert both.exit_code == 0, both.output
    (check,) = [c for c in json.loads(both.stdout)["checks"] if c["name"] == "recognise notes.txt"]
    assert check["status"] == "not-made"


def test_an_output_a_reader_recognises_but_cannot_read_is_refused_with_its_reason(cli, tmp_path):
    """tinygrad#44 cut after the banner: scan --from says why it cannot be read; doctor said "nothing
    in banner.txt is evidence doctor reads", which is false and hides the reason."""
    (capture_file,) = (CORPUS / "p2pbw").glob("tinygrad44_*.txt")
    banner = tmp_path / "banner.txt"
    banner.write_text("".join(capture_file.read_text().splitlines(keepends=True)[:3]))
    result = cli("doctor", "--from", str(banner))
    assert_one_error_line(result, 2)
    assert "banner found but no device line and no matrix" in result.stderr
    assert "nothing in" not in result.stderr


def test_an_nccl_log_pasted_after_dmesg_is_judged_too(cli, tmp_path):
    """Real dmesg (Xid 32) with the ray_lightning#24 NCCL log pasted after it in one file: doctor read
    the dmesg and dropped the log without a word (its nccl-p2p-ipc-failed unsaid)."""
    (log,) = (CORPUS / "nccl_log").glob("raylightning24_*.log")
    paste = tmp_path / "paste.txt"
    paste.write_text((DOCTOR_FIXTURES / "dmesg_nvrm_xid32_twice.txt").read_text() + log.read_text())
    report = json.loads(cli("doctor", "--from", str(paste), "--json").stdout)
    assert {"xid-32", "nccl-p2p-ipc-failed"} <= {f["code"] for f in report["findings"]}
    # An output beside health evidence that cannot be read (GPUs that cannot be joined) is said, not fatal.
    paste.write_text((DOCTOR_FIXTURES / "nvlink_s_v100_two_inactive.txt").read_text() + log.read_text())
    result = cli("doctor", "--from", str(paste), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [f["code"] for f in report["findings"]].count("nvlink-inactive") == 1
    (unread,) = [c for c in report["checks"] if c["name"] == "read the other outputs in paste.txt"]
    assert unread["status"] == "not-made" and "number their GPUs differently" in unread["detail"]


# --- faults fail a prolog, GPUs expected (issue 32) ---------------------------------------------

def _expert_says_fault(facts: dict) -> bool:
    """What EXPECTED.json's expert wrote down as a fault of the capture."""
    listed = ("acs_redirect_on", "acs_redirect_on_count", "downtrained", "downtrained_unnamed", "iommu_faults",
              "fallen_off_bus", "inactive_links", "xids", "aer_uncorrected", "aer_corrected", "aer_not_recovered",
              "nvlink_errors", "xids_unnamed", "link_errors_logged")
    return (any(facts.get(key) for key in listed) or facts.get("fabric_health_summary") == "Unhealthy"
            or facts.get("fabric_state") not in (None, "Completed") or facts.get("fabric_status") not in (None, "Success")
            or any(limit["by"] == "width" for limit in facts.get("link_limited", {}).values()))


_EXPECTED = json.loads((DOCTOR_FIXTURES / "EXPECTED.json").read_text())


@pytest.mark.parametrize("name", sorted(_EXPECTED))
def test_fail_on_warning_fails_each_fault_capture_and_passes_the_rest(cli, name):
    result = cli("doctor", "--from", str(DOCTOR_FIXTURES / name), "--fail-on", "warning")
    assert result.exit_code == (1 if _expert_says_fault(_EXPECTED[name]) else 0), result.output


def _with_fake_nvml(monkeypatch, fake):
    import gputopo.sources.doctor_input as doctor_input

    real = doctor_input.evidence_of_host
    monkeypatch.setattr(doctor_input, "evidence_of_host", lambda root="/", env=None: real(root, env, nvml=fake))


def test_expect_gpus_fails_a_host_showing_fewer(cli, tmp_path, monkeypatch):
    from fake_nvml import FakeNvml

    from gputopo.sources.reference import load_reference

    _healthy(tmp_path)
    _with_fake_nvml(monkeypatch, FakeNvml(load_reference("two-socket-4gpu")))  # NVML shows 4 GPUs
    result = cli("doctor", "--root", str(tmp_path), "--expect-gpus", "8", "--fail-on", "error", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    (missing,) = [f for f in report["findings"] if f["code"] == "gpus-missing"]
    assert missing["message"].startswith("4 GPUs visible, 8 expected: expected by --expect-gpus 8")
    assert missing["kind"] == "fault" and {"name": "gpus-expected", "status": "problem",
                                           "detail": "4 visible, 8 expected (--expect-gpus 8)"} in report["checks"]
    assert cli("doctor", "--root", str(tmp_path), "--expect-gpus", "4", "--fail-on", "error").exit_code == 0


def test_no_driver_visible_fails_when_slurm_expects_gpus(cli, tmp_path, monkeypatch):
    """The prolog's case: NVML cannot be loaded, Slurm gave the job 8 GPUs."""
    import pynvml

    from fake_nvml import FakeNvml

    class NoDriver(FakeNvml):
        def nvmlInit(self):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    from gputopo.sources.reference import load_reference

    _healthy(tmp_path)
    _with_fake_nvml(monkeypatch, NoDriver(load_reference("dgx1")))
    monkeypatch.setenv("SLURM_JOB_GPUS", "0,1,2,3,4,5,6,7")
    # (--root makes doctor read a folder, whose host is not this one: the expectation is given for it)
    result = cli("doctor", "--root", str(tmp_path), "--expect-gpus", "8", "--fail-on", "warning")
    assert result.exit_code == 1, result.output
    assert "0 GPUs visible, 8 expected" in " ".join(result.stdout.split())
    monkeypatch.delenv("SLURM_JOB_GPUS")
    assert cli("doctor", "--root", str(tmp_path), "--fail-on", "warning").exit_code == 0  # nothing expected


def test_save_joins_health_through_the_bus_ids_of_another_pasted_output(cli, tmp_path):
    """Newcomer review: `doctor --from lspci --from dmesg --from p2p --topology topo_m.txt --save` kept no
    pair health (topo -m has no bus ids) and said nothing. The outputs among --from that are topologies
    are merged with --topology, as scan merges them; where no join is possible, it is said."""
    import json

    from conftest import OWN_FIXTURES

    box = OWN_FIXTURES / "doctor" / "constructed"
    pastes = ["--from", str(box / "lspci_vvv.txt"), "--from", str(box / "dmesg.txt")]
    saved = tmp_path / "box.json"
    result = cli("doctor", *pastes, "--from", str(box / "p2pBandwidthLatencyTest.txt"),
                 "--topology", str(box / "topo_m.txt"), "--save", str(saved))
    assert result.exit_code == 0, result.output
    links = {(link["a"], link["b"]): link["health"] for link in json.loads(saved.read_text())["links"]}
    assert "acs" in links[(0, 1)] and "downtrained" in links[(4, 5)]
    without = cli("doctor", *pastes, "--topology", str(box / "topo_m.txt"), "--save", str(tmp_path / "b2.json"))
    assert without.exit_code == 0 and "pair problems are not on the saved links" in without.output
