"""``NCCL_DEBUG=INFO`` logs -> Topology with NCCL's view (``Topology.nccl``): ranks, the transport of
every connection per channel, P2P NCCL refused, settings from the environment, rings and trees.

Lines look like ``host:pid:tid [cudaDev] NCCL INFO <message>`` (any prefix before ``NCCL INFO`` is
skipped: timestamps, log collectors, an mpirun tag; what a line says of ranks is ``sources.nccl_lines``,
which the TF log reader shares). Read:
- ``comm 0x.. rank R nranks N cudaDev D [nvmlDev M] busId B`` (Init START/COMPLETE): a rank's GPU
  (``comm 0x.. rank R nRanks N nNodes K`` and NCCL 2.3's ``[comm 0x..] rank R nranks N``: the rank
  count, and the rank its own thread logs for);
- ``Channel CC[/x] : R[X] -> S[Y] [send|receive] via T`` and the older ``Ring CC : ...``: R sends to
  S over T (``P2P/IPC``, ``P2P/CUMEM/read``, ``P2P/direct pointer``, ``SHM/direct/direct``, ``direct
  shared memory``, ``NET/IB/0/GDRDMA``...). X is the rank's busId (hex, NCCL 2.5 to 2.18.1; four digits
  or more: ``1000`` is 0000:01:00.0) or a device number, kept as the rank's CUDA device: NCCL 2.3
  printed the CUDA device there, 2.4 and 2.18.3 on the NVML index (the two agree where each process
  sees every GPU in PCI order); GPUs are never numbered by it (below);
- ``P2P is disabled between connected GPUs a and b`` / ``Could not enable P2P between dev a(=B) and
  dev b(=C)``: P2P CUDA refused (a and b are NCCL's GPU numbers on that host);
- ``failed to open CUDA IPC handle : N reason`` (WARN): the P2P connections the same thread set up
  failed; ``peer access is not supported`` (CUDA error 217, or 64 in old CUDA) says the pair cannot peer;
- ``NCCL_X set by environment to V``, ``NCCL version V``, ``Channel CC/NN : r r r`` (rings: each
  lists every rank of its communicator, so its ranks are the job's even where no other line names them),
  ``Trees ...`` / ``Tree N : ...``, ``NVLS multicast support is (not) available``, ``CollNet``;
- the ``[cudaDev]`` of the prefix is the logging thread's CUDA device; a thread logs for the rank its
  connection (the sender; the receiver of a ``[receive]``), ``Trees [c] d/d/d->R->u`` or Init line
  names, which gives that rank's CUDA device; ``Setting affinity for GPU N`` names NCCL's GPU
  ``dev``, the NVML index (nvidia-smi's number) since the topology code prints it: where N is not
  the thread's CUDA device it can only be the NVML index, and numbers that rank's GPU.

GPU numbers: on one host, ranks whose bus ids are all known are numbered in bus-id order (PCI
order, which is nvidia-smi's where every GPU takes part: inferred, and said so); otherwise, and
across hosts, the GPU number is the rank. A rank is a GPU (NCCL refuses two ranks of a communicator on
one GPU): where ``nranks`` says more ranks than the text names, the label says so as a lower bound
(``at least 4 GPUs (3 named)``, ``9 of 16 ranks on ...``); the GPUs not named are not made up.

Hosts: a rank's host is the ``host`` of the lines its thread logs; P2P and SHM never leave a host,
so the peer of such a connection is on the logging rank's host too. A NET (or CollNet) connection
the log does not place inside one named host means several hosts (NCCL takes the network inside a
host only where P2P and SHM are both off, which ``NCCL_P2P_DISABLE``/``NCCL_SHM_DISABLE`` would
show): host names redacted to one ``<placeholder>`` no longer make a multi-node job one host's GPUs.
A decoration every line shares (a quote, bold, a host label) is taken off first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputopo.errors import InputError, NothingToRead
from gputopo.model import Gpu, NcclRank, NcclTransport, NcclView, ReadingNote, Topology
from gputopo.sources.nccl_lines import (
    COMM_RE,
    CONN_RE,
    INIT_RE,
    LEVEL_RE,
    OLD_COMM_RE,
    TREE_RANK_RE,
    host_of,
    ring_ranks,
    ring_text,
    thread_device,
)
from gputopo.sources.pasted import MAX_GPUS, capped, device_index, nccl_bus_id, undecorated_lines, with_all_pairs
from gputopo.sources.tools.nccl_tests import device_line, header_without_rows
from gputopo.sources.tools.nccl_tests import sniff as nccl_tests_sniff

KIND = "NCCL_DEBUG=INFO log"
MAX_NOTES = 20

_IPC_FAILED = "failed to open CUDA IPC handle"
_PEER_UNSUPPORTED = "peer access is not supported"
_TREE_RE = re.compile(r"^(Trees \[.*|Tree \d+ : .*)$")
_DISABLED_RE = re.compile(r"P2P is disabled between connected GPUs (\d+) and (\d+)")
_NOT_ENABLED_RE = re.compile(r"Could not enable P2P between dev (\d+)\(=([0-9a-fA-F]+)\) and dev (\d+)\(=([0-9a-fA-F]+)\)")
_SETTING_RE = re.compile(r"(NCCL_[A-Z0-9_]+) set by environment to (\S+?)\.?\s*$")
_VERSION_RE = re.compile(r"NCCL version (\S+)")
_AFFINITY_RE = re.compile(r"Setting affinity for GPU (\d+) to ")
_WITHIN_A_HOST = ("P2P", "SHM")  # NCCL's transports inside one host (CUDA IPC / pointers, host shared memory)
_BETWEEN_HOSTS = ("NET", "COLLNET")  # the network: NCCL uses it within a host only where P2P and SHM are both off


def sniff(text: str) -> bool:
    """Whether the text holds NCCL debug lines."""
    return re.search(r"NCCL (?:INFO|WARN) ", text) is not None


@dataclass
class _State:
    view: NcclView = field(default_factory=NcclView)
    bus: dict[int, str] = field(default_factory=dict)  # rank -> bus id
    cuda: dict[int, int] = field(default_factory=dict)  # rank -> CUDA device
    nvml: dict[int, int] = field(default_factory=dict)  # rank -> NVML index (``nvmlDev``), nvidia-smi's number
    hosts: set[str] = field(default_factory=set)
    rank_host: dict[int, str] = field(default_factory=dict)
    transports: dict[tuple[int, int, str], NcclTransport] = field(default_factory=dict)
    disabled: set[tuple[int, int]] = field(default_factory=set)
    # "P2P is disabled between connected GPUs a and b" with the host that logged it: NVML's numbers there
    disabled_at: set[tuple[str | None, int, int]] = field(default_factory=set)
    refused_bus: set[tuple[str, str]] = field(default_factory=set)  # "Could not enable P2P": the two bus ids
    nodes: int = 0  # the most ``nNodes`` any comm line says
    most_ranks: int = 0  # the most ``nranks`` any comm line says (at most MAX_GPUS): the job's GPUs, one per rank
    net_pairs: int = 0  # network connections (NET, CollNet) the log does not place within one named host
    dev_bus: dict[int, str] = field(default_factory=dict)  # NCCL's GPU number -> bus id ("Could not enable P2P")
    thread_p2p: dict[str | None, list[tuple[int, int]]] = field(default_factory=dict)  # host:pid:tid -> P2P it set up
    ipc_failed: list[tuple[str | None, bool]] = field(default_factory=list)  # (thread, peer access unsupported)
    # (host:pid:tid, [cudaDev]) of the line being read: one thread may set up several ranks in turn
    # (an init loop over devices), each with its device current.
    speaker: tuple[str, int] | None = None
    speaker_rank: dict[tuple[str, int], int] = field(default_factory=dict)  # -> the rank it logs for
    speaker_gpu: dict[tuple[str, int], int] = field(default_factory=dict)  # -> "Setting affinity for GPU N"
    names: dict[int, str] = field(default_factory=dict)  # rank -> GPU name (nccl-tests' device list)
    ring_ranks: set[int] = field(default_factory=set)  # the ranks NCCL's rings list (every rank of a communicator)


def read(text: str, source: str) -> Topology:
    """NCCL's view of the job logged in ``text``, and the GPUs it names."""
    state = _State()
    for line in undecorated_lines(text):
        line = capped(line)  # no NCCL message is that long
        if "NCCL " in line and (m := LEVEL_RE.search(line)):
            host, thread = host_of(line[: m.start()])
            if host and not host.startswith("<"):
                state.hosts.add(host)
            dev = thread_device(line[: m.start()])
            state.speaker = (thread, dev) if thread is not None and dev is not None else None
            _message(state, m.group(1), line[m.end() :], host, thread)
        elif "NCCL version" in line and (v := _VERSION_RE.search(line)):
            state.view.version = state.view.version or v.group(1)
        elif "Rank" in line and (d := device_line(line)) is not None and d[0] < MAX_GPUS:
            _device_of_rank(state, *d)  # nccl-tests' `Using devices` preamble
    view = state.view
    if not (state.bus or state.cuda or state.transports or state.disabled or view.settings or view.version
            or state.speaker_rank or state.ring_ranks):
        raise NothingToRead(f"{source}: NCCL lines found, but none that names a rank, a connection or a setting")
    view.transports = list(state.transports.values())
    view.p2p_disabled_pairs = [list(p) for p in sorted(state.disabled)]
    topo = _topology(state, source)
    if "busbw" in text and not nccl_tests_sniff(text) and header_without_rows(text):  # an nccl-tests table cut at its header
        topo.reading_notes.append(ReadingNote("nccl-tests-no-rows", {"source": source, "header": True, "beside_log": True}))
    return topo


