"""Findings from what tools measured and observed, checked against the topology:

- ``measured-below-expected``: a pair copies far below what its link type gives ("GPU 2->5: 9.9
  GB/s, 40% of what PIX over PCIe Gen4 x16 gives"); only where the link type is known;
- ``p2p-slower-than-staged``: with P2P on, a pair copies slower than the same tool measured with P2P
  off (through host memory): P2P hurts there (ACS, IOMMU, a bad switch);
- ``measured-above-card-line-rate`` (info, a note): a copy above what the cards' own PCIe generation carries,
  that generation inferred from their names, not read; ``measured-above-line-rate`` stays for figures above
  the line rate of what the source read (or, unread, of the highest generation): those are impossible;
- ``pcie-path-narrow``: a pair whose link type the source does not give copies below what one PCIe
  Gen3 x16 link carries both with P2P and staged through host memory: a narrow or slow link on the
  path (x4/x8 slot, chipset lanes, a riser), not P2P;
- ``gpu-slow-to-every-peer``: one GPU copies slower than the others to every peer (``slow_gpu_findings``);
- ``nccl-not-p2p``: NCCL connected two GPUs of one host through SHM or the network although the
  topology says they can peer (NVLink, or P2P ok), naming the setting that explains it where the
  log shows one (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL);
- ``nccl-shm-between-gpus``: NCCL connected GPUs of one host through host memory where the topology
  does not say they can peer, with the cause the link between them points to (``nccl_paths``);
- ``nccl-p2p-refused``: NCCL logged that CUDA refused P2P between GPUs it considers connected;
- ``nccl-p2p-ipc-failed``: NCCL set up a P2P connection and CUDA would not open the peer's memory
  (``failed to open CUDA IPC handle``): the job stops there, it does not fall back;
- ``nccl-p2p-off-by-setting``: the log shows P2P turned off by the environment (NCCL_P2P_DISABLE,
  NCCL_P2P_LEVEL=LOC) and no connection line that says more (an info);
- ``nvlink-inactive``: links ``nvidia-smi nvlink`` shows ``<inactive>``, a warning where the topology
  says the GPU should have more active links than it has (worded in ``nvlink``, for every door);
- ``collective-wrong-results``: nccl-tests counted wrong results (#wrong) or out-of-bounds values;
- ``collective-busbw-vs-ring`` / ``collective-busbw-vs-pcie``: what a run's busbw says of the links
  (``collective_findings``).
"""

from __future__ import annotations

from gputopo.analysis.causes.collective_findings import collective_findings
from gputopo.analysis.causes.nccl_paths import host_memory_findings, refused_pairs
from gputopo.analysis.causes.nvlink import nvlink_inactive_findings
from gputopo.analysis.causes.pcie_findings import LINK_QUERY
from gputopo.analysis.causes.slow_gpu_findings import slow_gpu_findings
from gputopo.analysis.expect.bandwidth import card_generation, pcie_generation
from gputopo.analysis.expect.measured import (
    FAR_BELOW_RATIO,
    Comparison,
    compare,
    measured_gbps,
    measured_links,
    p2p_slower_than_staged,
)
from gputopo.analysis.place.locality import pcie_path
from gputopo.model import P2P_OK, Finding, Link, Topology
from gputopo.notation import count_word

# Staged (P2P off) copies below this, per direction, are under what one PCIe Gen3 x16 link carries
# (~10-12 GB/s staged): the path has a narrow or slow link; P2P within this factor of it does not help.
NARROW_STAGED_GBPS = 8.0
NARROW_P2P_FACTOR = 1.3  # P2P no more than 30% above staged: P2P does not help either


def observed_findings(topology: Topology) -> list[Finding]:
    """Every finding above that ``topology`` gives reason for."""
    measured = measured_links(topology)  # (looked for once: a domain's links are many, its measured ones few)
    compared = [c for link in measured for c in compare(topology, link)]  # = comparisons(topology)
    return [
        *_below_expected(compared),
        *_above_line_rate(compared),
        *_above_card_line_rate(compared, topology),
        *_p2p_slower(measured, topology),
        *_narrow_path(topology, measured),
        *slow_gpu_findings(topology, measured),
        *(_nccl_transports(topology) + host_memory_findings(topology) or _nccl_p2p_off(topology)),
        *_nccl_refused(topology),
        *_nccl_ipc_failed(topology),
        *nvlink_inactive_findings(topology),
        *_collective_errors(topology),
        *collective_findings(topology),
    ]


