"""The engine's declared collaborators: greentrain's own implementations satisfy the protocols."""

from __future__ import annotations

import pytest

from greentrain.actuators.actuator_set import ActuatorSet
from greentrain.actuators.advisory import AdvisoryActuators
from greentrain.engine.collaborators import Actuators, Advises, CarbonSignal, CountsRefusals, EnergyMonitor, HoldsDevices, StepBoundary
from greentrain.monitor import Monitor
from greentrain.signals.chain import SignalChain


@pytest.mark.parametrize(("implementation", "protocol"), [
    (SignalChain, CarbonSignal),
    (Monitor, EnergyMonitor),
    (ActuatorSet, Actuators),
    (AdvisoryActuators, Actuators),
    (Monitor, HoldsDevices),
    (ActuatorSet, StepBoundary),
])
def test_each_implementation_has_every_method_its_protocol_declares(implementation: type, protocol: type) -> None:
    assert issubclass(implementation, protocol)


def test_an_object_missing_a_method_is_not_a_collaborator() -> None:
    class StepsOnly:
        def step_begin(self) -> None: ...

        def step_end(self) -> None: ...

    assert not isinstance(StepsOnly(), EnergyMonitor)


def test_advisory_actuators_declare_what_advice_reads() -> None:
    advisory = AdvisoryActuators([])
    assert isinstance(advisory, Advises) and isinstance(advisory, CountsRefusals) and advisory.advisory
