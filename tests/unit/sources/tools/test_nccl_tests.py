"""nccl-tests tables on real captures: devices with bus ids and hosts, busbw per size, #wrong,
averages, several runs in one paste, the operation only where the paste names it."""

import pytest

from gputopo.errors import InputError
from gputopo.sources.tools import nccl_tests
from unit.sources.readers_corpus import DRESSINGS, cases, text_of


@pytest.mark.parametrize(("name", "want"), cases("nccl_tests"))
def test_real_outputs_read_as_the_expert_reads_them(name, want):
    text = text_of("nccl_tests", name)
    assert nccl_tests.sniff(text)
    topo = nccl_tests.read(text, name)
    runs = topo.collectives
    assert len(runs) == want["runs"]
    assert all(run.operation == (want["operation"] or "unknown") for run in runs)
    averages = want["avg_busbw_gbps"] if isinstance(want["avg_busbw_gbps"], list) else [want["avg_busbw_gbps"]]
    assert [run.avg_busbw_gbps for run in runs] == pytest.approx(averages)
    wrong_in = want.get("wrong_in", want["wrong"])  # "N/A" in place (not checked) is None
    assert all(row.out_wrong == want["wrong"] and row.in_wrong == wrong_in for run in runs for row in run.rows)
    assert all(run.out_of_bounds == want.get("out_of_bounds", 0) for run in runs)  # None: cut before that line
    if "rows" in want:
        assert len(runs[0].rows) == want["rows"]
    for size, busbw in want.get("busbw_gbps", {}).items():
        assert next(r.out_busbw_gbps for r in runs[0].rows if r.size_bytes == int(size)) == pytest.approx(busbw)
    if "nranks" in want:  # a run cut before its first row is no run: its device list still counts the ranks
        assert all(run.nranks == want["nranks"] for run in runs) and len(topo.gpus) == want["nranks"]
        assert len({g.host for g in topo.gpus}) == (want["hosts"] if want["hosts"] > 1 else 1)
    for index, bus in {**want.get("bus_ids", {}), **want.get("bus_ids_rank0_7", {})}.items():
        assert topo.gpu(int(index)).pci_bus_id == bus
    for index, host in want.get("gpu_hosts", {}).items():
        assert topo.gpu(int(index)).host == host
    if "reading_notes" in want:
        assert sorted(n.code for n in topo.reading_notes) == want["reading_notes"]


def test_the_p2p_disabled_sys_run_is_thirty_times_slower_than_nvlink():
    first, second = nccl_tests.read(text_of("nccl_tests", "dgx_a100_2gpu_nv_vs_p2p_disable_sys_tables_no_devices.txt"), "x").collectives
    assert first.avg_busbw_gbps / second.avg_busbw_gbps > 30


def test_wrong_counts_and_na_are_kept_as_read():
    text = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
            "           8             2     float     sum      -1    42.56    0.00    0.00      3    41.00    0.00    0.00    N/A\n")
    row = nccl_tests.read(text, "w").collectives[0].rows[0]
    assert (row.out_wrong, row.in_wrong, row.root) == (3, None, -1)


def test_a_header_without_rows_is_one_input_error():
    with pytest.raises(InputError, match="without any row"):
        nccl_tests.read("#       size         count      type   redop    root     time   algbw   busbw #wrong\nnothing\n", "h")


@pytest.mark.parametrize("digit", ["²", "٣", "３"])
def test_digits_of_other_scripts_are_no_figures_and_no_traceback(digit):
    """`str.isdigit` is true for '²' and '٣', which `int` refuses or reads as another number."""
    header = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n")
    with pytest.raises(InputError):
        nccl_tests.read(header + f"{digit}  2 float sum -1 5.1 0.00 0.00 0 5.0 0.00 0.00 0\n", "t")
    topology = nccl_tests.read(header + f" 8 {digit} float sum -1 5.1 0.00 0.00 {digit} 5.0 0.00 0.00 0\n", "t")
    [row] = topology.collectives[0].rows
    assert (row.size_bytes, row.count, row.out_wrong) == (8, None, None)


def test_a_device_number_in_other_digits_is_no_device():
    from gputopo.sources.pasted import device_index

    assert [device_index(t) for t in ("²", "٣", "3", "0003", "99999")] == [None, None, 3, 3, None]


@pytest.mark.parametrize(("command", "operation"), [
    ("# ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 8", "all_reduce"),  # root's prompt (the 8x RTX 4090 blog)
    ("# NCCL_DEBUG=INFO sudo /opt/nccl-tests/build/all_gather_perf -g 2", "all_gather"),
    ("# all_reduce_perf is slower than alltoall_perf here", "unknown"),  # a comment naming no command: no claim
])
def test_a_command_after_roots_prompt_names_the_operation(command, operation):
    header = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n")
    row = "     1048576        262144     float     sum      -1    222.8    4.71    8.24      0    226.1    4.64    8.12      0\n"
    assert nccl_tests.read(f"{command}\n{header}{row}", "r").collectives[0].operation == operation


def _hashes_lost(text: str) -> str:
    """DERIVED: every line's leading ``#`` taken off, as markdown does to a paste outside a code block."""
    return "\n".join(line.lstrip().lstrip("#").lstrip() for line in text.split("\n"))