def _below_expected(compared: list[Comparison]) -> list[Finding]:
    slow = [c for c in compared if c.ratio < FAR_BELOW_RATIO]
    if not slow:
        return []
    shown = "; ".join(c.text() for c in slow[:6]) + (f"; and {len(slow) - 6} more" if len(slow) > 6 else "")
    gpus = sorted({g for c in slow for g in (c.src, c.dst)})
    return [Finding(
        "warning", "measured-below-expected",
        f"{count_word(len(slow), 'direction')} measured far below what the link gives: {shown}",
        gpus=gpus,
        fix="check the PCIe link width/speed under load, ACS and IOMMU on the path (`gputopo doctor`), "
            "and measure again with `gputopo bench-p2p`",
    )]


def _above_line_rate(compared: list[Comparison]) -> list[Finding]:
    """Copies measured faster than the link can carry (cuda-samples#390 reported such figures):
    the bytes did not cross that link, or the figure is misread."""
    fast = [c for c in compared if c.above_line_rate]
    if not fast:
        return []
    shown = "; ".join(f"GPU {c.src}\u2192{c.dst}: {c.measured_gbps:.1f} GB/s over {c.link_type}, whose line rate is "
                      f"{c.line_rate_gbps:.0f} GB/s ({c.method})" for c in fast[:6])
    more = f"; and {len(fast) - 6} more" if len(fast) > 6 else ""
    return [Finding(
        "warning", "measured-above-line-rate",
        f"{count_word(len(fast), 'direction')} measured faster than the link can carry: {shown}{more}; those bytes "
        "did not cross that link (a zero-copy or cached copy, a clock error, or a misread unit)",
        gpus=sorted({g for c in fast for g in (c.src, c.dst)}),
        fix="check the bytes, not only the speed: `gputopo bench-p2p` compares every copy's destination with its source",
    )]


def _above_card_line_rate(compared: list[Comparison], topology: Topology) -> list[Finding]:
    """Copies above what the cards' own PCIe generation carries, where that generation is inferred from
    their names (the source reads none): a note, not ``measured-above-line-rate``. The name gives the most
    the card's link trains to, but it is read from a name, not from the link: a figure above it is either
    not what crossed the link or a card the name table gets wrong; only the link's reading can tell."""
    fast = [c for c in compared if c.above_card_line_rate]
    if not fast:
        return []
    cards = "; ".join(dict.fromkeys(
        f"{gpu.name} is a Gen{gen} card" for c in fast for g in (c.src, c.dst)
        if (gpu := topology.gpu(g)) is not None and (gen := card_generation(gpu)) is not None))
    shown = "; ".join(f"GPU {c.src}\u2192{c.dst}: {c.measured_gbps:.1f} GB/s over {c.link_type}, above the "
                      f"~{c.card_line_rate[0]:.0f} GB/s a Gen{c.card_line_rate[1]} card's link carries ({c.method})"  # type: ignore[index]
                      for c in fast[:6])
    more = f"; and {len(fast) - 6} more" if len(fast) > 6 else ""
    return [Finding(
        "info", "measured-above-card-line-rate",
        f"{count_word(len(fast), 'direction')} measured above what the cards' own PCIe generation carries: {shown}{more}. "
        f"The card's generation is inferred from its name ({cards}); the source reads no link generation. If the "
        "cards are what their names say, those bytes did not cross that link (a zero-copy or cached copy, a clock "
        "error, a misread unit); if the figure is right, the link runs faster than the name gives",
        gpus=sorted({g for c in fast for g in (c.src, c.dst)}),
        fix=f"read the links' generation and width (`{LINK_QUERY}`) and check the bytes, not only the speed: "
            "`gputopo bench-p2p` compares every copy's destination with its source",
    )]


# What makes P2P slower than staged copies where doctor found it (the root cause first).
P2P_CAUSES = ("doctor-iommu-translating", "doctor-acs-redirect")


