"""One setting, one check: the same bad value gives the same reason, naming the setting, from ``Session(...)``,
a command-line flag, a runtime config's ``[greentrain]`` (or ``[metrics]``) key and a policy file's
``[settings]``."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.cli import main
from greentrain.errors import ConfigError

pytestmark = pytest.mark.timeout(120)

# (setting, bad value as Python gives it, the same value as a word on the command line, as TOML)
CASES = [
    ("deadline", "soon", "soon", '"soon"'),
    ("deadline_policy", "sometimes", "sometimes", '"sometimes"'),
    ("pause_mode", "sometimes", "sometimes", '"sometimes"'),
    ("min_wait_saving", 2.0, "2.0", "2.0"),
    ("metrics_port", 70000, "70000", "70000"),
    ("metrics_addr", "not-an-address", "not-an-address", '"not-an-address"'),
    ("max_replicas", 0, "0", "0"),
    ("scaling_profile", " ", " ", '" "'),
    ("waiting_power_w", -5.0, "-5.0", "-5.0"),
    ("max_emissions_g", -1.0, "-1.0", "-1.0"),
]
POLICY_SETTINGS = ("deadline_policy", "pause_mode", "waiting_power_w", "max_emissions_g")
FILE_KEY = {"metrics_port": ("metrics", "port"), "metrics_addr": ("metrics", "addr")}


def _reason(message: str, prefix: str) -> str:
    """The reason on the line of ``message`` that starts with ``prefix``."""
    lines = [line for line in message.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, (prefix, message)
    return lines[0].removeprefix(prefix)


def _from_python(name: str, value: object) -> str:
    """``Session(name=value)``, or the framework callbacks' ``JobOptions`` for a setting Session does not take."""
    from greentrain import Session
    from greentrain.job.options import JobOptions, settings_for

    build = Session if name in {s.name for s in settings_for("session")} else JobOptions
    with pytest.raises(ConfigError) as info:
        build(**{name: value})
    return _reason(str(info.value), f"{name}: ")


def _from_flag(capsys: pytest.CaptureFixture[str], name: str, word: str) -> str:
    flag = "--" + name.replace("_", "-")
    with pytest.raises(SystemExit) as info:
        main(["run", "--estimate-hours", "1", f"{flag}={word}", "--", "true"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return _reason(err, f"greentrain: error: {flag}: ")


def _from_runtime_config(tmp_path: Path, name: str, toml: str) -> str:
    from greentrain.cli.train import build_config_with_sources

    section, key = FILE_KEY.get(name, ("greentrain", name))
    path = tmp_path / "job.toml"
    path.write_text(f"[{section}]\n{key} = {toml}\n")
    with pytest.raises(ConfigError) as info:
        build_config_with_sources(str(path), {}, ())
    return _reason(str(info.value), f"{path}: {section}.{key}: ")


def _from_policy_file(tmp_path: Path, name: str, toml: str) -> str:
    from greentrain.policies import load_policy

    path = tmp_path / "policy.toml"
    path.write_text(f'[policy]\nkind = "carbon-aware"\n[settings]\n{name} = {toml}\n')
    with pytest.raises(ConfigError) as info:
        load_policy(path)
    return _reason(str(info.value), f"{path}: settings.{name}: ")


@pytest.mark.parametrize(("name", "value", "word", "toml"), CASES, ids=[c[0] for c in CASES])
def test_the_same_bad_value_gives_the_same_reason_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             name: str, value: object, word: str,
                                                             toml: str) -> None:
    reasons = {"Python": _from_python(name, value), "flag": _from_flag(capsys, name, word),
               "config file": _from_runtime_config(tmp_path, name, toml)}
    if name in POLICY_SETTINGS:
        reasons["policy [settings]"] = _from_policy_file(tmp_path, name, toml)
    assert len(set(reasons.values())) == 1, reasons
    assert reasons["Python"].strip(), reasons
