"""`watch --json` lines read back for `report --watch`: intervals kept, garbage refused in one line."""

from __future__ import annotations

import json

import pytest

from gputopo.errors import InputError
from gputopo.sources.tools.watch_lines import read_watch_lines


def frame(percent, pcie=1.0, peer="GPU 1"):
    return {"schema": "gputopo.watch/1", "captured_at": "2026-01-01T00:00:00Z", "interval_s": 1.0, "gpus": [],
            "links": [{"gpu": 0, "link": 3, "peer": peer, "peer_gpu": 1, "tx_gbps": 1.0, "rx_gbps": None,
                       "line_rate_gbps": 25.0, "percent_of_peak": percent}],
            "pcie": [{"gpu": 0, "tx_gbps": 0.5, "rx_gbps": 0.0, "line_rate_gbps": 63.0, "percent_of_peak": pcie,
                      "reading": "counters"}], "errors": [], "findings": []}


def write(tmp_path, *lines) -> str:
    path = tmp_path / "watch.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return str(path)


def test_intervals_per_link_with_gaps_and_the_summary_passed_over(tmp_path):
    no_links = dict(frame(0), links=[])
    path = write(tmp_path, frame(10.0), "", no_links, frame(None), {"schema": "gputopo.watch-summary/1"})
    watch = read_watch_lines(path)
    assert watch.frames == 3 and watch.summaries == 1
    assert watch.series[(0, 3)].percent == [10.0, None, None] and watch.series[(0, None)].percent == [1.0, 1.0, 1.0]
    assert watch.series[(0, 3)].peer == "GPU 1" and watch.series[(0, 3)].peak_gbps == 1.0


@pytest.mark.parametrize("line, fragment", [
    ("not json", "line 2: not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"schema": "other/1"}', "schema is \"other/1\""),
    (json.dumps(frame(10.0)).replace("10.0", "NaN"), "not JSON"),
    (json.dumps(frame(10.0)).replace('"gpu": 0, "link": 3', '"gpu": true, "link": 3'), "links[0]: gpu is true"),
    (json.dumps(frame(10.0)).replace('"gpu": 0, "link": 3', '"gpu": 99999, "link": 3'), "gpu is 99999"),
    (json.dumps(frame(-5.0)), "percent_of_peak is -5.0"),
    (json.dumps(frame(1.0, peer="x" * 500)), "peer is not a string"),
    ("[" * 100000 + "]" * 100000, "not JSON"),
    (json.dumps(dict(frame(1.0), links={"a": 1})), "links is not a list"),
])
def test_hostile_lines_are_one_line(tmp_path, line, fragment):
    with pytest.raises(InputError) as caught:
        read_watch_lines(write(tmp_path, frame(1.0), line))
    message = str(caught.value)
    assert "\n" not in message and fragment in message, message


def test_no_intervals_is_one_line(tmp_path):
    with pytest.raises(InputError, match="holds no intervals"):
        read_watch_lines(write(tmp_path, {"schema": "gputopo.watch-summary/1"}))
