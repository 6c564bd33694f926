"""`gputopo bench-p2p`: measure copy bandwidth and latency between devices with TensorFlow."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Optional

import typer
from typing_extensions import Annotated

from gputopo.bench.options import (
    DEFAULT_MIN_SAMPLE_S,
    DEFAULT_REPEAT,
    DEFAULT_SIZE_BYTES,
    DEFAULT_STEP_TIMEOUT_S,
    DEFAULT_WARMUP,
)
from gputopo.cli import (
    FromOption,
    JsonOption,
    MachineOption,
    command,
    fail,
)
from gputopo.notation import format_size

_HELP = (
    "Measure GPU-to-GPU copy bandwidth (one way and both ways), latency and all-reduce with TensorFlow."
    "\n\nGPU numbers follow nvidia-smi (PCI bus order): CUDA_DEVICE_ORDER=PCI_BUS_ID is set for TensorFlow "
    "unless you set it yourself. With --cpu-devices N the figures are host memory, not GPUs. "
    "See docs/bench-p2p.md."
)



if TYPE_CHECKING:
    from gputopo.bench.results import BenchResult

@command("bench-p2p", help=_HELP)
def bench_p2p(
    devices: Annotated[
        Optional[str],
        typer.Option("--devices", help="GPUs to measure, as nvidia-smi numbers them (e.g. 0,2,3 or 0-3). Default: all.",
                     metavar="LIST"),
    ] = None,
    old_gpus: Annotated[
        Optional[str], typer.Option("--gpus", hidden=True, help="Deprecated name of --devices (a list, not a count).")
    ] = None,
    cpu_devices: Annotated[
        Optional[int],
        typer.Option(
            "--cpu-devices",
            help="Measure N logical CPU devices instead of GPUs (host memory, for machines without GPUs).",
            metavar="N",
        ),
    ] = None,
    size: Annotated[
        Optional[str],
        typer.Option("--size", metavar="SIZE", help=f"Message size, e.g. 4KB, 1GiB (default {format_size(DEFAULT_SIZE_BYTES)})."),
    ] = None,
    sizes: Annotated[
        Optional[str],
        typer.Option(
            "--sizes", metavar="RANGE", help="Sweep sizes: FIRST:LAST[:FACTOR] (e.g. 1KiB:1GiB, doubling) or a list 4KiB,64MiB."
        ),
    ] = None,
    repeat: Annotated[
        int, typer.Option("--repeat", metavar="N", help="Timed samples per figure; the median is reported.")
    ] = DEFAULT_REPEAT,
    warmup: Annotated[int, typer.Option("--warmup", metavar="N", help="Untimed runs before the samples.")] = DEFAULT_WARMUP,
    via_host: Annotated[
        bool, typer.Option("--via-host", help="Also copy through host memory (/cpu:0), shown side by side.")
    ] = False,
    allreduce: Annotated[
        bool,
        typer.Option(
            "--allreduce", help="Also measure all-reduce algbw/busbw with each MirroredStrategy cross-device op."
        ),
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="SECONDS", help="Seconds before a step (one pair, one size) is declared hung.")
    ] = DEFAULT_STEP_TIMEOUT_S,
    min_sample_ms: Annotated[
        float, typer.Option("--min-sample-ms", metavar="MS", help="Each timed sample repeats the copy until it lasts this long.")
    ] = DEFAULT_MIN_SAMPLE_S * 1000,
    quick: Annotated[
        bool, typer.Option("--quick", help="Measure one pair per class of equivalent pairs (and one per GPU); "
                           "infer the rest, marked as inferred.")
    ] = False,
    concurrent: Annotated[
        bool, typer.Option("--concurrent", help="Also copy disjoint pairs at the same time (a perfect matching "
                           "per round): contention against the one-at-a-time figures.")
    ] = False,
    from_files: FromOption = None,
    machine: MachineOption = None,
    json_output: JsonOption = False,
    save: Annotated[
        Optional[str],
        typer.Option(
            "--save",
            help="Write a topology snapshot with the measured figures (for `recommend --from`).",
            metavar="FILE",
        ),
    ] = None,
) -> None:
    """Parse and check every option before TensorFlow's slow import, pick the devices, run the
    engine with a progress bar, then save and print even a partial (Ctrl-C, SIGTERM) result; exit 1
    when any measurement failed."""
    from gputopo.bench.options import check_save_target, config_from_options

    from gputopo.sources import TopologyRequest

    devices = _devices_option(devices, old_gpus)
    config, wanted = config_from_options(
        gpus=devices, cpu_devices=cpu_devices, size=size, sizes=sizes, repeat=repeat, warmup=warmup,
        via_host=via_host, allreduce=allreduce, step_timeout_s=timeout, min_sample_ms=min_sample_ms,
    )  # fmt: skip
    if save is not None:
        check_save_target(save)
    topology = None
    request = TopologyRequest(from_files=tuple(from_files or ()), machine=machine)
    if request.names_a_source:
        from gputopo.analysis import topology_for

        topology = topology_for(request)

    from gputopo.bench.judgement import judge
    from gputopo.bench.run import open_devices, run_benchmark, save_measured_snapshot
    from gputopo.views import bench as view
    from gputopo.views.common import err, print_json

    setup = open_devices(cpu_devices, topology, wanted)
    plan = None
    if quick:
        from gputopo.bench.plan import quick_plan

        plan = quick_plan([d.index for d in setup.devices], setup.topology)
    with view.BenchProgressBar() as progress:
        result = run_benchmark(setup.tf, setup.devices, setup.device_kind, config, progress=progress, plan=plan,
                               concurrent=concurrent)
    result.notes[:0] = setup.notes

    # The figures are shown first: a save that fails (disk full) must not lose a long measurement.
    judged = judge(result, setup.topology)  # each pair rated once, for either rendering
    if json_output:
        print_json(view.bench_json(result, judged, setup.topology))
    else:
        view.render_bench(result, judged)
    if save is not None:
        updated = save_measured_snapshot(result, setup.topology, save)
        err().print(f"saved {updated} measured links to {save}", markup=False)
    _exit_for(result, save)


def _devices_option(devices: Optional[str], old_gpus: Optional[str]) -> Optional[str]:
    """``--devices``, or its deprecated name ``--gpus`` (a count everywhere else: recommend, train,
    report), said once on standard error."""
    if old_gpus is None:
        return devices
    if devices is not None:
        from gputopo.errors import InputError

        raise InputError("give the GPUs to measure once, with --devices (--gpus is its deprecated name)")
    typer.echo("gputopo: warning: bench-p2p --gpus LIST is deprecated: use --devices LIST "
               "(--gpus is a count in every other command)", err=True)
    return old_gpus


def _exit_for(result: "BenchResult", save: Optional[str]) -> None:
    """130/143 for a run stopped by Ctrl-C/SIGTERM, 1 where a measurement failed; else nothing."""
    saved = f" (saved to {save})" if save else ""
    if result.interrupted:  # 130 for Ctrl-C, 143 (128 + 15) for SIGTERM, as a shell reports them
        code = 128 + int(signal.Signals[result.stopped_by]) if result.stopped_by else 130
        raise fail(f"interrupted by {result.stopped_by or 'SIGINT'}: the results above are partial{saved}", code)
    failures = result.failures()
    if failures:
        from gputopo.errors import CheckFailed

        raise CheckFailed(
            f"{len(failures)} measurement{'s' if len(failures) != 1 else ''} failed (first: {failures[0]}); "
            f"the figures above are those that worked{saved}"
        )
