"""gputopo.train.workers: TF_CONFIG and worker addresses (and the count and CUDA parsers the launcher uses)."""

from __future__ import annotations

import json

import pytest

from gputopo.errors import InputError
from gputopo.notation import parse_count_list
from gputopo.numbering import cuda_env
from gputopo.train.workers import parse_workers, tf_config


def test_tf_config_and_parsers():
    assert json.loads(tf_config(["a:1", "b:2"], 1)) == {
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 1},
    }
    assert parse_workers("10.0.0.1:2222, 10.0.0.2:2222") == ["10.0.0.1:2222", "10.0.0.2:2222"]
    with pytest.raises(InputError, match="same address twice"):
        parse_workers("a:1,a:1")
    with pytest.raises(InputError, match="not host:port"):
        parse_workers("a:99999")
    assert parse_count_list("4,1,2,2") == [1, 2, 4]
    with pytest.raises(InputError):
        parse_count_list("1,x")
    with pytest.raises(InputError):
        parse_count_list("0,2")
    assert cuda_env([1, 0]) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1,0"}