def _device_of_rank(state: _State, rank: int, _host: str, device: int, bus: str | None, name: str) -> None:
    """A rank's GPU as nccl-tests lists it before the log (an init line, where there is one, says the
    same). Its host name is not taken: nccl-tests may spell it otherwise than NCCL's prefix does."""
    state.cuda.setdefault(rank, device)
    if bus is not None:
        state.bus.setdefault(rank, bus)
    if name:
        state.names.setdefault(rank, name)


def _message(state: _State, level: str, msg: str, host: str | None, thread: str | None) -> None:
    view = state.view
    if level == "WARN":
        if len(view.notes) < MAX_NOTES:
            view.notes.append(msg.strip()[:300])
        if _IPC_FAILED in msg and len(state.ipc_failed) < MAX_GPUS:
            state.ipc_failed.append((thread, _PEER_UNSUPPORTED in msg))
    elif m := CONN_RE.search(msg):
        _connection(state, m, host, thread)
    elif m := INIT_RE.search(msg):
        rank = int(m.group(1))
        view.nranks = int(m.group(2)[:9])
        state.most_ranks = max(state.most_ranks, min(view.nranks, MAX_GPUS))
        if rank >= MAX_GPUS:
            return
        state.cuda[rank] = int(m.group(3)[:9])
        if m.group(4) is not None:  # NVML's index of the GPU: nvidia-smi's number for it
            state.nvml[rank] = int(m.group(4)[:9])
        if m.group(5) is not None and (bus := nccl_bus_id(m.group(5))) is not None:
            state.bus[rank] = bus
        if host:
            state.rank_host[rank] = host
        _logs_for(state, rank)
    elif (m := COMM_RE.search(msg)) or (m := OLD_COMM_RE.match(msg.strip())):
        view.nranks = int(m.group(2)[:9])
        state.most_ranks = max(state.most_ranks, min(view.nranks, MAX_GPUS))
        if m.re is COMM_RE:
            state.nodes = max(state.nodes, min(int(m.group(3)[:9]), MAX_GPUS))
        if (rank := device_index(m.group(1))) is not None:  # the rank's own thread prints its comm line
            _logs_for(state, rank)
    elif (ring := ring_text(msg)) is not None:
        if len(view.rings) < MAX_GPUS:
            view.rings.append(ring)
        if len(state.ring_ranks) < MAX_GPUS:  # a ring lists every rank of its communicator
            state.ring_ranks.update(ring_ranks(msg) or [])
    elif m := _TREE_RE.match(msg.strip()):
        if len(view.trees) < MAX_GPUS:
            view.trees.append(m.group(1)[:500])
        if (r := TREE_RANK_RE.match(msg.strip())) and (rank := device_index(r.group(1))) is not None:
            _logs_for(state, rank)
    elif (m := _AFFINITY_RE.search(msg)) and state.speaker and (gpu := device_index(m.group(1))) is not None:
        if len(state.speaker_gpu) < MAX_GPUS * 8:
            state.speaker_gpu[state.speaker] = gpu
    else:
        _other(state, msg, host)


