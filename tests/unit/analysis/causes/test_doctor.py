"""`gputopo doctor`'s analysis on fake hosts built from real captures (tests/doctor_trees.py), on the
real pasted captures (tests/fixtures/doctor/EXPECTED.json: test_doctor_corpus.py), and on NVML through the
fake pynvml."""

from __future__ import annotations

import json

import pytest
from doctor_trees import (
    FakeHost,
    capture,
    real_acs_controls,
    real_links,
    two_gpus_under_root_ports,
    two_gpus_under_switch,
)
from fake_nvml import FakeNvml

from gputopo.analysis.causes.doctor import apply_health, doctor
from gputopo.sources.doctor_input import evidence_of_host
from gputopo.sources.host.pcie_health import LinkState
from gputopo.sources.reference import load_reference


def _report(root, env=None, nvml=None):
    return doctor(evidence_of_host(str(root), env or {}, nvml=nvml))


def _codes(report, severity=None):
    return [f.code for f in report.findings if severity is None or f.severity == severity]


def _healthy_extras(host: FakeHost, gpus: list[str]) -> None:
    host.iommu_group(12, "identity", gpus)
    host.proc("cmdline", capture("proc_cmdline_amd_iommu_pt.txt"))
    host.proc("mounts", "shm /dev/shm tmpfs rw,nosuid,nodev,size=16777216k 0 0\n")


def test_acs_on_root_ports_is_an_error_naming_each_port_the_pair_and_the_setpci_line(tmp_path):
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["on"])
    report = _report(tmp_path)
    acs = [f for f in report.findings if f.code == "acs-redirect"]
    assert [f.severity for f in acs] == ["error", "error"]
    assert report.findings[0].code == "acs-redirect"  # worst first
    ports = sorted(f.evidence[0].split("/config")[0].rsplit("/", 1)[1] for f in acs)
    assert ports == ["0000:40:01.1", "0000:60:01.1"]
    for finding, port in zip(sorted(acs, key=lambda f: f.evidence[0]), ports):
        assert f"setpci -s {port} ECAP_ACS+6.w=0000" in finding.fix
        assert "ReqRedir+ CmpltRedir+" in finding.evidence[0]
        assert "0000:41:00.0" in finding.effect and "0000:61:00.0" in finding.effect
    assert report.pair_problems == {("0000:41:00.0", "0000:61:00.0"): ["acs"]}


def test_acs_on_one_switch_port_names_that_port_only(tmp_path):
    acs = real_acs_controls()
    two_gpus_under_switch(tmp_path, {"0000:04:08.0": acs["switch-on"], "0000:04:10.0": acs["switch-off"]}, acs["off"])
    report = _report(tmp_path)
    found = [f for f in report.findings if f.code == "acs-redirect"]
    assert len(found) == 1
    assert found[0].evidence[0].startswith("/sys/bus/pci/devices/0000:04:08.0/config: ACS control 0x001d")
    assert report.pair_problems == {("0000:05:00.0", "0000:06:00.0"): ["acs"]}


def test_acs_above_both_gpus_does_not_touch_their_pair(tmp_path):
    """ACS on the root port above a switch: peer traffic inside the switch never reaches it."""
    acs = real_acs_controls()
    two_gpus_under_switch(tmp_path, {"0000:04:08.0": acs["off"], "0000:04:10.0": acs["off"]}, acs["on"])
    report = _report(tmp_path)
    finding = next(f for f in report.findings if f.code == "acs-redirect")
    assert "0000:00:02.0" in finding.evidence[0]
    assert finding.effect.startswith("P2P of the GPU(s) below it; GPUDirect RDMA")
    assert report.pair_problems == {}


def test_not_root_says_the_acs_check_was_not_made_and_why(tmp_path):
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["on"], root_readable=False)
    report = _report(tmp_path)
    assert "acs-redirect" not in _codes(report)
    info = next(f for f in report.findings if f.code == "acs-not-checked")
    assert info.severity == "info" and "root" in info.message and "sudo" in info.fix
    assert any(c.name == "acs" and c.status == "not-made" for c in report.checks)


