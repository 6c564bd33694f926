"""Expected GPU-to-GPU copy bandwidth per link, from public figures (NCCL's per-link NVLink
figures are ``SM60_NVLINK_BW`` ... ``SM100_NVLINK_BW`` in NVIDIA/nccl src/graph/topo.h, its
Gen3 x16 ``PCI_BW`` 12.0; NVIDIA/nvbandwidth#50 measured 26.3 GB/s for Gen4 x16 copy-engine copies).

Pure functions: a ``Link`` (plus the two GPUs' PCIe/NVLink facts) in, an ``Estimate`` out.
Estimates only: a measurement stored on the link is not looked at here (``analysis.expect.measured``
holds measured against expected, and the figure to rank by, where a measurement wins).

Figures, per direction:
- NVLink per link: NVLink1 20 GB/s; NVLink2/3/4 25 GB/s; NVLink5 50 GB/s (raw). What NCCL really
  gets per link is lower: 18 (P100), 20 (V100, A100), 20.6 (H100), 40.1 (B200). We use NCCL's
  effective figures, since that is what a data-parallel all-reduce sees.
- GA102 boards (RTX 3090, RTX A6000, A40, RTX A5000) bond 4 narrower NVLink 3 links through a bridge:
  112.5 GB/s both ways together, 56.25 per direction, ~14 GB/s a link (NVIDIA RTX A6000 and A40
  datasheets, "NVLink: 112.5 GB/s (bidirectional)"; GeForce RTX 3090 specifications, same figure).
- Where the source gives no generation (nvidia-smi text, a TF log), the link count alone bounds it:
  a GPU has at most 4 NVLinks in generation 1 (P100), 6 in 2 (V100), 12 in 3 (A100), 18 in 4 (H100)
  and 5 (B200), and GA102's bridge is 4 links. The figure is then a range over the generations that
  fit (NV18: ~371 on H100 to ~722 on B200; NV4: ~56 on a GA102 bridge to ~160), ranked by its low end.
- PCIe x16 in practice: Gen3 ~12, Gen4 ~24, Gen5 ~48 GB/s; scaled by lane count. Where the source
  gives no generation but names the card, the card's own generation (``analysis.expect.cards``), an
  inference the estimate says (``Estimate.inference``); else a range over Gen3-Gen5 x16 (every GPU
  with NVLink or P2P since Kepler).
- Path penalties: a PCIe switch (PIX) is free, more bridges (PXB) and the host bridge (PHB) cost a
  little, crossing host bridges in one socket (NODE) a little more; crossing sockets (SYS) goes over
  QPI/UPI and is often staged through host memory.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from dataclasses import dataclass

from gputopo.analysis.expect import pstates
from gputopo.analysis.expect.cards import card_pcie_generation
from gputopo.model import Gpu, Link, Topology

# NCCL's effective per-link, per-direction NVLink bandwidth by NVLink generation (GB/s).
NVLINK_EFFECTIVE_GBPS_PER_LINK = {1: 18.0, 2: 20.0, 3: 20.0, 4: 20.6, 5: 40.1}
# Raw per-link, per-direction figure (GB/s), for display.
NVLINK_RAW_GBPS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
DEFAULT_NVLINK_GENERATION = 2  # only for a count no generation allows (a damaged capture)
# The most NVLinks one GPU has in each generation (P100 4, V100 6, A100 12, H100 18, B200 18).
NVLINK_MAX_LINKS = {1: 4, 2: 6, 3: 12, 4: 18, 5: 18}
# GA102's bridged NVLink 3 (RTX 3090, RTX A6000, A40, RTX A5000): 56.25 GB/s per direction over 4 links.
GA102_NVLINK_GBPS_PER_LINK = 14.06
GA102_NAMES = ("RTX 3090", "RTX A6000", "A40", "RTX A5000", "RTX A4500")

# Achievable per-lane, per-direction PCIe copy bandwidth (GB/s): x16 Gen3 ~12.3, Gen4 ~24.6, Gen5 ~48.
PCIE_EFFECTIVE_GBPS_PER_LANE = {1: 0.2, 2: 0.4, 3: 0.77, 4: 1.54, 5: 3.0, 6: 6.0}
DEFAULT_PCIE_GENERATION = 3
DEFAULT_PCIE_WIDTH = 16
PCIE_GENERATION_RANGE = (3, 5)  # where the source does not say: Gen3 (Kepler..Volta) to Gen5 (Hopper, Blackwell)

# Fraction of the PCIe figure a path keeps.
PCIE_PATH_FACTOR = {"PIX": 1.0, "PXB": 0.95, "PHB": 0.85, "NODE": 0.8, "SYS": 0.5}
# Without working P2P, copies are staged through host memory: roughly this fraction of PCIe.
HOST_STAGED_FACTOR = 0.6

# nvmlDeviceGetNvLinkVersion's version strings -> NVLink generation.
_NVLINK_VERSION_TO_GENERATION = {"1.0": 1, "2.0": 2, "2.2": 2, "3.0": 3, "3.1": 3, "4.0": 4, "5.0": 5}


@dataclass(frozen=True)
class Estimate:
    """A per-direction bandwidth figure for one pair, and how it was obtained."""

    gbps: float
    basis: str  # "measured" or "estimated"
    explanation: str
    # Where a fact the figure depends on is not in the source: the span of figures it could be and
    # what was assumed ("NVLink generation not in the source"); None where nothing was assumed.
    low_gbps: float | None = None
    high_gbps: float | None = None
    assumption: str | None = None
    # Where the figure rests on a fact inferred rather than read (the PCIe generation of the card its
    # name names): what was inferred, in words; None where nothing was.
    inference: str | None = None

    @property
    def span(self) -> tuple[float, float]:
        """(lowest, highest) figure the facts allow; one figure twice where nothing was assumed."""
        return (self.low_gbps if self.low_gbps is not None else self.gbps,
                self.high_gbps if self.high_gbps is not None else self.gbps)


def nvlink_generation(version: str | None) -> int | None:
    """``"4.0"`` -> 4; ``None`` or unknown -> ``None``."""
    if version is None:
        return None
    return _NVLINK_VERSION_TO_GENERATION.get(version)


def pcie_generation(gpu: Gpu | None) -> int | None:
    """The PCIe generation a GPU's link reaches, where the source gives it: ``pcie_gen_max``, else
    the current one (idle GPUs drop to Gen1 to save power: the current one alone would make every
    path look slow)."""
    return (gpu.pcie_gen_max or gpu.pcie_gen_current) if gpu is not None else None


def card_generation(gpu: Gpu | None) -> int | None:
    """The PCIe generation of the card, by its name, where the source reads no generation of its link
    (``pcie_generation`` None); None otherwise."""
    if gpu is None or pcie_generation(gpu) is not None:
        return None
    return card_pcie_generation(gpu.name)


def pcie_inference(gpu_a: Gpu | None, gpu_b: Gpu | None) -> str | None:
    """Where a PCIe figure of the pair uses a generation inferred from a card's name, that in words."""
    said = [f"{gpu.name} is a Gen{gen} card" for gpu in (gpu_a, gpu_b) if (gen := card_generation(gpu)) is not None]
    if not said:
        return None
    return (f"PCIe generation inferred from the card ({'; '.join(dict.fromkeys(said))}), not read from the link: "
            "the most it trains to, less in an older slot or riser")


