"""A card's own PCIe generation by its model name: the one table (``analysis.expect.cards``)."""

import pytest

from gputopo.analysis.expect.cards import card_pcie_generation


@pytest.mark.parametrize("name, generation", [
    ("NVIDIA GeForce RTX 4090", 4),
    ("NVIDIA GeForce RTX 3090", 4),
    ("NVIDIA GeForce RTX 5090", 5),
    ("NVIDIA GeForce RTX 2080 Ti", 3),
    ("NVIDIA H100 PCIe", 5),
    ("NVIDIA H100 80GB HBM3", 5),
    ("NVIDIA A100-SXM4-80GB", 4),
    ("NVIDIA A100 80GB PCIe", 4),
    ("NVIDIA RTX A6000", 4),
    ("NVIDIA L40S", 4),
    ("Tesla V100-PCIE-16GB", 3),
    ("Tesla V100-SXM2-32GB", 3),
    ("Tesla T4", 3),
    ("Tesla P100-PCIE-16GB", 3),
    ("NVIDIA B200", 5),
    # workstation cards whose names hold a GeForce-like "RTX 5000" / "RTX 4000" / "RTX 3000"
    ("Quadro RTX 5000", 3),
    ("Quadro RTX 4000", 3),
    ("Quadro RTX 3000", 3),
    ("NVIDIA RTX 5000 Ada Generation", 4),
    ("NVIDIA RTX 4000 SFF Ada Generation", 4),
    ("NVIDIA RTX 2000 Ada Generation", 4),
    ("NVIDIA RTX A400", 4),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 5),
    ("NVIDIA GeForce RTX 5060 Ti", 5),
])
def test_named_cards_give_their_generation(name, generation):
    assert card_pcie_generation(name) == generation


@pytest.mark.parametrize("name", [None, "", "Test GPU", "NVIDIA GH200 480GB", "GPU 0 (model not shown)"])
def test_unknown_or_unlisted_cards_give_none(name):
    assert card_pcie_generation(name) is None