@pytest.mark.parametrize("where", ["gpu", "bridge"])
def test_a_link_trained_narrow_is_a_warning_on_the_gpu_or_a_bridge_above_it(tmp_path, where):
    links = real_links()
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"],
                              gpu_link=links["gpu-x8"] if where == "gpu" else links["full"],
                              bridge_link=links["bridge-x8"] if where == "bridge" else links["full"])
    report = _report(tmp_path)
    narrow = [f for f in report.findings if f.code == "pcie-link-narrow"]
    assert len(narrow) == 2 and all(f.severity == "warning" for f in narrow)
    assert all("x8 of x16" in f.message for f in narrow)
    assert ("a bridge above" in narrow[0].message) == (where == "bridge")
    # Its speed (2.5 of 16 GT/s) is said too, apart: with no performance state read, maybe idle.
    slow = [f for f in report.findings if f.code.startswith("pcie-link-slow")]
    assert [f.code for f in slow] == ["pcie-link-slow-maybe-idle"] * 2 and "Gen1 of Gen4" in slow[0].message
    assert "downtrained" in report.gpu_problems["0000:41:00.0"]
    assert report.pair_problems[("0000:41:00.0", "0000:61:00.0")] == ["downtrained"]


def test_a_port_that_reads_x0_above_a_working_gpu_is_no_narrow_link(tmp_path):
    """current_link_width 0 is no link trained; above a GPU that answers, that is a port saying
    nothing (a VM's emulated root port), never a link trained narrow (the reader takes 0 as unknown)."""
    links = real_links()
    x0 = LinkState(current_speed_gts=links["full"].current_speed_gts, max_speed_gts=links["full"].max_speed_gts,
                   current_width=0, max_width=16)
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"], gpu_link=links["full"], bridge_link=x0)
    report = _report(tmp_path)
    assert "pcie-link-narrow" not in _codes(report) and report.pair_problems == {}
    (check,) = [c for c in report.checks if c.name == "pcie-links"]
    assert check.status == "ok"


@pytest.mark.parametrize(("cmdline", "status"), [
    ("proc_cmdline_no_iommu_options.txt", "not-made"),  # nothing says whether an IOMMU translates
    ("proc_cmdline_amd_iommu_pt.txt", "ok"),  # the command line does
])
def test_a_missing_iommu_folder_is_not_taken_for_no_iommu(tmp_path, cmdline, status):
    """A tree (an archive, a copied folder) without /sys/kernel/iommu_groups says nothing about the
    IOMMU; only an empty folder means none is active."""
    host = two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"])
    host.proc("cmdline", capture(cmdline))
    (check,) = [c for c in _report(tmp_path).checks if c.name == "iommu"]
    assert check.status == status


def test_an_idle_speed_drop_alone_is_only_info_with_how_to_check_under_load(tmp_path):
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"], gpu_link=real_links()["idle"])
    report = _report(tmp_path)
    assert _codes(report, "warning") == [] and _codes(report, "error") == []
    idle = [f for f in report.findings if f.code == "pcie-link-slow-maybe-idle"]
    assert len(idle) == 2 and "under load" in idle[0].fix and "idle" in idle[0].message


@pytest.mark.parametrize(("kind", "cmdline", "warned"), [
    ("DMA", "proc_cmdline_no_iommu_options.txt", True),
    ("DMA-FQ", "proc_cmdline_no_iommu_options.txt", True),
    ("identity", "proc_cmdline_amd_iommu_pt.txt", False),
    (None, "proc_cmdline_no_iommu_options.txt", False),
])
def test_iommu_translating_vs_identity_vs_off(tmp_path, kind, cmdline, warned):
    host = two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"])
    if kind is not None:
        host.iommu_group(27, kind, ["0000:41:00.0"])
        host.iommu_group(41, kind, ["0000:61:00.0"])
    else:  # no IOMMU: the kernel's folder is there and empty
        (tmp_path / "sys/kernel/iommu_groups").mkdir(parents=True, exist_ok=True)
    host.proc("cmdline", capture(cmdline))
    report = _report(tmp_path)
    assert ("iommu-translating" in _codes(report, "warning")) == warned
    if warned:
        finding = next(f for f in report.findings if f.code == "iommu-translating")
        assert f"/sys/kernel/iommu_groups/27/type: {kind}" in finding.evidence
        assert "iommu=pt" in finding.fix
        assert report.pair_problems[("0000:41:00.0", "0000:61:00.0")] == ["iommu"]
    else:
        assert any(c.name == "iommu" and c.status == "ok" for c in report.checks)


