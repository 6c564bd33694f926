"""``gputopo train --launcher ... --dry-run``: each task's plan and command, then the sbatch script."""

from __future__ import annotations

from rich.text import Text

from gputopo.train.launch.plan_file import Launch
from gputopo.views.common import out
from gputopo.views.train import render_plan


def render_launch(launch: Launch) -> None:
    """Every task the launcher would start (its plan entry applied), and for Slurm the batch script."""
    console = out()
    for task in launch.tasks:
        console.print(Text(f"{task.process.label}, from {launch.plan_file}", style="bold"))
        render_plan(task.plan, [task.process.to_dict()], task.process.config.strategy)
    if launch.script:
        console.print(Text("sbatch script (save it as train.sbatch and submit it with `sbatch train.sbatch`):", style="bold"))
        console.print(Text(launch.script.rstrip("\n")), soft_wrap=True)