def _p2p_slower(measured: list[Link], topology: Topology) -> list[Finding]:
    """One finding for every pair that copies slower with P2P on than staged through host memory."""
    slow: list[tuple[int, int, float, float, str]] = []
    for link in measured:
        broken = p2p_slower_than_staged(link)  # (the rule recommend also sets such figures aside by)
        if broken is not None:
            slow.append((link.a, link.b, *broken, link.measured.method or "bench-p2p"))
    if not slow:
        return []
    shown = "; ".join(f"{a}-{b} {on:.1f} vs {off:.1f}" for a, b, on, off, _ in slow[:6])
    more = f"; and {len(slow) - 6} more" if len(slow) > 6 else ""
    methods = ", ".join(sorted({method for *_, method in slow}))
    return [Finding(
        "warning", "p2p-slower-than-staged",
        f"{count_word(len(slow), 'GPU pair')} {'copies' if len(slow) == 1 else 'copy'} slower with P2P on than with P2P off (staged through host "
        f"memory), GB/s measured by the same test ({methods}): {shown}{more}: P2P slows these pairs down",
        gpus=sorted({g for a, b, *_ in slow for g in (a, b)}),
        fix=_p2p_slower_fix(topology, [(a, b) for a, b, *_ in slow]),
        caused_by=next((code for code in P2P_CAUSES if any(f.code == code for f in topology.diagnostics)), None),
    )]


def _p2p_slower_fix(topology: Topology, pairs: list[tuple[int, int]]) -> str:
    """ACS or the IOMMU for every such pair; for pairs across the CPU's host bridge, also the root
    complex's own peer forwarding, which some CPUs do slower than host copies by design."""
    links = topology.link_map()
    paths = [pcie_path(links[(min(a, b), max(a, b))]) for a, b in pairs]
    across = [pair for pair, path in zip(pairs, paths) if path in ("PHB", "NODE", "SYS")]
    platform = ("the root complex itself may forward peer traffic slower than host copies (some Xeon and EPYC "
                "generations do), a limit of the platform no setting removes: NCCL's default P2P level already "
                "sends such pairs through host memory")
    if across:
        shown = ", ".join(f"{a}-{b}" for a, b in across[:6]) + (", ..." if len(across) > 6 else "")
        platform = f"; {shown} cross{'es' if len(across) == 1 else ''} the CPU's host bridge, where {platform}"
    elif None in paths:
        platform = (f"; where a pair crosses the CPU's host bridge (PHB, NODE or SYS in `nvidia-smi topo -m`; this "
                    f"source does not say), {platform}")
    else:
        platform = ""
    return ("P2P slower than host copies points at ACS or the IOMMU redirecting peer traffic through the root "
            f"complex: check `sudo lspci -vvv | grep ACSCtl` and the kernel's iommu= setting{platform}; meanwhile "
            "NCCL_P2P_DISABLE=1 is faster for these pairs (not for pairs whose P2P copies are fast)")


def _narrow_path(topology: Topology, measured: list[Link]) -> list[Finding]:
    """Pairs of unknown link type slow both ways (P2P on and off): the path, not P2P (tinygrad#44).
    A pair ``p2p-slower-than-staged`` names is left to it: there P2P is the cause."""
    slow: list[tuple[int, int, float, float]] = []
    assumed = False
    gpus = {gpu.index: gpu for gpu in topology.gpus}
    for link in measured:
        m = link.measured
        if link.type != "UNKNOWN" or m.p2p_enabled is not True:
            continue
        on = measured_gbps(link)
        off = [v for v in (m.p2p_off_a_to_b_gbps, m.p2p_off_b_to_a_gbps) if v is not None and v > 0]
        if on is None or not off or p2p_slower_than_staged(link) is not None:
            continue
        gens = [pcie_generation(gpus.get(g)) for g in (link.a, link.b)]
        if any(gen is not None and gen < 3 for gen in gens):
            continue  # a Gen2 (or older) link carries about this much: slow is normal there
        if max(off) < NARROW_STAGED_GBPS and on < NARROW_P2P_FACTOR * max(off):
            slow.append((link.a, link.b, on, max(off)))
            assumed = assumed or None in gens
    if not slow:
        return []
    basis = ("assuming PCIe Gen3 or newer (the source does not give the GPUs' PCIe generation; on a Gen2 card "
             "such figures are normal)" if assumed else "the GPUs' links are PCIe Gen3 or newer")
    shown = "; ".join(f"{a}-{b} {on:.1f} with P2P, {off:.1f} without" for a, b, on, off in slow[:6])
    more = f"; and {len(slow) - 6} more" if len(slow) > 6 else ""
    return [Finding(
        "warning", "pcie-path-narrow",
        f"{count_word(len(slow), 'GPU pair')} {'copies' if len(slow) == 1 else 'copy'} slowly both ways (GB/s): {shown}{more}; "
        f"staged copies below {NARROW_STAGED_GBPS:.0f} GB/s are under what one PCIe Gen3 x16 link carries ({basis}), "
        "so a link on the path is narrow or slow (an x4/x8 slot, chipset lanes, a riser); P2P is not the cause",
        gpus=sorted({g for a, b, *_ in slow for g in (a, b)}),
        fix=f"check each GPU's link under load (`{LINK_QUERY}`: width and generation, current vs max) "
            "and which slots hang off the chipset; `gputopo doctor` with `lspci -vvv` shows the narrow hop",
    )]


