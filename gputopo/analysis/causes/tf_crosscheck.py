"""TensorFlow's view of the GPUs checked against the topology: what TF's peer lines mean here.

TensorFlow numbers GPUs by ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` (default
FASTEST_FIRST), nvidia-smi and NVML by PCI bus order, so TF's GPU:1 need not be nvidia-smi's GPU 1.
The two are joined on PCI bus ids (by ordinal, said so, where the topology has none); then each
pair TF could not peer is explained by its link (SYS: different NUMA nodes, or different sockets
where the source knows them; P2P disabled, chipset, a PCIe switch with ACS...), and pairs TF peers
over SYS are pointed out. For a log alone the findings say which GPUs form peer groups, which is
what a user needs to place work. Pure functions: no I/O (``tf_findings`` records the join in
``TfDevice.nvml_index``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gputopo.model import (
    P2P_OK,
    P2P_STATUS_MEANING,
    Finding,
    Link,
    TfView,
    Topology,
    normalize_pci_bus_id,
)
from gputopo.notation import all_word, gpu_set, number_list, pair_list
from gputopo.numbering import index_by_bus_id
from gputopo.analysis.place.locality import SYS_MEANING, same_socket, vm_evidence
from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.analysis.causes import tf_log_findings as alone  # what a TF log says on its own
from gputopo.sources.tf.tflog import ERA_NO_GPU, ERA_TF25, ERA_TF_ABSL, peer_state

ORDER_FIX = (
    "export CUDA_DEVICE_ORDER=PCI_BUS_ID before starting TensorFlow (and list CUDA_VISIBLE_DEVICES in "
    "increasing order) so that TensorFlow's GPU:i is nvidia-smi's GPU i"
)
MATRIX_FIX = (
    "run the job with TF_CPP_MAX_VLOG_LEVEL=1 TF_CPP_MIN_LOG_LEVEL=0 to make TensorFlow print its "
    "peer matrix ('Device interconnect StreamExecutor with strength 1 edge matrix'), "
    "or let `gputopo scan --tf` do it"
)


@dataclass(frozen=True)
class PeerGroups:
    """TF ordinals partitioned by peer access: groups in which every pair can peer."""

    groups: list[list[int]]  # connected components of the "can peer" graph, each sorted
    partial: list[list[int]]  # components in which some pairs cannot peer (not cliques)
    cross_denied: list[tuple[int, int]]  # pairs in different groups that cannot peer
    unknown: list[tuple[int, int]]  # pairs the log says nothing about

    @property
    def has_peer_info(self) -> bool:
        return any(len(g) > 1 for g in self.groups) or bool(self.cross_denied)


def tf_ordinals(view: TfView) -> list[int]:
    """The GPUs the log names (a view built by hand may have a peer matrix only)."""
    return sorted({d.ordinal for d in view.devices}) or list(range(len(view.peer)))


def peer_groups(view: TfView) -> PeerGroups:
    """Connected cliques of the peer matrix: the sets within which work can exchange fast."""
    ordinals = tf_ordinals(view)
    parent = {o: o for o in ordinals}

    def root(o: int) -> int:
        while parent[o] != o:
            parent[o] = parent[parent[o]]
            o = parent[o]
        return o

    unknown: list[tuple[int, int]] = []
    for pos, a in enumerate(ordinals):
        for b in ordinals[pos + 1 :]:
            state = peer_state(view, a, b)
            if state is True:
                parent[root(a)] = root(b)
            elif state is None:
                unknown.append((a, b))
    components: dict[int, list[int]] = {}
    for o in ordinals:
        components.setdefault(root(o), []).append(o)
    groups = sorted(components.values())
    partial = [  # a pair the log says cannot peer inside a group; unknown pairs are listed apart
        g for g in groups if any(peer_state(view, a, b) is False for i, a in enumerate(g) for b in g[i + 1 :])
    ]
    group_of = {o: i for i, g in enumerate(groups) for o in g}
    pairs = [(a, b) for pos, a in enumerate(ordinals) for b in ordinals[pos + 1 :]]
    cross_denied = [(a, b) for a, b in pairs if group_of[a] != group_of[b] and peer_state(view, a, b) is False]
    return PeerGroups(groups=groups, partial=partial, cross_denied=cross_denied, unknown=unknown)


def peer_group_summary(view: TfView) -> str | None:
    """One line a user reads at a glance, e.g. "GPUs 0,1 and 2,3 can peer; the cross pairs cannot;
    keep work that needs fast exchange within {0,1} or {2,3}". ``None`` without peer information."""
    result = peer_groups(view)
    if not result.has_peer_info:
        return None
    ordinals = tf_ordinals(view)
    multi = [g for g in result.groups if len(g) > 1]
    singles = [g[0] for g in result.groups if len(g) == 1]
    inferred = " (inferred: TF logs only the pairs that cannot peer)" if view.peer_inferred else ""
    if len(result.groups) == 1 and not result.partial and not result.unknown:
        text = f"{all_word(len(ordinals), 'GPU')} ({number_list(ordinals)}) can peer with each other{inferred}"
    else:
        parts = []
        if multi:
            parts.append(f"GPUs {' and '.join(number_list(g) for g in multi)} can peer{inferred}")
        if result.cross_denied:
            if multi:
                parts.append("the cross pairs cannot")
            else:  # with pairs the log is silent on, "no pair can peer" would claim too much
                parts.append(f"pairs {pair_list(result.cross_denied, limit=None)} cannot peer" if result.unknown else "no pair can peer")
        if singles and multi:
            isolated = [o for o in singles if all(peer_state(view, o, p) is False for p in ordinals if p != o)]
            unsure = [o for o in singles if o not in isolated]
            for group, verb in ((isolated, "cannot peer with any other"), (unsure, "no known peer")):
                if group:
                    word = "GPU" if len(group) == 1 else "GPUs"
                    if verb == "no known peer":
                        verb = ("has " if len(group) == 1 else "have ") + verb
                    parts.append(f"{word} {number_list(group)} {verb}")
        text = "; ".join(parts)
        if len(multi) > 1 or (multi and result.cross_denied):
            text += "; keep work that needs fast exchange within " + " or ".join(gpu_set(g) for g in multi)
    if result.partial:  # a group joined through peers (a cube mesh), not a clique: name the pairs that cannot
        inside = [(a, b) for g in result.partial for i, a in enumerate(g) for b in g[i + 1 :] if peer_state(view, a, b) is False]
        text += ("; not every pair within " + " or ".join(gpu_set(g) for g in result.partial)
                 + f" can peer: {pair_list(inside, limit=None)} cannot")
    if result.unknown:
        text += f" (the log does not say for {pair_list(result.unknown, limit=None)})"
    return text