def test_a_healthy_box_has_nothing_to_say(tmp_path):
    host = two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"])
    _healthy_extras(host, ["0000:41:00.0", "0000:61:00.0"])
    report = _report(tmp_path)
    assert report.findings == []
    assert report.pair_problems == {} and {c.status for c in report.checks} == {"ok"}


@pytest.mark.parametrize(("env", "code"), [
    ({"NCCL_P2P_DISABLE": "1"}, "env-nccl-p2p-disable"),
    ({"NCCL_P2P_LEVEL": "LOC"}, "env-nccl-p2p-level"),
])
def test_environment_that_turns_p2p_off(tmp_path, env, code):
    host = two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"])
    _healthy_extras(host, ["0000:41:00.0", "0000:61:00.0"])
    report = _report(tmp_path, env={**env, "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x"})
    assert _codes(report) == [code]
    assert "unset" in report.findings[0].fix
    assert "AWS_SECRET" not in json.dumps(report.to_dict())


def test_small_dev_shm_and_missing_peermem_and_hidden_gpus(tmp_path):
    host = two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"])
    _healthy_extras(host, ["0000:41:00.0", "0000:61:00.0"])
    host.proc("mounts", "shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n")
    host.proc("modules", "nvidia_uvm 1 0 - Live 0x0\nnvidia 2 1 nvidia_uvm, Live 0x0\n")
    (tmp_path / "sys/class/infiniband/mlx5_0").mkdir(parents=True)
    for bdf in ("0000:41:00.0", "0000:61:00.0"):
        (tmp_path / "proc/driver/nvidia/gpus" / bdf).mkdir(parents=True)
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/nvidia0").write_text("")
    report = _report(tmp_path)
    assert sorted(_codes(report)) == ["gpus-hidden", "nvidia-peermem-missing", "shm-too-small"]
    shm = next(f for f in report.findings if f.code == "shm-too-small")
    assert "--shm-size=1g --ulimit memlock=-1" in shm.fix and "64 MiB" in shm.message
    peermem = next(f for f in report.findings if f.code == "nvidia-peermem-missing")
    assert "modprobe nvidia-peermem" in peermem.fix
    # Review 3: NCCL's DMA-BUF path needs no peermem; the finding no longer says GDR is impossible without it.
    assert "unless its DMA-BUF path serves instead" in peermem.message


def _nvml_host(tmp_path):
    host = two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"])
    _healthy_extras(host, ["0000:41:00.0", "0000:61:00.0"])
    return host


def test_nvml_inactive_nvlink_and_errors(tmp_path):
    _nvml_host(tmp_path)
    fake = FakeNvml(load_reference("dgx1"), inactive_links={2: 2}, nvlink_errors={(0, 0): {0: 7, 2: 3}})
    report = _report(tmp_path, nvml=fake)
    inactive = next(f for f in report.findings if f.code == "nvlink-inactive")
    assert inactive.gpus == [2] and "2 of 6" in inactive.message
    errors = next(f for f in report.findings if f.code == "nvlink-errors")
    assert errors.gpus == [0] and "replay 7" in errors.evidence[0] and "crc_flit 3" in errors.evidence[0]
    assert "nvlink-down" in report.gpu_problems[load_reference("dgx1").gpu(2).pci_bus_id]