def _nccl_transports(topology: Topology) -> list[Finding]:
    view = topology.nccl
    if view is None:
        return []
    links = topology.link_map()
    seen: set[tuple[int, int]] = set()
    findings = []
    why = _p2p_setting(view.settings)
    for t in view.transports:
        if t.transport not in ("SHM", "NET") or t.a is None or t.b is None or (t.a, t.b) not in links:
            continue
        link = links[(t.a, t.b)]
        pair = (link.a, link.b)
        if pair in seen or not (link.is_nvlink or link.can_peer):
            continue
        seen.add(pair)
        facts = link.type if link.is_nvlink else f"{link.type}, P2P ok"
        findings.append(Finding(
            "warning", "nccl-not-p2p",
            f"NCCL uses {t.transport} ({t.detail}) between GPU {t.a} and GPU {t.b} although they are {facts}"
            + (f": {why}" if why else ": P2P disabled by NCCL_P2P_DISABLE or NCCL_P2P_LEVEL? (the log does not show)"),
            gpus=[link.a, link.b],
            fix="unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL for this job, or see why NCCL refused P2P (NCCL_DEBUG=INFO, "
                "NCCL_DEBUG_SUBSYS=INIT,P2P)",
        ))
    return findings


def _p2p_setting(settings: dict[str, str]) -> str | None:
    if settings.get("NCCL_P2P_DISABLE") not in (None, "0"):
        return f"the log shows NCCL_P2P_DISABLE={settings['NCCL_P2P_DISABLE']}"
    level = settings.get("NCCL_P2P_LEVEL")
    if level is not None:
        return f"the log shows NCCL_P2P_LEVEL={level}, which limits P2P to paths up to {level}"
    return None


def _nccl_p2p_off(topology: Topology) -> list[Finding]:
    view = topology.nccl
    why = _p2p_setting(view.settings) if view is not None else None
    level = view.settings.get("NCCL_P2P_LEVEL", "") if view is not None else ""
    if why is None or (level and level.upper() not in ("LOC", "0")):  # a level above LOC still allows some P2P
        return []
    return [Finding(
        "info", "nccl-p2p-off-by-setting",
        f"NCCL runs without P2P in this job: {why} (NCCL_P2P_DISABLE=1 shows as NCCL_P2P_LEVEL=LOC), so every "
        "GPU-to-GPU copy goes through host memory or the network",
        fix="unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL where the GPUs can peer (NVLink, or `nvidia-smi topo -p2p r` OK)",
    )]


def _nccl_ipc_failed(topology: Topology) -> list[Finding]:
    view = topology.nccl
    if view is None or not any("failed to open CUDA IPC handle" in note for note in view.notes):
        return []
    links = topology.link_map()
    pairs = sorted({(min(t.a, t.b), max(t.a, t.b)) for t in view.transports if t.transport == "P2P"
                    and t.a is not None and t.b is not None and (min(t.a, t.b), max(t.a, t.b)) in links})
    refused = [p for p in pairs if links[p].p2p_read == "NS"]
    named = refused or pairs
    reason = next(note for note in view.notes if "failed to open CUDA IPC handle" in note)
    return [Finding(
        "warning", "nccl-p2p-ipc-failed",
        f"NCCL set up P2P between GPU {' and GPU '.join(str(g) for g in named[0])}"
        + (f" (and {count_word(len(named) - 1, 'more pair')})" if len(named) > 1 else "")
        + f" and CUDA refused {'one of them' if len(named) > 1 and not refused else 'it'} ({reason!r}): NCCL "
        "does not fall back, the job fails there"
        if named else f"NCCL could not open a peer GPU's memory ({reason!r}): its P2P connection failed",
        gpus=sorted({g for p in named for g in p}),
        fix="run with NCCL_P2P_DISABLE=1 (SHM through host memory) to get going; then see why CUDA refuses peer "
            "access: a GPU without P2P (GeForce), ACS or the IOMMU, a VM (`gputopo doctor`)",
    )]


