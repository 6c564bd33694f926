"""`gputopo nccl-topo`: a host's topology as NCCL's topology XML (``NCCL_TOPO_FILE``)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gputopo.cli import FromOption, HostOption, MachineOption, command


@command("nccl-topo")
def nccl_topo_command(
    from_files: FromOption = None,
    machine: MachineOption = None,
    host: HostOption = None,
    output: Annotated[
        Optional[str], typer.Option("--output", "-o", metavar="FILE", help="Write the XML to FILE (default: stdout).")
    ] = None,
    node: Annotated[
        Optional[str], typer.Option("--node", metavar="NAME", help="The host to write, where the topology holds "
                                    "several (a rack's trays).")
    ] = None,
) -> None:
    """Write a host's GPUs, PCIe tree and NVLinks as NCCL's topology XML, the file NCCL_TOPO_DUMP_FILE
    writes and NCCL_TOPO_FILE reads (e.g. to give a VM its bare-metal wiring). Bridges are made up
    from the link words; NICs are left out (NCCL adds them)."""
    from gputopo.analysis import topology_for
    from gputopo.sources import TopologyRequest
    from gputopo.views.nccl_topo import nccl_topology_xml

    topology = topology_for(TopologyRequest(from_files=tuple(from_files or ()), machine=machine, host=host))
    text = nccl_topology_xml(topology, node)
    unplaced = [g.index for g in topology.gpus if not g.pci_bus_id]
    if unplaced:  # NCCL matches a file's GPUs to its own by bus id: these match none (newcomer review)
        typer.echo(f"gputopo: note: GPUs {','.join(map(str, unplaced))} have no PCI bus id in the source; the file "
                   "gives them made-up ones, which NCCL cannot match to the real GPUs: read the topology where bus ids "
                   "are known (this host's NVML, a snapshot, `nvidia-smi -q`) before NCCL_TOPO_FILE uses it", err=True)
    if output is None:
        typer.echo(text, nl=False)
        return
    from gputopo.fileio import atomic_write_text

    atomic_write_text(output, text)
    typer.echo(f"saved {output} (for NCCL_TOPO_FILE)", err=True)
