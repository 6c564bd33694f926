"""What the NVLinks are, in words: an NVSwitch fabric (inferred where nvidia-smi text shows its
pattern), direct links per pair, or none at all (findings ``nvswitch-fabric``, ``nvlink-summary``,
``no-nvlink``; ``analysis.causes.diagnose`` lists every code); and a GPU of an NVSwitch fabric that shows
no NVLink at all (``nvlink-links-down``, the code diagnose gives a GPU with fewer active links than
its peers: here the source shows none where its peers' reach each other through the switches)."""

from __future__ import annotations

from collections import Counter, defaultdict

from gputopo.model import MAX_NVLINKS_PER_PAIR, Fabric, Finding, Gpu, Link, Topology
from gputopo.model.link_table import END_A, END_B, LinkTable
from gputopo.model.words import nvlink_count_of
from gputopo.notation import gpus_word, pair_list


def _version_text(gpus: list[Gpu]) -> str:
    versions = sorted({g.nvlink_version for g in gpus if g.nvlink_version})
    return f"NVLink {'/'.join(versions)}" if versions else "NVLink"


def nvlink_fabric(topology: Topology) -> list[Finding]:
    """What the NVLinks are: an NVSwitch fabric, direct links (or links the source cannot place),
    or none at all."""
    if len(topology.gpus) < 2 or not topology.links:
        return []
    table = topology.link_table()  # (what is asked of every link, asked once per kind of link)
    switched = [k for k, link in enumerate(table.examples) if link.nvswitch]
    # NVLinks not known to go through NVSwitch: direct, or unknown (nvswitch None: text can't tell).
    direct_links = table.links_where(topology.links, [k for k, link in enumerate(table.examples)
                                                      if link.is_nvlink and not link.nvswitch])
    findings = []
    if switched:
        findings.append(_nvswitch_fabric(topology, table, switched))
        findings += _outside_the_fabric(topology, table, switched)
    if direct_links:
        findings.append(_nvlink_summary(topology, direct_links))
        findings += _bridged_pairs_unequal(topology, direct_links)
    link_types_known = all(link.type != "UNKNOWN" for link in table.examples)
    # `nvidia-smi topo -mp` shows PCIe paths only: its SYS/PIX words say nothing of NVLink.
    pcie_only = any(note.code == "pcie-only-matrix" for note in topology.reading_notes)
    if not switched and not direct_links and link_types_known and not pcie_only:
        findings.append(Finding(severity="info", code="no-nvlink",
                                message="no NVLink between any GPUs: every GPU-to-GPU copy uses PCIe",
                                gpus=topology.gpu_indices))
    return findings


def _nvswitch_fabric(topology: Topology, table: LinkTable, switched: list[int]) -> Finding:
    """The links of the ``switched`` kinds (through NVSwitch) in words, from the table's columns."""
    # nvidia-smi text never names the switches: there NVSwitch is inferred from the NV<n> pattern.
    inferred = topology.source == "nvidia-smi"
    every = len(switched) == len(table.kinds)
    gpus = sorted(table.gpus_of_kinds(switched))
    per_kind = table.kind_counts()
    words: Counter[str] = Counter()
    for k in switched:  # (most_common keeps the first counted of equal counts: kinds in order of first link)
        words[table.examples[k].type] += per_kind[k]
    common, _ = words.most_common(1)[0]
    version = _version_text([topology.gpu(g) for g in gpus])
    # A cut paste leaves some pairs UNKNOWN: "every pair" then is every pair the source shows.
    unknown_kinds = [k for k, word in enumerate(table.kind_fact("type")) if word == "UNKNOWN"]
    unshown = [(link.a, link.b) for link in table.links_where(topology.links, unknown_kinds)] if unknown_kinds else []
    scope = "every pair" if every else f"every pair of {gpus_word(gpus)}"
    if unshown:
        scope += f" but {pair_list(unshown)} (not in the source)"
    others = table.links_where(topology.links, [k for k in switched if table.examples[k].type != common])
    exceptions = f" except {pair_list((link.a, link.b) for link in others)}" if others else ""
    every_shown = len(switched) + len(unknown_kinds) == len(table.kinds)
    pattern = (f"every pair {'it shows is' if unshown else 'shows'} {common}, the NVSwitch pattern" if every_shown else
               f"{gpus_word(gpus)} show {common} to each other, more NVLinks than one GPU has")
    return Finding(
        severity="info",
        code="nvswitch-fabric",
        message=(
            (f"NVSwitch fabric (inferred: {pattern}; the text does not name the switches): " if inferred
             else "NVSwitch fabric: ")
            + f"{scope} is {common}{exceptions} ({version}), so "
            + ("any GPUs of it can be grouped together at the same bandwidth; placement only matters for "
               "CPU/NUMA locality" if not others else "pairs with fewer links are slower; otherwise placement "
               "only matters for CPU/NUMA locality")
        ),
        gpus=gpus,
    )


