"""Output of `gputopo recommend`: rich text for people, and JSON / shell env / Python for pasting.

Thin on purpose: every figure and sentence comes from ``analysis.recommend``; this module only lays
them out. ``format_env`` and ``format_python`` return strings so they can be tested and written to
files as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gputopo.notation import count_word, format_gbps, gpus_word, number_list
from gputopo.quoting import comment, env_assignment, python_str
from gputopo.views.common import indented, labelled, out
from gputopo.views.vocabulary import UNKNOWN

if TYPE_CHECKING:
    from gputopo.analysis.recommend import GroupAdvice, Recommendation

FORMATS = ("text", "json", "env", "python")


def _gbps(value: float | None) -> str:
    return "-" if value is None else format_gbps(value)


def ring_summary(group: GroupAdvice) -> str:
    """``"ring 0-1-3-2-0, slowest hop NV1 ~ 20 GB/s"``; where the group's P2P is broken until a fix,
    both states: ``"... ~ 12 GB/s once P2P is fixed, ~9.9 today (NCCL_P2P_DISABLE=1, measured)"``."""
    summary = _ring_summary(group)
    today = group.allreduce_busbw_until_fixed_gbps
    if today is None or group.bottleneck_gbps is None:
        return summary
    hop = min(group.hops, key=lambda h: h.until_fixed_gbps or 0.0)
    if not group.p2p_disable_advised:  # broken pairs on the ring, but P2P as it is beats host memory
        how = "measured" if hop.until_fixed_basis == "measured" else "estimated"
        return f"{summary} once P2P is fixed; today ~{_gbps(today)} GB/s ({hop.label}, P2P as it is: {how})"
    how = "staged copies measured" if hop.until_fixed_basis == "measured" else "staged, estimated"
    return f"{summary} once P2P is fixed; today ~{_gbps(today)} GB/s ({hop.label}, NCCL_P2P_DISABLE=1: {how})"


def _ring_summary(group: GroupAdvice) -> str:
    if group.bottleneck_gbps is None:
        return "one GPU, no ring"
    slowest = min(group.hops, key=lambda h: h.gbps)
    word = "pair" if len(group.gpus) == 2 else "ring"
    if slowest.label.startswith("unknown") and slowest.basis == "measured":
        return f"{word} {group.ring_text}, slowest hop measured ~{_gbps(slowest.gbps)} GB/s (its link not in the source)"
    if slowest.label.startswith("unknown"):  # the source names no link type: the figure is an assumption
        return (f"{word} {group.ring_text}, slowest hop not known (~{_gbps(slowest.gbps)} GB/s assumed from "
                "what the source says of peer access)")
    if slowest.basis == "assumed":  # the low end of a range: say so, never a bare figure
        return f"{word} {group.ring_text}, slowest hop {slowest.label} >= ~{_gbps(slowest.gbps)} GB/s (generation not in the source)"
    return f"{word} {group.ring_text}, slowest hop {slowest.label} ~ {_gbps(slowest.gbps)} GB/s"


def strategy_line(group: GroupAdvice, renumbered: bool = True) -> str:
    """The ``tf.distribute.MirroredStrategy(...)`` line for a group."""
    devices = group.mirrored_strategy_devices if renumbered else group.mirrored_strategy_devices_all_visible
    if group.strategy == "MultiWorkerMirroredStrategy":
        return f"strategy = {group.cross_device_ops_code}"
    ops = f", cross_device_ops={group.cross_device_ops_code}" if group.cross_device_ops_code else ""
    return f"strategy = tf.distribute.MirroredStrategy(devices={devices!r}{ops})"


def launch_lines(group: GroupAdvice) -> list[str]:
    """The command line(s) that start training on a group: one, or one per host."""
    if not group.same_host:
        return [
            f"on {host}: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={local}"
            for host, local in (group.cuda_visible_devices_by_host or {}).items()
        ]
    prefix = f"{group.numactl} " if group.numactl else ""
    # In a multi-host topology a one-host group's command only works on that host: name it.
    where = f"on {group.hosts[0]}: " if group.hosts else ""
    env = " ".join(f"{name}={value}" for name, value in group.env.items())  # (NCCL_P2P_DISABLE too, where set)
    return [f"{where}{env} {prefix}python train.py"]


def placement(group: GroupAdvice) -> str:
    """Where a group's GPUs sit, in words: one socket, several NUMA nodes, or several hosts."""
    if not group.same_host:
        hosts = group.hosts or sorted((group.cuda_visible_devices_by_host or {}).keys())
        return f"spread over {len(hosts)} hosts ({', '.join(hosts)})"
    if group.numa_unknown_gpus:
        return (f"{count_word(group.numa_domains, 'NUMA node')} given; the NUMA node of "
                f"{gpus_word(group.numa_unknown_gpus)} is not in the source")
    if group.same_socket is None and group.numa_domains > 1:
        return f"{group.numa_domains} NUMA nodes; whether on one CPU socket, the source does not say"
    if group.same_socket is None:
        return "CPU socket not known (the source does not say which CPU or NUMA node each GPU is on)"
    if group.same_socket:
        return "one CPU socket" + (f", NUMA node {group.numa_node}" if group.numa_node is not None else "")
    if group.numa_domains > 1:
        return f"spread over {group.numa_domains} NUMA nodes / CPU sockets"
    return "spread over CPU sockets"  # the source crosses sockets but gives no NUMA nodes


