"""Host settings users paste, for doctor:

- ``/etc/default/grub``'s ``GRUB_CMDLINE_LINUX_DEFAULT="... amd_iommu=on iommu=pt"`` (or
  ``GRUB_CMDLINE_LINUX``): the kernel options the next ``update-grub`` and boot will use, which is
  not proof the running kernel had them (``/proc/cmdline`` is);
- ``/dev/shm``'s size: ``df -h`` (``shm  64M  0  64M  0% /dev/shm``; without ``-h`` the sizes are
  1K blocks), ``mount`` (``shm on /dev/shm type tmpfs (rw,...,size=65536k)``) and ``/proc/mounts``
  (``shm /dev/shm tmpfs rw,...,size=65536k 0 0``).
"""

from __future__ import annotations

import re

from gputopo.sources.evidence.pasted_evidence import MAX_CMDLINE_CHARS, PastedEvidence, shown
from gputopo.sources.evidence.pasted_facts import Said, ShmSize

_GRUB = re.compile(r"\bGRUB_CMDLINE_LINUX(?:_DEFAULT)?\s*=\s*(.*)$")
_DF = re.compile(r"^\s*\S{1,128}\s+([0-9]{1,15}(?:[.,][0-9]{1,3})?)([KMGTP]?)i?B?\s+\S{1,24}\s+\S{1,24}\s+"
                 r"[0-9]{1,3}%\s+/dev/shm\s*$")
_MOUNT = re.compile(r"(?:\son\s+/dev/shm\s+type\s+tmpfs\s+\(([^)]{0,1024})\)|\s/dev/shm\s+tmpfs\s+(\S{1,1024}))")
_SIZE_OPTION = re.compile(r"(?:^|,)size=([0-9]{1,15})([kmgKMG%]?)")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def scan_host_lines(evidence: PastedEvidence, line: str, number: int) -> bool:
    """Read one line into ``evidence.facts``; whether it was one of these."""
    grub = _GRUB.search(line)
    if grub:
        value = grub.group(1).strip()[:MAX_CMDLINE_CHARS]
        if value[:1] in "\"'":
            value = value[1:].split(value[0], 1)[0]
        evidence.add_kind("GRUB kernel options")
        evidence.facts.grub_cmdline = (value, Said(number, shown(line)))
        return True
    if "/dev/shm" not in line:
        return False
    df = _DF.match(line)
    if df:
        number_text, unit = df.group(1).replace(",", "."), df.group(2)
        size = int(float(number_text) * _UNITS[unit]) if unit else int(float(number_text)) * 1024
        evidence.add_kind("df /dev/shm")
        evidence.facts.keep(evidence.facts.shm_sizes, ShmSize(number, shown(line), size))
        return True
    mount = _MOUNT.search(line)
    if mount:
        options = mount.group(1) if mount.group(1) is not None else mount.group(2)
        option = _SIZE_OPTION.search(options)
        size = None
        if option and option.group(2) != "%":
            size = int(option.group(1)) * _UNITS.get(option.group(2).upper(), 1)
        evidence.add_kind("mount /dev/shm")
        evidence.facts.keep(evidence.facts.shm_sizes, ShmSize(number, shown(line), size))
        return True
    return False
