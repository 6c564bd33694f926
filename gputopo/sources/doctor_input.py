"""Where doctor's evidence comes from: this host (a root folder, NVML, the environment), or saved
files (``--from``): a ``gather`` archive, a folder with the same layout, or pasted text."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Mapping

from gputopo.errors import InputError
from gputopo.fileio import read_text_input
from gputopo.sources.evidence import slurm_gres_text
from gputopo.sources.archives.archive import SMI_FAILURES, is_archive, opened_archive
from gputopo.sources.evidence.health import HealthEvidence, read_health
from gputopo.sources.evidence.pasted_health import parse_pasted, plain_pasted
from gputopo.sources.evidence.pasted_text import unprefixed
from gputopo.sources.host.tree import FolderTree, Tree

ENV_FILE = "gputopo/env"
SMI_FOLDER = "gputopo/nvidia-smi"
MAX_PASTE_BYTES = 16 << 20


def evidence_of_host(root: str = "/", env: Mapping[str, str] | None = None, nvml=None) -> HealthEvidence:
    """This host: sysfs/procfs under ``root``; NVML only where ``root`` is ``/`` (or a fake is given)."""
    tree = FolderTree(root)
    return read_health(tree, env, nvml=nvml, use_nvml=tree.is_live_host or nvml is not None,
                       source="this host" if tree.is_live_host else root)


def _saved_env(tree: Tree) -> dict[str, str] | None:
    """The variables gather saved; None where the tree has no ``gputopo/env`` (not known)."""
    data = tree.read_bytes(ENV_FILE, 65536)
    if data is None:
        return None
    lines = data.decode("utf-8", "replace").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def evidence_of_tree(tree: Tree, label: str) -> HealthEvidence:
    """A gathered tree (an archive held in memory, or a folder): read like a host, without NVML;
    the nvidia-smi outputs it holds are read as pasted evidence. Every path is resolved inside the
    tree and only regular files are read (``sources/host/tree.py``)."""
    evidence = read_health(tree, _saved_env(tree), use_nvml=False, source=label)
    for name in tree.listdir(SMI_FOLDER) or []:
        text = tree.read_text(f"{SMI_FOLDER}/{name}", MAX_PASTE_BYTES, "nvidia-smi output")
        if text is None:  # a FIFO, a device, a link out of the tree, binary: not an output
            evidence.unread_outputs.append((f"{label}:{SMI_FOLDER}/{name}", "not a regular text file inside the tree"))
            continue
        evidence.recorded_outputs[name] = text
        parsed = parse_pasted(text)
        if parsed.kinds:
            evidence.pasted.append((f"{label}:{SMI_FOLDER}/{name}", parsed))
    for line in (tree.read_text(SMI_FAILURES, 65536) or "").splitlines():
        name, _, why = line.partition(": ")
        if why:  # what gather could not record (nvidia-smi timed out or failed): said, not dropped
            evidence.unread_outputs.append((f"{label}:{SMI_FOLDER}/{name[:64]}.txt", why[:200]))
    if "topo-m.txt" in evidence.recorded_outputs:
        from gputopo.sources.archives.gathered import read_smi_outputs
        from gputopo.sources.registry import read_text

        try:
            evidence.topology = read_smi_outputs(tree, label, read_text)
        except InputError:
            evidence.topology = None  # an output doctor cannot read is no evidence; scan --from says why
    return evidence


@contextlib.contextmanager
def evidence_from_files(paths: list[str]) -> Iterator[HealthEvidence]:
    """Evidence from ``--from`` files: at most one tree (archive or folder) plus any pasted texts."""
    trees = [p for p in paths if p != "-" and (os.path.isdir(p) or is_archive(p))]
    stdin_text: str | None = None
    stdin_tree = None
    if "-" in paths:  # read once: a pasted text, or a `gather -o -` archive piped in
        from gputopo.fileio import decode_text, read_stdin_bytes
        from gputopo.sources.archives.archive import MAX_STREAM_BYTES, is_archive_start

        data = read_stdin_bytes("evidence file", max(MAX_STREAM_BYTES, MAX_PASTE_BYTES))
        if is_archive_start(data[: 1 << 20]):
            stdin_tree = opened_archive("-", data)
            trees.append("-")
        else:
            if len(data) > MAX_PASTE_BYTES:
                raise InputError(f"evidence file standard input is larger than the {MAX_PASTE_BYTES >> 20} MiB "
                                 "limit for inputs")
            stdin_text = decode_text(data, "standard input", "evidence file")
    if len(trees) > 1:
        raise InputError("give at most one gathered archive or folder with --from (pasted text files may be added)")
    if trees:
        given = trees[0]
        label = "standard input" if given == "-" else os.path.basename(os.path.normpath(given))
        tree = stdin_tree if given == "-" else FolderTree(given, label) if os.path.isdir(given) else opened_archive(given)
        evidence = evidence_of_tree(tree, label)
    else:
        evidence = HealthEvidence(source=", ".join(os.path.basename(p) if p != "-" else "standard input" for p in paths))
    unread = []
    for path in paths:
        if path in trees:
            continue
        text = stdin_text if path == "-" and stdin_text is not None else read_text_input(path, "evidence file", MAX_PASTE_BYTES)
        label = os.path.basename(path) if path != "-" else "standard input"
        if slurm_gres_text.sniff(text):  # Slurm's view of the GPUs: judged against the wiring given beside it
            evidence.slurm_gres.append((label, slurm_gres_text.read(text)))
            continue
        parsed, text = plain_pasted(text)  # read without a ticket's dressing (pasted_text), as scan's readers read it
        stripped = unprefixed(text.split("\n"))
        if not parsed.kinds and stripped is not None and _sniffed("\n".join(stripped)):
            text = "\n".join(stripped)  # `host: ` before every line of an NCCL log
        if _read_as_topology(evidence, text, label, beside_health=bool(parsed.kinds)) and not parsed.kinds:
            continue
        if not parsed.kinds:
            unread.append(label)
        evidence.pasted.append((label, parsed))
    if not trees and len(unread) == len(paths):
        raise InputError(f"nothing in {', '.join(unread)} is evidence doctor reads: give lspci -vvv / -tv, setpci, dmesg, "
                         "/proc/cmdline, GRUB, nvidia-smi nvlink -s / -e / -q / --query-gpu text, NCCL or CUDA "
                         "errors, printenv / export / docker run lines, df -h /dev/shm, a `gputopo gather` "
                         "archive, or an output "
                         "`gputopo scan --from` reads (an NCCL log, nvbandwidth, p2pBandwidthLatencyTest, topo -m)")
    yield evidence


def _sniffed(text: str) -> bool:
    from gputopo.sources.registry import READERS

    return any(reader.sniff(text) for reader in READERS)


def _read_as_topology(evidence: HealthEvidence, text: str, label: str, beside_health: bool = False) -> bool:
    """Whether ``text`` holds an output ``scan --from`` reads; if so its topology (as read) joins
    the evidence. Text no reader takes stays a check doctor could not make; text a reader
    recognises but cannot read (cut before anything, damaged, outputs that cannot be joined) is
    refused with that reader's reason, as ``scan --from`` refuses it, never called "nothing".
    ``beside_health``: the text is health evidence too (dmesg with an NCCL log pasted after it): it
    is read only where a reader other than ``nvidia-smi nvlink`` (which doctor reads itself) takes a
    part of it, so no part of a paste is dropped silently."""
    from gputopo.sources.smi import nvlink
    from gputopo.sources.registry import READERS, read_text
    from gputopo.sources.snapshot import looks_like_report, looks_like_snapshot

    if beside_health and not any(r.kind != nvlink.KIND and r.sniff(text) for r in READERS):
        return False
    try:
        evidence.read_as_topology.append((label, read_text(text, label)))
    except InputError as exc:
        if beside_health:  # the health evidence stands; the part that could not be read is said
            evidence.unread_outputs.append((label, str(exc)))
            return False
        if any(reader.sniff(text) for reader in READERS) or looks_like_snapshot(text) or looks_like_report(text):
            raise
        return False
    return True


def health_only(path: str) -> bool:
    """Whether the ``--from`` file ``path`` holds health evidence only (lspci, dmesg, a command
    line, NCCL variables ...: what doctor reads) and nothing a topology reader takes: given beside a
    topology to ``scan``/``recommend``/``report``/``train``, it is judged by doctor and its pair
    problems put on that topology's links. Only a regular file of at most ``MAX_PASTE_BYTES`` is
    looked at, read here and again by its reader: standard input and a pipe (``<(nvidia-smi topo
    -m)``) can be read once only, and a large snapshot is no paste; archives, folders and files that
    cannot be read are not either (the readers say what they are)."""
    from gputopo.sources.registry import READERS
    from gputopo.sources.snapshot import looks_like_report, looks_like_snapshot

    try:
        if path == "-" or not os.path.isfile(path) or os.path.getsize(path) > MAX_PASTE_BYTES or is_archive(path):
            return False
    except OSError:
        return False
    try:
        text = read_text_input(path, "evidence file", MAX_PASTE_BYTES)
    except InputError:
        return False
    if looks_like_snapshot(text) or looks_like_report(text) or any(reader.sniff(text) for reader in READERS):
        return False
    return bool(parse_pasted(text).kinds)
