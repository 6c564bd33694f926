"""The one door to pynvml: how every NVML answer and error is classified, and the decoding helpers."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import pynvml
import pytest
from fake_nvml import FakeNvml

import gputopo

from gputopo.errors import NvmlUnavailable
from gputopo.sources.host.nvml_binding import (
    FUNCTION_NOT_FOUND,
    NOT_SUPPORTED,
    Failed,
    GpuLost,
    TEXT_FUNCTIONS,
    UNDECODABLE,
    NvmlBinding,
    bus_id_of,
    cuda_version_text,
    mask_bits,
    text,
)
from gputopo.sources.reference import load_reference


def _started(**knobs) -> tuple[NvmlBinding, FakeNvml]:
    fake = FakeNvml(load_reference("two-socket-4gpu"), **knobs)
    binding = NvmlBinding(fake)
    binding.init()
    return binding, fake


def test_answers_come_back_and_bytes_become_str():
    binding, _ = _started(strings="bytes")
    assert binding.query("nvmlSystemGetDriverVersion") == "550.54.15"
    assert binding.gpu_count() == 4
    handle = binding.query("nvmlDeviceGetHandleByIndex", 0)
    assert isinstance(binding.query("nvmlDeviceGetName", handle), str)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (pynvml.NVMLError_NotSupported, "not supported"),
        (pynvml.NVMLError_NoPermission, "no permission"),
        (pynvml.NVMLError_NotFound, "not found"),
        (pynvml.NVMLError_FunctionNotFound, "not in this driver"),
        (pynvml.NVMLError_Unknown, "unknown error"),
    ],
)
def test_every_nvml_error_is_a_failed_answer_with_its_reason(error, reason):
    binding, _ = _started(unsupported={"nvmlDeviceGetUUID": error})
    handle = binding.query("nvmlDeviceGetHandleByIndex", 0)
    assert binding.query("nvmlDeviceGetUUID", handle) == Failed(error.__name__, reason)


def test_a_function_the_binding_lacks_is_not_in_this_driver():
    binding, _ = _started(missing={"nvmlDeviceGetMigMode"})
    handle = binding.query("nvmlDeviceGetHandleByIndex", 0)
    assert binding.query("nvmlDeviceGetMigMode", handle) == Failed(FUNCTION_NOT_FOUND, "not in this driver")
    assert binding.query("nvmlDeviceGetMigMode", handle).error != NOT_SUPPORTED


def test_a_lost_gpu_is_its_own_outcome():
    binding, _ = _started(lost_after={1: 0})
    handle = binding.query("nvmlDeviceGetHandleByIndex", 1)
    with pytest.raises(GpuLost):
        binding.query("nvmlDeviceGetName", handle)


def test_errors_that_are_not_nvml_errors_are_bugs_and_go_up():
    binding, _ = _started()
    a, b = (binding.query("nvmlDeviceGetHandleByIndex", i) for i in (0, 1))
    with pytest.raises(ctypes.ArgumentError):  # the nvidia-ml-py 13 tuple caps index
        binding.query("nvmlDeviceGetP2PStatus", a, b, pynvml.NVML_P2P_CAPS_INDEX_READ)


def test_init_failure_and_uncountable_gpus_are_nvml_unavailable():
    with pytest.raises(NvmlUnavailable, match="libnvidia-ml.so"):
        NvmlBinding(FakeNvml(load_reference("dgx1"), init_error=pynvml.NVMLError_LibraryNotFound)).init()
    binding, fake = _started(unsupported={"nvmlDeviceGetCount": pynvml.NVMLError_Unknown})
    with pytest.raises(NvmlUnavailable, match=r"could not count the GPUs \(unknown error\)"):
        binding.gpu_count()
    binding.shutdown()
    binding.shutdown()  # a second shutdown (Uninitialized) is not an error
    assert fake.shutdown_calls == 1


def test_decoding_helpers():
    assert text(b"Tesla V100\x00") == "Tesla V100" and text("  ") is None and text(None) is None
    info = pynvml.nvmlPciInfo_t()
    info.busId = b"00000000:07:00.0"
    assert bus_id_of(info) == "0000:07:00.0" and bus_id_of(None) is None
    assert mask_bits([0b101, 1]) == [0, 2, 64]
    assert cuda_version_text(12040) == "12.4" and cuda_version_text(0) is None
    assert NvmlBinding(FakeNvml(load_reference("dgx1"))).max_nvlinks() >= 18


# What a driver could put in a string buffer: a byte that is not UTF-8, an escape sequence, a newline.
NOT_UTF8_NAME = b"Tesla\xff V100\x1b[31m\nRED"


@pytest.mark.parametrize("strings", ["str", "bytes"])
def test_a_string_that_is_not_utf8_or_holds_control_characters_becomes_one_line_of_text(strings):
    raw = {"nvmlDeviceGetName": NOT_UTF8_NAME, "nvmlSystemGetDriverVersion": b"550\x00\xc3",
           ("nvmlDeviceGetUUID", 1): b"GPU-\x9b1;2H"}
    binding, fake = _started(strings=strings, raw_text=raw)
    if strings == "str":  # the premise: nvidia-ml-py 13 decodes strictly and raises
        with pytest.raises(UnicodeDecodeError):
            fake.nvmlDeviceGetName(fake.nvmlDeviceGetHandleByIndex(0))
    handle = binding.query("nvmlDeviceGetHandleByIndex", 1)
    assert binding.query("nvmlDeviceGetName", handle) == "Tesla\ufffd V100[31mRED"
    assert binding.query("nvmlSystemGetDriverVersion") == "550\ufffd"
    assert binding.query("nvmlDeviceGetUUID", handle) == "GPU-\ufffd1;2H"  # 0x9b: C1 CSI, not UTF-8 alone


def test_the_text_functions_are_the_string_functions_of_the_binding_that_gputopo_asks():
    asked = {n for path in Path(gputopo.__file__).parent.rglob("*.py")
             for n in re.findall(r'"(nvml[A-Z]\w*)"', path.read_text())}
    decoding = pynvml.convertStrBytes(lambda: None).__code__  # the wrapper that decodes a string answer
    wrapped = {n for n in asked if getattr(getattr(pynvml, n, None), "__code__", None) is decoding}
    assert TEXT_FUNCTIONS == wrapped


def test_a_bus_id_that_is_not_utf8_is_not_read_and_raises_nothing():
    info = pynvml.nvmlPciInfo_t()
    info.busId = b"00000000:07:00.0\xff"
    with pytest.raises(UnicodeDecodeError):  # the premise: 13.x's structure decodes when read
        info.busId  # noqa: B018
    info.busIdLegacy = b"\xfe"
    assert bus_id_of(info) is None
    info.busIdLegacy = b"0000:07:00.0"
    assert bus_id_of(info) == "0000:07:00.0"


def test_an_undecodable_answer_of_a_function_that_gives_no_string_is_failed():
    class Binding:
        class NVMLError(Exception):
            pass

        @staticmethod
        def nvmlDeviceGetMemoryInfo(handle):
            return b"\xff".decode()

    answer = NvmlBinding(Binding).query("nvmlDeviceGetMemoryInfo", None)
    assert answer == Failed(UNDECODABLE, "answer not UTF-8 text")


class NVMLError_Odd(pynvml.NVMLError):
    """An NVML error gputopo has no words for, whose own words (``nvmlErrorString``) are not UTF-8."""

    def __new__(cls):
        obj = Exception.__new__(cls)
        obj.value = 4242
        return obj

    def __str__(self):
        return b"\xff".decode()


def test_an_nvml_error_whose_words_cannot_be_decoded_is_still_named():
    binding, _ = _started(unsupported={"nvmlDeviceGetUUID": NVMLError_Odd})
    handle = binding.query("nvmlDeviceGetHandleByIndex", 0)
    assert binding.query("nvmlDeviceGetUUID", handle) == Failed("NVMLError_Odd", "NVMLError_Odd")
    with pytest.raises(NvmlUnavailable, match=r"NVML could not start \(NVMLError_Odd\)"):
        NvmlBinding(FakeNvml(load_reference("dgx1"), init_error=NVMLError_Odd)).init()


class FabricInfoOf13_610(ctypes.Structure):
    """``c_nvmlGpuFabricInfo_t`` as nvidia-ml-py 13.610.43 declares it: an 80-byte cluster UUID
    (NVML_DEVICE_UUID_BUFFER_SIZE) where nvml.h has 16."""

    _fields_ = [("clusterUuid", ctypes.c_uint8 * 80), ("status", ctypes.c_int), ("cliqueId", ctypes.c_uint32),
                ("state", ctypes.c_uint)]


def test_the_plain_fabric_structure_is_laid_out_as_nvml_h_whatever_the_binding_declares():
    class Binding13_610:
        c_nvmlGpuFabricInfo_t = FabricInfoOf13_610

    class BindingWithoutTheCall:
        pass

    assert type(NvmlBinding(pynvml).fabric_info_v1()) is pynvml.c_nvmlGpuFabricInfo_t  # laid out right: its own
    ours = NvmlBinding(Binding13_610()).fabric_info_v1()
    layout = {name: (getattr(type(ours), name).offset, getattr(type(ours), name).size) for name, *_ in ours._fields_}
    assert layout == {"clusterUuid": (0, 16), "status": (16, 4), "cliqueId": (20, 4), "state": (24, 4)}
    assert NvmlBinding(BindingWithoutTheCall()).fabric_info_v1() is None
