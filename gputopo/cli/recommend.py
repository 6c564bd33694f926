"""`gputopo recommend`: which GPUs to train on together, and how to tell TensorFlow.

Only option parsing here; the decision is ``gputopo.analysis.recommend.recommend`` (pure, never
imports TensorFlow) and the layout is ``gputopo.views.recommend``.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gputopo.cli import FromOption, JsonOption, MachineOption, TfLogOption, TfRunOption, command
from gputopo.errors import InputError


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
    gpus: Annotated[int, typer.Option("--gpus", "-n", help="How many GPUs each job trains on.")],
    jobs: Annotated[int, typer.Option("--jobs", help="Split the box into N disjoint groups for N concurrent jobs.")] = 1,
    require: Annotated[
        Optional[str], typer.Option("--require", help="GPUs that must be in the group, e.g. 0,3.", metavar="GPUS")
    ] = None,
    exclude: Annotated[
        Optional[str], typer.Option("--exclude", help="GPUs that must not be used, e.g. 5.", metavar="GPUS")
    ] = None,
    alternatives: Annotated[int, typer.Option("--alternatives", help="How many runner-up groups to list.")] = 3,
    output_format: Annotated[
        str, typer.Option("--format", "-f", help="text (default), json, env (shell `eval`) or python (snippet).")
    ] = "text",
    json_output: JsonOption = False,
    from_file: FromOption = None,
    machine: MachineOption = None,
    tf_log: TfLogOption = None,
    tf_run: TfRunOption = None,
) -> None:
    """Recommend the best GPUs to train on together: ranked groups with their ring bottleneck, and
    the CUDA_VISIBLE_DEVICES / MirroredStrategy lines to use them."""
    if json_output and output_format.lower() not in ("text", "json"):
        raise InputError(f"--json and --format {output_format} ask for two different outputs; give one of them")
    fmt = "json" if json_output else output_format.lower()
    if fmt != "json":  # JSON needs neither the tables nor rich (a cold start stays light)
        from gputopo.views.recommend import FORMATS

        if fmt not in FORMATS:
            raise InputError(f"--format must be one of {', '.join(FORMATS)}, not {output_format!r}")
    if alternatives < 0:
        raise InputError(f"--alternatives must be 0 or more (got {alternatives})")
    required = parse_gpu_list(require, "--require")
    excluded = parse_gpu_list(exclude, "--exclude")

    from gputopo.analysis.recommend import recommend
    from gputopo.sources import load_topology
    from gputopo.views.common import status

    topology = load_topology(from_file=from_file, machine=machine, tf_log=tf_log, tf_run=tf_run)
    # Usually milliseconds; large --jobs splits can take a second or two. The spinner goes to
    # standard error and only shows on a terminal, so --json / env output stays clean.
    with status(f"Ranking groups of {gpus} GPUs...", spinner="dots"):
        rec = recommend(topology, gpus, jobs=jobs, require=required, exclude=excluded, alternatives=alternatives)

    if fmt == "json":
        from gputopo.views.common import print_json

        print_json(rec.to_dict())
        return
    from gputopo.views import recommend as view

    if fmt == "env":
        typer.echo(view.format_env(rec), nl=False)
    elif fmt == "python":
        typer.echo(view.format_python(rec), nl=False)
    else:
        view.render_recommendation(rec)
