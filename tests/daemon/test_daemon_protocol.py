"""Protocol parsing and config validation: bad input gets an error naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.daemon.config import load_config, parse_config
from greentrain.daemon.protocol import MAX_LINE_BYTES, ProtocolError, parse_request
from greentrain.errors import ConfigError

pytestmark = pytest.mark.timeout(10)


def test_valid_requests_parse() -> None:
    r = parse_request(b'{"op":"set_power_limit","uuid":"GPU-1","power_limit_w":200}\n')
    assert (r.op, r.fields) == ("set_power_limit", {"uuid": "GPU-1", "power_limit_w": 200})
    assert parse_request(b'{"op":"reset"}').fields == {}
    assert parse_request(b'{"op":"reset","knob":"power_limit_w"}').fields == {"knob": "power_limit_w"}


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b"not json", "not one line of UTF-8 JSON"),
        (b"\xff\xfe", "not one line of UTF-8 JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"op":"format_disk"}', "unknown op 'format_disk'"),
        (b'{"uuid":"GPU-1"}', "unknown op None"),
        (b'{"op":"set_power_limit","uuid":"GPU-1"}', "missing field 'power_limit_w'"),
        (b'{"op":"set_power_limit","uuid":"GPU-1","power_limit_w":"200"}', "'power_limit_w' has the wrong type"),
        (b'{"op":"set_power_limit","uuid":"GPU-1","power_limit_w":true}', "wrong type"),
        (b'{"op":"set_power_limit","uuid":"GPU-1","power_limit_w":NaN}', "must be finite"),
        (b'{"op":"lock_sm_clocks","uuid":"GPU-1","min_mhz":1.5,"max_mhz":900}', "'min_mhz' has the wrong type"),
        (b'{"op":"set_power_limit","uuid":"GPU-1","power_limit_w":1,"shell":"rm -rf /"}', "unknown field(s) ['shell']"),
        (b'{"op":"hello","job":""}', "1..128 characters"),
        (b'{"op":"status","x":' + b"1" * MAX_LINE_BYTES + b"}", f"longer than {MAX_LINE_BYTES}"),
    ],
)
def test_malformed_requests_are_refused_by_name(line: bytes, needle: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_request(line)
    assert needle in str(info.value)


def test_config_example_parses(tmp_path: Path) -> None:
    path = tmp_path / "daemon.toml"
    path.write_text(
        """
[daemon]
socket = "/tmp/gt.sock"
group = "nogroup"
allowed_uids = [1000]
[limits]
min_power_limit_w = 150
max_power_limit_w = 350
[gpu."0"]
max_power_limit_w = 250
allow_clock_lock = false
[node_policy]
trace = "/data/GB.csv"
dirty_above_g_per_kwh = 300
dirty_power_limit_w = 200
"""
    )
    config = load_config(path)
    assert config.socket == Path("/tmp/gt.sock") and config.socket_mode == 0o660
    assert config.allowed_uids == (1000,)
    limits = config.limits_for("GPU-x", 0)
    assert (limits.min_power_limit_w, limits.max_power_limit_w, limits.allow_clock_lock) == (150, 250, False)
    assert config.limits_for("GPU-y", 1).max_power_limit_w == 350
    assert config.node_policy is not None and config.node_policy.dirty_power_limit_w == 200


def test_a_gpu_table_that_says_nothing_of_clock_locking_keeps_the_limits_setting(tmp_path: Path) -> None:
    path = tmp_path / "daemon.toml"
    path.write_text('[daemon]\nsocket = "/tmp/gt.sock"\n[limits]\nallow_clock_lock = false\n'
                    '[gpu."0"]\nmax_power_limit_w = 250\n[gpu."1"]\nallow_clock_lock = true\n')
    config = load_config(path)
    assert config.limits_for("GPU-x", 0).allow_clock_lock is False  # was True: the override re-enabled it
    assert config.limits_for("GPU-y", 1).allow_clock_lock is True  # said explicitly
    assert config.limits_for("GPU-z", 2).allow_clock_lock is False


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({"limts": {}}, "unknown table [limts] (did you mean 'limits'?)"),
        ({"daemon": {"socket_mode": "0666"}}, "daemon.socket_mode: '0666' gives access to every user"),
        ({"daemon": {"socket_mode": "rw"}}, "daemon.socket_mode: 'rw' is not octal"),
        ({"daemon": {"allowed_uids": ["root"]}}, "daemon.allowed_uids: expected a list of int"),
        ({"limits": {"max_power_limit_w": -5}}, "limits.max_power_limit_w: must be a number > 0"),
        ({"limits": {"min_power_limit_w": 300, "max_power_limit_w": 200}},
         "limits.min_power_limit_w: 300 is above max_power_limit_w (200)"),
        ({"limits": {"max_power": 200}}, "limits.max_power: unknown key (did you mean 'max_power_limit_w'?)"),
        ({"gpu": {"0": {"max_power_limit_w": 0}}}, "gpu.0.max_power_limit_w: must be a number > 0"),
        ({"node_policy": {"dirty_power_limit_w": 200, "trace": "x.csv"}}, "node_policy: missing dirty_above_g_per_kwh"),
        ({"node_policy": {"dirty_power_limit_w": 200, "dirty_above_g_per_kwh": 300}},
         "node_policy.trace: give exactly one of 'trace'"),
        ({"node_policy": {"dirty_power_limit_w": 200, "dirty_above_g_per_kwh": 300, "provider": "x"}},
         "node_policy.zone: 'provider' needs 'zone'"),
    ],
)
def test_bad_config_names_the_key(raw: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "daemon.toml")
    assert needle in str(info.value)
    assert str(info.value).startswith("daemon.toml: ")


def test_every_problem_of_a_daemon_config_is_one_line_naming_its_key() -> None:
    raw = {"daemon": {"max_connections": 0, "idle_timeout_s": "1", "admin_uids": "root", "socket_mode": "0666"},
           "limits": {"max_power": 200}, "gpu_access": {"alice": "0"}, "node_policy": {"interval_s": 0.5}}
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "daemon.toml")
    keys = [line.split(": ")[1] for line in str(info.value).splitlines()]
    assert sorted(keys) == ["daemon.admin_uids", "daemon.idle_timeout_s", "daemon.max_connections",
                            "daemon.socket_mode", "gpu_access.alice", "limits.max_power", "node_policy"], keys


def test_unreadable_or_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read daemon config"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[daemon\n")
    with pytest.raises(ConfigError, match=r"bad.toml:1:8: invalid TOML"):
        load_config(bad)
