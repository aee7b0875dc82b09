"""On a machine with an NVIDIA GPU (marker `gpu`, skipped elsewhere): the real NVML path end to end."""

from __future__ import annotations

import time

import pytest

from greentrain.device import discover
from greentrain.monitor import Monitor

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(60)]


def test_real_gpus_are_found_and_measured() -> None:
    with discover(rapl_root=None, estimate_cpu=False) as devices:
        assert devices.gpus, devices.notes
        gpu = devices.gpus[0]
        assert gpu.uuid.startswith("GPU-") and gpu.architecture != "unknown"
        assert 0 < gpu.power_w() < 2000 and gpu.power_limit_w() > 0
        with Monitor(devices.gpus[:1], interval_s=0.05) as monitor:
            deadline = time.monotonic() + 10
            while monitor.readings()[0].energy_j <= 0:  # an idle GPU still draws tens of watts
                assert time.monotonic() < deadline, monitor.readings()
                time.sleep(0.05)
        (reading,) = monitor.readings()
        assert not reading.failed and reading.source.value in ("measured", "integrated")