def _logs_for(state: _State, rank: int) -> None:
    if state.speaker is not None and rank < MAX_GPUS and len(state.speaker_rank) < MAX_GPUS * 8:
        state.speaker_rank.setdefault(state.speaker, rank)


def _other(state: _State, msg: str, host: str | None = None) -> None:
    view = state.view
    if m := _DISABLED_RE.search(msg):
        pair = tuple(sorted((int(m.group(1)), int(m.group(2)))))
        state.disabled.add(pair)  # type: ignore[arg-type]
        if len(state.disabled_at) < MAX_GPUS * 8:
            state.disabled_at.add((host, *pair))  # type: ignore[arg-type]
    elif m := _NOT_ENABLED_RE.search(msg):
        state.disabled.add(tuple(sorted((int(m.group(1)), int(m.group(3))))))  # type: ignore[arg-type]
        buses = (nccl_bus_id(m.group(2)), nccl_bus_id(m.group(4)))
        if None not in buses and len(state.refused_bus) < MAX_GPUS * 8:
            state.refused_bus.add(tuple(sorted(buses)))  # type: ignore[arg-type]
        for dev, tag in ((m.group(1), m.group(2)), (m.group(3), m.group(4))):
            if (index := device_index(dev)) is not None and (bus := nccl_bus_id(tag)) is not None:
                state.dev_bus.setdefault(index, bus)
    elif m := _SETTING_RE.search(msg):
        if len(view.settings) < MAX_NOTES:
            view.settings[m.group(1)] = m.group(2)[:100]
    elif m := _VERSION_RE.search(msg):
        view.version = view.version or m.group(1)
    elif "NVLS multicast support is not available" in msg:
        view.nvls = False if view.nvls is None else view.nvls
    elif "CollNet" in msg and "enabled" in msg.lower():
        view.collnet = True


