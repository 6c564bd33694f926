from gputopo.analysis.causes.doctor import doctor
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted


def _report(text):
    return doctor(HealthEvidence(source="t", pasted=[("t", parse_pasted(text))]))


def _codes(text):
    return {(f.severity, f.code) for f in _report(text).findings}


def test_pasted_variables_are_worded_as_the_hosts():
    codes = _codes("NCCL_P2P_DISABLE=1\nNCCL_P2P_LEVEL=LOC\nNCCL_SHM_DISABLE=1\nNCCL_IB_DISABLE=1")
    assert codes == {("warning", "env-nccl-p2p-disable"), ("warning", "env-nccl-p2p-level"),
                     ("info", "env-nccl-shm-disable"), ("info", "env-nccl-ib-disable")}
    assert _codes("export NCCL_IB_DISABLE=0\nexport NCCL_DEBUG=INFO") == set()


def test_docker_run_without_shm_is_an_inference_and_with_it_is_quiet():
    (finding,) = _report("docker run --gpus all img").findings
    assert finding.code == "shm-too-small" and "inferred" in finding.message
    assert _codes("docker run --gpus all --ipc=host img") == set()
    assert _codes("docker run --shm-size=64m img") == {("warning", "shm-too-small")}


def test_nccl_shm_errors_and_df():
    assert ("error", "shm-too-small") in _codes("NCCL WARN Call to posix_fallocate failed : No space left on device")
    assert _codes("shm  64M  0  64M  0% /dev/shm") == {("warning", "shm-too-small")}
    assert _codes("tmpfs  32G  0  32G  0% /dev/shm") == set()


def test_gdr_disabled_says_what_the_paste_cannot_show():
    (finding,) = _report("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'").findings
    assert finding.code == "gdr-disabled" and "unknown here" in finding.message
    (finding,) = _report("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\nnvidia_peermem 16384 0").findings
    assert "is loaded" in finding.message


def test_grub_iommu_pt_is_quiet_and_on_without_pt_warns_as_configuration():
    report = _report('GRUB_CMDLINE_LINUX_DEFAULT="amd_iommu=on iommu=pt"')
    assert report.findings == [] and any(c.name == "iommu (GRUB config)" and c.status == "ok" for c in report.checks)
    (finding,) = _report('GRUB_CMDLINE_LINUX="intel_iommu=on"').findings
    assert finding.code == "iommu-translating" and "/proc/cmdline" in finding.message


def test_nccl_without_the_gpus_sysfs_path_names_the_devices_and_not_the_environment():
    """pytorch#40273: NCCL 2.4.2's `Could not find real path of /sys/class/pci_bus/...` said nothing."""
    text = "".join(f"X:4:5 [{i}] include/topo.h:27 NCCL WARN Could not find real path of "
                   f"/sys/class/pci_bus/0000:0{b}/../../0000:0{b}:00.0\n" for i, b in ((0, 2), (1, 3)))
    (finding,) = _report(text).findings
    assert (finding.severity, finding.code) == ("error", "nccl-sysfs-path")
    assert "0000:02:00.0, 0000:03:00.0" in finding.message and "the paste does not show" in finding.message


def test_net_ib_in_use_makes_the_gdr_check_a_named_not_made():
    """deit#28: an NCCL log cut after `NET/IB : Using [0]mlx4_0:1/RoCE` was refused as nothing doctor reads."""
    report = _report("h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx4_0:1/RoCE ; OOB enp7s0:10.0.0.1<0>")
    assert report.findings == []
    (check,) = [c for c in report.checks if c.name == "gpudirect-rdma"]
    assert check.status == "not-made" and "GPU Direct RDMA Enabled/Disabled" in check.detail