def _pcie_gbps(gpu: Gpu | None) -> tuple[float, str]:
    """A GPU's own PCIe link: its generation (``pcie_generation``) and its current width (a x8 slot
    stays x8). At P0 the link already runs at the best it trained to (``analysis.expect.pstates``): a
    generation below max read there is the one copies get, so it is used, said in the label."""
    gen = pcie_generation(gpu)
    trained_down = (gpu is not None and gpu.pcie_gen_current is not None and gen is not None
                    and gpu.pcie_gen_current < gen and pstates.link_reading(gpu.performance_state) == pstates.TOP)
    if trained_down:
        gen = gpu.pcie_gen_current  # type: ignore[union-attr]
    width = (gpu.pcie_width_current or gpu.pcie_width_max) if gpu else None
    inferred = card_generation(gpu) if gen is None else None
    gen = gen or inferred
    assumed = gen is None or width is None
    gen = gen or DEFAULT_PCIE_GENERATION
    width = width or DEFAULT_PCIE_WIDTH
    per_lane = PCIE_EFFECTIVE_GBPS_PER_LANE.get(gen, PCIE_EFFECTIVE_GBPS_PER_LANE[max(PCIE_EFFECTIVE_GBPS_PER_LANE)])
    how = (f" (Gen{gen} inferred from the card" + (", x16 assumed)" if width == DEFAULT_PCIE_WIDTH and assumed else ")")
           if inferred else " (assumed)" if assumed else "")
    label = f"PCIe Gen{gen} x{width}" + how + (" (trained down: read at P0)" if trained_down else "")
    return per_lane * width, label


