"""FakeGPU behaves like the measured profiles say, and its ground-truth energy is exact."""

from __future__ import annotations

import pytest

from greentrain.device.base import GPU
from greentrain.device.profiles import load_gpu_profile
from greentrain.errors import ConfigError, DeviceLostError, PrivilegeError
from greentrain.testing import FakeCPUDomain, FakeGPU

pytestmark = pytest.mark.timeout(10)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_is_a_real_gpu_and_draws_the_profiled_power_at_each_limit() -> None:
    points = load_gpu_profile("a40").points("imagenet/resnet50")
    gpu = FakeGPU("a40", "imagenet/resnet50", ripple=0.0, refresh_period_s=None)
    assert isinstance(gpu, GPU)
    for point in points:
        gpu.set_power_limit_w(point.power_limit_w)
        assert gpu.power_w() == pytest.approx(point.average_power_w)
        assert gpu.relative_speed() == pytest.approx(points[0].time_per_epoch_s / point.time_per_epoch_s)


def test_interpolates_between_measured_limits() -> None:
    hi, lo = load_gpu_profile("a40").points("cifar100/shufflenetv2")[:2]
    gpu = FakeGPU("a40", "cifar100/shufflenetv2", ripple=0.0, refresh_period_s=None)
    gpu.set_power_limit_w((hi.power_limit_w + lo.power_limit_w) / 2)
    assert gpu.power_w() == pytest.approx((hi.average_power_w + lo.average_power_w) / 2)
    expected_speed = hi.time_per_epoch_s / ((hi.time_per_epoch_s + lo.time_per_epoch_s) / 2)
    assert gpu.relative_speed() == pytest.approx(expected_speed)
    assert gpu.step_time_s(0.5) == pytest.approx(0.5 / expected_speed)


def test_constraints_default_to_max_and_range_is_checked() -> None:
    gpu = FakeGPU("rtx6000")
    limits = gpu.power_limit_constraints()
    points = load_gpu_profile("rtx6000").points("imagenet/resnet50")
    assert (limits.min_w, limits.max_w, limits.default_w) == (
        points[-1].power_limit_w,
        points[0].power_limit_w,
        points[0].power_limit_w,
    )
    assert gpu.power_limit_w() == limits.max_w
    with pytest.raises(ConfigError, match=rf"{limits.min_w - 1:g} W is outside the allowed range"):
        gpu.set_power_limit_w(limits.min_w - 1)


def test_true_energy_is_the_exact_integral_of_power_across_limit_changes() -> None:
    clock = Clock()
    gpu = FakeGPU("a40", time_fn=clock, ripple=0.2, refresh_period_s=None)
    dt, total = 1e-3, 0.0

    def integrate(seconds: float) -> float:  # fine midpoint rule over power_w()
        acc, steps = 0.0, round(seconds / dt)
        start = clock.t
        for i in range(steps):
            clock.t = start + (i + 0.5) * dt
            acc += gpu.power_w() * dt
        clock.t = start + steps * dt
        return acc

    total += integrate(1.3)
    gpu.set_power_limit_w(150)
    total += integrate(0.9)
    assert gpu.true_energy_j() == pytest.approx(total, rel=1e-6)
    assert gpu.total_energy_j() == gpu.counter_offset_j + gpu.true_energy_j()


def test_privilege_fail_and_set_calls() -> None:
    gpu = FakeGPU("a40", privileged=False)
    with pytest.raises(PrivilegeError, match="root"):
        gpu.set_power_limit_w(200)
    assert gpu.capabilities.power_limit_permitted is False
    ok = FakeGPU("a40")
    ok.set_power_limit_w(200)
    ok.lock_sm_clocks_mhz(600, 1200)
    ok.reset_sm_clocks()
    assert ok.set_calls == [
        ("set_power_limit_w", 200.0),
        ("lock_sm_clocks_mhz", (600, 1200)),
        ("reset_sm_clocks", None),
    ]
    ok.fail(DeviceLostError("GPU 0 lost"))
    for call in (ok.power_w, ok.total_energy_j, ok.power_limit_w, ok.sm_clock_mhz):
        with pytest.raises(DeviceLostError):
            call()
    ok.reset_failure()
    assert ok.power_limit_w() == 200.0


def test_clocks_are_plausible_and_locks_cap_the_clock() -> None:
    gpu = FakeGPU("a40")
    clocks = gpu.supported_sm_clocks_mhz()
    assert clocks[0] == 1740 and clocks == sorted(clocks, reverse=True)
    gpu.lock_sm_clocks_mhz(clocks[-1], 1005)
    assert gpu.sm_clock_mhz() == 1005
    with pytest.raises(ConfigError):
        gpu.lock_sm_clocks_mhz(100, 5000)


def test_fake_cpu_domain_is_deterministic() -> None:
    clock = Clock()
    cpu = FakeCPUDomain("package-0", 80.0, time_fn=clock)
    clock.t = 2.5
    assert cpu.energy_j() == pytest.approx(200.0) and cpu.source.value == "measured"


def test_workloads_measured_with_several_optimizers_keep_one_point_per_limit() -> None:
    # V100 cifar100/shufflenetv2 was measured with adadelta and adam (70 rows each); the profile
    # keeps one optimizer (most rows, ties by name: adam), so the fake draws exactly that row's power.
    points = load_gpu_profile("v100").points("cifar100/shufflenetv2", 1024)
    top = [p for p in points if p.power_limit_w == points[0].power_limit_w]
    assert len(top) == 1
    assert top[0].average_power_w == pytest.approx(194.92, abs=0.01)  # adam @ 250 W in the CSV
    gpu = FakeGPU("v100", "cifar100/shufflenetv2", batch_size=1024, ripple=0.0)
    assert len({p.power_limit_w for p in gpu.points}) == len(gpu.points)
    assert gpu.power_w() == pytest.approx(top[0].average_power_w)


def test_both_profiled_doubles_share_identity_limits_and_clock_ladder(tmp_path) -> None:
    import uuid

    from greentrain.testing import FileBackedGPU

    fake = FakeGPU("a40", index=2)
    backed = FileBackedGPU(tmp_path / "gpu.json", "a40", index=2, privileged=False)
    assert fake.uuid == f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, 'greentrain-fake/a40/2')}"
    assert backed.uuid == f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, 'a40/2')}"
    assert FakeGPU("a40", uuid="GPU-given").uuid == "GPU-given"
    assert fake.power_limit_constraints() == backed.power_limit_constraints()
    assert fake.supported_sm_clocks_mhz() == backed.supported_sm_clocks_mhz()  # both A40s top out at 1740 MHz
    assert fake.supported_sm_clocks_mhz()[-1] == 210
    assert fake.capabilities.clock_control_permitted and not backed.capabilities.clock_control_permitted
    assert backed.capabilities.energy_counter and not FakeGPU("a40", energy_counter=False).capabilities.energy_counter
    backed.fail(DeviceLostError("GPU 2 lost"))
    with pytest.raises(DeviceLostError):
        backed.utilization_pct()
    backed.fail(None)
    assert backed.utilization_pct() == 100.0
