"""Pasted evidence recognised line by line (gputopo/sources/evidence/pasted_health.py): here, a kernel command
line known by its shape where it has neither ``BOOT_IMAGE=`` nor ``root=`` (a VM booted straight
into its kernel, as a real Firecracker microVM was)."""

from __future__ import annotations

import pytest
from conftest import REPO

from gputopo.sources.evidence.pasted_health import parse_pasted

FIRECRACKER = (REPO / "tests/fixtures/doctor/proc_cmdline_firecracker_vm_no_boot_image.txt").read_text()


def test_a_vm_kernel_line_without_boot_image_is_a_command_line():
    parsed = parse_pasted(FIRECRACKER)
    assert parsed.kinds == ["/proc/cmdline"]
    assert parsed.cmdline.startswith("mitigations=auto") and "--firecracker-init" in parsed.cmdline


@pytest.mark.parametrize("text", [
    "console=ttyS0 quiet panic=1 intel_iommu=on iommu=pt",
    "  ro quiet splash console=tty0 crashkernel=512M-:192M",
])
def test_other_lines_of_kernel_parameters_are_command_lines(text):
    assert parse_pasted(text).cmdline == text.strip()


@pytest.mark.parametrize("text", [
    "NCCL_P2P_LEVEL=NVL NCCL_DEBUG=INFO python train.py",  # an environment, upper case
    "export a=1 b=2 c",  # words with values, but none of the kernel's
    "the console is quiet and root is ro",  # kernel words, no values
    "console=ttyS0 quiet",  # too short to tell
    "console=ttyS0 quiet panic=1 Then some prose",  # not every word is a parameter
])
def test_lines_that_are_not_kernel_parameters_are_not_taken_for_one(text):
    parsed = parse_pasted(text)
    assert parsed.cmdline is None and "/proc/cmdline" not in parsed.kinds