def pcie_link_gbps(link_type: str, gpu_a: Gpu | None, gpu_b: Gpu | None) -> tuple[float, str]:
    """Bandwidth of a PCIe path between two GPUs: the slower GPU's PCIe link times the path factor."""
    gbps_a, label_a = _pcie_gbps(gpu_a)
    gbps_b, label_b = _pcie_gbps(gpu_b)
    base, label = (gbps_a, label_a) if gbps_a <= gbps_b else (gbps_b, label_b)
    factor = PCIE_PATH_FACTOR.get(link_type, PCIE_PATH_FACTOR["SYS"])
    return base * factor, f"{link_type} over {label}"


def _pcie_known(gpu: Gpu | None) -> bool:
    """Whether the GPU's PCIe generation is read, or inferred from its card (``card_generation``)."""
    return pcie_generation(gpu) is not None or card_generation(gpu) is not None


def pcie_span(factor: float, gpu_a: Gpu | None, gpu_b: Gpu | None) -> tuple[float, float] | None:
    """(low, high) of ``factor`` times a x16 PCIe link over Gen3-Gen5, where neither GPU's
    generation is known; None where one is."""
    if _pcie_known(gpu_a) or _pcie_known(gpu_b):
        return None
    lo, hi = (PCIE_EFFECTIVE_GBPS_PER_LANE[g] * DEFAULT_PCIE_WIDTH * factor for g in PCIE_GENERATION_RANGE)
    return lo, hi


def _with_pcie_span(estimate: Estimate, factor: float, gpu_a: Gpu | None, gpu_b: Gpu | None) -> Estimate:
    span = pcie_span(factor, gpu_a, gpu_b)
    if span is None:
        return estimate
    low, high = span
    return Estimate(low, estimate.basis, estimate.explanation, low, high,
                    f"PCIe generation not in the source: Gen{PCIE_GENERATION_RANGE[0]}-Gen{PCIE_GENERATION_RANGE[1]} x16",
                    estimate.inference)


def _is_ga102(gpu: Gpu | None) -> bool:
    return gpu is not None and gpu.name is not None and any(name in gpu.name for name in GA102_NAMES)


def implied_nvlinks(topology: Topology, index: int) -> int | None:
    """The fewest active NVLinks GPU ``index`` must have, read from the link words (NV#): the sum
    over its direct peers, the largest bond where the links go through NVSwitch (each bond is the
    same links to the switches); None where no word says NVLink. One pass over the links per
    topology (``Topology.cached``): per-pair callers ask for every pair."""
    return topology.cached("implied_nvlinks", _implied_nvlinks_of_all).get(index)


def _implied_nvlinks_of_all(topology: Topology) -> dict[int, int]:
    """Per GPU with NVLinks: the sum of its direct links' counts, or the largest switched bond.
    Counted in whole columns, once per NVLink count (``Topology.link_table``)."""
    table = topology.link_table()
    direct: Counter[int] = Counter()
    switched: dict[int, int] = {}
    by_count: dict[tuple[bool, int], list[int]] = {}  # (direct, NVLink count) -> the kinds of link
    for k, link in enumerate(table.examples):
        if link.is_nvlink:
            by_count.setdefault((link.nvswitch is False, link.nvlink_count), []).append(k)
    for (is_direct, count), kinds in sorted(by_count.items(), key=lambda item: -item[0][1]):
        if not is_direct:  # through NVSwitch: which GPUs, not how many links each
            for gpu in table.gpus_of_kinds(kinds):
                switched.setdefault(gpu, count)  # (largest count first)
            continue
        chosen = table.kinds_where(kinds)
        ends = Counter(itertools.compress(table.ends_a, chosen))
        ends.update(itertools.compress(table.ends_b, chosen))
        for gpu, links in ends.items():
            direct[gpu] += count * links
    return {gpu: max(direct.get(gpu, 0), switched.get(gpu, 0)) for gpu in direct.keys() | switched.keys()}


def fewest_nvlinks(topology: Topology, a: int, b: int) -> int:
    """The larger of the two GPUs' implied NVLink counts: a generation with fewer links per GPU is out."""
    return max(implied_nvlinks(topology, a) or 0, implied_nvlinks(topology, b) or 0)


