"""`gputopo doctor` (why P2P is slow, wrong or hangs) and `gputopo gather` (pack what it reads)."""

from __future__ import annotations

import os

from typing import Annotated, Optional

import typer

from gputopo.cli import JsonOption, command, complete_fail_on
from gputopo.cli.scan import ExpectGpusOption, FailOnDesignOption

FailOnOption = Annotated[
    Optional[str],
    typer.Option("--fail-on", metavar="LEVEL", autocompletion=complete_fail_on,
                 help="Exit with code 1 when a fault (not a design fact or a note) is at least this severe: warning or "
                      "error (Slurm prologs, CI)."),
]


@command("doctor")
def doctor_command(
    from_files: Annotated[
        Optional[list[str]],
        typer.Option("--from", metavar="FILE",
                     help="Judge saved evidence instead of this host: a `gputopo gather` archive or folder, or pasted "
                          "text: `lspci -vvv` / `-tv`, `setpci` ACS words, dmesg / journalctl, /proc/cmdline or GRUB, "
                          "`nvidia-smi nvlink -s` / `-q` / `--query-gpu` CSV, CUDA and NCCL errors, NCCL logs, "
                          "`env` / `docker run -e`, `df` / `mount` of /dev/shm, any output `scan --from` reads, or "
                          "`slurmd -G` / `scontrol show node` beside a snapshot ('-' = stdin); give it once per file."),
    ] = None,
    json_output: JsonOption = False,
    fail_on: FailOnOption = None,
    fail_on_design: FailOnDesignOption = False,
    expect_gpus: ExpectGpusOption = None,
    topology: Annotated[
        Optional[str],
        typer.Option("--topology", metavar="FILE",
                     help="With --save: the snapshot (or `nvidia-smi topo -m` text) to annotate (default: probe this host)."),
    ] = None,
    save: Annotated[
        Optional[str],
        typer.Option("--save", metavar="FILE",
                     help="Also write the topology snapshot with doctor's pair health and findings, for "
                          "`recommend --from FILE` and `report --from FILE`."),
    ] = None,
    root: Annotated[Optional[str], typer.Option("--root", hidden=True, help="Read this folder as / (tests).")] = None,
) -> None:
    """Why P2P is slow, wrong or hangs: ACS, IOMMU, PCIe links trained down, NVLinks down, Fabric
    Manager, GPUDirect RDMA, /dev/shm and NCCL variables; each finding with its cause, the evidence
    read, its effect on GPU pairs and the fix. Checks it cannot make say why."""
    from gputopo.cli.scan import _fail_on_findings, checked_fail_on, expectation

    checked_fail_on(fail_on)
    if topology is not None and save is None:
        from gputopo.errors import InputError

        raise InputError("--topology names the snapshot that --save annotates: give --save FILE too")
    topo = _topology_to_annotate(topology, save, from_files or []) if save is not None else None
    index_of = {g.pci_bus_id: g.index for g in topo.gpus if g.pci_bus_id} if topo is not None else None
    expected = expectation(expect_gpus, live=not from_files and root is None)
    report = _report(from_files or [], root, index_of, expected)
    if topo is not None and save is not None:
        _save_with_health(report, topo, save)
    if json_output:
        from gputopo.views.common import print_json

        print_json(report.to_dict())
    else:
        from gputopo.views.doctor import render_doctor

        render_doctor(report)
    if fail_on is not None:
        _fail_on_findings(report.findings, fail_on, fail_on_design)


def _topology_to_annotate(topology_file: str | None, save: str, from_files: list[str]):
    """The topology ``--save`` writes: ``--topology FILE`` merged with the outputs among ``--from``
    that are topologies (p2pBandwidthLatencyTest's bus ids let doctor's pair health join a `topo -m`
    that has none, as `scan --from` merges them), else those outputs alone, else this host's NVML probe."""
    from gputopo.fileio import write_target
    from gputopo.sources import TopologyRequest, resolve
    from gputopo.sources.archives.archive import is_archive
    from gputopo.sources.doctor_input import health_only

    write_target(save)  # refuse a bad target before probing
    outputs = tuple(path for path in from_files
                    if path != "-" and not os.path.isdir(path) and not is_archive(path) and not health_only(path))
    return resolve(TopologyRequest(from_files=((topology_file,) if topology_file else ()) + outputs))


