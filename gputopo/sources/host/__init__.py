"""This host's files and NVML: the confined tree view, sysfs, the NVML door and probe, PCIe and host health."""
