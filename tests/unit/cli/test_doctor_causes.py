"""`gputopo doctor --from` on the four pastes of issue 30's box (tests/fixtures/doctor/constructed/:
a dual-socket 8x V100 PCIe server booted with `intel_iommu=on`, ACS redirect on two PLX downstream
ports, GPU 5's link at x8): one judgement, causes linked and effects named as GPUs and pairs; and
`scan --from` / `doctor --from` giving the same NVLink findings for one `nvidia-smi nvlink -s` paste."""

from __future__ import annotations

import json

from doctor_trees import DOCTOR_FIXTURES

BOX = DOCTOR_FIXTURES / "constructed"
PASTES = ("topo_m.txt", "p2pBandwidthLatencyTest.txt", "lspci_vvv.txt", "dmesg.txt")


def _doctor(cli, *extra: str):
    args = [a for name in PASTES for a in ("--from", str(BOX / name))]
    return cli("doctor", *args, *extra)


def _pairs_with(gpu: int) -> list[list[int]]:
    return [sorted([gpu, other]) for other in range(8) if other != gpu]


def test_acs_findings_name_their_gpus_and_pairs_and_are_caused_by_the_iommu(cli):
    result = _doctor(cli, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    acs = [f for f in report["findings"] if f["code"] == "acs-redirect"]
    by_bridge = {f["evidence"][0].split(" line ")[1].split(":")[0]: f for f in acs}
    assert len(acs) == 2 and len(by_bridge) == 2
    first, second = sorted(acs, key=lambda f: f["message"])
    # A redirect at a switch's downstream port reroutes the pairs that would turn inside that switch:
    # GPU 0 with GPU 1 (PIX), GPU 5 with GPU 4; the NODE and SYS pairs go up to the root complex anyway.
    assert "0000:19:08.0" in first["message"] and first["gpus"] == [0] and first["pairs"] == [[0, 1]]
    assert "0000:87:10.0" in second["message"] and second["gpus"] == [5] and second["pairs"] == [[4, 5]]
    (iommu,) = [f for f in report["findings"] if f["code"] == "iommu-translating"]
    assert first["caused_by"] == second["caused_by"] == iommu["id"] == "iommu-translating"
    assert iommu["caused_by"] is None and "Linux set it" in first["message"]
    # the complete fix, on the cause: the IOMMU off where no VM needs it, else iommu=pt AND clearing ACS on
    # both bridges at once: on this box's Linux 4.15 (dmesg) the setpci loop at every boot, since
    # pci=disable_acs_redir= came with Linux 5.1 (a newer kernel gets the one option: test_acs.py)
    fix = iommu["fix"]
    assert "`intel_iommu=off`" in fix and "`iommu=pt` AND" in fix
    assert "`for b in 0000:19:08.0 0000:87:10.0; do sudo setpci" in fix and "predates `pci=disable_acs_redir=`" in fix
    assert "disable ACS in the BIOS" not in json.dumps(report)
    # the box's GPUs joined by bus id (p2pBandwidthLatencyTest's Device lines), and the pairs marked
    assert [(g["index"], g["pci_bus_id"]) for g in report["gpus"]][:2] == [(0, "0000:1a:00.0"), (1, "0000:1b:00.0")]
    assert {"acs", "iommu"} <= {w for p in report["pairs"] for w in p["problems"]}


def test_the_x8_link_read_at_both_ends_is_one_finding_naming_gpu_5(cli):
    report = json.loads(_doctor(cli, "--json").output)
    (narrow,) = [f for f in report["findings"] if f["code"] == "pcie-link-narrow"]
    assert narrow["gpus"] == [5] and "GPU 5 (0000:89:00.0)" in narrow["message"] and len(narrow["evidence"]) == 2
    assert sorted(narrow["pairs"]) == _pairs_with(5)


def test_the_terminal_says_the_cause(cli):
    text = " ".join(_doctor(cli).output.split())
    assert "Linux set it: the IOMMU is on (translating)" in text
    assert "It is also why Linux turned ACS redirect on at 0000:19:08.0 and 0000:87:10.0" in text


NVLINK_S = ("GPU 0: NVIDIA RTX A6000 (UUID: GPU-1a2b3c4d-0000-1111-2222-333344445555)\n\tLink 0: 14.062 GB/s\n"
            "\tLink 1: <inactive>\nGPU 1: NVIDIA RTX A6000 (UUID: GPU-1a2b3c4d-0000-1111-2222-333344445556)\n"
            "\tLink 0: 14.062 GB/s\n\tLink 1: 14.062 GB/s\n")


def test_scan_and_doctor_give_the_same_nvlink_findings_for_one_tab_indented_paste(cli, tmp_path):
    """As nvidia-smi prints it (a tab before each link line), one of GPU 0's two links down."""
    paste = tmp_path / "nvlink_s.txt"
    paste.write_text(NVLINK_S)
    scan = json.loads(cli("scan", "--from", str(paste), "--json").output)
    doctor = json.loads(cli("doctor", "--from", str(paste), "--json").output)
    said = lambda findings: sorted((f["code"], f["severity"], tuple(f["gpus"])) for f in findings if "nvlink" in f["code"])  # noqa: E731
    assert said(scan["diagnostics"]) == said(doctor["findings"])
    assert ("nvlink-links-down", "warning", (0,)) in said(doctor["findings"])
