"""model.words: PCI bus ids in one form."""

from gputopo.model import normalize_pci_bus_id


def test_bus_ids():
    assert normalize_pci_bus_id("00000000:9B:00.0") == "0000:9b:00.0"
    assert normalize_pci_bus_id("0000:9b:00.0") == "0000:9b:00.0"
    assert normalize_pci_bus_id("garbage") is None