def nvlink_gbps(nvlink_count: int, gpu_a: Gpu | None, gpu_b: Gpu | None) -> tuple[float, str]:
    """Bandwidth of ``nvlink_count`` bonded NVLinks at the pair's (lower) NVLink generation; the low
    end of the range where the generation is not known (``nvlink_span``)."""
    low, _high, label, _assumption = nvlink_span(nvlink_count, gpu_a, gpu_b)
    return low, label


def nvlink_span(
    nvlink_count: int, gpu_a: Gpu | None, gpu_b: Gpu | None, fewest_links: int = 0
) -> tuple[float, float, str, str | None]:
    """(low, high GB/s per direction, label, what was assumed) of ``nvlink_count`` bonded NVLinks;
    ``fewest_links``: how many NVLinks one of the GPUs has at least (rules out older generations)."""
    if _is_ga102(gpu_a) or _is_ga102(gpu_b):
        gbps = nvlink_count * GA102_NVLINK_GBPS_PER_LINK
        return gbps, gbps, f"{nvlink_count} x GA102 bridged NVLink3 at ~{GA102_NVLINK_GBPS_PER_LINK:g} GB/s", None
    gens = [nvlink_generation(g.nvlink_version) for g in (gpu_a, gpu_b) if g is not None]
    known = [g for g in gens if g is not None]
    if known:
        gen = min(known)
        per_link = NVLINK_EFFECTIVE_GBPS_PER_LINK[gen]
        gbps = nvlink_count * per_link
        return gbps, gbps, f"{nvlink_count} x NVLink{gen} at ~{per_link:g} GB/s", None
    need = max(nvlink_count, fewest_links)
    fitting = [gen for gen, most in NVLINK_MAX_LINKS.items() if need <= most] or [DEFAULT_NVLINK_GENERATION]
    figures = [nvlink_count * NVLINK_EFFECTIVE_GBPS_PER_LINK[gen] for gen in fitting]
    if nvlink_count == 4 and need == 4:  # a GA102 bridge: one bond of 4 links
        figures.append(nvlink_count * GA102_NVLINK_GBPS_PER_LINK)
    low, high = min(figures), max(figures)
    gens = f"NVLink{fitting[0]}" + (f"-{fitting[-1]}" if len(fitting) > 1 else "")
    return low, high, f"{nvlink_count} x {gens}, ~{low:.0f}-{high:.0f} GB/s", "NVLink generation not in the source"


def _host_staged_gbps(gpu_a: Gpu | None, gpu_b: Gpu | None) -> tuple[float, str]:
    """Copy through host memory: each GPU's own PCIe link is used twice (GPU->host->GPU) and the
    slower one decides, so a fraction of the slower PCIe link."""
    gbps_a, label_a = _pcie_gbps(gpu_a)
    gbps_b, label_b = _pcie_gbps(gpu_b)
    base, label = (gbps_a, label_a) if gbps_a <= gbps_b else (gbps_b, label_b)
    return base * HOST_STAGED_FACTOR, label


def host_staged_estimate(link: Link, gpu_a: Gpu | None = None, gpu_b: Gpu | None = None) -> Estimate:
    """What copies of the pair staged through host memory get per direction (P2P off, or NCCL's SHM):
    the staged fraction of the slower GPU's PCIe link, no more than the path's own figure (across
    sockets, the SMP interconnect); a range where no generation is known or inferred."""
    path = link.type if link.type in PCIE_PATH_FACTOR else (link.pcie_path or "SYS")
    gbps, _ = pcie_link_gbps(path, gpu_a, gpu_b)
    staged, label = _host_staged_gbps(gpu_a, gpu_b)
    estimate = Estimate(min(gbps, staged), "estimated", f"staged through host memory over {label}",
                        inference=pcie_inference(gpu_a, gpu_b))
    return _with_pcie_span(estimate, min(PCIE_PATH_FACTOR.get(path, PCIE_PATH_FACTOR["SYS"]), HOST_STAGED_FACTOR),
                           gpu_a, gpu_b)


def estimate_link(link: Link, gpu_a: Gpu | None = None, gpu_b: Gpu | None = None, fewest_links: int = 0) -> Estimate:
    """``_estimate_link``'s figure, with the PCIe generation it inferred from a card's name said
    (``Estimate.inference``) where a PCIe figure decided it."""
    estimate = _estimate_link(link, gpu_a, gpu_b, fewest_links)
    if link.nvlink_count > 0 and link.can_peer is not False:
        return estimate
    inference = pcie_inference(gpu_a, gpu_b)
    return estimate if inference is None else dataclasses.replace(estimate, inference=inference)