def test_nvml_fabric_manager_not_started_is_an_error(tmp_path):
    _nvml_host(tmp_path)
    topo = load_reference("dgx-h100")  # NVML reports the fabric of Hopper and newer GPUs only
    fake = FakeNvml(topo, fabric={i: (1 if i == 3 else 3, 0, 2) for i in range(len(topo.gpus))})
    report = _report(tmp_path, nvml=fake)
    fabric = [f for f in report.findings if f.code == "fabric-not-ready"]
    assert [f.gpus for f in fabric] == [[3]] and fabric[0].severity == "error"
    assert "nvidia-fabricmanager" in fabric[0].fix and "802" in fabric[0].message
    assert "nvmlDeviceGetGpuFabricInfoV" in fake.calls


def test_nvml_p2p_not_supported_pairs(tmp_path):
    _nvml_host(tmp_path)
    report = _report(tmp_path, nvml=FakeNvml(load_reference("two-socket-4gpu")))
    tns = next(f for f in report.findings if f.code.startswith("p2p-status-"))
    assert tns.severity == "info" and "cannot use P2P" in tns.message and tns.gpus


def test_no_nvml_says_the_check_was_not_made(tmp_path):
    import pynvml

    _nvml_host(tmp_path)
    report = _report(tmp_path, nvml=FakeNvml(load_reference("dgx1"), init_error=pynvml.NVMLError_LibraryNotFound))
    assert _codes(report) == ["nvml-not-checked"]
    assert any(c.name == "nvml" and c.status == "not-made" and "libnvidia-ml" in c.detail for c in report.checks)


def test_apply_health_marks_links_and_recommend_ranks_them_last(tmp_path):
    from gputopo.analysis.recommend import recommend

    topo = load_reference("pcie-8gpu")
    before = recommend(topo, 2).groups[0].gpus
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["on"])
    report = _report(tmp_path)
    report.pair_problems = {(topo.gpu(before[0]).pci_bus_id, topo.gpu(before[1]).pci_bus_id): ["acs"]}
    assert apply_health(topo, report) == 1
    assert topo.link(*before).health == ["acs"]
    result = recommend(topo, 2)
    assert tuple(result.groups[0].gpus) != tuple(before)
    forced = recommend(topo, 2, require=before).groups[0]  # the reason names what doctor found
    assert forced.slowest_hop.label.endswith("doctor: acs") and "doctor: acs" in forced.bottleneck


def test_merged_sources_keep_every_health_word_without_a_disagreement():
    from gputopo.sources.merge import merge_views

    a, b = load_reference("pcie-8gpu"), load_reference("pcie-8gpu")
    b.link(0, 1).health = ["acs"]
    merged = merge_views([a, b], ["a.json", "b.json"])
    assert merged.link(0, 1).health == ["acs"]
    assert not [d for d in merged.disagreements if "health" in d.subject]


@pytest.mark.parametrize(("cmdline", "expected"), [
    ("BOOT_IMAGE=/vmlinuz ro intel_iommu=on\n", "warning"),
    ("BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt\n", "ok"),
    ("BOOT_IMAGE=/vmlinuz ro quiet\n", "not-made"),
])
def test_old_kernels_without_a_group_type_file_are_judged_by_the_command_line(tmp_path, cmdline, expected):
    host = two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"])
    host.iommu_group(27, "DMA", ["0000:41:00.0", "0000:61:00.0"])
    (tmp_path / "sys/kernel/iommu_groups/27/type").unlink()
    host.proc("cmdline", cmdline)
    report = _report(tmp_path)
    check = next(c for c in report.checks if c.name == "iommu")
    assert ("iommu-translating" in _codes(report)) == (expected == "warning")
    assert check.status == {"warning": "problem"}.get(expected, expected)


def test_an_empty_iommu_groups_folder_means_no_iommu(tmp_path):
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"])
    (tmp_path / "sys/kernel/iommu_groups").mkdir(parents=True)
    report = _report(tmp_path)
    assert next(c for c in report.checks if c.name == "iommu").status == "ok"


