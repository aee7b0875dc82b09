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
        ({"limts": {}}, "unknown table(s) ['limts']"),
        ({"daemon": {"socket_mode": "0666"}}, "gives access to every user"),
        ({"daemon": {"socket_mode": "rw"}}, "is not octal"),
        ({"daemon": {"allowed_uids": ["root"]}}, "allowed_uids must be a list of integers"),
        ({"limits": {"max_power_limit_w": -5}}, "[limits].max_power_limit_w: must be a number > 0"),
        ({"limits": {"min_power_limit_w": 300, "max_power_limit_w": 200}}, "min_power_limit_w > max_power_limit_w"),
        ({"limits": {"max_power": 200}}, "unknown key(s) ['max_power']"),
        ({"node_policy": {"dirty_power_limit_w": 200, "trace": "x.csv"}}, "missing dirty_above_g_per_kwh"),
        ({"node_policy": {"dirty_power_limit_w": 200, "dirty_above_g_per_kwh": 300}}, "exactly one of 'trace'"),
        ({"node_policy": {"dirty_power_limit_w": 200, "dirty_above_g_per_kwh": 300, "provider": "x"}}, "needs 'zone'"),
    ],
)
def test_bad_config_names_the_key(raw: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "daemon.toml")
    assert needle in str(info.value)
    assert str(info.value).startswith("daemon.toml")


def test_unreadable_or_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read daemon config"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[daemon\n")
    with pytest.raises(ConfigError, match=r"bad.toml:1:8: invalid TOML"):
        load_config(bad)