def tf_findings(topology: Topology) -> list[Finding]:
    """Findings about TensorFlow's view (``topology.tf``) against the topology; [] without one."""
    view = topology.tf
    if view is None:
        return []
    findings: list[Finding] = note_findings(view.reading_notes)  # what the log reader noticed, first
    if view.era == ERA_NO_GPU or (not view.devices and view.visible_ordinals == []):
        findings.append(
            Finding(
                "warning",
                "tf-no-gpu",
                "TensorFlow sees no GPU here: it will run everything on the CPU",
                fix="check `nvidia-smi`, that TensorFlow was installed with GPU support "
                "(`pip install 'tensorflow[and-cuda]'`), and that CUDA_VISIBLE_DEVICES is not empty",
            )
        )
        return findings
    log_alone = topology.source == "tf-log"
    mapping = {o: o for o in tf_ordinals(view)} if log_alone else _join_devices(topology, view, findings)
    findings.extend(_order_findings(topology, view, log_alone))
    findings.extend(alone.ignored_gpu_findings(view) + alone.memory_short_findings(view))
    limit = alone.peer_limit_finding(view)
    if limit is not None:
        findings.append(limit)
        if alone.peer_info_is_peer_limit_only(view):
            return findings  # the peer-limit finding is what this log says

    summary = peer_group_summary(view)
    if summary is None and len(tf_ordinals(view)) > 1:  # one GPU has no pair to speak of
        newer = view.era in (ERA_TF25, ERA_TF_ABSL)
        findings.append(
            Finding(
                "info",
                "tf-no-peer-matrix",
                "this TensorFlow log says nothing about peer access: "
                + (
                    "TensorFlow >= 2.5 prints its peer matrix only at verbose level 1"
                    if newer
                    else "it holds no peer matrix and no 'cannot enable peer access' lines (cut short?)"
                ),
                gpus=sorted(mapping.get(o, o) for o in tf_ordinals(view) if o in mapping),
                fix=MATRIX_FIX,
            )
        )
    elif summary is not None:
        findings.append(
            Finding(
                "info",
                "tf-peer-groups",
                f"TensorFlow: {summary}",
                gpus=sorted(mapping[o] for o in tf_ordinals(view) if o in mapping),
                fix=alone.denied_peers_fix(view) if log_alone and peer_groups(view).cross_denied else None,
            )
        )
    if not log_alone and mapping:
        findings.extend(_pair_findings(topology, view, mapping))
    return findings