def _outside_the_fabric(topology: Topology, table: LinkTable, switched: list[int]) -> list[Finding]:
    """GPUs that show no NVLink at all, every link of theirs known, while others reach each other
    through NVSwitch: on a switch board every GPU has its links to the switches, so its NVLinks are
    down or it was left out of the fabric. (NVML's link states say it themselves: diagnose.)"""
    fabric = table.gpus_of(table.kinds_where(switched))
    outside = [g for g in topology.gpu_indices if g not in fabric and topology.gpu(g).nvlink_active_links is None]
    if not outside:
        return []
    nvlinked = table.gpus_of(table.kinds_where(k for k, link in enumerate(table.examples) if link.is_nvlink))
    unknown = table.gpus_of(table.kinds_where(k for k, link in enumerate(table.examples) if link.type == "UNKNOWN"))
    # A GPU of another model (the source names both) is another card beside the board (a PCIe L4 in
    # an HGX server has no NVLink at all), not a board GPU whose links are down.
    models = {topology.gpu(g).name for g in fabric} - {None}
    cut_off = [g for g in outside if g not in nvlinked and g not in unknown
               and (topology.gpu(g).name is None or not models or topology.gpu(g).name in models)]
    if not cut_off:
        return []
    unnamed = any(topology.gpu(g).name is None for g in cut_off) or not models
    words = sorted({link.type for link in topology.links if (link.a in cut_off or link.b in cut_off)})
    one = len(cut_off) == 1
    return [Finding(
        severity="warning",
        code="nvlink-links-down",
        message=(f"{gpus_word(cut_off)} {'shows' if one else 'show'} no NVLink to any other GPU "
                 f"while {gpus_word(sorted(fabric))} reach each other through NVSwitch"
                 f"{' (inferred from their NV# pattern)' if topology.source == 'nvidia-smi' else ''}: on a switch board every GPU "
                 f"has NVLinks, so {'its' if one else 'their'} links are down or {'it is' if one else 'they are'} not "
                 f"in the NVSwitch fabric (a Fabric Manager partition, a fault)"
                 f"{', unless it is another card beside the board (the source does not name the GPUs)' if unnamed else ''}; "
                 f"{'it copies' if one else 'they copy'} "
                 f"over PCIe ({'/'.join(words)}) at a fraction of the NVLink bandwidth"),
        gpus=cut_off,
        fix=(f"check `nvidia-smi nvlink -s -i {cut_off[0]}` (inactive links), the fabric state in `nvidia-smi -q` "
             "and Fabric Manager's log; until then keep "
             f"{'it' if one else 'them'} out of NVLink groups (`gputopo recommend` does)"),
    )]


def _nvlink_summary(topology: Topology, direct_links: list[Link]) -> Finding:
    gpus = sorted(set(map(END_A, direct_links)) | set(map(END_B, direct_links)))
    per_gpu = sorted({topology.gpu(g).nvlink_active_links for g in gpus} - {None})
    links_text = f", {'/'.join(str(n) for n in per_gpu)} links per GPU" if per_gpu else ""
    counts = Counter(link.type for link in direct_links)
    pair_text = ", ".join(
        f"{n} pair{'s' if n != 1 else ''} {t}" for t, n in sorted(counts.items(), key=lambda kv: (-nvlink_count_of(kv[0]), kv[0]))
    )
    table = topology.link_table()
    pcie_kinds = [k for k, link in enumerate(table.examples) if not link.is_nvlink and link.type != "UNKNOWN"]
    pcie_only = sum(table.kinds_where(pcie_kinds))  # pairs
    rest = ""
    if pcie_only:
        words = "/".join(sorted({table.examples[k].type for k in pcie_kinds}))
        rest = (
            f"; the other pair uses PCIe ({words})" if pcie_only == 1
            else f"; the other {pcie_only} pairs use PCIe ({words})"
        )
    if any(link.nvswitch is None for link in direct_links):
        rest += "; whether through NVSwitch or direct, the source does not say"
    return Finding(
        severity="info",
        code="nvlink-summary",
        message=f"{_version_text([topology.gpu(g) for g in gpus])}{links_text}: {pair_text}{rest}",
        gpus=gpus,
    )


