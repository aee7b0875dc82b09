"""A new carbon provider is one module plus one entry-point line: no greentrain file changes."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from greentrain.clock import FrozenClock
from greentrain.errors import ConfigError
from greentrain.signals import make_provider, provider_names
from tests.plugin_dist import install_plugin

FAKEPROV = textwrap.dedent('''
    """A grid operator greentrain does not know: hourly values from a fixed daily profile."""
    from datetime import timedelta

    from greentrain.clock import SystemClock
    from greentrain.signals.base import CarbonIntensityProvider, IntensityPoint, Kind

    PROFILE_G_PER_KWH = [300 + 10 * h for h in range(24)]


    class FakeProvider(CarbonIntensityProvider):
        name = "fakeprov"
        uses_network = False

        def __init__(self, *, clock=None):
            self.clock = clock or SystemClock()

        def _point(self, start, kind):
            return IntensityPoint(start=start, end=start + timedelta(hours=1), kind=kind, provider=self.name,
                                  zone="XX", intensity_g_per_kwh=float(PROFILE_G_PER_KWH[start.hour]))

        def _hour(self):
            return self.clock.now().replace(minute=0, second=0, microsecond=0)

        def latest(self, zone):
            return self._point(self._hour(), Kind.ACTUAL)

        def forecast(self, zone, horizon_h=72.0):
            return [self._point(self._hour() + timedelta(hours=k), Kind.FORECAST) for k in range(int(horizon_h))]

        def history(self, zone, start, end):
            return []
''')


def test_a_new_provider_is_one_module_and_one_entry_point_line(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="unknown carbon provider 'fakeprov'"):
        make_provider("fakeprov")
    install_plugin(monkeypatch, tmp_path / "site", "fakeprov", {"fakeprov": FAKEPROV},
                   {"greentrain.providers": {"fakeprov": "fakeprov:FakeProvider"}})
    assert "fakeprov" in provider_names()
    clock = FrozenClock(datetime(2026, 3, 1, 5, 30, tzinfo=UTC))
    provider = make_provider("fakeprov", clock=clock)
    assert provider.latest("XX").intensity_g_per_kwh == 350.0
    assert [p.intensity_g_per_kwh for p in provider.forecast("XX", 3)] == [350.0, 360.0, 370.0]
    assert provider.forecast("XX", 1)[0].start == datetime(2026, 3, 1, 5, tzinfo=UTC)
    with pytest.raises(ConfigError, match="api_base: provider 'fakeprov' does not use HTTP"):
        make_provider("fakeprov", api_base="https://example.invalid")
    cached = make_provider("fakeprov", clock=clock, cache_dir=tmp_path / "cache")  # the built-in cache wraps it
    assert cached.latest("XX").intensity_g_per_kwh == 350.0
