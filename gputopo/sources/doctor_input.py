"""Where doctor's evidence comes from: this host (a root folder, NVML, the environment), or saved
files (``--from``): a ``gather`` archive, a folder with the same layout, or pasted text."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Mapping

from gputopo.errors import InputError
from gputopo.fileio import read_text_input
from gputopo.sources.archive import is_archive, unpacked
from gputopo.sources.health import HealthEvidence, read_health
from gputopo.sources.pasted_health import parse_pasted

ENV_FILE = "gputopo/env"
SMI_FOLDER = "gputopo/nvidia-smi"
MAX_PASTE_BYTES = 16 << 20


def evidence_of_host(root: str = "/", env: Mapping[str, str] | None = None, nvml=None) -> HealthEvidence:
    """This host: sysfs/procfs under ``root``; NVML only where ``root`` is ``/`` (or a fake is given)."""
    live = os.path.abspath(root) == "/"
    return read_health(root, env, nvml=nvml, use_nvml=live or nvml is not None,
                       source="this host" if live else root)


def _saved_env(root: str) -> dict[str, str] | None:
    """The variables gather saved; None where the tree has no ``gputopo/env`` (not known)."""
    try:
        with open(os.path.join(root, ENV_FILE), encoding="utf-8", errors="replace") as f:
            lines = f.read(65536).splitlines()
    except OSError:
        return None
    return dict(line.split("=", 1) for line in lines if "=" in line)


def evidence_of_tree(root: str, label: str) -> HealthEvidence:
    """A gathered tree (unpacked archive or folder): read like a host, without NVML; the
    nvidia-smi outputs it holds are read as pasted evidence."""
    evidence = read_health(root, _saved_env(root), use_nvml=False, source=label)
    smi = os.path.join(root, SMI_FOLDER)
    for name in sorted(os.listdir(smi)) if os.path.isdir(smi) else []:
        text = read_text_input(os.path.join(smi, name), "nvidia-smi output", MAX_PASTE_BYTES)
        evidence.recorded_outputs[name] = text
        parsed = parse_pasted(text)
        if parsed.kinds:
            evidence.pasted.append((f"{label}:{SMI_FOLDER}/{name}", parsed))
    if "topo-m.txt" in evidence.recorded_outputs:
        from gputopo.sources.gathered import read_smi_outputs
        from gputopo.sources.registry import read_text

        try:
            evidence.topology = read_smi_outputs(root, label, read_text)
        except InputError:
            evidence.topology = None  # an output doctor cannot read is no evidence; scan --from says why
    return evidence


@contextlib.contextmanager
def evidence_from_files(paths: list[str]) -> Iterator[HealthEvidence]:
    """Evidence from ``--from`` files: at most one tree (archive or folder) plus any pasted texts."""
    trees = [p for p in paths if p != "-" and (os.path.isdir(p) or is_archive(p))]
    if len(trees) > 1:
        raise InputError("give at most one gathered archive or folder with --from (pasted text files may be added)")
    with contextlib.ExitStack() as stack:
        if trees:
            tree = trees[0]
            root = tree if os.path.isdir(tree) else stack.enter_context(unpacked(tree))
            evidence = evidence_of_tree(root, os.path.basename(os.path.normpath(tree)))
        else:
            evidence = HealthEvidence(source=", ".join(os.path.basename(p) if p != "-" else "standard input" for p in paths))
        unread = []
        for path in paths:
            if path in trees:
                continue
            text = read_text_input(path, "evidence file", MAX_PASTE_BYTES)
            label = os.path.basename(path) if path != "-" else "standard input"
            parsed = parse_pasted(text)
            if _read_as_topology(evidence, text, label, beside_health=bool(parsed.kinds)) and not parsed.kinds:
                continue
            if not parsed.kinds:
                unread.append(label)
            evidence.pasted.append((label, parsed))
        if not trees and len(unread) == len(paths):
            raise InputError(f"nothing in {', '.join(unread)} is evidence doctor reads: give lspci -vvv / -tv, dmesg, "
                             "/proc/cmdline, nvidia-smi nvlink -s / -e or nvidia-smi -q text, a `gputopo gather` "
                             "archive, or an output "
                             "`gputopo scan --from` reads (an NCCL log, nvbandwidth, p2pBandwidthLatencyTest, topo -m)")
        yield evidence


def _read_as_topology(evidence: HealthEvidence, text: str, label: str, beside_health: bool = False) -> bool:
    """Whether ``text`` holds an output ``scan --from`` reads; if so its topology (as read) joins
    the evidence. Text no reader takes stays a check doctor could not make; text a reader
    recognises but cannot read (cut before anything, damaged, outputs that cannot be joined) is
    refused with that reader's reason, as ``scan --from`` refuses it, never called "nothing".
    ``beside_health``: the text is health evidence too (dmesg with an NCCL log pasted after it): it
    is read only where a reader other than ``nvidia-smi nvlink`` (which doctor reads itself) takes a
    part of it, so no part of a paste is dropped silently."""
    from gputopo.sources import nvlink
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