def _bridged_pairs_unequal(topology: Topology, direct_links: list[Link]) -> list[Finding]:
    """NVLinked pairs (each GPU NVLinked to exactly one other, not known to go through NVSwitch: NVLink
    bridges, or two-GPU partitions) joined by fewer NVLinks than the other pairs: the same bridges on
    the same GPUs give the same count (NV# counts the links that trained), so the pair with fewer has
    links down, a bridge not fully seated or a failed link. An inference: said as a warning where the source names the GPUs and they are one
    model, as info where it does not (other GPUs may take other bridges). Where NVML counts each
    GPU's active links, ``diagnose`` says it from those counts instead."""
    ends = Counter([link.a for link in direct_links] + [link.b for link in direct_links])
    if len(direct_links) < 2 or any(n != 1 for n in ends.values()):
        return []
    if any(topology.gpu(g).nvlink_active_links is not None for g in ends):
        return []
    most = max(link.nvlink_count for link in direct_links)
    fewer = [link for link in direct_links if link.nvlink_count < most]
    if not fewer:
        return []
    names = {topology.gpu(g).name for g in ends}
    one_model = len(names) == 1 and None not in names
    pairs = pair_list([(link.a, link.b) for link in fewer])
    counts = "/".join(str(n) for n in sorted({link.nvlink_count for link in fewer}))
    gpus = sorted({g for link in fewer for g in (link.a, link.b)})
    rest = len(direct_links) - len(fewer)
    others = f"pair has {most}" if rest == 1 else f"pairs have {most}"
    same = (f"on GPUs of one model ({next(iter(names))}) the same bridges give the same count" if one_model else
            "if the GPUs and their bridges are alike (the source does not name the GPUs), they give the same count")
    return [Finding(
        severity="warning" if one_model else "info",
        code="nvlink-links-down",
        message=(f"{'pair' if len(fewer) == 1 else 'pairs'} {pairs} {'is' if len(fewer) == 1 else 'are'} joined by "
                 f"{counts} NVLinks where the other NVLinked {others}: {same}, so some links of "
                 f"{'that pair' if len(fewer) == 1 else 'those pairs'} are down (a bridge not fully seated, a failed "
                 "link); an inference from the NV# counts"),
        gpus=gpus,
        fix=(f"check `nvidia-smi nvlink -s -i {gpus[0]}` (inactive links) and `nvidia-smi nvlink -e`; reseat the "
             "bridge with the machine powered off"),
    )]


def nvlinks_down(topology: Topology) -> list[Finding]:
    """GPUs with fewer active NVLinks than their peers of the same model (``nvidia-smi nvlink -s``,
    NVML): scan's rule, and doctor's for a pasted ``nvlink -s``."""
    by_model: dict[str | None, list[Gpu]] = defaultdict(list)
    for g in topology.gpus:
        if g.nvlink_active_links is not None and g.nvlink_active_links > 0 or (
            g.nvlink_active_links == 0 and g.nvlink_version is not None
        ):
            by_model[g.name].append(g)
    findings = []
    for model_gpus in by_model.values():
        if len(model_gpus) < 2:
            continue
        most = max(g.nvlink_active_links or 0 for g in model_gpus)
        low = [g for g in model_gpus if (g.nvlink_active_links or 0) < most]
        if not low:
            continue
        sides = _switch_sides(topology, low, model_gpus)
        details = "; ".join(f"GPU {g.index} has {g.nvlink_active_links}{sides.get(g.index, '')}" for g in low)
        findings.append(
            Finding(
                severity="warning",
                code="nvlink-links-down",
                message=(
                    f"fewer active NVLinks than its peers: {details} (the others {most}); "
                    "a link is down, so its pairs get less bandwidth"
                ),
                gpus=[g.index for g in low],
                fix=(
                    f"check `nvidia-smi nvlink --status -i {low[0].index}` and `nvidia-smi nvlink -e` for errors; "
                    "a GPU reset or reboot may bring the link back, otherwise have the GPU or baseboard serviced"
                ),
            )
        )
    return findings


def _switch_sides(topology: Topology, low: list[Gpu], peers: list[Gpu]) -> dict[int, str]:
    """Where the fabric graph names each NVSwitch (NVML's remote PCI info, NCCL's XML): per GPU with
    links down, the switches it has fewer up links to than its peers most have (`` (links up to
    NVSwitch 0000:c4:00.0: 2 of 3; ...)``); nothing where the switches are not told apart."""
    fabric = topology.fabric
    if fabric is None:
        return {}
    per_node = fabric.links_per_nvswitch()
    node_of = {g.index: node.id for g in peers if (node := fabric.gpu_node(g.index)) is not None}
    most: dict[str, int] = {}
    for g in peers:
        for switch, links in per_node.get(node_of.get(g.index, ""), {}).items():
            most[switch] = max(most.get(switch, 0), links)
    # One switch node (or none): the GPU's total already says it. More switches than a GPU has links
    # (a hostile snapshot's fabric): no machine's, and naming each for each GPU grew as their product.
    if not 2 <= len(most) <= MAX_NVLINKS_PER_PAIR:
        return {}
    sides = {}
    for g in low:
        mine = per_node.get(node_of.get(g.index, ""), {})
        short = [(switch, mine.get(switch, 0), links) for switch, links in sorted(most.items()) if mine.get(switch, 0) < links]
        if short:
            named = "; ".join(f"{_switch_name(fabric, switch)}: {up} of {links}" for switch, up, links in short)
            sides[g.index] = f" (links up to NVSwitch {named})"
    return sides


def _switch_name(fabric: Fabric, switch: str) -> str:
    node = fabric.node(switch)
    return node.bdf if node is not None and node.bdf else switch
