"""`gputopo --install-completion`: typer's files, never through a link, `$HOME` quoted (issue 36)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import assert_one_error_line


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A HOME whose path a shell would split, unquote and run: spaces, both quotes, ``$(...)``."""
    folder = tmp_path / "o'neil \"x\" $(touch PWNED) `touch PWNED2`"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")  # the shell given as a value
    monkeypatch.chdir(tmp_path)
    return folder


def test_bash_completion_in_a_home_with_quotes_and_commands_in_its_path_loads_and_runs_nothing(cli, home, tmp_path):
    result = cli("--install-completion", "bash")
    assert result.exit_code == 0, result.output
    script = home / ".bash_completions" / "gputopo.sh"
    assert "_GPUTOPO_COMPLETE" in script.read_text()
    assert cli("--install-completion", "bash").exit_code == 0  # a second time adds no second line
    assert (home / ".bashrc").read_text().count("source ") == 1
    if shutil.which("bash") is None:
        pytest.skip("no bash here to load the start-up file")
    run = subprocess.run(["bash", "--norc", "--noprofile", "-c", 'source "$HOME/.bashrc" && complete -p gputopo'],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, env={**os.environ, "HOME": str(home)})
    assert run.returncode == 0, run.stderr
    assert "gputopo" in run.stdout
    assert not list(tmp_path.rglob("PWNED*"))  # nothing in the path ran


def test_a_symlinked_bashrc_is_refused_and_nothing_is_written(cli, home, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("precious\n")
    (home / ".bashrc").symlink_to(elsewhere)
    line = assert_one_error_line(cli("--install-completion", "bash"))
    assert ".bashrc is a symbolic link" in line and "--show-completion" in line
    assert elsewhere.read_text() == "precious\n"
    assert sorted(p.name for p in home.iterdir()) == [".bashrc"]


def test_a_symlinked_folder_on_the_way_to_the_script_is_refused(cli, home, tmp_path):
    (tmp_path / "target").mkdir()
    (home / ".config").symlink_to(tmp_path / "target")
    line = assert_one_error_line(cli("--install-completion", "fish"))
    assert ".config is a symbolic link" in line
    assert list((tmp_path / "target").iterdir()) == []


def test_a_home_of_another_user_is_refused(cli, home, monkeypatch):
    """Root with another user's HOME (``sudo -E``) writes nothing there."""
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(home).st_uid + 1)
    line = assert_one_error_line(cli("--install-completion", "bash"))
    assert "belongs to uid" in line
    assert list(home.iterdir()) == []


def test_zsh_and_fish_as_typer_installs_them_and_other_shells_are_one_line(cli, home):
    (home / ".zshrc").write_bytes(b"# caf\xe9 in Latin-1\nzstyle ':completion:*' menu no")  # no final newline
    assert cli("--install-completion", "zsh").exit_code == 0
    assert (home / ".zfunc" / "_gputopo").is_file()
    assert (home / ".zshrc").read_bytes() == (b"# caf\xe9 in Latin-1\nzstyle ':completion:*' menu no\n"
                                              b"fpath+=~/.zfunc; autoload -Uz compinit; compinit\n")
    assert cli("--install-completion", "fish").exit_code == 0
    assert (home / ".config" / "fish" / "completions" / "gputopo.fish").is_file()
    line = assert_one_error_line(cli("--install-completion", "powershell"))
    assert "bash, zsh and fish" in line and "--show-completion" in line


def test_a_home_with_bytes_that_are_not_text_is_refused_before_anything_is_written(cli, tmp_path, monkeypatch):
    """Security review: HOME b'/h\\xff\\x9b' (read with surrogateescape) raised UnicodeEncodeError after
    the script was written, and its 0x9b is an 8-bit CSI a terminal acts on."""
    folder = os.fsdecode(os.fsencode(str(tmp_path)) + b"/h\xff\x9b")
    os.mkdir(folder)
    monkeypatch.setenv("HOME", folder)
    line = assert_one_error_line(cli("--install-completion", "bash"))
    assert "not text" in line and os.listdir(folder) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own a link as another user")
def test_a_home_that_is_another_users_link_in_a_sticky_folder_makes_nothing_through_it(cli, tmp_path, monkeypatch):
    """Security review: such a HOME was refused only after a folder had been made through the link."""
    public = tmp_path / "public"
    public.mkdir()
    os.chmod(public, 0o1777)
    real = tmp_path / "realhome"
    real.mkdir()
    link = public / "home"
    os.symlink(real, link)
    os.lchown(link, 65534, 65534)
    monkeypatch.setenv("HOME", str(link))
    line = assert_one_error_line(cli("--install-completion", "bash"))
    assert "protected_symlinks" in line and os.listdir(real) == []
