"""What docs/*.md says about exit codes is what the tool does (issue 24)."""

from __future__ import annotations

import re

from conftest import REPO

from gputopo.errors import InputError, NvmlUnavailable


def test_nvml_md_gives_missing_nvml_its_real_exit_code():
    text = (REPO / "docs" / "nvml.md").read_text()
    said = re.search(r"NVML cannot start.*?exits (\d)", text, re.S)
    assert said and int(said.group(1)) == NvmlUnavailable.exit_code


def test_json_md_does_not_give_every_error_exit_code_2():
    text = (REPO / "docs" / "json.md").read_text()
    errors = re.search(r"Errors never print JSON:(.*?)\n\n", text, re.S).group(1)
    assert str(InputError.exit_code) in errors and str(NvmlUnavailable.exit_code) in errors
