"""RAPL zones from a sysfs tree built in tmp_path: selection, wrap-around, permission."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.device import discover, rapl
from greentrain.device.rapl import RAPLDomain, find_rapl_domains
from greentrain.errors import PrivilegeError

pytestmark = pytest.mark.timeout(10)

MAX_RANGE_UJ = 262_143_328_850  # a real Intel package range


def make_zone(root: Path, zone: str, name: str, energy_uj: int, max_uj: int = MAX_RANGE_UJ) -> Path:
    path = root / zone
    path.mkdir(parents=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return path


def set_energy(path: Path, energy_uj: int) -> None:
    (path / "energy_uj").write_text(f"{energy_uj}\n")


@pytest.fixture()
def powercap(tmp_path: Path) -> Path:
    make_zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000)
    make_zone(tmp_path, "intel-rapl:0:0", "core", 500_000)
    make_zone(tmp_path, "intel-rapl:0:1", "dram", 200_000)
    make_zone(tmp_path, "intel-rapl:1", "package-1", 3_000_000)
    make_zone(tmp_path, "intel-rapl:2", "psys", 9_000_000)
    make_zone(tmp_path, "intel-rapl-mmio:0", "package-0", 1_000_000)
    return tmp_path


def test_package_and_dram_zones_only(powercap: Path) -> None:
    domains, notes = find_rapl_domains(powercap)
    assert [d.name for d in domains] == ["package-0", "dram-0", "package-1"]
    assert all(d.readable() and d.source.value == "measured" for d in domains)
    assert any("psys" in n and "double-count" in n for n in notes)


def test_energy_counts_from_construction(powercap: Path) -> None:
    domain = RAPLDomain(powercap / "intel-rapl:0", "package-0")
    assert domain.energy_j() == 0.0
    set_energy(powercap / "intel-rapl:0", 6_000_000)
    assert domain.energy_j() == pytest.approx(5.0)


def test_counter_wrap_around_is_corrected(tmp_path: Path) -> None:
    zone = make_zone(tmp_path, "intel-rapl:0", "package-0", 990_000, max_uj=1_000_000)
    domain = RAPLDomain(zone)
    set_energy(zone, 995_000)
    assert domain.energy_j() == pytest.approx(0.005)
    set_energy(zone, 15_000)  # wrapped: 5,000 to the top, then 15,000
    assert domain.energy_j() == pytest.approx(0.025)
    set_energy(zone, 500_000)
    assert domain.energy_j() == pytest.approx(0.510)


def test_unreadable_counter_is_a_clear_state_and_error(powercap: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_read = rapl.read_counter

    def root_only(path: Path) -> int:  # what a 0400 root-owned energy_uj gives a normal user
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return real_read(path)

    monkeypatch.setattr(rapl, "read_counter", root_only)
    domains, _ = find_rapl_domains(powercap)
    assert [d.status for d in domains] == ["not readable (permission)"] * 3
    with pytest.raises(PrivilegeError, match=r"energy_uj: not readable \(permission\).*CVE-2020-8694"):
        domains[0].energy_j()
    found = discover("", rapl_root=powercap, estimate_cpu=True)
    assert [c.name for c in found.cpus] == ["cpu-estimate"]
    assert sum("not readable (permission)" in n for n in found.notes) == 3


def test_discover_uses_readable_rapl_instead_of_the_estimate(powercap: Path) -> None:
    found = discover("", rapl_root=powercap, estimate_cpu=True)
    assert [c.name for c in found.cpus] == ["package-0", "dram-0", "package-1"]
    assert found.measurable()


def test_missing_root_is_a_note(tmp_path: Path) -> None:
    assert find_rapl_domains(tmp_path / "none") == (
        [],
        [f"no RAPL interface at {tmp_path / 'none'} (not Linux, no intel_rapl/powercap driver, or a VM that hides it)"],
    )


def test_environment_points_discover_at_another_powercap_tree(powercap: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREENTRAIN_RAPL_ROOT", str(powercap))
    assert [c.name for c in discover("").cpus] == ["package-0", "dram-0", "package-1"]
