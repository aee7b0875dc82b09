"""TTL cache: hit/miss/expiry, disk sharing, atomic files, corrupt files as misses; lat/lon queries."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from gt_signal_server import Reply, SignalServer, recorded

from greentrain.clock import FrozenClock
from greentrain.signals import make_provider
from greentrain.signals.base import EmissionFactor, IntensityPoint, Kind
from greentrain.signals.cache import TTLCache, point_from_dict, point_to_dict

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2024, 3, 6, 19, 20, tzinfo=UTC)


def _point(value: float) -> IntensityPoint:
    start = datetime(2024, 3, 6, 19, tzinfo=UTC)
    return IntensityPoint(start=start, end=start + timedelta(hours=1), intensity_g_per_kwh=value, kind=Kind.ACTUAL,
                          provider="electricitymaps", zone="DE", emission_factor=EmissionFactor.LIFECYCLE,
                          estimated=True)


def test_hit_miss_and_expiry():
    clock = FrozenClock(T0)
    cache = TTLCache(clock=clock, ttl_s=300)
    assert cache.get("k") is None
    cache.put("k", [_point(300)])
    clock.advance(300)
    points, fetched_at = cache.get("k")
    assert points == [_point(300)] and fetched_at == T0
    clock.advance(1)
    assert cache.get("k") is None
    assert (cache.hits, cache.misses) == (1, 2)


def test_disk_entries_are_shared_atomic_and_corruption_is_a_miss(tmp_path):
    clock = FrozenClock(T0)
    TTLCache(clock=clock, ttl_s=60, cache_dir=tmp_path).put("latest|DE", [_point(420)])
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and not any(f.name.startswith(".tmp") for f in files)  # no temp file left behind
    other = TTLCache(clock=clock, ttl_s=60, cache_dir=tmp_path)  # another rank or a restart
    assert other.get("latest|DE")[0] == [_point(420)]
    files[0].write_text('{"key": "latest|DE", "points": [{"start": ')  # torn by a crash
    assert TTLCache(clock=clock, ttl_s=60, cache_dir=tmp_path).get("latest|DE") is None


def test_point_round_trip():
    point = _point(123.5)
    assert point_from_dict(json.loads(json.dumps(point_to_dict(point)))) == point


def test_make_provider_cache_calls_the_api_once_per_ttl(tmp_path, monkeypatch):
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", "cache-test-token")
    clock = FrozenClock(T0)
    with SignalServer() as server:
        server.route("/carbon-intensity/latest",
                     Reply(body=recorded("electricitymaps_v3_carbon-intensity_latest.json")))
        ranks = [make_provider("electricitymaps", clock=clock, api_base=server.url, cache_dir=tmp_path, ttl_s=300)
                 for _ in range(4)]
        values = {rank.latest("US-CAR-DUK").intensity_g_per_kwh for rank in ranks}
        assert values == {216} and len(server.hits("/carbon-intensity/latest")) == 1
        clock.advance(301)
        ranks[0].latest("US-CAR-DUK")
        assert len(server.hits("/carbon-intensity/latest")) == 2
        for rank in ranks:
            rank.close()


def test_lat_lon_query_replaces_zone(monkeypatch):
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", "latlon-token")
    with SignalServer() as server:
        server.route("/carbon-intensity/history",
                     Reply(body=recorded("electricitymaps_v3_carbon-intensity_history_lat-lon_US-MIDW-MISO.json")))
        clock = FrozenClock(datetime(2024, 12, 1, 6, tzinfo=UTC))
        em = make_provider("electricitymaps", clock=clock, api_base=server.url, lat=41.88, lon=-87.63)
        points = em.history("", clock.now() - timedelta(hours=24), clock.now())
        assert len(points) == 24 and points[0].zone == "US-MIDW-MISO" and points[0].estimated
        (request,) = server.hits("/carbon-intensity/history")
        assert request.query["lat"] == ["41.88"] and "zone" not in request.query
        em.close()


def test_expired_memory_entry_picks_up_another_processes_refresh(tmp_path):
    clock = FrozenClock(T0)
    rank0 = TTLCache(clock=clock, ttl_s=60, cache_dir=tmp_path)
    rank1 = TTLCache(clock=clock, ttl_s=60, cache_dir=tmp_path)
    rank0.put("latest|DE", [_point(400)])
    assert rank1.get("latest|DE")[0] == [_point(400)]
    clock.advance(61)
    rank0.put("latest|DE", [_point(410)])  # rank 0 fetched again after the TTL
    assert rank1.get("latest|DE")[0] == [_point(410)]  # rank 1 reads it instead of calling the API
