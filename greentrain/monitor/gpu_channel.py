"""A GPU's channel: cheap power samples shape the energy, the expensive counter anchors it.

On an H100 one read of NVML's total-energy counter costs 3.9 ms of busy CPU,
an instant-power read 11 us, and both refresh every 100 ms. So every pass
reads power and integrates it (trapezoid rule); the counter is read only
every ``anchor_interval_s`` (a few seconds) and at window and job
boundaries. Each counter read is an *anchor*: the cumulative figure there is
the counter's, so window and job totals are exact to the counter. Between
anchors the power integral only shapes the energy: it is scaled by the
counter/integral ratio over the last minute or so of anchor intervals (one
10 s interval alone would be too noisy: the counter moves in 100 ms steps).

A GPU without a counter is ``integrated``: the power integral is its figure.

Faults never turn into a silent 0 J: a counter that goes backwards or wraps
fills that interval from the power samples and labels the device
``integrated``; a missing power reading is bridged (by the counter's average
power, or, without a counter, by the trapezoid across the gap, for at most
``MAX_POWER_GAP_S``); a GPU lost between anchors keeps its energy up to the
last sample, and the figure is labelled ``integrated`` when that tail came
from power samples.
"""

from __future__ import annotations

import logging
import math
from collections import deque

from greentrain.device.base import GPU
from greentrain.errors import DeviceError, DeviceLostError, NotSupportedError
from greentrain.monitor.channels import EXTRAS_INTERVAL_S, Channel, optional_read
from greentrain.provenance import Source

__all__ = ["GPUChannel", "COUNTER_REFRESH_S", "ANCHOR_INTERVAL_S", "MAX_POWER_GAP_S"]

log = logging.getLogger("greentrain.monitor")

COUNTER_REFRESH_S = 0.1
"""Refresh period of NVML's energy counter and instant power (measured on an H100; NVML documents none)."""
ANCHOR_INTERVAL_S = 10.0
"""Default seconds between counter reads of one GPU: 8 GPUs cost 8 x 3.9 ms / 10 s = 0.3 % of a core for the
counter (at 5 s the whole sampler measured 0.75-1.06 % of a core on the calibrated fake: over the 1 % goal)."""
MAX_POWER_GAP_S = 1.0
"""How long a GPU without a counter may go without a power reading before it is marked failed."""
_MIN_SCALE_INTERVAL_S = 1.0  # shorter anchor intervals are dominated by the counter's 100 ms steps
_SCALE_INTERVALS = 12  # anchor intervals the counter/integral ratio is taken over