def test_without_sysfs_nvml_judges_the_gpu_link(tmp_path):
    """In a container without /sys/bus/pci: NVML's widths still show a narrow link (the values of the
    real RTX 3090 capture, x8 of x16, put on a reference machine's GPU 1)."""
    topo = load_reference("pcie-8gpu")
    x8 = real_links()["gpu-x8"]
    topo.gpu(1).pcie_width_current, topo.gpu(1).pcie_width_max = x8.current_width, x8.max_width
    topo.gpu(2).pcie_gen_current, topo.gpu(2).pcie_gen_max = 1, 4
    (tmp_path / ".dockerenv").write_text("")
    report = _report(tmp_path, nvml=FakeNvml(topo))
    narrow = next(f for f in report.findings if f.code == "pcie-link-narrow")
    assert narrow.gpus == [1] and "x8 of x16" in narrow.message and "nvmlDeviceGetCurrPcieLinkWidth" in narrow.evidence[0]
    idle = next(f for f in report.findings if f.code == "pcie-link-slow-maybe-idle")
    assert idle.gpus == [2] and idle.severity == "info"
    assert any(c.name == "pcie-paths" and "container" in c.detail for c in report.checks)


def test_several_acs_bridges_get_one_shell_line_for_all(tmp_path):
    import shlex

    two_gpus_under_root_ports(tmp_path, real_acs_controls()["on"])
    fix = next(f for f in _report(tmp_path).findings if f.code == "acs-redirect").fix
    loop = "for b in" + fix.split("`for b in")[1].split("`")[0]
    assert shlex.split(loop)[:5] == ["for", "b", "in", "0000:40:01.1", "0000:60:01.1;"]
    assert 'sudo setpci -s "$b" ECAP_ACS+6.w=0000' in loop
    # the kernel keeps only the last pci=disable_acs_redir= option: one option lists every bridge
    assert fix.count("pci=disable_acs_redir=") == 2 and "`pci=disable_acs_redir=0000:40:01.1;0000:60:01.1`" in fix


def test_acs_spares_pairs_joined_by_nvlink(tmp_path):
    """Two GPUs of a DGX-1 (NVLink between them) placed under the two ACS root ports: their P2P goes
    over NVLink, so the pair is not marked, and the effect says why."""
    topo = load_reference("dgx1")
    a, b = next((lk.a, lk.b) for lk in topo.links if lk.nvlink_count)
    topo.gpu(a).pci_bus_id, topo.gpu(b).pci_bus_id = "0000:41:00.0", "0000:61:00.0"
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["on"])
    report = _report(tmp_path, nvml=FakeNvml(topo))
    acs = [f for f in report.findings if f.code == "acs-redirect"]
    assert len(acs) == 2 and "joined by NVLink" in acs[0].effect
    assert ("0000:41:00.0", "0000:61:00.0") not in report.pair_problems


def test_nvml_inactive_nvlinks_in_a_vm_are_a_question_not_a_fault(tmp_path):
    """A VM given some GPUs of an NVLink board: links to the GPUs it was not given are down by design."""
    _nvml_host(tmp_path).proc("cpuinfo", "processor\t: 0\nflags\t\t: fpu hypervisor sse\n")
    four = load_reference("dgx1")
    four.gpus = four.gpus[:4]  # a VM given 4 of the board's 8 GPUs
    four.links = [link for link in four.links if link.b < 4]
    report = _report(tmp_path, nvml=FakeNvml(four, inactive_links={2: 2}))
    inactive = next(f for f in report.findings if f.code == "nvlink-inactive")
    assert inactive.severity == "info" and inactive.gpus == [2] and "2 of 6" in inactive.message
    assert "virtual machine" in inactive.message and "inferred" in inactive.message
    assert "nvlink-down" not in report.gpu_problems.get(four.gpu(2).pci_bus_id, set())


def test_nvml_inactive_nvlinks_in_a_vm_holding_a_whole_8_gpu_board_are_a_fault(tmp_path):
    """Azure NDv2 gives a VM all 8 V100s of the board (Azure/azhpc-diagnostics#73): no link leads out."""
    _nvml_host(tmp_path).proc("cpuinfo", "processor\t: 0\nflags\t\t: fpu hypervisor sse\n")
    report = _report(tmp_path, nvml=FakeNvml(load_reference("dgx1"), inactive_links={2: 2}))
    inactive = next(f for f in report.findings if f.code == "nvlink-inactive")
    assert inactive.severity == "warning" and "virtual machine" not in inactive.message
