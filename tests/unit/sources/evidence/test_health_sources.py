"""The health sources read sysfs/procfs text the ways kernels write it, and say "not known"
(None) for what is missing, never guess."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gputopo.sources.host.host_health import read_host_health, relevant_env, shm_size
from gputopo.sources.evidence.pasted_health import parse_pasted
from gputopo.sources.host.pcie_health import acs_from_config, link_state, nvidia_gpus
from gputopo.sources.host.tree import FolderTree


def test_link_files_in_old_and_new_kernel_words(tmp_path):
    (tmp_path / "current_link_speed").write_text("8 GT/s\n")  # before 4.19
    (tmp_path / "max_link_speed").write_text("16.0 GT/s PCIe\n")
    (tmp_path / "current_link_width").write_text("16\n")
    (tmp_path / "max_link_width").write_text("x16\n")
    state = link_state(FolderTree(tmp_path), "")
    assert (state.current_speed_gts, state.max_speed_gts, state.current_width, state.max_width) == (8.0, 16.0, 16, 16)
    assert state.speed_below_max and not state.width_below_max
    (tmp_path / "current_link_speed").write_text("Unknown\n")
    (tmp_path / "current_link_width").write_text("0\n")
    unknown = link_state(FolderTree(tmp_path), "")
    assert unknown.current_speed_gts is None and unknown.current_width is None and not unknown.speed_below_max


def test_nvidia_gpus_are_display_or_3d_controllers_of_vendor_10de(tmp_path):
    base = tmp_path / "sys/bus/pci/devices"
    for bdf, vendor, klass in (("0000:01:00.0", "0x10de", "0x030200"), ("0000:01:00.1", "0x10de", "0x040300"),
                               ("0000:02:00.0", "0x1002", "0x030000"), ("0000:03:00.0", "0x10de", "0x030000")):
        (base / bdf).mkdir(parents=True)
        (base / bdf / "vendor").write_text(vendor + "\n")
        (base / bdf / "class").write_text(klass + "\n")
    assert nvidia_gpus(tmp_path) == ["0000:01:00.0", "0000:03:00.0"]
    assert nvidia_gpus(tmp_path / "nowhere") == []


def test_shm_size_from_mounts_only_off_the_live_host(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/mounts").write_text("shm /dev/shm tmpfs rw,size=64m 0 0\n")
    assert shm_size(tmp_path)[0] == 64 << 20
    (tmp_path / "proc/mounts").write_text("tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=50% 0 0\n")
    assert shm_size(tmp_path) == (None, None)  # a percentage of RAM: not a size; no statvfs of this tree


def test_an_empty_root_knows_nothing_and_the_environment_is_filtered(tmp_path):
    host = read_host_health(tmp_path, {"NCCL_DEBUG": "INFO", "PASSWORD": "x", "CUDA_VISIBLE_DEVICES": "0"})
    assert host.iommu_groups is None and host.cmdline is None and host.modules is None
    assert host.is_vm is None and host.container is None and host.driver_gpus is None
    assert host.env == {"CUDA_VISIBLE_DEVICES": "0", "NCCL_DEBUG": "INFO"}
    assert relevant_env({"NCCL_X": 1}) == {"NCCL_X": "1"}


def test_vm_and_container_evidence(tmp_path):
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu vme hypervisor lahf_lm\n")
    (tmp_path / "proc/1/cgroup").write_text("0::/kubepods/burstable/pod1234\n")
    host = read_host_health(tmp_path)
    assert host.is_vm is True and host.container == "/proc/1/cgroup mentions kubepods"


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=4096))
def test_any_config_bytes_give_an_answer_and_end(data):
    state = acs_from_config(data)
    assert state.status in ("read", "absent", "not-root", "unreadable")
    assert state.control is None or 0 <= state.control <= 0xFFFF


_PASTE_WORDS = st.sampled_from([
    "ACSCtl:\tSrcValid+ ReqRedir+ CmpltRedir+", "LnkCap:\tPort #0, Speed 16GT/s, Width x16", "LnkSta:\tSpeed 2.5GT/s, Width x8",
    "40:01.1 PCI bridge: x", "$ lspci -vvv -s 01:00.0", "GPU 3: Tesla", "         Link 3: <inactive>",
    "NVRM: Xid (PCI:0000:01:00): 79, x", "fallen off the bus", "BOOT_IMAGE=/x iommu=pt", "\x1b[31m", "",
])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_PASTE_WORDS, st.text(max_size=40)), max_size=30))
def test_any_paste_is_read_without_error(lines):
    evidence = parse_pasted("\n".join(lines))
    assert all(len(a.text) <= 300 for a in evidence.acs)


def test_a_link_width_in_other_digits_is_unknown_not_a_traceback():
    from gputopo.sources.host.pcie_health import _width

    assert [_width(t) for t in ("x16", "16", "x²", "x٣", "x65", None)] == [16, 16, None, None, None, None]
