"""`gputopo recommend`: which GPUs to train on together, and how to tell TensorFlow.

Only option parsing here; the decision is ``gputopo.analysis.recommend.recommend`` (pure, never
imports TensorFlow) and the layout is ``gputopo.views.recommend``. With ``--from`` given once per
host, the multi-host plan: ``gputopo.analysis.recommend.hosts`` and ``gputopo.views.cluster_plan``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from gputopo.cli import FromOption, HostOption, JsonOption, MachineOption, TfLogOption, TfRunOption, command, complete_recommend_format
from gputopo.errors import InputError

if TYPE_CHECKING:
    from gputopo.analysis.recommend import Recommendation
    from gputopo.model import Topology


def parse_gpu_list(text: str | None, option: str) -> list[int]:
    """``"0,3"`` or ``"0-3"`` -> GPU indices; no option -> ``[]``; garbage -> a one-line InputError.

    The parsing itself is bench-p2p's (``parse_index_list``, TensorFlow-free), so every command reads
    GPU lists the same way."""
    if text is None:
        return []
    from gputopo.notation import parse_gpu_list

    return parse_gpu_list(text, option)


@command("recommend")
def recommend_command(
    gpus: Annotated[Optional[int], typer.Option("--gpus", "-n", metavar="N", help="How many GPUs each job trains on.")] = None,
    jobs: Annotated[int, typer.Option("--jobs", metavar="N", help="Split the box into N disjoint groups for N concurrent jobs.")] = 1,
    require: Annotated[
        Optional[str], typer.Option("--require", help="GPUs that must be in the group, e.g. 0,3.", metavar="GPUS")
    ] = None,
    exclude: Annotated[
        Optional[str], typer.Option("--exclude", help="GPUs that must not be used, e.g. 5.", metavar="GPUS")
    ] = None,
    alternatives: Annotated[int, typer.Option("--alternatives", metavar="N", help="How many runner-up groups to list.")] = 3,
    output_format: Annotated[
        str,
        typer.Option("--format", "-f", metavar="FORMAT", autocompletion=complete_recommend_format, help="text (default), json, env (shell `eval`) or python (snippet); "
                     "with several --from: text, json, env (a block per host) or slurm (an sbatch script); "
                     "gres (Slurm's gres.conf) or slurm-topology (topology.conf blocks) for any hosts."),
    ] = "text",
    json_output: JsonOption = False,
    from_files: FromOption = None,
    host: HostOption = None,
    machine: MachineOption = None,
    tf_log: TfLogOption = None,
    tf_run: TfRunOption = None,
    gpus_per_host: Annotated[
        Optional[int], typer.Option("--gpus-per-host", metavar="N", help="Several --from: GPUs on each host (default --gpus / hosts).")
    ] = None,
    port: Annotated[
        Optional[int], typer.Option("--port", metavar="PORT", help="Several --from: the workers' port in TF_CONFIG (default 12345).")
    ] = None,
    save: Annotated[
        Optional[str], typer.Option("--save", help="Several --from: also write the plan to FILE (JSON), for "
                                    "`gputopo train --plan`.", metavar="FILE")
    ] = None,
    free_only: Annotated[
        bool, typer.Option("--free-only", help="Only GPUs no other process uses (NVML's live state); refuse if too few.")
    ] = False,
    include_busy: Annotated[
        bool, typer.Option("--include-busy", help="Rank busy GPUs like idle ones (they are still named as busy).")
    ] = False,
    max_memory_used: Annotated[
        float, typer.Option("--max-memory-used", help="A GPU with more of its memory in use is busy.", metavar="PERCENT")
    ] = 10.0,
    max_util: Annotated[
        float, typer.Option("--max-util", help="A GPU with higher utilisation is busy.", metavar="PERCENT")
    ] = 10.0,
    pcie_weight: Annotated[
        Optional[int], typer.Option("--pcie-weight", help="--format gres: Links= count for GPUs under one PCIe "
                                    "switch tree (PIX/PXB), so Slurm prefers them together (default 0).", metavar="N")
    ] = None,
) -> None:
    """Recommend the best GPUs to train on together: ranked groups with their slowest hop, and
    the CUDA_VISIBLE_DEVICES / MirroredStrategy lines to use them. With --from once per host: the
    same group on every host, each host's CUDA/numactl/NCCL environment and TF_CONFIG."""
    if json_output and output_format.lower() not in ("text", "json"):
        raise InputError(f"--json and --format {output_format} ask for two different outputs; give one of them")
    fmt = "json" if json_output else output_format.lower()
    if fmt in SLURM_FILE_FORMATS or pcie_weight is not None:
        others = {"--jobs": jobs != 1, "--require": require, "--exclude": exclude, "--save": save, "--port": port,
                  "--gpus-per-host": gpus_per_host}
        _slurm_file((from_files, machine, tf_log, tf_run, host), fmt, output_format, pcie_weight, others)
        return
    if gpus is None:
        raise InputError("--gpus is needed: how many GPUs each job trains on (see gputopo recommend --help)")
    if alternatives < 0:
        raise InputError(f"--alternatives must be 0 or more (got {alternatives})")
    required = parse_gpu_list(require, "--require")
    excluded = parse_gpu_list(exclude, "--exclude")
    from gputopo.analysis import topologies_for
    from gputopo.sources import TopologyRequest

    request = TopologyRequest(from_files=tuple(from_files or ()), machine=machine, tf_log=tf_log, tf_run=tf_run, host=host)
    if len(request.from_files) <= 1:  # one host for sure: refuse plan options before reading anything
        _check_one_host_options(fmt, output_format, gpus_per_host, port, save)
    topologies = topologies_for(request, diagnosed=False)  # it shows no finding: only lost GPUs matter (busy.py)
    if len(topologies) > 1:
        single_host = {"--jobs": jobs != 1, "--require": require, "--exclude": exclude}
        given = [option for option, value in single_host.items() if value]
        if given:
            raise InputError(f"{given[0]} is for one host; with several --from each file is one host's snapshot")
        _recommend_hosts(topologies, gpus, gpus_per_host, port, fmt, output_format, save)
        return
    if len(from_files or ()) > 1:
        _check_one_host_options(fmt, output_format, gpus_per_host, port, save)
    from gputopo.analysis.recommend import recommend
    from gputopo.views.common import status

    (topology,) = topologies
    from gputopo.analysis.busy import BusyLimits, choose_skipped, memory_held

    if free_only and include_busy:
        raise InputError("--free-only and --include-busy contradict each other; give one of them")
    for option, value in (("--max-memory-used", max_memory_used), ("--max-util", max_util)):
        if not 0 <= value <= 100:
            raise InputError(f"{option} is a percentage from 0 to 100, not {value:g}")
    policy = "free-only" if free_only else "include" if include_busy else "skip"
    skipped, busy, busy_notes = choose_skipped(topology, gpus * jobs, required, excluded,
                                               BusyLimits(max_memory_used, max_util), policy)
    held = memory_held(topology)  # a TF log's memory figures: a past state, ties only
    # Usually milliseconds; large --jobs splits can take a second or two. The spinner goes to
    # standard error and only shows on a terminal, so --json / env output stays clean.
    with status(f"Ranking groups of {gpus} GPUs...", spinner="dots"):
        rec = recommend(topology, gpus, jobs=jobs, require=required, exclude=excluded + skipped, alternatives=alternatives,
                        held=held)
    rec.exclude, rec.busy, rec.skipped_busy = excluded, busy, skipped
    rec.busy_as_of = topology.captured_at if busy else None
    rec.notes[:0] = busy_notes

    if fmt == "json":
        from gputopo.views.common import print_json

        print_json(rec.to_dict())
        return
    _print_recommendation(rec, fmt, busy_notes)


