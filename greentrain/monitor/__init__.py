"""Energy measurement while training: a background sampler, windows, per-step attribution.

``Monitor`` samples every selected device at ``interval_s`` on a daemon
thread; ``begin``/``end`` measure named (nestable) windows and
``step_begin``/``step_end`` attribute energy to training steps. Each figure
is labelled ``measured`` (hardware counter), ``integrated`` (power samples)
or ``estimated`` (a model); a step too short for the hardware to resolve
is ``interpolated``.
"""

from greentrain.monitor.monitor import Monitor, step_source, validate_interval_s
from greentrain.monitor.readings import DeviceReading, StepEnergy, WindowEnergy, weakest_source

__all__ = ["Monitor", "DeviceReading", "StepEnergy", "WindowEnergy", "weakest_source", "validate_interval_s", "step_source"]