def _transport_word(detail: str) -> str:
    head = detail.split("/")[0].strip().upper()
    if "shared memory" in detail.lower():
        return "SHM"
    return {"P2P": "P2P", "SHM": "SHM", "NET": "NET", "NVLS": "NVLS", "COLLNET": "COLLNET"}.get(head, head[:20])


def _connection(state: _State, m: re.Match[str], host: str | None, thread: str | None) -> None:
    channel, src, dst = int(m.group(1)), int(m.group(2)), int(m.group(4))
    if src >= MAX_GPUS or dst >= MAX_GPUS:  # a rank past the bound is a misread (or a job too big to chart)
        return
    detail = m.group(6)[:80]
    word = _transport_word(detail)
    if host and not host.startswith("<"):  # the rank that logs the line: the receiver of a [receive]
        state.rank_host.setdefault(dst if "[receive]" in m.group(0) else src, host)
        if word in _WITHIN_A_HOST:  # P2P and SHM never leave a host: the peer is on the logging rank's
            state.rank_host.setdefault(src, host)
            state.rank_host.setdefault(dst, host)
    _logs_for(state, dst if "[receive]" in m.group(0) else src)
    for rank, tag in ((src, m.group(3)), (dst, m.group(5))):
        if tag is None:
            continue
        if len(tag) >= 4 or any(c in "abcdefABCDEF" for c in tag):  # busId 1000 is 0000:01:00.0
            if (bus := nccl_bus_id(tag)) is not None:
                state.bus.setdefault(rank, bus)
        elif (device := device_index(tag)) is not None:
            state.cuda.setdefault(rank, device)
    if word == "NET" and "GDRDMA" in detail:
        state.view.gdr = True
    if word == "NVLS":
        state.view.nvls = True
    if word == "COLLNET":
        state.view.collnet = True
    if word == "P2P" and len(state.thread_p2p.setdefault(thread, [])) < MAX_GPUS:
        state.thread_p2p[thread].append((src, dst))
    key = (src, dst, detail)
    entry = state.transports.setdefault(key, NcclTransport(src_rank=src, dst_rank=dst, transport=word, detail=detail))
    if channel not in entry.channels and len(entry.channels) < 256:
        entry.channels.append(channel)