SLURM_FILE_FORMATS = ("gres", "slurm-topology")


def _slurm_file(sources: tuple, fmt: str, output_format: str, pcie_weight: int | None, others: dict) -> None:
    """``--format gres`` / ``slurm-topology``: every host's GPUs as the file Slurm reads (all of
    them, whatever --gpus: the file describes the nodes, not a job). ``others``: the options that
    mean nothing here, refused where given."""
    refused = [option for option, value in others.items() if value]
    if pcie_weight is not None and fmt != "gres":
        refused.append("--pcie-weight")
    if refused:
        raise InputError(f"{refused[0]} does not go with --format {output_format}")
    if pcie_weight is not None and not 0 <= pcie_weight <= 1000:
        raise InputError(f"--pcie-weight must be 0 to 1000, not {pcie_weight}")
    from gputopo.analysis import topologies_for
    from gputopo.sources import TopologyRequest
    from gputopo.views import slurm_files

    from_files, machine, tf_log, tf_run, host = sources
    request = TopologyRequest(from_files=tuple(from_files or ()), machine=machine, tf_log=tf_log, tf_run=tf_run,
                              host=host)
    topologies = topologies_for(request, diagnosed=False)
    if fmt == "gres":
        from gputopo.analysis.slurm.slurm_gres import gres_nodes

        typer.echo(slurm_files.format_gres(gres_nodes(topologies, pcie_weight)), nl=False)
    else:
        from gputopo.analysis.slurm.slurm_blocks import block_topology

        typer.echo(slurm_files.format_block_topology(block_topology(topologies)), nl=False)