def _nccl_refused(topology: Topology) -> list[Finding]:
    view = topology.nccl
    if view is None or not view.p2p_disabled_pairs:
        return []
    pairs = ", ".join(f"{a}-{b}" for a, b in view.p2p_disabled_pairs[:12])
    ours = refused_pairs(topology)  # NCCL's numbers are this topology's where it numbers GPUs as NVML does
    designed = _refused_by_design(topology, ours)
    if designed is not None:
        word, meaning = designed
        return [Finding(
            "info", "nccl-p2p-refused",
            f"NCCL could not use P2P between its GPUs {pairs} although it considers them connected: the driver's P2P "
            f"status for them is {word} ({meaning}), so NCCL copies through host memory, as this machine is built",
            gpus=sorted({g for pair in ours for g in pair}),
            fix=None,
        )]
    return [Finding(
        "warning", "nccl-p2p-refused",
        f"NCCL could not use P2P between its GPUs {pairs} although it considers them connected "
        "(numbers are NCCL's GPUs on that host): the driver's P2P status for them (NVML's, what `nvidia-smi topo "
        "-p2p r` prints) is not OK, so NCCL falls back to copies through host memory",
        gpus=sorted({g for pair in ours for g in pair}),
        fix="the log does not say why the driver refused: `nvidia-smi topo -p2p r` (and `-p2p w`: NCCL needs both) "
            "tells (GNS: a GPU model without P2P, such as GeForce; CNS/TNS: the chipset or topology; NS: no reason "
            "given: a VM or the platform, `gputopo doctor` on the host checks ACS and the IOMMU); "
            "NCCL_IGNORE_DISABLED_P2P=1 only hides the message",
    )]


# The driver's P2P words that name a reason the machine is built with (nvidia-smi topo -p2p's legend).
_DESIGN_WORDS = {"GNS": "the GPU model does not support P2P, as GeForce cards", "CNS": "the chipset does not support it",
                 "TNS": "the topology does not support it, as across CPU sockets on some platforms"}


def _refused_by_design(topology: Topology, pairs: set[tuple[int, int]]) -> tuple[str, str] | None:
    """``(word, meaning)`` where another source (``nvidia-smi topo -p2p``, NVML) gives every refused
    pair one design word: then NCCL's refusal is how the machine is built, not a fault. NS is not
    one: it names no reason (and is what a log alone records)."""
    links = topology.link_map()
    words = set()
    for pair in pairs:
        link = links.get(pair)
        if link is None:
            return None
        said = {w for w in (link.p2p_read, link.p2p_write) if w is not None} - {P2P_OK}
        if not said:
            return None  # the other source says this pair peers, or nothing of it: no design explains its refusal
        words |= said
    if len(words) != 1 or next(iter(words)) not in _DESIGN_WORDS:
        return None
    word = next(iter(words))
    return word, _DESIGN_WORDS[word]


def _collective_errors(topology: Topology) -> list[Finding]:
    findings = []
    for run in topology.collectives:
        wrong = sum((row.out_wrong or 0) + (row.in_wrong or 0) for row in run.rows)
        if wrong or run.out_of_bounds:
            findings.append(Finding(
                "error", "collective-wrong-results",
                f"nccl-tests {run.operation}: {wrong} wrong results"
                + (f", {run.out_of_bounds} out-of-bounds values" if run.out_of_bounds else "")
                + ": data was corrupted between GPUs (not just slow)",
                gpus=list(run.gpus),
                fix="corrupted collectives point at P2P through a broken path (ACS/IOMMU) or failing hardware: run "
                    "again with NCCL_P2P_DISABLE=1; if that is correct, fix P2P (`gputopo doctor`)",
            ))
    return findings
