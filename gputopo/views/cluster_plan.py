"""`gputopo recommend` with several ``--from``: the multi-host plan as tables, as shell ``export``
blocks (one per host) or as an sbatch script that launches ``gputopo train --launcher slurm``."""

from __future__ import annotations

import json

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gputopo.analysis.recommend.hosts import ClusterPlan, HostPlan
from gputopo.notation import count_word, gpus_word
from gputopo.quoting import comment, env_assignment
from gputopo.views.common import out

PLAN_FORMATS = ("text", "json", "env", "slurm")
DEFAULT_PLAN_FILE = "plan.json"


def _role(plan: HostPlan) -> str:
    return f"worker {plan.task_index}" + (", the chief" if plan.task_index == 0 else "")


def _nics_text(plan: HostPlan) -> str:
    """``one per GPU, PXB: mlx5_10 ... mlx5_17`` where each GPU has its own NIC, else each NIC."""
    names, paths = [nic.name for nic in plan.nics], {nic.path for nic in plan.nics}
    one_each = all(len(nic.gpus) == 1 for nic in plan.nics) and len(set(names)) == len(names) == len(plan.gpus)
    if len(plan.nics) > 2 and one_each and len(paths) == 1:
        return f"one per GPU, {paths.pop()}: {names[0]} ... {names[-1]}"
    return "; ".join(f"{nic.name}{f' ({nic.netdev})' if nic.netdev else ''} {nic.path}: {gpus_word(nic.gpus)}"
                     for nic in plan.nics) or "none shown"


def render_plan(plan: ClusterPlan, console: Console | None = None, saved: str | None = None) -> None:
    console = console or out()
    table = Table(title=f"{count_word(len(plan.hosts), 'host')} x {count_word(plan.gpus_per_host, 'GPU')} "
                        f"= {count_word(plan.gpus, 'GPU')}, one worker per host",
                  box=box.SIMPLE_HEAD, title_justify="left")
    renumbered = any(",".join(map(str, host.gpus)) != host.cuda_visible_devices for host in plan.hosts)
    columns = ["host", "worker", *(["GPUs"] if renumbered else []), "CUDA_VISIBLE_DEVICES", "numactl", "NICs (path: GPUs)"]
    for column in columns:
        table.add_column(column, overflow="fold")
    for host in plan.hosts:
        gpus = [",".join(map(str, host.gpus))] if renumbered else []
        # Text, never markup strings: a snapshot's "[/x]" or "[link=...]" is shown as it is.
        table.add_row(Text(host.host, style="bold"), _role(host), *map(Text, gpus), Text(host.cuda_visible_devices),
                      Text(" ".join(host.numactl) or "none"), Text(_nics_text(host)))
    console.print(table)
    for host in plan.hosts:
        console.print(Text(f"{host.host} ({_role(host)})", style="bold"))
        for name, value in host.env.items():
            console.print(Text(f"  {name}={value}"))
        console.print(Text(f"  TF_CONFIG={json.dumps(host.tf_config)}"))
        for warning in host.warnings:
            console.print(Text(f"  warning: {warning}", style="yellow"))
    console.print(Text(f"why: {plan.reason}"))
    from gputopo.quoting import shell_word

    # After --save the plan is saved: say where it goes next, not to save it.
    first = (f"saved as {saved}: each host trains its part with `gputopo train --launcher slurm|tf-config --plan "
             f"{shell_word(saved, 'the plan file')}`" if saved else "save it with --save plan.json for `gputopo train --plan`")
    console.print(Text(f"{first}; --format env or --format slurm print it for shells and sbatch", style="dim"))


def format_plan_env(plan: ClusterPlan) -> str:
    """One block per host: ``# node1 ...`` and the ``export`` lines to run there (``gputopo.quoting``:
    names checked, values quoted, text from the snapshots kept inside its comment)."""
    lines = [comment(f"gputopo recommend: {plan.reason}")]
    for host in plan.hosts:
        lines.append(comment(f"{host.host} ({_role(host)}): GPUs {','.join(map(str, host.gpus))}"))
        lines += [env_assignment(name, value) for name, value in host.env.items()]
        lines.append(env_assignment("TF_CONFIG", json.dumps(host.tf_config)))
        if host.numactl:
            lines.append(env_assignment("GPUTOPO_NUMACTL", " ".join(host.numactl)))
        lines += [comment(f"warning: {warning}") for warning in host.warnings]
    return "\n".join(lines) + "\n"


def format_plan_slurm(plan: ClusterPlan, plan_file: str | None = None) -> str:
    """An sbatch script for the plan (``gputopo.train.launch.slurm.batch_script``, the one ``train --launcher
    slurm --dry-run`` prints too): the planned nodes, one task per node with every GPU of the node
    (the plan picks GPUs by their nvidia-smi numbers; a partial allocation would be renumbered), and
    ``srun gputopo train --launcher slurm --plan FILE`` passing the script's arguments on."""
    from gputopo.train.launch.slurm import batch_script

    path = plan_file or DEFAULT_PLAN_FILE
    gpus_per_node = max(host.host_gpus or len(host.gpus) for host in plan.hosts)
    notes = [
        f"gputopo recommend: {plan.reason}",
        f"Save the plan next to this script (`gputopo recommend ... --save {path}`), on a folder every node",
        "reads: each task applies its host's part (GPUs, numactl, NCCL) before TensorFlow starts.",
    ]
    if plan.gpus_per_host < gpus_per_node:
        notes.append(f"Every GPU of a node is asked for; the plan trains on {plan.gpus_per_host} of them on each.")
    return batch_script({host.host: 1 for host in plan.hosts}, gpus_per_node, notes,
                        ["gputopo", "train", "--launcher", "slurm", "--plan", path], pass_script_args=True)
