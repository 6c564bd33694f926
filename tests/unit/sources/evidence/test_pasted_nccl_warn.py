from gputopo.sources.evidence.pasted_health import parse_pasted


def test_shm_failures_with_their_size():
    facts = parse_pasted("include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device\n"
                         "Error while creating shared memory segment /dev/shm/nccl-1 (size 7340384)").facts
    assert [f.size for f in facts.shm_failures] == [None, 7340384]


def test_gdr_disabled_and_peermem_loaded():
    facts = parse_pasted("h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
                         "nvidia_peermem         16384  0").facts
    assert len(facts.gdr_disabled) == 1 and facts.peermem_loaded is not None
    assert parse_pasted("NCCL_NET_GDR_LEVEL=SYS disabled").facts.gdr_disabled == []


def test_nccl_could_not_resolve_a_device_under_sys():
    facts = parse_pasted("X:430:2237 [0] include/topo.h:27 NCCL WARN Could not find real path of "
                         "/sys/class/pci_bus/0000:02/../../0000:02:00.0").facts
    assert len(facts.sysfs_unresolved) == 1
    assert parse_pasted("Could not find real path of /home/x").facts.sysfs_unresolved == []


def test_nccl_choosing_net_ib_is_kept_without_a_gdr_state():
    facts = parse_pasted("gpu-dev006:1:1 [0] NCCL INFO NET/IB : Using [0]mlx4_0:1/RoCE ; OOB enp7s0:10.0.0.1<0>").facts
    assert facts.net_ib_used is not None and facts.gdr_disabled == []