# --- joining TF ordinals to the topology's GPUs --------------------------------------------------


def _join_devices(topology: Topology, view: TfView, findings: list[Finding]) -> dict[int, int]:
    """``{TF ordinal: topology GPU index}``, by PCI bus id; sets ``TfDevice.nvml_index``."""
    by_bus = index_by_bus_id(topology)
    mapping: dict[int, int] = {}
    # Without bus ids in the topology the log's bus ids cannot decide: join by ordinal below.
    with_bus = [d for d in view.devices if d.pci_bus_id] if by_bus else []
    for device in with_bus:
        index = by_bus.get(normalize_pci_bus_id(device.pci_bus_id))
        device.nvml_index = index
        if index is not None:
            mapping[device.ordinal] = index
    strangers = [d for d in with_bus if d.nvml_index is None]
    if strangers and by_bus:
        findings.append(
            Finding(
                "warning",
                "tf-gpu-not-in-topology",
                "TensorFlow's "
                + ", ".join(f"GPU:{d.ordinal} ({d.pci_bus_id})" for d in strangers)
                + f" {'is' if len(strangers) == 1 else 'are'} not among the GPUs of "
                f"{topology.source_detail or topology.source}: is the log from another machine?",
            )
        )
    if mapping or strangers:
        return mapping
    ordinals = tf_ordinals(view)
    if len(ordinals) == len(topology.gpus) and ordinals == list(range(len(ordinals))):
        findings.append(
            Finding(
                "info",
                "tf-join-assumed",
                f"{'the topology' if not by_bus else 'the TensorFlow log'} has no PCI bus ids to join on, so "
                "TensorFlow's GPU:i is taken as nvidia-smi's GPU i (true with CUDA_DEVICE_ORDER=PCI_BUS_ID "
                "and all GPUs visible)",
                fix="the topology with bus ids (`gputopo scan --tf-log LOG` on the machine itself reads them through "
                "NVML, or a snapshot saved there) joins them for certain" if not by_bus else
                "a log with 'Created device ... pci bus id: ...' lines joins them for certain",
            )
        )
        return {o: topology.gpu_indices[o] for o in ordinals}
    findings.append(
        Finding(
            "warning",
            "tf-join-impossible",
            f"TensorFlow's {len(ordinals)} GPUs cannot be matched to the {len(topology.gpus)} GPUs of "
            f"{topology.source_detail or topology.source} ("
            + ("no PCI bus ids to join on)" if by_bus else "the topology has no PCI bus ids to join on; is the log "
               "from another machine, or did CUDA_VISIBLE_DEVICES hide some GPUs?)"),
        )
    )
    return {}


