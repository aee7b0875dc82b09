"""JobOptions is the only declaration of a job setting: Session's and the callbacks' keywords, the flags of
`greentrain run`, `train` and `demo`, and the runtime's [greentrain] section are generated from its fields,
with their types, choices, defaults, docstrings and checks."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import click
import pytest

from greentrain.cli.demo import demo as demo_command
from greentrain.cli.jobflags import flag_of, job_options
from greentrain.cli.run import run as run_command
from greentrain.cli.train import FLAG_KEYS, build_config
from greentrain.cli.train import train as train_command
from greentrain.device.discovery import NoDevices
from greentrain.errors import ConfigError
from greentrain.fields import field_docs
from greentrain.integrations.driver import PART_NAMES, CallbackKeywords, StepDriver, callback_job
from greentrain.job.build import JobParts
from greentrain.job.options import (
    JobOptions,
    JobSettings,
    SessionSettings,
    choices_of,
    option_problems,
    settings_for,
)
from greentrain.runtime.config import RUNTIME_DEFAULTS, GreentrainConfig, config_from_dict
from greentrain.session import Session

OPTIONS = {f.name: f for f in dataclasses.fields(JobOptions)}
PARTS = {f.name for f in dataclasses.fields(JobParts)}
COMMANDS = {"run": run_command, "train": train_command, "demo": demo_command}


def test_every_field_has_a_docstring_and_literal_choices_are_enforced() -> None:
    docs = field_docs(JobOptions)
    assert set(docs) == set(OPTIONS) and all(docs.values())
    for name in ("pause_mode", "relaunch", "deadline_policy", "actuation"):
        choices = choices_of(name)
        assert choices and all(isinstance(c, str) for c in choices)
        for choice in choices:
            JobOptions(**{name: choice})
        with pytest.raises(ConfigError, match=f"^{name}: 'bogus' is not"):
            JobOptions(**{name: "bogus"})


def test_bad_values_are_one_line_naming_the_field() -> None:
    cases = {"power": "yes", "precision": "bf16", "waiting_power_w": -1.0, "max_emissions_g": 0,
             "max_energy_j": float("inf"), "decide_interval_s": 0, "min_wait_saving": 1.5, "step_time_s": -2.0, "steps_total": -1,
             "metrics_port": 70000, "job": " ", "stop_signals": ("TERM",), "zone": 5, "deadline": "tomorrow",
             "progress": "yes"}
    for name, value in cases.items():
        with pytest.raises(ConfigError) as caught:
            JobOptions(**{name: value})
        assert str(caught.value).startswith(f"{name}: ") and "\n" not in str(caught.value)


def test_every_problem_comes_at_once_in_field_order() -> None:
    problems = option_problems({"zone": 5, "pause_mode": "later", "max_energy_j": -1.0})
    assert [name for name, _ in problems] == ["zone", "pause_mode", "max_energy_j"]
    with pytest.raises(ConfigError) as caught:
        JobOptions(zone=5, pause_mode="later", max_energy_j=-1.0)  # type: ignore[arg-type]
    assert len(str(caught.value).splitlines()) == 3


def test_session_takes_the_settings_as_typed_keywords_and_the_parts_by_name() -> None:
    params = inspect.signature(Session).parameters
    assert set(params) == {"policy", "settings", "save", "load", "optimizer", "state", "dist"} | PARTS
    assert params["settings"].kind is inspect.Parameter.VAR_KEYWORD
    # policy: Session's first parameter, the rest its keywords, each with its JobOptions field's type
    assert typing.get_type_hints(SessionSettings) == {s.name: s.hint for s in settings_for("session")
                                                      if s.name != "policy"}
    # stop_signals: the callbacks'; a scaling profile: `run`'s and `train`'s (a Session is given its scaler)
    assert set(typing.get_type_hints(SessionSettings)) == set(OPTIONS) - {"policy", "stop_signals",
                                                                           "scaling_profile", "scaling_profile_steps"}
    assert typing.get_type_hints(JobSettings) == {s.name: s.hint for s in settings_for()}  # the callbacks: all
    session = Session("run-now", zone="GB", max_energy_j=5.0, devices=False)
    assert (session.options.policy, session.options.zone, session.options.max_energy_j) == ("run-now", "GB", 5.0)
    with pytest.raises(TypeError, match="max_energy: unknown setting .*did you mean 'max_energy_j'"):
        Session(max_energy=5.0)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="^waiting_power_w: must be a number of watts >= 0"):
        Session(waiting_power_w=-1.0)


def test_callback_keywords_are_every_setting_and_part() -> None:
    assert set(PART_NAMES) == PARTS
    assert set(typing.get_type_hints(CallbackKeywords)) == set(OPTIONS) | PARTS
    options, parts = callback_job(zone="GB", power=False, precision=["fp32", "bf16"], devices=False, job="hf")
    assert (options.zone, options.power, options.precision, options.job) == ("GB", False, ["fp32", "bf16"], "hf")
    assert isinstance(parts.devices, NoDevices) and options.pause_mode == "checkpoint"  # a callback's default
    with pytest.raises(ConfigError, match="precision: 'fp16' needs a grad scaler"):
        StepDriver(*callback_job(precision=["fp32", "fp16"]))
    with pytest.raises(ConfigError, match="^pause_mode: 'auto' is not 'checkpoint' or 'suspend'"):
        callback_job(pause_mode="auto")
    for module, cls in (("hf", "GreenTrainCallback"), ("lightning", "GreenTrainCallback"),
                        ("accelerate", "GreenAccelerate")):
        pytest.importorskip({"hf": "transformers", "lightning": "lightning", "accelerate": "accelerate"}[module])
        mod = __import__(f"greentrain.integrations.{module}", fromlist=[cls])
        params = inspect.signature(getattr(mod, cls)).parameters
        assert params["keywords"].kind is inspect.Parameter.VAR_KEYWORD
        assert set(params) - {"keywords", "policy"} <= {"accelerator", "checkpoint_dir", "after_pause"}


def test_runtime_section_is_the_train_settings_read_by_the_same_rules() -> None:
    offered = {s.name: s for s in settings_for("train")}
    keys = {f.name: f for f in dataclasses.fields(GreentrainConfig)}
    assert set(keys) == set(offered)
    for name, f in keys.items():
        assert f.default == RUNTIME_DEFAULTS.get(name, OPTIONS[name].default), name
    for name in ("pause_mode", "deadline_policy", "actuation", "relaunch"):
        for choice in choices_of(name) or ():
            config_from_dict({"greentrain": {name: choice}})
    bad = {"pause_mode": "bogus", "zone": 5, "max_energy_j": -5.0, "deadline": "tomorrow", "zonee": "GB"}
    with pytest.raises(ConfigError) as caught:
        config_from_dict({"greentrain": bad}, origin="job.toml")
    lines = str(caught.value).splitlines()
    assert len(lines) == len(bad), lines  # every problem at once, each naming the file and the key
    whys = dict(option_problems({k: v for k, v in bad.items() if k in OPTIONS}))
    for key in ("pause_mode", "zone", "max_energy_j", "deadline"):
        assert f"job.toml: greentrain.{key}: {whys[key]}" in lines
    assert any(line.startswith("job.toml: greentrain.zonee: unknown key (did you mean 'zone'?)") for line in lines)


def _params(command: click.Command) -> dict[str, click.Parameter]:
    return {p.name: p for p in command.params if p.name}


@pytest.mark.parametrize("front_end", ["run", "train", "demo"])
def test_command_flags_are_generated_from_the_fields(front_end: str) -> None:
    params = _params(COMMANDS[front_end])
    offered = settings_for(front_end)  # type: ignore[arg-type]
    assert offered and {s.name for s in offered} <= set(params)
    own = {name for name, (section, _key) in FLAG_KEYS.items() if section != "greentrain"}  # training config
    assert not (set(params) & set(OPTIONS)) - {s.name for s in offered} - own, "a job setting declared by hand"
    for s in offered:
        param = params[s.name]
        assert isinstance(param, click.Option)
        assert param.opts[0] == flag_of(s.name)
        first_sentence = s.doc.split(". ")[0].replace("``", "")
        assert first_sentence[:40] in " ".join((param.help or "").split()), s.name
        if s.choices and s.flag is None:
            assert isinstance(param.type, click.Choice) and list(param.type.choices) == [str(c) for c in s.choices]
    if front_end == "train":
        assert not set(FLAG_KEYS) & {s.name for s in offered}, "train's own flags are not job settings"


def test_flags_land_in_the_options_and_bad_ones_name_the_flag() -> None:
    options = job_options({"zone": "GB", "max_emissions_g": 10.0}, job="cmd")
    assert (options.zone, options.max_emissions_g, options.job) == ("GB", 10.0, "cmd")
    with pytest.raises(ConfigError) as caught:
        job_options({"waiting_power_w": -1.0, "deadline": "soon"})
    assert str(caught.value).splitlines() == [
        "--deadline: 'soon' is not ISO-8601 (e.g. 2026-11-22T06:00Z)",
        "--waiting-power-w: must be a number of watts >= 0, got -1.0"]
    cfg = build_config("tiny", {"zone": "GB", "actuation": "advise", "max_energy_j": 7.0}, ())
    assert (cfg.greentrain.zone, cfg.greentrain.actuation, cfg.greentrain.max_energy_j) == ("GB", "advise", 7.0)
    with pytest.raises(ConfigError, match="^--max-energy-j: must be a number > 0"):
        build_config("tiny", {"max_energy_j": -7.0}, ())


def test_a_new_setting_is_one_field_everywhere_at_once(tmp_path) -> None:
    """max_replicas/min_replicas (carbon scaling) were added to job/options.py alone: each is a flag of
    `greentrain run` and `train`, a Session keyword and a [greentrain] key, checked by one rule."""
    for command in (run_command, train_command):
        params = _params(command)
        assert params["max_replicas"].opts == ["--max-replicas"] and params["min_replicas"].opts == ["--min-replicas"]
        assert params["max_replicas"].type.name == "integer"
        assert "data-parallel replicas carbon scaling may use" in (params["max_replicas"].help or "")
    assert {"max_replicas", "min_replicas"} <= set(typing.get_type_hints(SessionSettings))
    session = Session("run-now", max_replicas=8, min_replicas=2, devices=False)
    assert (session.options.max_replicas, session.options.min_replicas) == (8, 2)
    assert JobOptions().max_replicas is None and JobOptions().min_replicas == 1  # no scaling by default
    (tmp_path / "job.toml").write_text("[greentrain]\nmax_replicas = 4\n")
    cfg = config_from_dict({"greentrain": {"max_replicas": 4, "min_replicas": 2}})
    assert (cfg.greentrain.max_replicas, cfg.greentrain.min_replicas) == (4, 2)
    assert build_config(str(tmp_path / "job.toml"), {"min_replicas": 2}, ()).greentrain.min_replicas == 2
    with pytest.raises(ConfigError, match="^max_replicas: must be >= min_replicas \\(2\\), got 1$"):
        JobOptions(max_replicas=1, min_replicas=2)
    with pytest.raises(ConfigError, match="^min_replicas: must be >= 1, got 0$"):
        Session(min_replicas=0)
    with pytest.raises(ConfigError, match="greentrain.max_replicas: expected int | None, got str 'many'"):
        config_from_dict({"greentrain": {"max_replicas": "many"}})
    with pytest.raises(ConfigError, match="^--max-replicas: must be >= min_replicas"):
        job_options({"max_replicas": 1, "min_replicas": 3})


def test_the_carbon_scaling_settings_are_fields_and_reach_the_engine(tmp_path) -> None:
    """scaling_profile (run, train), scaling_profile_steps (train) and the replica range are JobOptions fields:
    `greentrain run --scaling-profile` and `[greentrain] scaling_profile` are generated from them, and the range
    an engine plans within is the options', whatever the scaler."""
    from greentrain.engine.scaler import Scaling
    from greentrain.job.build import build_job
    from greentrain.jobstats import JobStats
    from greentrain.policies import load_policy
    from greentrain.policies.scaling_profile import parse_scaling_profile

    for command in (run_command, train_command):
        assert _params(command)["scaling_profile"].opts == ["--scaling-profile"]
    assert "scaling_profile_steps" in _params(train_command) and "scaling_profile_steps" not in _params(run_command)
    assert "scaling_profile" not in typing.get_type_hints(SessionSettings)  # a Session gives a scaler instead
    cfg = config_from_dict({"greentrain": {"scaling_profile": "p.csv", "scaling_profile_steps": 6, "max_replicas": 4}})
    assert (cfg.greentrain.scaling_profile, cfg.greentrain.scaling_profile_steps) == ("p.csv", 6)
    with pytest.raises(ConfigError, match="greentrain.scaling_profile_steps: must be in \\[1, 10000\\], got 0"):
        config_from_dict({"greentrain": {"scaling_profile_steps": 0}})
    with pytest.raises(ConfigError, match="^scaling_profile: must be a CSV path"):
        JobOptions(scaling_profile=" ")

    class Fixed:  # the smallest ReplicaScaler: two counts, never changes
        profile = parse_scaling_profile("replicas,throughput,power_w\n1,10,100\n2,19,200\n", "p.csv")
        replicas = 2

        def request(self, replicas: int, reason: str) -> bool:
            return False

    options = JobOptions(policy="run-now", min_replicas=2, max_replicas=2, progress=False)
    job = build_job(options, JobParts(devices=False), policy=load_policy("run-now"), job_stats=JobStats(),
                    scaler=Fixed())
    try:
        scaling = job.engine.scaling
        assert isinstance(scaling, Scaling) and (scaling.min_replicas, scaling.max_replicas) == (2, 2)
        assert job.engine.io.job_stats.replicas_actual == 2
    finally:
        job.close(raise_errors=False)


