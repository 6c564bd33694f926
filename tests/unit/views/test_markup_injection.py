"""Snapshot strings are text, never rich markup or terminal codes, in the multi-host views (issue 20,
item 7); TensorFlow started only for a check keeps its own ERROR lines to itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

HOSTS = ["[/x]oops", "[link=https://evil.example]n2[/link]"]


@pytest.fixture
def two_hosts(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # no folding: the names are looked for whole
    paths = []
    for k, host in enumerate(HOSTS):
        path = tmp_path / f"h{k}.json"
        result = cli("scan", "--machine", "dgx-h100", "--host", host, "--save", str(path), "--json")
        assert result.exit_code == 0, result.output
        data = json.loads(path.read_text())
        for gpu in data["gpus"]:
            gpu["name"] = "[/y]GPU[bold]"
        for nic in data["nics"]:
            nic["name"] = nic["rdma_device"] = "[/z][link=https://nic.example]" + nic["name"]
        for nic_link in data["nic_links"]:
            nic_link["nic"] = "[/z][link=https://nic.example]" + nic_link["nic"]
        path.write_text(json.dumps(data))
        paths.append(str(path))
    return paths


def test_scan_of_two_hosts_shows_markup_in_names_as_text(cli, two_hosts):
    result = cli("scan", "--from", two_hosts[0], "--from", two_hosts[1])
    assert result.exit_code == 0, result.output  # "[/x]" was a MarkupError traceback
    assert "[/x]oops" in result.stdout and "[link=https://evil.example]" in result.stdout
    assert "[/y]GPU[bold]" in result.stdout and "[link=https://nic.example]" in result.stdout
    assert "\x1b]8;" not in result.stdout  # no hyperlink escape


def test_the_cluster_plan_shows_markup_in_names_as_text(cli, two_hosts):
    result = cli("recommend", "--from", two_hosts[0], "--from", two_hosts[1], "--gpus", "4")
    assert result.exit_code == 0, result.output
    assert "[/x]oops" in result.stdout and "[link=https://evil.example]" in result.stdout
    assert "[link=https://nic.example]" in result.stdout
    assert "\x1b]8;" not in result.stdout


def test_env_comments_carry_no_terminal_codes():
    from dataclasses import replace

    from gputopo.analysis.recommend import recommend
    from gputopo.sources.reference import load_reference
    from gputopo.views.recommend import format_env

    topology = load_reference("two-socket-4gpu")
    host = "n1\x1b]0;owned\x07\x1b[2J\x9b1m"
    topology = replace(topology, host=host, gpus=[replace(g, host=host) for g in topology.gpus])
    text = format_env(recommend(topology, 2))
    assert "# on n1]0;owned[2J1m" in text
    assert not any(c in text for c in "\x1b\x07\x9b")


FAKE_TF = textwrap.dedent('''
    import os
    os.write(2, b"E0000 00:00:1700000000.000000   123 some_file.cc:42] an error TensorFlow logs itself\\n")
    os.write(2, b"W0000 00:00:1700000000.000000   123 some_file.cc:43] a warning\\n")
''')


@pytest.mark.parametrize(("for_check", "shown"), [(True, False), (False, True)])
def test_tensorflow_started_for_a_check_keeps_its_error_lines_to_itself(tmp_path, for_check, shown):
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text(FAKE_TF)
    script = (f"from gputopo.tfruntime import import_tensorflow\nimport os\nimport_tensorflow(for_check={for_check})\n"
              "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert ("an error TensorFlow logs itself" in result.stderr) is shown
    assert "a warning" not in result.stderr
    assert result.stdout.strip() == ("None" if for_check else "2")  # the children choose their own level