def _order_findings(topology: Topology, view: TfView, log_alone: bool) -> list[Finding]:
    """TF's numbering against nvidia-smi's (PCI bus) order."""
    devices = sorted(view.devices, key=lambda d: d.ordinal)
    if log_alone:
        if len(devices) < 2 or any(d.pci_bus_id is None for d in devices):
            return []
        bus_order = sorted(devices, key=lambda d: d.pci_bus_id or "")
        if [d.ordinal for d in bus_order] == [d.ordinal for d in devices]:
            return []
        listing = ", ".join(f"GPU:{d.ordinal} at {d.pci_bus_id}" for d in devices)
        return [
            Finding(
                "warning",
                "tf-order-differs",
                f"TensorFlow's GPU order is not PCI bus order, which nvidia-smi and NVML use ({listing}): "
                "GPU numbers in TensorFlow and in nvidia-smi name different cards",
                gpus=[d.ordinal for d in devices],
                fix=ORDER_FIX,
            )
        ]
    joined = [d for d in devices if d.nvml_index is not None]
    if not joined:
        return []
    indices = [d.nvml_index for d in joined]
    listing = ", ".join(f"TF GPU:{d.ordinal} = GPU {d.nvml_index}" for d in joined)
    if indices != sorted(indices):  # type: ignore[type-var]
        return [
            Finding(
                "warning",
                "tf-order-differs",
                f"TensorFlow numbers the GPUs differently from nvidia-smi ({listing}): "
                "tf.device('/gpu:1') need not be nvidia-smi's GPU 1",
                gpus=sorted(indices),  # type: ignore[arg-type]
                fix=ORDER_FIX,
            )
        ]
    if [d.ordinal for d in joined] != indices:
        return [
            Finding(
                "info",
                "tf-ordinals-renumbered",
                f"TensorFlow sees {len(joined)} of the {len(topology.gpus)} GPUs, renumbered from 0 "
                f"(CUDA_VISIBLE_DEVICES): {listing}",
                gpus=sorted(indices),  # type: ignore[arg-type]
                fix="use TensorFlow's numbers in tf.device / MirroredStrategy, nvidia-smi's in CUDA_VISIBLE_DEVICES",
            )
        ]
    return []


# --- why a pair cannot peer ----------------------------------------------------------------------

_REASONS: dict[str, tuple[str, str]] = {
    "cross-socket": (
        "they sit under different CPU sockets (SYS): copies between them cross QPI/UPI or Infinity Fabric via host memory",
        "keep work that needs fast exchange among GPUs of one socket; pin each worker's input pipeline "
        "to its GPUs' CPUs",
    ),
    "disabled": (
        "P2P is disabled by a driver setting (registry key / module option)",
        "re-enable P2P in the driver configuration if the platform supports it",
    ),
    "chipset": (
        "the chipset / PCIe root complex does not support peer traffic between them",
        "no software fix: exchange goes through host memory; place such work on GPUs that can peer",
    ),
    "gpu": (
        "this GPU model or mode does not allow peer access (e.g. GeForce cards on recent drivers)",
        "no software fix: exchange goes through host memory; NCCL still works, more slowly",
    ),
    "acs": (
        "they share a PCIe switch, yet peer access failed: a switch with ACS (Access Control Services) "
        "enabled, or the IOMMU, sends peer traffic up to the root complex",
        "disable ACS on the switch ports (BIOS, or `setpci` on each bridge; check `lspci -vvv | grep ACSCtl`) "
        "and use iommu=pt, then rerun",
    ),
    "host-bridge": (
        "their path crosses the CPU's PCIe host bridge (PHB/NODE), which many chipsets do not forward "
        "peer traffic through",
        "place work that needs fast exchange on GPUs behind one PCIe switch, or accept staged copies",
    ),
    "nvlink": (
        "they are connected by NVLink, yet peer access failed: check the driver, the NVIDIA fabric manager "
        "(NVSwitch systems) and any virtualization layer",
        "run `nvidia-smi topo -p2p n` and `nvidia-smi nvlink -s` on the machine",
    ),
    "unknown": (
        "the topology does not say why",
        "run `nvidia-smi topo -p2p r` on the machine to see the driver's reason",
    ),
}
# "cross-socket" where the source does not know the sockets: what SYS says there, hedged.
_SYS_WHERE = f"different NUMA nodes ({SYS_MEANING}; which it is here, the source does not say)"
_CROSS_NUMA_REASONS: dict[str, tuple[str, str]] = {
    "numa": (
        f"they sit on {_SYS_WHERE}: copies between them go through host memory",
        ("keep work that needs fast exchange among GPUs of one NUMA node; pin each worker's input pipeline "
         "to its GPUs' CPUs"),
    ),
    "vm": (
        ("this virtual machine's topology shows SYS between them, and a VM's virtual topology cannot tell why "
         "(the hypervisor hides the host's PCIe layout): copies between them go through host memory"),
        "keep work that needs fast exchange among GPUs that can peer; measure with `gputopo bench-p2p`",
    ),
}