@pytest.mark.parametrize("dressing", DRESSINGS)
@pytest.mark.parametrize(("name", "want"), cases("nccl_tests"))
def test_a_table_whose_hash_markers_were_lost_reads_as_the_real_one(name, want, dressing):
    whole = nccl_tests.read(text_of("nccl_tests", name), name)
    text = DRESSINGS[dressing](_hashes_lost(text_of("nccl_tests", name)))
    assert nccl_tests.sniff(text)
    topo = nccl_tests.read(text, name)
    assert [run.avg_busbw_gbps for run in topo.collectives] == [run.avg_busbw_gbps for run in whole.collectives]
    assert [len(run.rows) for run in topo.collectives] == [len(run.rows) for run in whole.collectives]
    assert [(g.index, g.pci_bus_id, g.host) for g in topo.gpus] == [(g.index, g.pci_bus_id, g.host) for g in whole.gpus]


@pytest.mark.parametrize("dressing", DRESSINGS)
@pytest.mark.parametrize("name", cases("nccl_tests"), ids=lambda case: case[0])
def test_every_real_table_reads_the_same_under_a_pastes_dressing(name, dressing):
    name = name[0]
    whole = nccl_tests.read(text_of("nccl_tests", name), name)
    topo = nccl_tests.read(DRESSINGS[dressing](text_of("nccl_tests", name)), name)
    assert [run.avg_busbw_gbps for run in topo.collectives] == [run.avg_busbw_gbps for run in whole.collectives]
    assert [len(run.rows) for run in topo.collectives] == [len(run.rows) for run in whole.collectives]


def _cut_before_rows(name: str, keep_header: bool) -> str:
    """DERIVED: the real output cut before its first row (the header kept or not)."""
    lines = text_of("nccl_tests", name).split("\n")
    header = next(i for i, line in enumerate(lines) if "busbw" in line)
    return "\n".join(lines[: header + (2 if keep_header else -1)])


@pytest.mark.parametrize("keep_header", [True, False])
@pytest.mark.parametrize(("name", "gpus", "hosts"), [("h100_8gpu_single_process_indented_markdown_list.txt", 8, 1),
                                                     ("k8s_2node_16x_h100_all_reduce.txt", 16, 2)])
def test_a_paste_cut_before_its_first_row_gives_the_devices_and_says_no_rows(name, gpus, hosts, keep_header):
    from gputopo.analysis.notes.reading_notes import note_findings
    from gputopo.sources.registry import read_text

    text = _cut_before_rows(name, keep_header)
    assert nccl_tests.sniff(text)
    topo = read_text(text, name)
    assert len(topo.gpus) == gpus and len({g.host for g in topo.gpus}) == hosts
    assert topo.collectives == []
    (finding,) = note_findings(topo.reading_notes)
    assert "before its first row" in finding.message and "no bus bandwidth" in finding.message
    assert ("after its column header" in finding.message) is keep_header


def test_one_rank_named_by_two_processes_is_jobs_run_apart_and_said():
    """NVIDIA/nccl-tests#107: under mpirun -np 2 each process names itself Rank 0 (nccl-tests built
    without MPI): both GPUs are kept, on their hosts, and the separate jobs are said; two runs one after
    the other (a column header between their device lists) are not."""
    from gputopo.analysis.notes.reading_notes import note_findings

    topo = nccl_tests.read(text_of("nccl_tests", "nccltests107_2node_v100_mpirun_without_mpi_two_rank0_error_column_cut.txt"), "x")
    assert [(g.index, g.host) for g in topo.gpus] == [(0, "ip-172-31-20-228"), (1, "ip-172-31-22-230")]
    (finding,) = [f for f in note_findings(topo.reading_notes) if f.code == "nccl-tests-separate-jobs"]
    assert "pid 1320 on ip-172-31-20-228" in finding.message and "MPI=1" in finding.fix
    header = "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
    row = "     1048576        262144     float     sum      -1    222.8    4.71    8.24      0\n"
    run = "#  Rank  0 Group  0 Pid  {pid} on h device  0 [0x1b] GPU\n" + header + row
    again = nccl_tests.read(run.format(pid=1) + run.format(pid=2), "two runs")
    assert len(again.gpus) == 1 and not any(n.code == "nccl-tests-separate-jobs" for n in again.reading_notes)


def test_a_bus_number_two_gpus_share_is_no_bus_id():
    # nccl-tests prints CUDA's pciBusID, the bus number alone: [0x1b] is read as 0000:1b:00.0 (device
    # 0); where several GPUs of one host print [0x00] (a VM's GPUs at 00:1b.0..00:1e.0), none is claimed.
    head = "#  Rank %d Group  0 Pid  42 on   host-a device  %d [%s] Tesla V100-SXM2-16GB\n"
    table = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
             "           8             2     float     sum      -1    10.00    0.00    0.00      0    10.00    0.00    0.00      0\n")
    shared = nccl_tests.read("".join(head % (r, r, "0x3a") for r in range(4)) + table, "vm.txt")
    assert [g.pci_bus_id for g in shared.gpus] == [None] * 4
    root_bus = nccl_tests.read(head % (0, 0, "0x00") + table, "p3.txt")  # bus 0's device 0 is the host bridge
    assert [g.pci_bus_id for g in root_bus.gpus] == [None]
    apart = nccl_tests.read("".join(head % (r, r, f"0x{0x1b + r:02x}") for r in range(2)) + table, "metal.txt")
    assert [g.pci_bus_id for g in apart.gpus] == ["0000:1b:00.0", "0000:1c:00.0"]
