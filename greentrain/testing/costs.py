"""What NVML calls cost the calling thread, measured on an H100, and a way for fakes to spend it.

The costs are CPU time, not waiting: on the H100 host (driver 580.159.04,
2026-11-23, 300 calls each) the calling thread's CPU time equalled the wall
time. So a fake spends them as busy CPU time on its own thread
(``spend_cpu_s``), and a benchmark that measures thread or process CPU time
sees what the hardware would cost. Calls not listed were not measured and
cost nothing extra.
"""

from __future__ import annotations

import time

__all__ = ["NVML_CALL_COST_S", "spend_cpu_s"]

NVML_CALL_COST_S: dict[str, float] = {
    "nvmlDeviceGetTotalEnergyConsumption": 3893e-6,
    "nvmlDeviceGetFieldValues": 11e-6,  # NVML_FI_DEV_POWER_INSTANT
    "nvmlDeviceGetPowerUsage": 1.8e-6,
    "nvmlDeviceGetEnforcedPowerLimit": 1.7e-6,
    "nvmlDeviceGetClockInfo": 5.8e-6,
}
"""Measured CPU seconds per call on one H100 80GB HBM3 (greentrain's GPU measurements, 2026-11-23)."""


def spend_cpu_s(seconds: float) -> None:
    """Busy-wait until this thread has used ``seconds`` of CPU time (as a driver call that spins does)."""
    if seconds <= 0:
        return
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