def _paste(console: Console, line: str, style: str = "") -> None:
    """A line meant for copying: the terminal may wrap it, rich must not break it with newlines."""
    console.print(Text(line, style=style), soft_wrap=True)


def render_recommendation(rec: Recommendation) -> None:
    """The `recommend` screen: best group, ranked alternatives, paste-ready lines, jobs, notes."""
    console = out()
    _render_best(console, rec)
    console.print(_ranked_table(rec))
    for group in rec.groups:
        ring = f" ring {group.ring_text}" if group.bottleneck_gbps is not None else ""
        console.print(labelled(Text(f"#{group.rank}", style="dim"),
                               Text(f"{{{number_list(group.gpus)}}}{ring}: {group.reason}", style="dim"), indent=2))
    _render_paste_ready(console, rec.best)
    if rec.jobs_requested > 1:
        _render_jobs(console, rec)
    for note in rec.notes:
        console.print(labelled(Text("note:", style="cyan"), Text(note, style="cyan")))
    proof = "proven optimal" if rec.proven_optimal else "NOT proven optimal"
    console.print(labelled(Text("search:", style="dim"), Text(f"{rec.search} — {proof}", style="dim")))


def _render_best(console: Console, rec: Recommendation) -> None:
    """The best group: its GPUs, ring and all-reduce figure, where it sits and why."""
    best = rec.best
    title = rec.label or rec.source
    n = rec.gpus_per_group
    what = "Best GPU to train on" if n == 1 else f"Best {n} GPUs to train on together"
    console.print(Text(f"{what} — {title}", style="bold"))
    from gputopo.views.topology import speed_style

    # The group is bold, not green: green is for fast links, and the best group may be slow
    # (SYS on a two-socket box). Its ring is coloured by its slowest hop, as scan colours links.
    console.print(indented(
        Text.assemble(
            ("GPUs ", "bold"),
            (number_list(best.gpus), "bold"),
            ("   " + ring_summary(best), speed_style(best.bottleneck_gbps) if best.bottleneck_gbps is not None else ""),
            f"   all-reduce ~{_gbps(best.allreduce_gbps)} GB/s of gradients (one ring: a floor, NCCL may run more)"
            + (f"; today ~{_gbps(best.allreduce_until_fixed_gbps)} until P2P is fixed"
               if best.allreduce_until_fixed_gbps is not None else "")
            if best.allreduce_gbps else "",
        )
    ))
    console.print(indented(Text(f"{placement(best)}. Why: {best.reason}.")))
    if rec.interchangeable:
        alike = "every pair measured within the noise of the others" if rec.measurement_noise else "every pair has the same bandwidth"
        console.print(indented(Text(f"Any group of this size is as good for all-reduce ({alike}).", style="cyan")))



