"""CPU estimate: utilisation from /proc/stat x TDP from CodeCarbon's table, always 'estimated'."""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import pytest

from greentrain.device.cpu_tdp import lookup_tdp
from greentrain.device.estimate import CPUEstimate, load_power_w
from greentrain.errors import ConfigError

pytestmark = pytest.mark.timeout(10)


def codecarbon_tdp(name: str) -> float:
    ref = resources.files("codecarbon").joinpath("data/hardware/cpu_power.csv")
    for row in csv.DictReader(ref.read_text(encoding="utf-8").splitlines()):
        if row["Name"] == name:
            return float(row["TDP"])
    raise AssertionError(f"{name} not in codecarbon's table")


def write_stat(path: Path, busy: int, idle: int) -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    path.write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {busy} 0 0 {idle} 0 0 0 0 0 0\n")


@pytest.mark.parametrize(
    ("raw", "table_name"),
    [
        ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", "Intel Xeon Gold 6248"),
        ("AMD EPYC 7763 64-Core Processor", "AMD EPYC 7763"),
        ("Intel(R) Core(TM) i7-10700K CPU @ 3.80GHz", "Intel Core i7-10700K"),
    ],
)
def test_tdp_comes_from_codecarbons_table(raw: str, table_name: str) -> None:
    info = lookup_tdp(raw)
    assert info.tdp_w == codecarbon_tdp(table_name)
    assert table_name in info.source


def test_unknown_cpu_uses_codecarbons_per_thread_default() -> None:
    from codecarbon.core.cpu import DEFAULT_POWER_PER_CORE

    info = lookup_tdp("Mystery Chip 9000", threads=12)
    assert info.tdp_w == DEFAULT_POWER_PER_CORE * 12 and "default" in info.source


def test_load_model_matches_codecarbon_machine_mode() -> None:
    assert load_power_w(100.0, 0.0) == pytest.approx(10.0)
    assert load_power_w(100.0, 1.0) == pytest.approx(100.0)
    assert load_power_w(100.0, 0.5) == pytest.approx(100.0 * (0.1 + 0.9 * 0.125))


def test_energy_integrates_the_load_of_each_interval(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    write_stat(stat, busy=1000, idle=1000)
    now = [50.0]
    est = CPUEstimate(tdp_w=120.0, cpu_model="test cpu", proc_stat=stat, time_fn=lambda: now[0])
    assert est.source.value == "estimated" and est.energy_j() == 0.0
    write_stat(stat, busy=1000 + 300, idle=1000 + 100)  # 75 % busy over 2 s
    now[0] += 2.0
    first_j = load_power_w(120.0, 0.75) * 2.0
    assert est.energy_j() == pytest.approx(first_j)
    assert est.load() == pytest.approx(0.75) and est.power_w() == pytest.approx(load_power_w(120.0, 0.75))
    write_stat(stat, busy=1300, idle=1100 + 400)  # idle for 1 s
    now[0] += 1.0
    assert est.energy_j() == pytest.approx(first_j + 12.0)


def test_bad_tdp_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tdp_w"):
        CPUEstimate(tdp_w=0, cpu_model="x")