def _estimate_link(link: Link, gpu_a: Gpu | None = None, gpu_b: Gpu | None = None, fewest_links: int = 0) -> Estimate:
    """Per-direction bandwidth the two GPUs of ``link`` should get, from its type (never its measurement).

    ``UNKNOWN`` links come from a source that says only whether the GPUs could enable peer access (a
    TensorFlow log, p2pBandwidthLatencyTest's peer lines, an NCCL log, `topo -p2p`): where they
    could, the two GPUs sit under one PCIe root (peer access over PCIe works only then), so we assume
    a host-bridge (PHB) path; where they could not, the copy is staged through host memory across
    the socket interconnect (as SYS without P2P).
    """
    if link.nvlink_count > 0:
        gbps, high, why, assumption = nvlink_span(link.nvlink_count, gpu_a, gpu_b, fewest_links)
        if link.nvswitch:
            why += " through NVSwitch"
        if link.can_peer is False:
            path = link.pcie_path or "SYS"
            pcie, pcie_label = pcie_link_gbps(path, gpu_a, gpu_b)
            staged, label = _host_staged_gbps(gpu_a, gpu_b)
            return Estimate(
                min(pcie, staged), "estimated", f"NVLink present but P2P is off: staged through host ({label})"
            )
        if assumption:
            return Estimate(gbps, "estimated", why, gbps, high, assumption)
        return Estimate(gbps, "estimated", why)
    if link.type == "UNKNOWN":
        if link.can_peer:
            gbps, label = pcie_link_gbps("PHB", gpu_a, gpu_b)
            return Estimate(gbps, "estimated", f"the source says they could peer: assumed one PCIe root ({label})")
        sys_gbps, _ = pcie_link_gbps("SYS", gpu_a, gpu_b)
        staged, label = _host_staged_gbps(gpu_a, gpu_b)
        if link.can_peer is False:
            return Estimate(
                min(sys_gbps, staged), "estimated",
                f"the source says they could not peer: assumed staged through host across sockets ({label})"
            )
        return Estimate(sys_gbps, "estimated", f"unknown path, assumed SYS over {label}")
    gbps, label = pcie_link_gbps(link.type, gpu_a, gpu_b)
    factor = PCIE_PATH_FACTOR.get(link.type, PCIE_PATH_FACTOR["SYS"])
    if link.can_peer is False:
        staged, _ = _host_staged_gbps(gpu_a, gpu_b)
        estimate = Estimate(min(gbps, staged), "estimated", f"{label}, no P2P: staged through host memory")
        return _with_pcie_span(estimate, min(factor, HOST_STAGED_FACTOR), gpu_a, gpu_b)
    return _with_pcie_span(Estimate(gbps, "estimated", label), factor, gpu_a, gpu_b)


def pair_estimate(topology: Topology, a: int, b: int) -> Estimate:
    """Per-direction bandwidth GPUs ``a`` and ``b`` of ``topology`` should get (estimate only)."""
    link = topology.link(a, b)
    return estimate_link(link, _gpu_or_none(topology, a), _gpu_or_none(topology, b), fewest_nvlinks(topology, a, b))


def link_estimates(topology: Topology) -> dict[tuple[int, int], Estimate]:
    """``{(a, b): estimate}`` for every link (``a < b``), computed once per class of equal links:
    a 576-GPU domain has 165,600 links and a handful of classes."""
    gpus = {g.index: g for g in topology.gpus}
    by_class: dict[tuple[object, ...], Estimate] = {}
    result: dict[tuple[int, int], Estimate] = {}
    for link in topology.links:
        gpu_a, gpu_b = gpus.get(link.a), gpus.get(link.b)
        fewest = fewest_nvlinks(topology, link.a, link.b) if link.is_nvlink else 0
        key = (*estimate_key(link, gpu_a, gpu_b), fewest)
        estimate = by_class.get(key)
        if estimate is None:
            estimate = by_class[key] = estimate_link(link, gpu_a, gpu_b, fewest)
        result[(link.a, link.b)] = estimate
    return result


