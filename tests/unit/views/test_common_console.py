"""The shared consoles print input text as it is: no emoji codes (``:ab:`` in a bus id), no markup."""

from __future__ import annotations

from conftest import assert_one_error_line  # noqa: F401  (keeps the conftest import style)

def test_bus_ids_are_not_turned_into_emoji(cli, tmp_path):
    """`0000:ab:00.0` and `0000:cd:01.1` hold rich emoji codes (:ab:, :cd:): the fix line must stay pasteable."""
    paste = tmp_path / "lspci.txt"
    paste.write_text(
        "0000:cd:01.1 PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane, 5-Port PCI Express Gen 3 (8.0 GT/s) Switch (rev ca)\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
    )
    result = cli("doctor", "--from", str(paste))
    assert "0000:cd:01.1" in result.stdout and "\U0001f4bf" not in result.stdout, result.stdout

def test_the_shared_consoles_have_emoji_off():
    from gputopo.views.common import err, out

    assert not out()._emoji and not err()._emoji
