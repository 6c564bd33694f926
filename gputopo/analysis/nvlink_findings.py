"""What the NVLinks are, in words: an NVSwitch fabric (inferred where nvidia-smi text shows its
pattern), direct links per pair, or none at all (findings ``nvswitch-fabric``, ``nvlink-summary``,
``no-nvlink``; ``analysis.diagnose`` lists every code)."""

from __future__ import annotations

from collections import Counter

from gputopo.model import Finding, Gpu, Link, Topology
from gputopo.notation import gpus_word, pair_list


def _version_text(gpus: list[Gpu]) -> str:
    versions = sorted({g.nvlink_version for g in gpus if g.nvlink_version})
    return f"NVLink {'/'.join(versions)}" if versions else "NVLink"


def nvlink_fabric(topology: Topology) -> list[Finding]:
    """What the NVLinks are: an NVSwitch fabric, direct links (or links the source cannot place),
    or none at all."""
    if len(topology.gpus) < 2 or not topology.links:
        return []
    switch_links = [link for link in topology.links if link.nvswitch]
    # NVLinks not known to go through NVSwitch: direct, or unknown (nvswitch None: text can't tell).
    direct_links = [link for link in topology.links if link.is_nvlink and not link.nvswitch]
    findings = []
    if switch_links:
        findings.append(_nvswitch_fabric(topology, switch_links))
    if direct_links:
        findings.append(_nvlink_summary(topology, direct_links))
    link_types_known = all(link.type != "UNKNOWN" for link in topology.links)
    if not switch_links and not direct_links and link_types_known:
        findings.append(Finding(severity="info", code="no-nvlink",
                                message="no NVLink between any GPUs: every GPU-to-GPU copy uses PCIe",
                                gpus=topology.gpu_indices))
    return findings


def _nvswitch_fabric(topology: Topology, switch_links: list[Link]) -> Finding:
    # nvidia-smi text never names the switches: there NVSwitch is inferred from the NV<n> pattern.
    inferred = topology.source == "nvidia-smi"
    gpus = sorted({g for link in switch_links for g in (link.a, link.b)})
    common, _ = Counter(link.type for link in switch_links).most_common(1)[0]
    version = _version_text([topology.gpu(g) for g in gpus])
    # A cut paste leaves some pairs UNKNOWN: "every pair" then is every pair the source shows.
    unshown = [(link.a, link.b) for link in topology.links if link.type == "UNKNOWN"]
    scope = "every pair" if len(switch_links) == len(topology.links) else f"every pair of {gpus_word(gpus)}"
    if unshown:
        scope += f" but {pair_list(unshown)} (not in the source)"
    others = [link for link in switch_links if link.type != common]
    exceptions = f" except {pair_list((link.a, link.b) for link in others)}" if others else ""
    return Finding(
        severity="info",
        code="nvswitch-fabric",
        message=(
            (f"NVSwitch fabric (inferred: every pair {'it shows is' if unshown else 'shows'} {common}, the NVSwitch "
             "pattern; the text does not name the switches): " if inferred else "NVSwitch fabric: ")
            + f"{scope} is {common}{exceptions} ({version}), so "
            + ("any GPUs of it can be grouped together at the same bandwidth; placement only matters for "
               "CPU/NUMA locality" if not others else "pairs with fewer links are slower; otherwise placement "
               "only matters for CPU/NUMA locality")
        ),
        gpus=gpus,
    )


def _nvlink_summary(topology: Topology, direct_links: list[Link]) -> Finding:
    gpus = sorted({g for link in direct_links for g in (link.a, link.b)})
    per_gpu = sorted({topology.gpu(g).nvlink_active_links for g in gpus} - {None})
    links_text = f", {'/'.join(str(n) for n in per_gpu)} links per GPU" if per_gpu else ""
    counts = Counter(link.type for link in direct_links)
    pair_text = ", ".join(
        f"{n} pair{'s' if n != 1 else ''} {t}" for t, n in sorted(counts.items(), key=lambda kv: -int(kv[0][2:]))
    )
    pcie_only = [link for link in topology.links if not link.is_nvlink and link.type != "UNKNOWN"]
    rest = ""
    if pcie_only:
        words = "/".join(sorted({link.type for link in pcie_only}))
        rest = (
            f"; the other pair uses PCIe ({words})" if len(pcie_only) == 1
            else f"; the other {len(pcie_only)} pairs use PCIe ({words})"
        )
    if any(link.nvswitch is None for link in direct_links):
        rest += "; whether through NVSwitch or direct, the source does not say"
    return Finding(
        severity="info",
        code="nvlink-summary",
        message=f"{_version_text([topology.gpu(g) for g in gpus])}{links_text}: {pair_text}{rest}",
        gpus=gpus,
    )