def test_codecarbon_csv_is_one_field_everywhere_at_once(tmp_path) -> None:
    """codecarbon_csv was added to job/options.py alone: a flag of run, train and demo, a Session and callback
    keyword and a [greentrain] key; an empty path is one line naming the flag or key."""
    for command in (run_command, train_command, demo_command):
        param = _params(command)["codecarbon_csv"]
        assert param.opts == ["--codecarbon-csv"] and "CodeCarbon-compatible row" in (param.help or "")
    assert "codecarbon_csv" in typing.get_type_hints(SessionSettings)
    assert Session("run-now", codecarbon_csv=tmp_path / "e.csv", devices=False).options.codecarbon_csv == \
        tmp_path / "e.csv"
    options, _parts = callback_job(codecarbon_csv="e.csv")
    assert options.codecarbon_csv == "e.csv" and JobOptions().codecarbon_csv is None
    assert config_from_dict({"greentrain": {"codecarbon_csv": "e.csv"}}).greentrain.codecarbon_csv == "e.csv"
    with pytest.raises(ConfigError, match="^--codecarbon-csv: must not be empty"):
        job_options({"codecarbon_csv": ""})
    with pytest.raises(ConfigError, match="greentrain.codecarbon_csv: expected str | Path | None, got int 5"):
        config_from_dict({"greentrain": {"codecarbon_csv": 5}})
