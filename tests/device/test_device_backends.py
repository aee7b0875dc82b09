"""Discovery asks every GPU backend: a new vendor is one module plus one entry-point line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from greentrain.device import discover
from greentrain.device.discovery import gpu_backends
from greentrain.device.nvml_backend import NVMLBackend
from greentrain.errors import ConfigError
from greentrain.testing.fake_backend import FakeBackend
from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice
from tests.plugin_dist import install_plugin

FAKEVENDOR = textwrap.dedent('''
    """A vendor that greentrain does not know: its GPU and its backend, nothing else."""
    from greentrain.device.base import GPUBackend
    from greentrain.device.visible import resolve_visible_devices
    from greentrain.testing import FakeGPU


    class FakeVendorGPU(FakeGPU):
        def __init__(self, index):
            super().__init__("v100", index=index, uuid=f"GPU-fakevendor-{index:04d}")
            self.name, self.architecture = "FakeVendor X1", "fv1"


    class FakeVendorBackend(GPUBackend):
        name = "fakevendor"
        closed = 0

        def discover(self, visible, notes):
            gpus = [FakeVendorGPU(i) for i in range(2)]
            positions, more = resolve_visible_devices(visible, [g.uuid for g in gpus])
            notes.extend(more)
            return [gpus[p] for p in positions]

        def close(self):
            type(self).closed += 1
''')


@pytest.fixture
def no_fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GREENTRAIN_FAKE_GPUS", raising=False)
    monkeypatch.delenv("GREENTRAIN_FAKE_GPU_DIR", raising=False)


def test_a_new_vendor_is_one_module_and_one_entry_point_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             no_fakes: None) -> None:
    before = discover(None, rapl_root=None, estimate_cpu=False)
    assert not any(g.uuid.startswith("GPU-fakevendor") for g in before.gpus)
    before.close()
    install_plugin(monkeypatch, tmp_path / "site", "fakevendor", {"fakevendor": FAKEVENDOR},
                   {"greentrain.gpu_backends": {"fakevendor": "fakevendor:FakeVendorBackend"}})
    with discover(None, rapl_root=None, estimate_cpu=False) as devices:
        ours = [g for g in devices.gpus if g.uuid.startswith("GPU-fakevendor")]
        assert [(g.name, g.index) for g in ours] == [("FakeVendor X1", 0), ("FakeVendor X1", 1)]
        backend = next(b for b in devices.backends if b.name == "fakevendor")
        assert all(g.power_w() > 0 and g.total_energy_j() > 0 for g in ours)  # read like any other GPU
    assert type(backend).closed == 1  # released with the DeviceSet
    with discover("GPU-fakevendor-0001", rapl_root=None, estimate_cpu=False) as devices:
        assert [g.uuid for g in devices.gpus] == ["GPU-fakevendor-0001"]


def test_a_uuid_reported_twice_is_kept_once_with_a_note() -> None:
    class Twin(FakeBackend):
        name = "twin"

    with discover(None, backends=[FakeBackend(["a40"]), Twin(["a40"])], rapl_root=None, estimate_cpu=False) as found:
        assert len(found.gpus) == 1
        assert any("also reported by the twin backend: the fake backend's is used" in n for n in found.notes)


def test_injected_nvml_replaces_the_nvml_backends_library(no_fakes: None) -> None:
    nvml = FakeNVML([FakeNVMLDevice("a40")])
    backends = gpu_backends(nvml)
    assert [b.name for b in backends][:3] == ["nvml", "fake", "daemon"]
    assert isinstance(backends[0], NVMLBackend)
    with discover(None, backends=backends, rapl_root=None, estimate_cpu=False) as found:
        assert len(found.gpus) == 1 and found.nvml is nvml
    assert nvml.initialised == 0


def test_fake_gpus_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_fakes: None) -> None:
    monkeypatch.setenv("GREENTRAIN_FAKE_GPUS", "a40:2,v100")
    with discover(None, nvml=FakeNVML([]), rapl_root=None, estimate_cpu=False) as found:
        assert [g.name for g in found.gpus] == ["NVIDIA A40", "NVIDIA A40", "Tesla V100-PCIE-32GB"]
        assert any("simulated GPUs (GREENTRAIN_FAKE_GPUS): a40, a40, v100" in n for n in found.notes)
    with discover("1", nvml=FakeNVML([]), rapl_root=None, estimate_cpu=False) as found:
        assert [g.index for g in found.gpus] == [1]
    monkeypatch.setenv("GREENTRAIN_FAKE_GPU_DIR", str(tmp_path / "fakes"))
    with discover(None, nvml=FakeNVML([]), rapl_root=None, estimate_cpu=False) as found:
        found.gpus[0].set_power_limit_w(200.0)
    with discover(None, nvml=FakeNVML([]), rapl_root=None, estimate_cpu=False) as again:
        assert again.gpus[0].power_limit_w() == 200.0  # the settings survive the process


@pytest.mark.parametrize(("value", "message"), [
    ("h100", "GREENTRAIN_FAKE_GPUS: 'h100' has no measured profile; use one of v100, a40, rtx6000"),
    ("a40:x", "GREENTRAIN_FAKE_GPUS: 'a40:x': expected MODEL[:COUNT] with COUNT in 1..64, e.g. a40:2"),
])
def test_bad_fake_gpus_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch, value: str,
                                                       message: str) -> None:
    monkeypatch.setenv("GREENTRAIN_FAKE_GPUS", value)
    with pytest.raises(ConfigError) as error:
        discover(None, nvml=FakeNVML([]), rapl_root=None, estimate_cpu=False)
    assert str(error.value) == message


def test_a_failing_backend_is_a_note_and_the_others_still_count() -> None:
    from greentrain.errors import DeviceError

    class Broken(FakeBackend):
        name = "broken"

        def discover(self, visible, notes):  # type: ignore[no-untyped-def]
            raise DeviceError("vendor library crashed")

    with discover(None, backends=[Broken([]), FakeBackend(["v100"])], rapl_root=None, estimate_cpu=False) as found:
        assert [g.name for g in found.gpus] == ["Tesla V100-PCIE-32GB"]
        assert "GPU backend 'broken' failed: vendor library crashed" in found.notes
