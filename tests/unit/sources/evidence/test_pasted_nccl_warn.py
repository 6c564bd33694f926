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


NCCL988 = "tests/fixtures/corpus/issue_bodies/nccl988_prose_lsmod_grep_peermem_both_empty_then_nccl_ib_sharp_log_cut.txt"


def test_an_lsmod_grep_that_printed_no_peer_module():
    """nccl#988: two `lsmod | grep` prompts for the peer-memory modules, each followed straight by the
    next prompt, were not read (no module row: nothing to read). Its output ends at a blank line, the
    next prompt or the end of the paste; a row of the module, even among others, says loaded; any
    other line ends it saying nothing (the paste was cut); a pattern that cannot match them is no such grep."""
    from pathlib import Path

    facts = parse_pasted(Path(NCCL988).read_text()).facts
    assert facts.peermem_absent.line == 6 and "grep nvidia_peermem" in facts.peermem_absent.text
    assert facts.peermem_loaded is None
    absent = ("$ lsmod | grep -e nvidia_peermem -e nv_peer_mem\n$ nvidia-smi\n",
              "lsmod | grep nvidia\r\nnvidia_uvm  1523712  0\r\nnvidia  56598528  147 nvidia_uvm\r\n\r\nnext\r\n",
              "```\n[root@gpu3 ~]# lsmod | egrep 'peer|nvidia'\n```\n", "> # lsmod | grep -i PEERMEM")
    for text in absent:
        assert parse_pasted(text).facts.peermem_absent is not None, text
    loaded = parse_pasted("# lsmod | grep nvidia\nnvidia_uvm 1 0\nnvidia_peermem 16384 0\nnvidia 5 2 nvidia_uvm\n").facts
    assert loaded.peermem_absent is None and loaded.peermem_loaded is not None
    for text in ("lsmod | grep nvidia\nnvidia_uvm 1 0\nand the paste goes on in prose",
                 "lsmod | grep ib_core\n\n", "lsmod | grep peer | wc -l\n0\n"):
        assert parse_pasted(text).facts.peermem_absent is None, text


def test_a_sigbus_in_nccls_shared_memory_code():
    """JAX-Toolbox#183's gdb session (SIGBUS, then a backtrace through ncclShmOpen) was refused as nothing
    doctor reads. The signal and a frame of NCCL's shared-memory code, in either order and in any
    crash report's shape (gdb, glog's `*** SIGBUS ... ***` and `@ 0x... ncclShmOpen()`), make one failure;
    a Bus error without such a frame (a DataLoader worker), or AER's "PCIe Bus Error", do not."""
    from pathlib import Path

    real = Path("tests/fixtures/corpus/doctor_pastes/jaxtoolbox183_gdb_sigbus_in_ncclshmopen_proxy_backtrace.txt")
    (failure,) = parse_pasted(real.read_text()).facts.shm_failures
    assert failure.sigbus and failure.line == 3 and "ncclShmOpen" in failure.text
    glog = ("    @     0x7f6b595436d7  ncclProxyService()\n    @     0x7f6b59544f3b  ncclShmOpen()\n"
            "*** SIGBUS (@0x7f45d7dff000) received by PID 3925 (TID 0x7f45d7dff640) from PID 0; stack trace: ***\r\n")
    assert [f.sigbus for f in parse_pasted(glog).facts.shm_failures] == [True]
    for text in ("RuntimeError: DataLoader worker (pid 325) is killed by signal: Bus error.",
                 "pcieport 0000:00:01.1: PCIe Bus Error: severity=Corrected\n#0 0x1 in ncclShmOpen() ()",
                 "#0 0x00007f6b59544f3b in ncclShmOpen(char*, unsigned long) ()"):
        assert parse_pasted(text).facts.shm_failures == [], text


def test_an_lsmod_grep_that_could_not_print_a_peer_module_row_says_nothing():
    """A grep whose empty output does not show the module absent is no such grep: an inverted match
    (-v), a quiet or counting one (-q, -c, -l), a word or line match (-w, -x), line numbers (-n: a row
    no longer reads as one), a pattern file (-f), a file operand (grep reads it, not lsmod), a pattern
    of another case without -i, one anchored at the end, BRE's literal `|`, or output piped on."""
    for args in ("-v peermem", "-q peermem", "-c peermem", "-l nvidia", "-w peer", "-x nvidia", "-n peermem",
                 "-f peermem", "PEERMEM", "peermem /proc/modules", "'peermem$'", "'peer|nvidia'",
                 "peer|wc -l", "peer;true", "peer>out", "-e"):
        assert parse_pasted(f"$ lsmod | grep {args}\n$ next\n").facts.peermem_absent is None, args
    for args in ("-i PEERMEM", "-E 'peer|nvidia'", "'peer\\|nvidia'", "--color=auto nvidia", "'^nv_peer'",
                 "-ie PEERMEM", "--regexp=peermem", "-Fe nv_peer_mem"):
        assert parse_pasted(f"$ lsmod | grep {args}\n$ next\n").facts.peermem_absent is not None, args