def _threads_to_ranks(state: _State) -> None:
    """Each thread's CUDA device and affinity line, given to the rank it logs for (see the module)."""
    for (thread, dev), rank in state.speaker_rank.items():
        host = thread.rsplit(":", 2)[0]
        if not host.startswith("<"):
            state.rank_host.setdefault(rank, host)
        state.cuda.setdefault(rank, dev)
        gpu = state.speaker_gpu.get((thread, dev))
        if gpu is not None and gpu != dev:  # not the CUDA device: the NVML index
            state.nvml.setdefault(rank, gpu)


def _topology(state: _State, source: str) -> Topology:
    view = state.view
    _threads_to_ranks(state)
    ranks = sorted(set(state.bus) | set(state.cuda) | {r for t in view.transports for r in (t.src_rank, t.dst_rank)}
                   | state.ring_ranks)
    if not ranks:  # only P2P complaints: they number the GPUs themselves (NCCL's GPU numbers)
        return _gpus_of_complaints(state, source)
    # One host's lines of a job on several nodes (``nNodes``, or a connection over the network, which
    # NCCL takes between hosts: host names redacted to one placeholder still show it) are not one
    # host's GPUs: ranks, as across hosts.
    state.net_pairs = 0 if _network_forced(view) else sum(
        1 for t in view.transports if t.transport in _BETWEEN_HOSTS and t.src_rank != t.dst_rank
        and (state.rank_host.get(t.src_rank) is None or state.rank_host.get(t.src_rank) != state.rank_host.get(t.dst_rank)))
    several = state.nodes > 1 or state.net_pairs > 0
    one_host = len(state.hosts) <= 1 and not several
    by_nvml = one_host and all(r in state.nvml for r in ranks) and len({state.nvml[r] for r in ranks}) == len(ranks)
    # Bus-id order is nvidia-smi's only where every rank of the job is in the text (a log's tail may
    # name ranks 4-7 of 8 only: the first of them is not GPU 0).
    every_rank = view.nranks is None or view.nranks <= len(ranks)
    by_bus = not by_nvml and one_host and every_rank and all(r in state.bus for r in ranks) and \
        len(set(state.bus.values())) == len(ranks)
    if by_nvml:  # NCCL names each rank's NVML index: nvidia-smi's GPU numbers, exactly
        index_of = {rank: state.nvml[rank] for rank in ranks}
    elif by_bus:
        index_of = {rank: pos for pos, rank in enumerate(sorted(ranks, key=lambda r: state.bus[r]))}
    else:
        index_of = {rank: rank for rank in ranks}
    if len(ranks) > MAX_GPUS:
        raise InputError(f"{source}: {len(ranks)} NCCL ranks; gputopo reads logs of at most {MAX_GPUS}")
    gpus = [Gpu(index=index_of[r], pci_bus_id=state.bus.get(r), host=None if one_host else state.rank_host.get(r),
                name=state.names.get(r)) for r in ranks]
    view.ranks = [NcclRank(rank=r, cuda_device=state.cuda.get(r), pci_bus_id=state.bus.get(r), host=state.rank_host.get(r))
                  for r in ranks]
    for t in view.transports:
        t.a, t.b = index_of.get(t.src_rank), index_of.get(t.dst_rank)
    # A rank is a GPU (NCCL refuses two ranks of one communicator on one GPU): ``nranks`` beyond the ranks
    # the text names are GPUs in lines the excerpt lacks.
    unnamed = state.most_ranks > len(ranks)
    topo = with_all_pairs(gpus, "nccl-log", (f"at least {state.most_ranks} GPUs ({len(gpus)} named)" if unnamed else
                                             f"{len(gpus)} GPUs") + " in an NCCL_DEBUG=INFO log", source) if one_host else \
        Topology(gpus=sorted(gpus, key=lambda g: g.index), source="nccl-log", source_detail=source,
                 label=f"{len(gpus)}{f' of {state.most_ranks}' if unnamed else ''} ranks on {_hosts_word(state)} "
                       "in an NCCL_DEBUG=INFO log")
    topo.nccl = view
    topo.gpu_numbering = "nvml" if by_nvml else None
    links = topo.link_map()
    for t in view.transports:
        if t.transport == "P2P" and t.a is not None and t.b is not None and (t.a, t.b) in links:
            link = links[(t.a, t.b)]
            link.p2p_read = link.p2p_write = "ok"  # NCCL set up a peer-to-peer connection
    _mark_ipc_failed(state, index_of, links)
    unplaced = _mark_refused(state, by_nvml or by_bus, links, _nvml_places(state, index_of, one_host), topo)
    if by_bus and len(ranks) > 1:
        topo.reading_notes.append(ReadingNote("nccl-gpus-by-bus-id", {"source": source}))
    if unplaced:
        topo.reading_notes.append(ReadingNote("nccl-p2p-disabled-unplaced", {
            "source": source, "pairs": [list(pair) for pair in unplaced[:MAX_NOTES]], "one_host": one_host}))
    if state.nodes > max(len(state.hosts), 1):
        topo.reading_notes.append(ReadingNote("nccl-log-hosts-missing", {
            "source": source, "nodes": state.nodes, "hosts": sorted(state.hosts)[:MAX_NOTES]}))
    return topo


