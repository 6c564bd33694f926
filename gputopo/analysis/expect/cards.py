"""A card's own PCIe generation, from its model name: the one table of it.

Where a source names the GPUs (a `nvidia-smi topo -m` paste with `nvidia-smi -L`'s list, a TF or
p2pBandwidthLatencyTest log) but not their link's generation, the card's own generation is the most
its link can train to: an inference (``analysis.expect.bandwidth`` says so), never a reading; a
card in an older slot or riser gets less. From NVIDIA's product specifications:

- Gen3: Kepler to Turing and Volta (Tesla K80/K40, M40/M60, P100/P40/P4, V100/V100S, T4, TITAN V and
  RTX, GeForce GTX 10 and RTX 20, Quadro RTX);
- Gen4: Ampere and Ada (A100, A800, A40, A30, A10/A10G, A16, A2, RTX A-series, GeForce RTX 30 and 40,
  L4, L20, L40/L40S, RTX 6000 Ada);
- Gen5: Hopper and Blackwell boards with a PCIe host link (H100, H200, H800, H20, B100, B200, GeForce
  RTX 50, RTX PRO Blackwell). Grace-coupled parts (GH200, GB200) reach their CPU over NVLink-C2C and
  are left out.
"""

from __future__ import annotations

import functools
import re

# (pattern on the name, generation), first match wins: the specific families before the short names.
# The workstation names come first: "Quadro RTX 5000" (Turing, Gen3) and "RTX 5000 Ada Generation"
# (Gen4) hold "RTX 5000", which the GeForce RTX 50 pattern would otherwise take for Gen5.
_CARD_GENERATIONS: tuple[tuple[re.Pattern[str], int], ...] = tuple((re.compile(p, re.IGNORECASE), g) for p, g in (
    (r"\bQuadro RTX\b", 3),
    (r"\bRTX PRO \d+ Blackwell\b", 5),
    (r"\bRTX \d+ (SFF )?Ada\b|\bRTX A\d{3,4}\b", 4),
    (r"\bRTX 50\d0\b", 5),
    (r"\bRTX 40\d0\b|\bRTX 30\d0\b", 4),
    (r"\bRTX 20\d0\b|\bGTX 1[06]\d0\b|\bTITAN (V|RTX|Xp?)\b", 3),
    (r"(?<![A-Z])(H100|H200|H800|H20|B100|B200)\b", 5),
    (r"(?<![A-Z])(A100|A800|A40|A30|A10G?|A16|A2|L4|L20|L40S?)\b", 4),
    (r"(?<![A-Z])(V100S?|P100|P40|P4|T4|K80|K40m?|M40|M60)\b", 3),
))


@functools.lru_cache(maxsize=256)
def card_pcie_generation(name: str | None) -> int | None:
    """The PCIe generation of the card ``name`` names (``"NVIDIA GeForce RTX 4090"`` -> 4), or None
    where the name is missing or not in the table."""
    if not name:
        return None
    for pattern, generation in _CARD_GENERATIONS:
        if pattern.search(name):
            return generation
    return None
