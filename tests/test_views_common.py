"""views.common: --json output is always strict JSON."""

from __future__ import annotations

import json

from gputopo.views.common import print_json


def test_print_json_writes_null_for_nan_and_infinity(capsys):
    print_json({"gbps": float("inf"), "pairs": [{"latency_us": float("nan"), "ok": 1.5}], "name": "x"})
    text = capsys.readouterr().out
    data = json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
    assert data == {"gbps": None, "pairs": [{"latency_us": None, "ok": 1.5}], "name": "x"}
