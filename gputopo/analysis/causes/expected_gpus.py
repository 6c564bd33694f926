"""``--expect-gpus N`` (scan, doctor): a node that shows fewer GPUs than it should is a fault.

A GPU that fell off the bus, a driver that did not load, or a node booted without its GPUs shows
no finding about its links: there are no links left to judge. So a Slurm prolog has to say how many
GPUs it expects. Without ``--expect-gpus`` the count comes from Slurm's environment where there is
one: ``SLURM_JOB_GPUS`` (the GPU ids of the job on this node: set for the Prolog and Epilog run by
slurmd, and for the job), else ``SLURM_GPUS_ON_NODE`` (set in a job and its steps), else, inside a
job (``SLURM_JOB_ID`` set), ``CUDA_VISIBLE_DEVICES``. Outside Slurm nothing is expected.

NVML numbers every GPU of the node whatever ``CUDA_VISIBLE_DEVICES`` says, so "visible" is what
NVML (or, for saved evidence, the driver's list or ``nvidia-smi topo -m``) shows: a job given 2 of
8 GPUs expects 2, and a node showing 7 passes it; give ``--expect-gpus 8`` to check the whole node.
"""

from __future__ import annotations

from typing import Mapping

from gputopo.model import Finding

CODE = "gpus-missing"
# In the order they are asked: the first set decides.
SLURM_VARIABLES = ("SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE")
_FIX = ("check `nvidia-smi` and `dmesg` (Xid 79: fallen off the bus; NVRM errors at load), that the driver "
        "and its modules are loaded (`lsmod | grep nvidia`), and reseat or replace the GPU; until then, drain the "
        "node (`scontrol update nodename=$(hostname -s) state=drain reason=gpus-missing`)")


def expected_from_env(env: Mapping[str, str]) -> tuple[int, str] | None:
    """(GPUs expected, the variable that says so) from Slurm's environment; None outside Slurm."""
    for name in SLURM_VARIABLES:
        count = _count(env.get(name), name == "SLURM_GPUS_ON_NODE")
        if count:
            return count, f"{name}={env[name]}"
    if env.get("SLURM_JOB_ID"):
        count = _count(env.get("CUDA_VISIBLE_DEVICES"), False)
        if count:
            return count, f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} in Slurm job {env['SLURM_JOB_ID']}"
    return None


def _small_number(text: str) -> int | None:
    """``text`` as a number where it is ASCII digits short enough to be a GPU count or id (a variable
    of thousands of digits made ``int`` raise past Python's 4,300-digit limit: a traceback)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def _count(value: str | None, is_number: bool) -> int | None:
    """A count (``SLURM_GPUS_ON_NODE=8``) or a list's length (``0,1,2,3``, ``0-3``, UUIDs)."""
    value = (value or "").strip()
    if not value or value in ("-1", "NoDevFiles"):
        return None
    if is_number:
        return number if (number := _small_number(value)) is not None and number <= 4096 else None
    count = 0
    for item in value.split(","):
        first, dash, last = item.strip().partition("-")
        low, high = _small_number(first), _small_number(last)
        if dash and low is not None and high is not None:
            count += max(0, high - low + 1)  # Slurm writes ranges in some versions: 0-3
        elif dash and first.isascii() and first.isdigit() and last.isascii() and last.isdigit():
            return None  # a range past any machine's GPUs
        elif item.strip():
            count += 1
    return count if 0 < count <= 4096 else None


def expected_gpus_findings(visible: int | None, expected: int, why: str, where: str = "",
                           unseen: str | None = None) -> list[Finding]:
    """One ``gpus-missing`` fault where fewer than ``expected`` GPUs are visible (``why``: what set
    the expectation; ``unseen``: why none could be seen, e.g. NVML's error); none where enough are.
    ``visible`` None: not counted (saved evidence that shows no GPU list) said as a note."""
    if visible is None:
        return [Finding("info", "gpus-not-counted",
                        f"the visible GPUs cannot be counted{where} ({why}): the GPU count was not checked")]
    if visible >= expected:
        return []
    because = f" ({unseen})" if unseen and visible == 0 else ""
    return [Finding("error", CODE,
                    f"{visible} GPU{'s' if visible != 1 else ''} visible, {expected} expected{where}{because}: "
                    f"expected by {why}; a job placed here gets fewer GPUs than it asked for, or none",
                    fix=_FIX)]


def visible_in_evidence(evidence) -> tuple[int | None, str | None]:
    """(GPUs ``doctor``'s evidence shows, why none where NVML failed): NVML's GPUs where it was
    read; none where it was asked and failed (no driver); else a gathered archive's ``topo -m``,
    else the driver's GPU list (``/proc/driver/nvidia/gpus``); None where nothing tells."""
    if evidence.nvml is not None:
        return len(evidence.nvml.gpus), None
    if evidence.nvml_unavailable:
        return 0, f"NVML: {evidence.nvml_unavailable}"
    if evidence.topology is not None:
        return len(evidence.topology.gpus), None
    driver = evidence.host.driver_gpus if evidence.host is not None else None
    return (len(driver), None) if driver is not None else (None, None)