def estimate_key(link: Link, gpu_a: Gpu | None, gpu_b: Gpu | None) -> tuple[object, ...]:
    """What ``estimate_link`` reads of a link and of its GPUs: links with equal keys have equal
    estimates."""
    return (link.type, link.nvlink_count, link.nvswitch, link.pcie_path, link.p2p_read, link.p2p_write,
            estimate_key_of_gpu(gpu_a), estimate_key_of_gpu(gpu_b))


def estimate_key_of_gpu(gpu: Gpu | None) -> tuple[object, ...] | None:
    """What of a GPU the estimate reads (``_pcie_gbps``, ``nvlink_gbps``, whether it is a GA102 card
    by its name): ``estimate_key``'s last two."""
    if gpu is None:
        return None
    return (gpu.pcie_gen_max, gpu.pcie_gen_current, gpu.pcie_width_current, gpu.pcie_width_max, gpu.nvlink_version,
            _is_ga102(gpu), pstates.link_reading(gpu.performance_state), card_generation(gpu),
            gpu.name if card_generation(gpu) is not None else None)


def pair_bandwidth_matrix(topology: Topology) -> dict[tuple[int, int], float]:
    """``{(a, b): GB/s}`` estimated for every ordered pair of distinct GPUs (symmetric)."""
    result: dict[tuple[int, int], float] = {}
    for (a, b), est in link_estimates(topology).items():
        result[(a, b)] = est.gbps
        result[(b, a)] = est.gbps
    return result


def _gpu_or_none(topology: Topology, index: int) -> Gpu | None:
    try:
        return topology.gpu(index)
    except KeyError:
        return None


# PCIe signalling per lane and direction after line coding (GB/s): Gen1/2 8b/10b, Gen3+ 128b/130b.
PCIE_RAW_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.877}


def line_rate_gbps(link: Link, gpu_a: Gpu | None = None, gpu_b: Gpu | None = None) -> float | None:
    """The most a link can carry per direction (the raw figure, not what copies reach): a copy
    measured above it did not move its bytes over this link (zero-copy, a cache, a clock error).
    Where the generation or width is not known the highest is assumed, so nothing is called
    suspect by mistake; None for links of unknown type."""
    if link.type == "UNKNOWN":
        return None
    if link.nvlink_count > 0:
        gens = [nvlink_generation(g.nvlink_version) for g in (gpu_a, gpu_b) if g is not None]
        known = [g for g in gens if g is not None]
        gen = min(known) if known else max(NVLINK_RAW_GBPS_PER_LINK)
        return link.nvlink_count * NVLINK_RAW_GBPS_PER_LINK[gen]
    gens = [pcie_generation(g) for g in (gpu_a, gpu_b) if g is not None]
    widths = [g.pcie_width_max or g.pcie_width_current for g in (gpu_a, gpu_b) if g is not None]
    gen = min(gens) if gens and all(gens) else max(PCIE_RAW_GBPS_PER_LANE)
    width = min(widths) if widths and all(widths) else 16
    return PCIE_RAW_GBPS_PER_LANE.get(gen, PCIE_RAW_GBPS_PER_LANE[max(PCIE_RAW_GBPS_PER_LANE)]) * width


def card_line_rate(link: Link, gpu_a: Gpu | None, gpu_b: Gpu | None) -> tuple[float, int] | None:
    """A PCIe link's line rate by the cards' own generation (``card_generation``: inferred from their names)
    where the source reads no generation of one of them and the names give it: ``(GB/s, generation)``, only
    where below what ``line_rate_gbps`` assumed. An inference, never a reading: a figure above it is a thing
    to check, not proof (``observed_findings`` says so)."""
    if link.type == "UNKNOWN" or link.nvlink_count > 0 or gpu_a is None or gpu_b is None:
        return None
    read = [pcie_generation(g) for g in (gpu_a, gpu_b)]
    gens = [r or card_generation(g) for r, g in zip(read, (gpu_a, gpu_b))]
    if all(read) or not all(gens):
        return None
    widths = [g.pcie_width_max or g.pcie_width_current for g in (gpu_a, gpu_b)]
    gen = min(gens)  # type: ignore[type-var]
    rate = PCIE_RAW_GBPS_PER_LANE[gen] * (min(widths) if all(widths) else DEFAULT_PCIE_WIDTH)  # type: ignore[index,type-var]
    conservative = line_rate_gbps(link, gpu_a, gpu_b)
    return (rate, gen) if conservative is None or rate < conservative else None  # type: ignore[return-value]
