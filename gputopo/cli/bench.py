"""`gputopo bench-p2p`: measure copy bandwidth and latency between devices with TensorFlow."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from typing_extensions import Annotated

from gputopo.cli import FromOption, JsonOption, MachineOption, command, fail
from gputopo.notation import format_size
from gputopo.tf.bench_options import (
    DEFAULT_MIN_SAMPLE_S,
    DEFAULT_REPEAT,
    DEFAULT_SIZE_BYTES,
    DEFAULT_STEP_TIMEOUT_S,
    DEFAULT_WARMUP,
)

_HELP = (
    "Measure GPU-to-GPU copy bandwidth (one way and both ways), latency and all-reduce with TensorFlow."
    "\n\nGPU numbers follow nvidia-smi (PCI bus order): CUDA_DEVICE_ORDER=PCI_BUS_ID is set for TensorFlow "
    "unless you set it yourself. With --cpu-devices N the figures are host memory, not GPUs. "
    "See docs/bench-p2p.md."
)


@command("bench-p2p", help=_HELP)
def bench_p2p(
    gpus: Annotated[
        Optional[str],
        typer.Option("--gpus", help="GPUs to measure, as nvidia-smi numbers them (e.g. 0,2,3 or 0-3). Default: all."),
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
        typer.Option("--size", help=f"Message size, e.g. 4KB, 1GiB (default {format_size(DEFAULT_SIZE_BYTES)})."),
    ] = None,
    sizes: Annotated[
        Optional[str],
        typer.Option(
            "--sizes", help="Sweep sizes: FIRST:LAST[:FACTOR] (e.g. 1KiB:1GiB, doubling) or a list 4KiB,64MiB."
        ),
    ] = None,
    repeat: Annotated[
        int, typer.Option("--repeat", help="Timed samples per figure; the median is reported.")
    ] = DEFAULT_REPEAT,
    warmup: Annotated[int, typer.Option("--warmup", help="Untimed runs before the samples.")] = DEFAULT_WARMUP,
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
        float, typer.Option("--timeout", help="Seconds before a step (one pair, one size) is declared hung.")
    ] = DEFAULT_STEP_TIMEOUT_S,
    min_sample_ms: Annotated[
        float, typer.Option("--min-sample-ms", help="Each timed sample repeats the copy until it lasts this long.")
    ] = DEFAULT_MIN_SAMPLE_S * 1000,
    from_file: FromOption = None,
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
    engine with a progress bar, then save and print even a partial (Ctrl-C) result."""
    from gputopo.errors import GputopoError, InputError
    from gputopo.notation import parse_gpu_list, parse_size, parse_size_sweep

    # Everything the user typed is checked before TensorFlow's multi-second import.
    if size is not None and sizes is not None:
        raise InputError("give either --size or --sizes, not both")
    if cpu_devices is not None and cpu_devices < 1:
        raise InputError(f"--cpu-devices must be at least 1, got {cpu_devices}")
    if not 0 < min_sample_ms < float("inf"):
        raise InputError(f"--min-sample-ms must be a positive number of milliseconds, got {min_sample_ms}")
    from gputopo.tf.bench import BenchConfig

    sizes_bytes = parse_size_sweep(sizes) if sizes is not None else [parse_size(size) if size else DEFAULT_SIZE_BYTES]
    wanted = parse_gpu_list(gpus) if gpus is not None else None
    config = BenchConfig(
        sizes_bytes=sizes_bytes,
        repeat=repeat,
        warmup=warmup,
        via_host=via_host,
        allreduce=allreduce,
        min_sample_s=min_sample_ms / 1000.0,
        step_timeout_s=timeout,
    )
    config.validate()
    if save is not None:  # refused now, not after a measurement that may take many minutes
        folder = Path(save).parent
        if not folder.is_dir():
            raise InputError(f"cannot write {save}: folder {folder} does not exist")
        if Path(save).is_dir():
            raise InputError(f"cannot write {save}: it is a folder; give a file name")
    topology = None
    if from_file or machine:
        from gputopo.analysis import with_findings
        from gputopo.sources import load_topology

        topology = with_findings(load_topology(from_file=from_file, machine=machine))

    from gputopo.tf import bench as engine
    from gputopo.tf.devices import configure_logical_cpu_devices, import_tensorflow

    engine.prepare_environment()
    tf = import_tensorflow()
    notes: list[str] = []
    if cpu_devices is not None:
        kind = "CPU"
        devices = engine.cpu_bench_devices(configure_logical_cpu_devices(cpu_devices), topology)
    else:
        kind = "GPU"
        tf_gpus = engine.tf_gpus_with_bus_ids(tf)
        if not tf_gpus:
            raise InputError("TensorFlow sees no GPU here; use --cpu-devices N to measure N logical CPU devices")
        if topology is None:
            from gputopo.analysis import with_findings
            from gputopo.sources import load_topology

            try:
                topology = with_findings(load_topology())
            except GputopoError as exc:
                notes.append(f"no topology to compare with ({exc})")
        devices, join_notes = engine.map_gpus(tf_gpus, topology)
        notes.extend(join_notes)
    devices = engine.choose_devices(devices, wanted)

    from gputopo.views import bench as view
    from gputopo.views.common import err, print_json

    with view.BenchProgressBar() as progress:
        result = engine.run_benchmark(tf, devices, kind, config, progress=progress)
    result.notes[:0] = notes

    # The figures are shown first: a save that fails (disk full) must not lose a long measurement.
    if json_output:
        print_json(view.bench_json(result, topology))
    else:
        view.render_bench(result, topology)
    if save is not None:
        import copy

        from gputopo.sources.snapshot import save_snapshot
        from gputopo.tf.bench_results import apply_measurements, placeholder_topology

        snapshot = copy.deepcopy(topology) if topology is not None else placeholder_topology(result)
        updated = apply_measurements(snapshot, result)
        save_snapshot(snapshot, save)
        err().print(f"saved {len(updated)} measured links to {save}", markup=False)
    if result.interrupted:
        raise fail("interrupted: the results above are partial" + (f" (saved to {save})" if save else ""), 130)
