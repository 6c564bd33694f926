from gputopo.sources.evidence.pasted_health import parse_pasted


def test_grub_line():
    facts = parse_pasted('GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on iommu=pt"').facts
    assert facts.grub_cmdline[0] == "quiet amd_iommu=on iommu=pt"


def test_shm_sizes_from_df_mount_and_proc_mounts():
    sizes = parse_pasted("shm              64M     0   64M   0% /dev/shm\n"
                         "shm on /dev/shm type tmpfs (rw,nosuid,size=65536k)\n"
                         "tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0\n"
                         "shm 65536 0 65536 0% /dev/shm").facts.shm_sizes
    assert [s.size for s in sizes] == [64 << 20, 64 << 20, None, 64 << 20]
