"""A PCIe link trained below what it can do, whoever read it (sysfs, NVML where sysfs does not
place the GPU, a pasted ``lspci -vv``): the one wording of ``pcie-link-narrow`` and
``pcie-link-slow-maybe-idle`` and the one way the GPUs and pairs behind a narrow link are marked.

A width below max is a fault: every copy through the link gets that fraction of the bandwidth. A
speed below max is only "maybe": idle GPUs lower their link speed to save power, so a speed read
once on an idle box says nothing until it is read again under load.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputopo.analysis.doctor_common import DoctorReport
from gputopo.model import Finding

UNDER_LOAD = ("check it under load: run `gputopo bench-p2p` (or any copy) and meanwhile "
              "`nvidia-smi -q -d PCIE` or `sudo lspci -vv -s {bdf} | grep LnkSta`")
# The pair-problem word recommend and report read (doctor_common.PAIR_PROBLEMS).
DOWNTRAINED = "downtrained"


def narrow_link(report: DoctorReport, who: str, current_width: int | None, max_width: int | None, *,
                below: list[str], affected: str, evidence: list[str],
                spared: Iterable[tuple[str, str]] = (), gpus: list[int] | None = None) -> None:
    """``pcie-link-narrow`` for the link of ``who`` (``x{current_width} of x{max_width}``).

    ``below``: the GPUs (bus ids) whose copies go through that link; each is marked downtrained,
    and so is every pair with one of them, except the ``spared`` pairs (NVLink pairs do not copy
    over PCIe). ``affected``: those GPUs as the words name them. ``gpus``: the finding's GPU
    indices where the bus ids do not give them (NVML's index of a GPU without a bus id)."""
    spared_pairs = {tuple(sorted(pair)) for pair in spared}
    for gpu in below:
        report.mark_gpu(gpu, DOWNTRAINED)
    known = sorted(report.gpus)
    for k, a in enumerate(known):
        for b in known[k + 1:]:
            if (a in below or b in below) and (a, b) not in spared_pairs:
                report.mark_pair(a, b, DOWNTRAINED)
    report.add(Finding(
        "warning", "pcie-link-narrow",
        f"The PCIe link of {who} runs at x{current_width} of x{max_width}: it trained narrower than it can "
        "(a riser, a slot wired with fewer lanes, chipset lanes, a bad seat); every copy through it gets that "
        "fraction of the bandwidth (tinygrad/open-gpu-kernel-modules#6).",
        gpus=report.indices(below) if gpus is None else gpus,
        evidence=evidence,
        effect=f"every copy to or from {affected}",
        fix="reseat the card, move it to a CPU-attached x16 slot (the board manual says which slots share lanes), "
            "check the riser and the BIOS slot bifurcation / link width settings"))


def slow_link_maybe_idle(report: DoctorReport, who: str, speed_now: str, speed_max: str, *,
                         gpus: list[int], evidence: list[str], bdf: str | None) -> None:
    """``pcie-link-slow-maybe-idle``: the link of ``who`` runs at ``speed_now`` of ``speed_max``
    (``Gen3 of Gen4``, with the widths where they are known); ``bdf`` is put in the command that
    checks it under load."""
    report.add(Finding(
        "info", "pcie-link-slow-maybe-idle",
        f"The PCIe link of {who} runs at {speed_now} of {speed_max}: GPUs lower their link speed when idle, "
        "so this may be normal; it is a fault only if it stays low under load.",
        gpus=gpus,
        evidence=evidence,
        fix=UNDER_LOAD.format(bdf=bdf or "<bdf>")))