def _ranked_table(rec: Recommendation) -> Table:
    """Every ranked group: slowest hop, all-reduce, CPU side, cross-device ops."""
    # Narrow enough for 80 columns: the ring order (long, and unreadable when rich folds it mid-number)
    # is in the line under the table, and the cross-device op's name is never cut.
    table = Table(title="Ranked groups", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    # A short GPU list is never folded ("2,/3"); a long one folds, and the hop's words wrap instead.
    widest = max((len(number_list(group.gpus)) for group in rec.groups), default=4)
    table.add_column("GPUs", overflow="fold", min_width=min(widest, 15))
    table.add_column("slowest hop\nGB/s", min_width=12)
    table.add_column("all-reduce\nGB/s (1 ring)", justify="right", no_wrap=True)
    table.add_column("CPU", no_wrap=True)
    table.add_column("cross-device ops", no_wrap=True)
    for group in rec.groups:
        if group.bottleneck_gbps is None:
            hop = "-"
        else:
            slowest = min(group.hops, key=lambda h: h.gbps)
            hop = f"{UNKNOWN if slowest.label.startswith('unknown') else slowest.label} ~{_gbps(slowest.gbps)}"
        if group.same_socket is None:  # the sockets unknown: the NUMA nodes the source gives, else "?"
            where = f"{group.numa_domains} NUMA" if group.numa_domains > 1 and not group.numa_unknown_gpus else "?"
        else:
            where = "1 socket" if group.same_socket else ("hosts" if not group.same_host else "spread")
        table.add_row(
            str(group.rank),
            number_list(group.gpus),
            Text(hop),
            _gbps(group.allreduce_gbps),
            where,
            group.cross_device_ops or ("multi-worker NCCL" if group.strategy == "MultiWorkerMirroredStrategy" else "-"),
        )
    return table


def _render_paste_ready(console: Console, best: GroupAdvice) -> None:
    """The lines to paste for the best group: launch, strategy, cross-device ops."""
    console.print(Text("Paste-ready (best group):", style="bold"))
    for line in launch_lines(best):
        _paste(console, f"  {line}")
    if best.same_host and len(best.gpus) > 1:
        _paste(console, f"  {strategy_line(best)}")
        _paste(
            console,
            f"  # devices above go with CUDA_VISIBLE_DEVICES={best.cuda_visible_devices} (renumbered from /gpu:0);"
            f" with every GPU visible and only CUDA_DEVICE_ORDER=PCI_BUS_ID: devices="
            f"{best.mirrored_strategy_devices_all_visible!r}",
            style="dim",
        )
    elif not best.same_host:
        _paste(console, f"  {strategy_line(best)}")
    console.print(indented(Text(f"cross-device ops: {best.cross_device_ops or 'none'} — {best.cross_device_ops_reason}")))
    if best.p2p_caveat:
        console.print(indented(Text(f"caveat: {best.p2p_caveat}", style="yellow")))


def _render_jobs(console: Console, rec: Recommendation) -> None:
    """``--jobs N``: the disjoint groups and each one's launch lines."""
    jobs = Table(title=f"{rec.jobs_requested} concurrent jobs (fair: the worst group as good as possible)",
                 box=box.SIMPLE_HEAD, title_justify="left")
    jobs.add_column("job", justify="right", no_wrap=True)
    jobs.add_column("GPUs", overflow="fold")
    jobs.add_column("ring, slowest hop")
    for group in rec.jobs:
        jobs.add_row(str(group.rank), number_list(group.gpus), Text(ring_summary(group)))
    console.print(jobs)
    for group in rec.jobs:
        for line in launch_lines(group):
            _paste(console, f"  job {group.rank}: {line}")
    if not rec.jobs_proven_optimal:
        console.print(indented(Text("The job split was found greedily and is not proven the fairest.", style="yellow")))


def format_env(rec: Recommendation) -> str:
    """Lines a POSIX shell can ``eval``: the best group's environment (and the other jobs' groups as
    ``CUDA_VISIBLE_DEVICES_JOB<n>`` variables). Every value is one quoted word and every text from
    the source stays inside its comment (``gputopo.quoting``)."""
    best = rec.jobs[0] if rec.jobs_requested > 1 else rec.best
    lines = [comment(f"gputopo recommend: GPUs {number_list(best.gpus)} — {ring_summary(best)}")]
    if best.same_host and best.cuda_visible_devices != number_list(best.gpus) and not best.hosts:
        lines.append(comment(
            f"(GPU numbers above are the source's; in PCI bus order, as CUDA_DEVICE_ORDER=PCI_BUS_ID numbers "
            f"them, they are {best.cuda_visible_devices})"
        ))
    if best.same_host and best.hosts:
        lines.append(comment(f"on {best.hosts[0]}"))
    lines.append(env_assignment("CUDA_DEVICE_ORDER", "PCI_BUS_ID"))
    if best.same_host:
        lines.append(env_assignment("CUDA_VISIBLE_DEVICES", best.cuda_visible_devices))
        if best.numactl:
            lines.append(env_assignment("GPUTOPO_NUMACTL", best.numactl))
        if best.p2p_disable_advised:
            lines.append(comment("until P2P is fixed (the caveat says why; gputopo doctor): NCCL through host memory"))
            lines.append(env_assignment("NCCL_P2P_DISABLE", "1"))
    else:
        for host, local in (best.cuda_visible_devices_by_host or {}).items():
            lines.append(comment(f"on {host}: export CUDA_VISIBLE_DEVICES={local}"))
    if rec.jobs_requested > 1:
        for group in rec.jobs:
            if group.same_host:
                if group.hosts:  # a multi-host topology: the variable is for that host only
                    lines.append(comment(f"job {group.rank} runs on {group.hosts[0]}"))
                lines.append(env_assignment(f"CUDA_VISIBLE_DEVICES_JOB{group.rank}", group.cuda_visible_devices))
    return "\n".join(lines) + "\n"


def format_python(rec: Recommendation) -> str:
    """A MirroredStrategy snippet for the best group, to paste at the top of a training script."""
    best = rec.best
    lines = [
        comment(f"gputopo recommend: GPUs {number_list(best.gpus)} — {ring_summary(best)}"),
        "import os",
        "",
        "# Must run before TensorFlow is imported: CUDA reads these once.",
        'os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # number GPUs as nvidia-smi does',
    ]
    if not best.same_host:
        lines.append("# This group spans hosts; on each host set CUDA_VISIBLE_DEVICES to:")
        for host, local in (best.cuda_visible_devices_by_host or {}).items():
            lines.append(comment(f"  {host}: {local}"))
        lines += ["", "import tensorflow as tf", "", strategy_line(best)]
        return "\n".join(lines) + "\n"
    lines.append(f'os.environ["CUDA_VISIBLE_DEVICES"] = {python_str(best.cuda_visible_devices)}  # CUDA renumbers these /gpu:0..')
    if best.numactl:  # a binding is made before Python starts: say how to start it
        lines.append(comment(f"Start this script bound next to the GPUs: {best.numactl} python train.py"))
    lines += ["", "import tensorflow as tf", ""]
    if len(best.gpus) == 1:
        lines.append('strategy = tf.distribute.OneDeviceStrategy("/gpu:0")  # one GPU: nothing to all-reduce')
        return "\n".join(lines) + "\n"
    lines.append(comment(f"{best.cross_device_ops or best.strategy}: {best.cross_device_ops_reason}"))
    lines.append(comment(
        f"Without CUDA_VISIBLE_DEVICES (all GPUs visible) the devices are {best.mirrored_strategy_devices_all_visible!r}"
    ))
    lines.append(strategy_line(best))
    return "\n".join(lines) + "\n"
