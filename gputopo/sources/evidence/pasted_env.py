"""NCCL/CUDA variables and container command lines as users paste them, for doctor:

- ``printenv | grep NCCL`` / ``env`` output (``NCCL_P2P_DISABLE=1``), ``export NCCL_P2P_LEVEL=LOC``,
  ``NAME=value command`` prefixes, ``docker run -e NCCL_SHM_DISABLE=1`` / ``--env NAME=value``:
  only ``NCCL_*``, ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` are kept (the rest of an
  environment can hold secrets and says nothing about P2P);
  (``CUDA_VISIBLE_DEVICES`` alone, often the prompt line before a test's output, makes no paste health
  evidence: it says which GPUs a job sees, not how they are);
- ``docker run`` (``podman run``, ``nvidia-docker run``; a command continued with ``\\`` is read
  whole): whether it gives the container a ``/dev/shm`` of its own size (``--shm-size``), the
  host's (``--ipc=host``, a volume or mount at ``/dev/shm``), or neither (Docker's default, 64 MB).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gputopo.sources.evidence.pasted_evidence import PastedEvidence, shown
from gputopo.sources.evidence.pasted_facts import DockerRun, EnvSetting

_ASSIGN = re.compile(r"(?:^|[\s;'\"(=])((?:NCCL_[A-Z0-9_]{1,64})|CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER)"
                     r"=(\"[^\"]{0,256}\"?|'[^']{0,256}'?|[^\s;'\"]{0,256})")
_DOCKER = re.compile(r"\b(?:docker|podman|nvidia-docker)(?:\s+container)?\s+run\b")
_SHM_SIZE = re.compile(r"--shm-size[= ]\s*([0-9]{1,12})(?:\.[0-9]{1,3})?\s*([bkmgtBKMGT]?)")
_IPC = re.compile(r"--ipc[= ]\s*(host|shareable|container:\S{1,128})")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
# What may stand before an assignment that sets a variable: at the start of a line, or after
# docker's -e / --env (``--env=NAME=value``).
_STARTS = ("export", "declare -x", "env", "ENV", "set", "sudo", "sudo -E", "sudo env")
_BEFORE = (" -e", " --env", "--env=", "\t-e")
MAX_CONTINUED = 32  # lines of one `docker run ... \` command read together
MAX_COMMAND_CHARS = 16384


@dataclass
class EnvState:
    docker: list[str] | None = None  # the lines of a `docker run` continued with a backslash
    docker_line: int = 0


def scan_env(evidence: PastedEvidence, line: str, number: int, state: EnvState) -> bool:
    """Read one line into ``evidence.facts``; whether it held a variable or a docker command."""
    found = False
    if state.docker is not None:
        state.docker.append(line)
        found = True
        if not _continued(line) or len(state.docker) >= MAX_CONTINUED:
            _docker_done(evidence, state)
    elif _DOCKER.search(line):
        evidence.add_kind("docker run")
        state.docker, state.docker_line, found = [line], number, True
        if not _continued(line):
            _docker_done(evidence, state)
    if "=" not in line:
        return found
    chained = 0  # where the assignments read so far end: `NCCL_A=1 NCCL_B=2 python ...`
    for match in _ASSIGN.finditer(line):
        before = line[chained:match.start(1)].strip()
        if before and not before.endswith(_BEFORE) and before not in ("-e", "--env") and not (
                chained == 0 and before in _STARTS):
            continue  # a name in prose or in a log line (`repress this message with NCCL_...=1`)
        chained = match.end()
        value = match.group(2).strip()
        if value[:1] in "\"'":
            value = value[1:-1] if len(value) > 1 and value[-1] == value[0] else value[1:]
        if match.group(1).startswith("NCCL_"):  # CUDA_VISIBLE_DEVICES alone selects GPUs: no health evidence
            evidence.add_kind("environment")
        evidence.facts.keep(evidence.facts.env, EnvSetting(number, shown(line), match.group(1), value.strip()))
        found = True
    return found


def finish_env(evidence: PastedEvidence, state: EnvState) -> None:
    """The paste ended inside a continued ``docker run``: it is read as far as it goes."""
    if state.docker is not None:
        _docker_done(evidence, state)


def _continued(line: str) -> bool:
    return line.rstrip().endswith("\\")


def _docker_done(evidence: PastedEvidence, state: EnvState) -> None:
    command = " ".join(part.rstrip().rstrip("\\") for part in state.docker or [])[:MAX_COMMAND_CHARS]
    state.docker = None
    run = DockerRun(state.docker_line, shown(command))
    size = _SHM_SIZE.search(command)
    ipc = _IPC.search(command)
    if size:
        run.shm_option = f"--shm-size={size.group(1)}{size.group(2)}"
        run.shm_bytes = int(size.group(1)) * _UNITS[size.group(2).lower()]
    elif ipc:
        run.shm_option = f"--ipc={ipc.group(1)}"
    elif "/dev/shm" in command:
        run.shm_option = "/dev/shm mounted from the host"
    evidence.facts.keep(evidence.facts.docker_runs, run)