def _save_with_health(report, topo, save: str) -> None:
    """The topology with doctor's health on its links and its findings, saved."""
    from gputopo.analysis.causes.doctor import apply_health
    from gputopo.analysis.notes.reading_notes import add_reading_findings
    from gputopo.sources.snapshot import save_snapshot

    from gputopo.analysis.causes.finding_kinds import with_kinds

    add_reading_findings(topo)  # what the reader noticed, in words, first (as every snapshot holds it)
    if not apply_health(topo, report) and report.pair_problems:  # said, never dropped silently
        unjoined = "has no PCI bus ids" if not any(g.pci_bus_id for g in topo.gpus) else "names none of their GPUs"
        typer.echo(f"gputopo: note: doctor's pair problems are not on the saved links: the topology {unjoined}; give "
                   "a file with bus ids too (p2pBandwidthLatencyTest, `nvidia-smi -q`, a snapshot)", err=True)
    with_kinds(topo.diagnostics)
    save_snapshot(topo, save)


def _report(from_files: list[str], root: str | None, index_of: dict[str, int] | None = None,
            expected: tuple[int, str] | None = None):
    """doctor's report on the evidence, each finding with its kind, and the GPU count checked."""
    import os

    from gputopo.analysis.causes.doctor import doctor
    from gputopo.sources import doctor_input

    if from_files:
        if root is not None:
            from gputopo.errors import InputError

            raise InputError("give either --from (saved evidence) or --root, not both")
        with doctor_input.evidence_from_files(from_files) as evidence:
            return _judged(doctor(evidence, index_of), evidence, expected)
    evidence = doctor_input.evidence_of_host(root or "/", dict(os.environ))
    return _judged(doctor(evidence, index_of), evidence, expected)


def _judged(report, evidence, expected: tuple[int, str] | None):
    """``report`` with ``--expect-gpus``'s check (first, as the worst news) and every finding's kind."""
    from gputopo.analysis.causes.expected_gpus import expected_gpus_findings, visible_in_evidence
    from gputopo.analysis.causes.finding_kinds import with_kinds

    if expected is not None:
        visible, unseen = visible_in_evidence(evidence)
        found = expected_gpus_findings(visible, expected[0], expected[1], unseen=unseen)
        report.findings[:0] = found
        report.check("gpus-expected", "not-made" if visible is None else ("problem" if found else "ok"),
                     f"{visible if visible is not None else '?'} visible, {expected[0]} expected ({expected[1]})")
    with_kinds(report.findings)
    return report


@command("gather")
def gather_command(
    output: Annotated[str, typer.Option("--output", "-o", metavar="FILE",
                                        help="The archive to write (a .tar.gz), e.g. box.tar.gz ('-' = stdout).")],
    no_smi: Annotated[bool, typer.Option("--no-smi", help="Do not run nvidia-smi.")] = False,
    root: Annotated[Optional[str], typer.Option("--root", hidden=True, help="Pack this folder as / (tests).")] = None,
) -> None:
    """Pack the files doctor and scan read (sys/, proc/, nvidia-smi outputs; no secrets) into one
    archive to attach to a ticket; read it anywhere with `gputopo doctor --from FILE`."""
    import io
    import os
    import sys

    from gputopo.fileio import atomic_write_bytes, write_target
    from gputopo.sources.archives.gather import gather
    from gputopo.views.common import err

    if output != "-":
        write_target(output)  # refuse a bad target before packing
    buffer = io.BytesIO()
    packer = gather(buffer, root=root or "/", env=dict(os.environ), smi=None if no_smi else "nvidia-smi")
    data = buffer.getvalue()
    if output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        atomic_write_bytes(output, data)
    err().print(f"gather: {packer.files} files, {len(data)} bytes compressed"
                + (f"; left out {len(packer.skipped)}" if packer.skipped else ""), markup=False, highlight=False)
