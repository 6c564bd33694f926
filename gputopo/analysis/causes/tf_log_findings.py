"""What a TensorFlow log says on its own, beyond who can peer: CUDA's peer limit, GPUs TF ignores.

Pure functions over a ``TfView``; ``tf_crosscheck.tf_findings`` reports them with the rest.
"""

from __future__ import annotations

from gputopo.model import Finding, TfView
from gputopo.notation import number_list

CUDA_MAX_PEERS = 8  # a GPU can map at most 8 peers (CUDA_ERROR_TOO_MANY_PEERS past that)

PEER_LIMIT_FIX = (
    f"give each process at most {CUDA_MAX_PEERS + 1} GPUs, so that no GPU needs more than {CUDA_MAX_PEERS} "
    f"peers: one process per group of at most {CUDA_MAX_PEERS} GPUs that can peer (MultiWorkerMirroredStrategy "
    f"with one worker per group, `gputopo recommend --gpus {CUDA_MAX_PEERS} --jobs 2` picks the groups), or "
    f"CUDA_VISIBLE_DEVICES listing at most {CUDA_MAX_PEERS + 1} GPUs"
)


def peer_limit_finding(view: TfView) -> Finding | None:
    """CUDA_ERROR_TOO_MANY_PEERS lines: which GPUs ran out of peer mappings, and what to do."""
    if view.too_many_peers is None:
        return None
    failed = [(i, j) for i, j in view.enable_failed if i in view.too_many_peers]
    largest = max([o for pair in view.enable_failed for o in pair] + list(view.too_many_peers), default=None)
    gpus = number_list(view.too_many_peers)
    if failed:
        pairs = ", ".join(f"{i}->{j}" for i, j in failed)
        what = (
            f"TensorFlow could not enable peer access {pairs} (CUDA_ERROR_TOO_MANY_PEERS: peer mapping resources "
            f"exhausted): GPU {gpus} hit CUDA's limit of {CUDA_MAX_PEERS} peers per GPU"
        )
        after = "; those pairs could peer, but in this process their copies go through host memory"
    else:
        named = f"set up GPU {gpus}" if view.too_many_peers else "set up a GPU"
        what = (
            f"TensorFlow could not {named}: CUDA_ERROR_TOO_MANY_PEERS (peer mapping resources exhausted); "
            f"a GPU can map at most {CUDA_MAX_PEERS} peers"
        )
        after = ""
    if largest is not None and largest >= CUDA_MAX_PEERS + 1:
        what += f", and this process sees at least {largest + 1} GPUs (ordinal {largest})"
    return Finding(
        "warning",
        "tf-too-many-peers",
        what + after,
        gpus=sorted(set(view.too_many_peers) | {o for pair in failed for o in pair}),
        fix=PEER_LIMIT_FIX,
    )


def ignored_gpu_findings(view: TfView) -> list[Finding]:
    """GPUs TensorFlow found but will not use (too old a compute capability)."""
    findings = []
    for device in view.devices:
        if device.ignored:
            name = f" ({device.name})" if device.name else ""
            findings.append(
                Finding(
                    "warning",
                    "tf-gpu-ignored",
                    f"TensorFlow ignores GPU {device.ordinal}{name}: {device.ignored}; it will not run on it",
                    gpus=[device.ordinal],
                    fix="train on the other GPUs (CUDA_VISIBLE_DEVICES), or use a TensorFlow build for that GPU",
                )
            )
    return findings


def peer_info_is_peer_limit_only(view: TfView) -> bool:
    """Whether the only pairs the log says can peer are those CUDA's peer limit stopped (no matrix,
    no 'cannot peer' line): then the peer-limit finding says it all."""
    if view.too_many_peers is None:
        return False
    stated = {(i, j) for i, row in enumerate(view.peer) for j, value in enumerate(row) if i != j and value is not None}
    return stated <= {(i, j) for i, j in view.enable_failed}


# A GPU TensorFlow got less than half the memory it got on the others of its model: the rest was in use.
SHORT_MEMORY_SHARE = 0.5


def memory_short_findings(view: TfView) -> list[Finding]:
    """``tf-gpu-memory-short``: a GPU on which TensorFlow's process got under half the memory it got on
    the others of the same model (``Created TensorFlow device ... with N MB memory``): when TensorFlow
    started, something else held the rest, most likely another process (an inference: a per-GPU
    memory limit set for that GPU alone would do the same)."""
    by_model: dict[str, list] = {}
    for device in view.devices:
        if device.memory_mb and device.name and not device.ignored:
            by_model.setdefault(device.name, []).append(device)
    findings = []
    for name, devices in by_model.items():
        most = max(device.memory_mb for device in devices)
        for device in devices:
            if len(devices) > 1 and device.memory_mb < SHORT_MEMORY_SHARE * most:
                findings.append(Finding(
                    "warning", "tf-gpu-memory-short",
                    f"TensorFlow got {device.memory_mb} MB on GPU {device.ordinal} against up to {most} MB on the other "
                    f"{name} GPUs: about {most - device.memory_mb} MB of it was in use when TensorFlow started, most "
                    "likely by another process (read from the figures alone: a memory limit set for that GPU alone would do the "
                    "same)",
                    gpus=[device.ordinal],
                    fix=f"see what runs on GPU {device.ordinal} (`nvidia-smi`) before training; leave it out "
                        "(CUDA_VISIBLE_DEVICES) or stop what holds it"))
    return findings


def denied_peers_fix(view: TfView) -> str:
    """What to do about pairs TF could not peer, from its log alone: the platform's rule where the
    log shows a Windows build (``tf-log-windows``), else where to look."""
    if any(note.code == "tf-log-windows" for note in view.reading_notes):
        return ("the log is from Windows, where CUDA lets GPUs peer only in the TCC driver model: see each GPU's "
                "'Driver Model' in `nvidia-smi -q`; in TCC, GPUs under different CPU sockets may still not peer")
    return ("to see why, give the machine's topology too (`gputopo scan --tf-log LOG` on it, or `--from` its "
            "`nvidia-smi topo -m` text); most often the GPUs sit under different CPU sockets")