def _sys_side(topology: Topology, pairs: list[tuple[int, int]]) -> str:
    """What SYS between these GPU pairs (topology indices) is known to be: ``sockets`` (every pair on
    known, different CPU sockets), ``vm`` (a virtual machine's topology) or ``numa`` (NUMA nodes only)."""
    known = (None not in (topology.gpu(a).socket, topology.gpu(b).socket) for a, b in pairs)
    if all(known) and all(same_socket(topology, a, b) is False for a, b in pairs):
        return "sockets"
    return "vm" if vm_evidence(topology) is not None else "numa"


def _no_peer_reason(link: Link) -> str:
    words = {w for w in (link.p2p_read, link.p2p_write) if w not in (None, P2P_OK)}
    path = link.pcie_path or (link.type if not link.is_nvlink else None)
    if "DR" in words:
        return "disabled"
    if "GNS" in words:
        return "gpu"
    if "CNS" in words:
        return "chipset"
    if link.is_nvlink:
        return "nvlink"
    if path == "SYS" or "TNS" in words:
        return "cross-socket"
    if path in ("PIX", "PXB"):
        return "acs"
    if path in ("PHB", "NODE"):
        return "host-bridge"
    return "unknown"


def _pair_findings(topology: Topology, view: TfView, mapping: dict[int, int]) -> list[Finding]:
    links = topology.link_map()
    denied: dict[str, list[tuple[int, int]]] = {}
    peers_across: list[tuple[int, int]] = []
    ordinals = [o for o in tf_ordinals(view) if o in mapping]
    for pos, a in enumerate(ordinals):
        for b in ordinals[pos + 1 :]:
            link = links.get((mapping[a], mapping[b]))
            if link is None:
                continue
            state = peer_state(view, a, b)
            if state is False:
                denied.setdefault(_no_peer_reason(link), []).append((a, b))
            elif state is True and not link.is_nvlink and (link.pcie_path or link.type) == "SYS":
                peers_across.append((a, b))
    findings = []
    for reason, pairs in denied.items():
        why, fix = _REASONS[reason]
        if reason == "cross-socket":
            side = _sys_side(topology, [(mapping[a], mapping[b]) for a, b in pairs])
            why, fix = _CROSS_NUMA_REASONS.get(side, (why, fix))
        words = sorted({w for a, b in pairs for w in _p2p_words(links[(mapping[a], mapping[b])])})
        detail = "; the driver says " + ", ".join(f"{w}: {P2P_STATUS_MEANING[w]}" for w in words) if words else ""
        findings.append(
            Finding(
                "warning",
                f"tf-cannot-peer-{reason}",
                f"TensorFlow could not peer {_pair_text(pairs, mapping)}: {why}{detail}",
                gpus=sorted({mapping[o] for pair in pairs for o in pair}),
                fix=fix,
            )
        )
    if peers_across:
        side = _sys_side(topology, [(mapping[a], mapping[b]) for a, b in peers_across])
        across = {
            "sockets": "the topology says SYS (across CPU sockets): peer copies over QPI/UPI or Infinity Fabric are often slower",
            "numa": f"the topology puts them on {_SYS_WHERE}: peer copies over that link are often slower",
        }.get(side, "this virtual machine's topology shows SYS between them; a VM's virtual topology cannot tell")
        across += " than staging through host memory" if side != "vm" else " how the GPUs are really wired"
        findings.append(
            Finding(
                "info",
                "tf-peers-across-sockets",
                f"TensorFlow treats {_pair_text(peers_across, mapping)} as peers although {across}",
                gpus=sorted({mapping[o] for pair in peers_across for o in pair}),
                fix="measure with `gputopo bench-p2p` before relying on these pairs",
            )
        )
    return findings


def _p2p_words(link: Link) -> set[str]:
    return {w for w in (link.p2p_read, link.p2p_write) if w is not None and w != P2P_OK and w in P2P_STATUS_MEANING}


def _pair_text(pairs: list[tuple[int, int]], mapping: dict[int, int]) -> str:
    """``GPUs 0-2, 0-3`` where TF's numbers are nvidia-smi's, else both numberings."""
    if all(mapping[a] == a and mapping[b] == b for a, b in pairs):
        return "GPUs " + pair_list(pairs, limit=None)
    return ", ".join(f"TF GPU:{a}-GPU:{b} (nvidia-smi {mapping[a]}-{mapping[b]})" for a, b in pairs)