def _network_forced(view: NcclView) -> bool:
    """Whether the log's settings turn both of NCCL's in-host transports off (then NET may join GPUs of one host)."""
    off = {"1", "true", "yes"}
    return view.settings.get("NCCL_P2P_DISABLE", "").lower() in off and view.settings.get("NCCL_SHM_DISABLE", "").lower() in off


def _hosts_word(state: _State) -> str:
    """``3 hosts``; where the log names fewer hosts than it shows (redacted names, one host's lines of a
    job on several nodes), what it shows: ``at least 2 hosts (1 named)``."""
    named = len(state.hosts)
    shown = max(named, state.nodes, 2 if state.net_pairs else 1)
    if shown <= named:
        return f"{named} host{'s' if named != 1 else ''}"
    return f"at least {shown} hosts ({named} named)" if state.net_pairs and not state.nodes else f"{shown} hosts ({named} named)"


def _nvml_places(state: _State, index_of: dict[int, int], one_host: bool) -> dict[tuple[str | None, int], int]:
    """``{(host, NVML index): GPU number}`` for the ranks whose NVML index the log names (host None on one host)."""
    return {(None if one_host else state.rank_host.get(rank), nvml): index_of[rank]
            for rank, nvml in state.nvml.items() if rank in index_of}


def _mark_ipc_failed(state: _State, index_of: dict[int, int], links: dict) -> None:
    """A ``failed to open CUDA IPC handle`` WARN undoes the "ok" of the P2P connections its thread
    set up (the thread's lines, wherever they are: processes interleave): "peer access is not
    supported" says the pair cannot peer (NS); another reason (invalid argument) leaves it unknown.
    A WARN without a ``host:pid:tid`` prefix is placed only where the log holds one P2P pair. The
    WARN does not name its peer: where the thread set up P2P with several pairs (rings of different
    orders, trees), which one CUDA refused is not known, so all are left unknown, none called NS."""
    every = {tuple(sorted(pair)) for pairs in state.thread_p2p.values() for pair in pairs}
    for thread, unsupported in sorted(state.ipc_failed, key=lambda f: f[1]):  # "not supported" last: it wins
        pairs = state.thread_p2p.get(thread) if thread is not None else (list(every) if len(every) == 1 else [])
        one_pair = len({tuple(sorted(pair)) for pair in pairs or []}) == 1
        for src, dst in pairs or []:
            a, b = index_of.get(src), index_of.get(dst)
            link = links.get((min(a, b), max(a, b))) if a is not None and b is not None else None
            if link is not None:
                link.p2p_read = link.p2p_write = "NS" if unsupported and one_pair else None