class GPUChannel(Channel):
    """One GPU: power every pass, the energy counter (if any) at anchors."""

    kind = "gpu"

    def __init__(self, gpu: GPU, anchor_interval_s: float = ANCHOR_INTERVAL_S, first_anchor_s: float = 0.0) -> None:
        super().__init__(f"gpu{gpu.index}", gpu.index, gpu.uuid, gpu.name, Source.MEASURED)
        self.gpu = gpu
        self.anchor_interval_s = anchor_interval_s
        self._first_anchor_s = first_anchor_s  # staggers the GPUs' counter reads across passes
        self._counter = False
        self._has_power = False
        self._extras_t: float | None = None
        self._anchor_t = 0.0
        self._anchor_j = 0.0  # cumulative energy at the last anchor (the counter's)
        self._raw_j = 0.0  # the counter there, in the device's own frame
        self._shape_j = 0.0  # integrated power since the last anchor, unscaled
        self._scale = 1.0  # counter / integral over the recent anchor intervals
        self._ratio_parts: deque[tuple[float, float]] = deque(maxlen=_SCALE_INTERVALS)  # (counter J, integral J)
        self._average_w: float | None = None  # counter's mean power over the last anchor interval
        self._next_anchor_t = math.inf
        self._gap_since: float | None = None  # first pass without a power reading
        self._gap_in_interval = False
        self._notes: list[str] = []

    # --- lifecycle ------------------------------------------------------------------------------

    def open(self, t: float) -> None:
        caps = self.gpu.capabilities
        self._counter, self._has_power = caps.energy_counter, caps.power_reading
        if not (self._counter or self._has_power):
            raise NotSupportedError(f"{self.key}: neither an energy counter nor a power reading; cannot measure it")
        self.source = Source.MEASURED if self._counter else Source.INTEGRATED
        power_w = self._read_power(t)
        if self._counter:
            self._raw_j = self._read_counter()
            self._next_anchor_t = t + self._first_anchor_s
        self._anchor_t, self._t = t, t
        self._read_extras(t)
        self._store(t, 0.0, power_w)

    def fail(self, error: BaseException) -> None:
        with self._lock:
            tail_integrated = self._shape_j > 0 and self._counter
        if tail_integrated:  # the frozen figure ends with power samples, not a counter read
            self.source = Source.INTEGRATED
        super().fail(error)

    def notes(self) -> list[str]:
        return list(self._notes)

    def _note(self, message: str) -> None:
        if message not in self._notes:
            self._notes.append(message)
            log.warning("greentrain monitor: %s", message)

    # --- reads ----------------------------------------------------------------------------------

    def _read_power(self, t: float) -> float | None:
        """Board power, or None when the reading is missing (a lost GPU still raises)."""
        if not self._has_power:
            return None
        try:
            power_w = float(self.gpu.power_w())
            if not (math.isfinite(power_w) and power_w >= 0):
                raise DeviceError(f"{self.key}: power reading {power_w!r} W is not a power")
        except DeviceLostError:
            raise
        except DeviceError as e:
            self._gap_since = t if self._gap_since is None else self._gap_since
            self._gap_in_interval = True
            self._note(f"{self.key}: power reading missing at times ({e}); bridged, not dropped")
            if not self._counter and t - self._gap_since > MAX_POWER_GAP_S:
                raise DeviceError(
                    f"{self.key}: no power reading for {t - self._gap_since:.1f} s and no energy counter; "
                    "energy measured until then is kept"
                ) from e
            return None
        self._gap_since = None
        return power_w

    def _read_counter(self) -> float:
        # The value dates from the counter's last refresh (0-100 ms ago). Correcting by half a period of
        # power was tried on the calibrated fake: it does not make windows more accurate (the lags of the
        # two ends cancel on average), so the counter is taken as it is.
        return self.gpu.total_energy_j()

    def _read_extras(self, t: float) -> None:
        # Limit and clock change only at step boundaries; once a second is fresh enough for gauges.
        if self._extras_t is not None and t - self._extras_t < EXTRAS_INTERVAL_S:
            return
        self._extras_t = t
        self.power_limit_w = optional_read(self.gpu.power_limit_w)
        clock_mhz = optional_read(self.gpu.sm_clock_mhz)
        self.sm_clock_hz = None if clock_mhz is None else clock_mhz * 1e6

    # --- one pass -------------------------------------------------------------------------------

    def sample(self, t: float, anchor: bool = False, min_anchor_gap_s: float = 0.0) -> None:
        power_w = self._read_power(t)
        if power_w is None and not self._counter:
            return  # the trapezoid from the last reading to the next one bridges the gap
        with self._lock:
            prev_t, prev_w = self._t, self._power_w
        now_w = power_w if power_w is not None else (self._average_w if self._average_w is not None else prev_w)
        if now_w is not None:
            start_w = prev_w if prev_w is not None and power_w is not None else now_w
            self._shape_j += 0.5 * (start_w + now_w) * max(0.0, t - prev_t)
        energy_j = self._anchor_j + self._scale * self._shape_j
        self._store(t, energy_j, power_w, extend_w=None if now_w is None else self._scale * now_w)
        if power_w is None:
            with self._lock:
                self._power_w = None  # the gauge shows the reading is missing, not a stale value
        boundary = anchor and t - self._anchor_t >= min_anchor_gap_s
        if self._counter and (boundary or t >= self._next_anchor_t):
            self._anchor(t, power_w)
        self._read_extras(t)

    def _anchor(self, t: float, power_w: float | None) -> None:
        raw_j = self._read_counter()  # a lost GPU raises here; what was integrated is kept
        delta_j = raw_j - self._raw_j
        if delta_j < 0:  # driver reload, reset or wrap: this interval can only come from the power samples
            delta_j = self._scale * self._shape_j
            self.source = Source.INTEGRATED
            self._note(f"{self.key}: energy counter went backwards; that interval is integrated from power")
        elif self._shape_j > 0 and not self._gap_in_interval and t - self._anchor_t >= _MIN_SCALE_INTERVAL_S:
            self._ratio_parts.append((delta_j, self._shape_j))
            self._scale = sum(c for c, _ in self._ratio_parts) / sum(i for _, i in self._ratio_parts)
        if t - self._anchor_t >= _MIN_SCALE_INTERVAL_S:
            self._average_w = delta_j / (t - self._anchor_t)
        self._anchor_j += delta_j
        self._raw_j, self._anchor_t, self._shape_j, self._gap_in_interval = raw_j, t, 0.0, False
        # Keep each GPU's own phase (the reads stay staggered); a boundary read postpones an imminent one.
        while self._next_anchor_t <= t + self.anchor_interval_s / 2:
            self._next_anchor_t += self.anchor_interval_s
        with self._lock:
            self._energy_j = self._anchor_j
            self._floor_j = max(self._floor_j, self._anchor_j)
            if self._extend_w is not None and power_w is not None:
                self._extend_w = self._scale * power_w
