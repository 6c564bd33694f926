"""``gpu-slow-to-every-peer``: one GPU copies slower than the others to every peer, from any matrix
of measurements (p2pBandwidthLatencyTest, nvbandwidth, bench-p2p).

A pair's figure depends on its kind of link (PIX, NODE, SYS, NV#), so each of a GPU's pairs is
compared with the *other* GPUs' pairs of the same kind (their median: the GPU's own pairs never make
its yardstick). A GPU all of whose pairs fall below ``SLOW_RATIO`` of that yardstick is slow to
every peer: what its pairs share is the GPU itself, its own link and the port above it. Where the
tool also measured with P2P off (copies staged through host memory), those figures are used: they
do not cross a peer path, so ACS or the IOMMU on the way cannot explain them, the GPU's link can.
"""

from __future__ import annotations

from collections import defaultdict

from gputopo.analysis.expect.measured import staged_gbps
from gputopo.model import Finding, Link, Topology

SLOW_RATIO = 0.8  # every pair at most 80% of what the other GPUs' pairs of its kind copy
MIN_PEERS = 2  # a GPU judged on fewer measured pairs says too little


def _figures(link: Link, staged: bool) -> float | None:
    """The slower direction of ``link``'s copies: staged (P2P off: ``measured.staged_gbps``) or the
    headline figures (the two directions only: a bidirectional total says nothing of one GPU's side)."""
    m = link.measured
    if staged:
        return staged_gbps(m)
    if m is None or m.device_kind != "GPU":
        return None
    present = [v for v in (m.a_to_b_gbps, m.b_to_a_gbps) if v is not None and v > 0]
    return min(present) if present else None


def slow_gpu_findings(topology: Topology, measured: list[Link]) -> list[Finding]:
    """A finding per GPU slow to every peer (see the module docstring); ``measured``: the measured links."""
    if not measured:
        return []
    import statistics  # (here: most topologies have no measurement, and scan starts faster without it)

    staged = sum(_figures(link, True) is not None for link in measured) >= len(measured) / 2 > 0
    figures = {(link.a, link.b): (link.type, value) for link in measured
               if (value := _figures(link, staged)) is not None}
    by_kind: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    for (a, b), (kind, value) in figures.items():
        by_kind[kind].append((a, b, value))
    gpus = sorted({g for pair in figures for g in pair})
    if len(gpus) < MIN_PEERS + 1:
        return []
    findings = []
    for gpu in gpus:
        ratios: list[tuple[int, float, float]] = []  # (peer, figure, yardstick)
        for (a, b), (kind, value) in figures.items():
            if gpu not in (a, b):
                continue
            others = [v for x, y, v in by_kind[kind] if gpu not in (x, y)]
            if others:
                ratios.append((b if a == gpu else a, value, statistics.median(others)))
        if len(ratios) < MIN_PEERS or any(value > SLOW_RATIO * typical for _, value, typical in ratios):
            continue
        findings.append(_finding(gpu, ratios, staged))
    return findings if len(findings) < len(gpus) / 2 else []  # most GPUs "slow": the yardstick, not a GPU


def _finding(gpu: int, ratios: list[tuple[int, float, float]], staged: bool) -> Finding:
    import statistics

    mine = statistics.median(value for _, value, _ in ratios)
    typical = statistics.median(t for _, _, t in ratios)
    how = ("with P2P off (copies staged through host memory, which cross no peer path: not ACS or the IOMMU "
           "between GPUs)" if staged else "as measured (with P2P on, ACS or the IOMMU on the GPU's own path "
           "would slow its pairs too)")
    return Finding(
        "warning", "gpu-slow-to-every-peer",
        f"GPU {gpu} copies slower than the other GPUs to every peer: {mine:.1f} GB/s against ~{typical:.1f} for "
        f"the other GPUs' pairs of the same kinds ({len(ratios)} peers, median, {how}); what its pairs share is "
        f"GPU {gpu} itself: its own PCIe link (trained narrow or slow, a riser, a slot's lanes) or the port above it",
        gpus=[gpu],
        fix=f"read GPU {gpu}'s link while it copies: `nvidia-smi --query-gpu=index,pstate,pcie.link.gen.current,"
            f"pcie.link.width.current,pcie.link.width.max --format=csv -i {gpu} -l 1`, or `sudo gputopo doctor`; "
            "reseat it or move it to a CPU-attached x16 slot; leave it out of groups meanwhile",
    )


# Findings that explain a GPU slow to every peer: its own link trained narrow or slow, whichever door
# read it (scan's own code, or doctor's on a topology: ``doctor-`` before it).
_LINK_CAUSES = ("pcie-link-narrow", "pcie-link-slow")


def link_slow_gpu_causes(findings: list[Finding], others: list[Finding] = ()) -> list[tuple[Finding, Finding]]:
    """Each ``gpu-slow-to-every-peer`` that a finding on the GPU's own link explains (in ``findings``
    or ``others``) is ``caused_by`` it and says so; its fix is then that finding's. Returns the
    (finding, its cause) pairs joined."""
    causes = [f for f in (*findings, *others) if f.code.removeprefix("doctor-") in _LINK_CAUSES]
    joined = []
    for finding in findings:
        if finding.code != "gpu-slow-to-every-peer" or finding.caused_by is not None:
            continue
        cause = next((c for c in causes if set(finding.gpus) <= set(c.gpus)), None)
        if cause is not None:
            finding.caused_by = cause.code
            finding.message += f" ({cause.code} found that link: the cause)"
            finding.fix = f"see {cause.code}"
            joined.append((finding, cause))
    return joined