def _mark_refused(state: _State, numbered_like_nvml: bool, links: dict,
                  places: dict[tuple[str | None, int], int], topo: Topology) -> list[tuple[int, int]]:
    """"P2P is disabled between connected GPUs a and b" numbers the GPUs as NVML does (NCCL's
    ``ncclTopoCheckP2p`` prints ``gpu.dev``, the NVML index: nvidia-smi's numbers). They land on
    this topology's pair where its GPUs are numbered that way too (by ``nvmlDev``, or by bus-id
    order, which the ``nccl-gpus-by-bus-id`` note says is inferred), else where the log names the
    NVML index of both GPUs' ranks (``nvmlDev``, ``Setting affinity for GPU N``) on the host that
    logged the line. "Could not enable P2P between dev a(=B) and dev b(=C)" names the bus ids: it
    lands on the GPUs that have them. The pairs of the first kind that land nowhere are returned
    (said in a note: the log records them, it does not say which of its GPUs they are)."""
    by_bus = {g.pci_bus_id: g.index for g in topo.gpus if g.pci_bus_id}
    for bus_a, bus_b in state.refused_bus:
        a, b = by_bus.get(bus_a), by_bus.get(bus_b)
        if a is not None and b is not None and (link := links.get((min(a, b), max(a, b)))) is not None:
            link.p2p_read = link.p2p_write = "NS"  # CUDA refused peer access to NCCL
    unplaced = []
    for host, a, b in sorted(state.disabled_at, key=lambda d: (d[0] or "", d[1], d[2])):
        if numbered_like_nvml:
            pair = (a, b)
        else:
            where = None if all(h is None for h, _ in places) else host
            pair = (places.get((where, a)), places.get((where, b)))  # type: ignore[assignment]
        link = links.get((min(pair), max(pair))) if None not in pair else None  # type: ignore[type-var]
        if link is not None:
            link.p2p_read = link.p2p_write = "NS"  # NCCL found P2P disabled between the pair: not used
        elif (a, b) not in unplaced:
            unplaced.append((a, b))
    if numbered_like_nvml:  # "Could not enable" pairs without bus ids on the GPUs: by number, as before
        for a, b in state.disabled:
            if (link := links.get((a, b))) is not None:
                link.p2p_read = link.p2p_write = "NS"
    return unplaced


def _gpus_of_complaints(state: _State, source: str) -> Topology:
    """No rank is named: the GPUs are the ones NCCL's P2P complaints number, and those pairs cannot peer."""
    numbers = sorted({n for pair in state.disabled for n in pair} | set(state.dev_bus))
    numbers = [n for n in numbers if n < MAX_GPUS]
    gpus = [Gpu(index=n, pci_bus_id=state.dev_bus.get(n)) for n in numbers]
    topo = with_all_pairs(gpus, "nccl-log", f"{len(gpus)} GPUs in an NCCL_DEBUG=INFO log", source)
    topo.nccl = state.view
    # "P2P is disabled between connected GPUs a and b" numbers GPUs by NVML index; "Could not enable
    # P2P between dev a and dev b" by the process's CUDA device: only the first alone is NVML's numbering.
    topo.gpu_numbering = None if state.dev_bus else "nvml"
    links = topo.link_map()
    for a, b in state.disabled:
        if (a, b) in links:
            links[(a, b)].p2p_read = links[(a, b)].p2p_write = "NS"  # CUDA refused peer access to NCCL
    return topo