def _print_recommendation(rec: "Recommendation", fmt: str, busy_notes: list[str]) -> None:
    """The recommendation as text, env lines or a Python snippet (what was skipped as busy goes to
    standard error where the output is for pasting)."""
    from gputopo.views import recommend as view

    if fmt in ("env", "python"):  # the lines are for pasting: what was skipped goes to standard error
        from gputopo.quoting import terminal_safe

        for note in busy_notes:
            typer.echo(f"gputopo: note: {terminal_safe(note)}", err=True)
    if fmt == "env":
        typer.echo(view.format_env(rec), nl=False)
    elif fmt == "python":
        typer.echo(view.format_python(rec), nl=False)
    else:
        view.render_recommendation(rec)


def _check_one_host_options(fmt: str, output_format: str, gpus_per_host: int | None, port: int | None,
                            save: str | None) -> None:
    """One host: the multi-host plan's options are refused, and --format must be a one-host one."""
    plan_only = {"--gpus-per-host": gpus_per_host, "--port": port, "--save": save}
    given = [option for option, value in plan_only.items() if value is not None]
    if given or fmt == "slurm":
        what = given[0] if given else "--format slurm"
        raise InputError(f"{what} is for a multi-host plan: give --from once per host (snapshots that each name their host)")
    if fmt != "json":  # JSON needs neither the tables nor rich (a cold start stays light)
        from gputopo.views.recommend import FORMATS

        if fmt not in FORMATS:
            raise InputError(f"--format must be one of {', '.join(FORMATS)} (or slurm, with --from once per host), "
                             f"not {output_format!r}")


def _recommend_hosts(topologies: list[Topology], gpus: int, gpus_per_host: int | None, port: int | None, fmt: str,
                     output_format: str, save: str | None) -> None:
    """``recommend --from a.json --from b.json ...``: the multi-host plan, shown, printed or saved."""
    if fmt != "json":  # JSON needs neither the tables nor rich
        from gputopo.views.cluster_plan import PLAN_FORMATS

        if fmt not in PLAN_FORMATS:
            raise InputError(f"--format with several --from must be one of {', '.join(PLAN_FORMATS)}, not {output_format!r}")
    from gputopo.analysis.recommend.hosts import DEFAULT_PORT, plan_hosts

    plan = plan_hosts(topologies, gpus, gpus_per_host, DEFAULT_PORT if port is None else port)
    if save:
        from gputopo.fileio import atomic_write_text

        atomic_write_text(save, plan.to_json())
        import shlex

        typer.echo(f"saved {save} (for `gputopo train --launcher slurm|tf-config --plan {shlex.quote(save)}`)", err=True)
    if fmt == "json":
        from gputopo.views.common import print_json

        print_json(plan.to_dict())
        return
    from gputopo.views import cluster_plan as view

    if fmt == "env":
        typer.echo(view.format_plan_env(plan), nl=False)
    elif fmt == "slurm":
        typer.echo(view.format_plan_slurm(plan, save), nl=False)
    else:
        view.render_plan(plan, saved=save)
