"""discover(): GPUs visible to this process, RAPL, the estimate, and notes on everything missing."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from greentrain.device import discover
from greentrain.device.estimate import CPUEstimate
from greentrain.errors import NotSupportedError
from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice

pytestmark = pytest.mark.timeout(20)


def _three() -> FakeNVML:
    return FakeNVML([FakeNVMLDevice("a40"), FakeNVMLDevice("v100"), FakeNVMLDevice("rtx6000")])


def test_all_gpus_when_cuda_visible_devices_unset() -> None:
    found = discover(None, nvml=_three(), rapl_root=None, estimate_cpu=False)
    assert [g.index for g in found.gpus] == [0, 1, 2] and found.cpus == [] and found.notes == []


def test_cuda_visible_devices_indices_and_uuid_prefixes_map_to_nvml() -> None:
    nvml = _three()
    uuid_v100 = nvml.gpus[1].uuid
    found = discover(f"2,{uuid_v100[:10]}", nvml=nvml, rapl_root=None, estimate_cpu=False)
    assert [g.index for g in found.gpus] == [2, 1]
    assert [g.name for g in found.gpus] == ["Quadro RTX 6000", "Tesla V100-PCIE-32GB"]


def test_default_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert [g.index for g in discover(nvml=_three(), rapl_root=None, estimate_cpu=False).gpus] == [1]


def test_empty_cuda_visible_devices_does_not_touch_nvml() -> None:
    nvml = _three()
    found = discover("", nvml=nvml, rapl_root=None, estimate_cpu=False)
    assert found.gpus == [] and nvml.calls == [] and "empty" in found.notes[0]


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED])
def test_missing_driver_means_no_gpus_not_a_crash(code: int) -> None:
    found = discover(None, nvml=FakeNVML([FakeNVMLDevice()], init_error=code), rapl_root=None, estimate_cpu=False)
    assert found.gpus == [] and found.nvml is None
    assert found.notes == ["no NVIDIA driver found (libnvidia-ml not loadable): no NVIDIA GPUs"]


def test_mig_gpu_is_skipped_when_enumerating_and_refused_when_asked_for() -> None:
    nvml = FakeNVML([FakeNVMLDevice("a40", mig=True), FakeNVMLDevice("a40")])
    found = discover(None, nvml=nvml, rapl_root=None, estimate_cpu=False)
    assert [g.index for g in found.gpus] == [1]
    assert "MIG mode and was skipped" in found.notes[0] and "per physical GPU" in found.notes[0]
    with pytest.raises(NotSupportedError, match="MIG mode"):
        discover("0", nvml=FakeNVML([FakeNVMLDevice("a40", mig=True)]), rapl_root=None, estimate_cpu=False)


def test_a_gpu_lost_during_discovery_is_skipped_with_a_note() -> None:
    nvml = _three()
    nvml.lose_gpu(1)
    found = discover(None, nvml=nvml, rapl_root=None, estimate_cpu=False)
    assert [g.index for g in found.gpus] == [0, 2]
    assert any("GPU 1 skipped" in n and "stopped answering" in n for n in found.notes)


def test_close_shuts_nvml_down() -> None:
    nvml = _three()
    with discover(None, nvml=nvml, rapl_root=None, estimate_cpu=False):
        assert nvml.initialised == 1
    assert nvml.initialised == 0


def test_no_rapl_falls_back_to_a_labelled_estimate(tmp_path: Path) -> None:
    found = discover("", rapl_root=tmp_path / "missing", estimate_cpu=True)
    (estimate,) = found.cpus
    assert isinstance(estimate, CPUEstimate) and estimate.source.value == "estimated"
    assert any("no RAPL interface" in n for n in found.notes)
    assert any(n.startswith("CPU energy estimated") for n in found.notes)
    assert not found.measurable()
