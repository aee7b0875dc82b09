"""JobOptions is the one spelling of a job's settings: Session, the callbacks, the runtime's [greentrain]
section and the CLI's job flags each name its fields, with its choices and its checks."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import click
import pytest

from greentrain.cli.run import run as run_command
from greentrain.cli.train import FLAG_KEYS
from greentrain.cli.train import train as train_command
from greentrain.errors import ConfigError
from greentrain.integrations.driver import PART_NAMES, StepDriver, callback_job
from greentrain.job.build import JobParts
from greentrain.job.options import JobOptions, choices_of, option_problems
from greentrain.runtime.config import JOB_OPTION_FIELDS, GreentrainConfig, config_from_dict
from greentrain.session import Session

OPTIONS = {f.name: f for f in dataclasses.fields(JobOptions)}
PARTS = {f.name for f in dataclasses.fields(JobParts)}
SESSION_ONLY = {"save", "load", "optimizer", "dist"}  # the Session's own checkpoint and process group


def test_every_field_has_a_docstring_and_literal_choices_are_enforced() -> None:
    source = inspect.getsource(JobOptions)
    for name in OPTIONS:
        after = source.split(f"\n    {name}:", 1)[1].split("\n", 2)[1]
        assert after.strip().startswith('"""'), f"{name} has no docstring"
    for name in ("pause_mode", "relaunch", "deadline_policy", "actuation"):
        choices = choices_of(name)
        assert choices and all(isinstance(c, str) for c in choices)
        for choice in choices:
            JobOptions(**{name: choice})
        with pytest.raises(ConfigError, match=f"^{name}: 'bogus' is not"):
            JobOptions(**{name: "bogus"})


def test_bad_values_are_one_line_naming_the_field() -> None:
    cases = {"power": "yes", "precision": "bf16", "waiting_power_w": -1.0, "max_emissions_g": 0,
             "max_energy_j": float("inf"), "decide_interval_s": 0, "step_time_s": -2.0, "steps_total": -1,
             "metrics_port": 70000, "job": " ", "stop_signals": ("TERM",)}
    for name, value in cases.items():
        with pytest.raises(ConfigError) as caught:
            JobOptions(**{name: value})
        assert str(caught.value).startswith(f"{name}: ") and "\n" not in str(caught.value)


def test_session_keywords_are_the_options_and_parts_with_the_same_defaults() -> None:
    params = inspect.signature(Session).parameters
    assert set(params) == set(OPTIONS) - {"stop_signals"} | PARTS | SESSION_ONLY
    for name, param in params.items():
        if name in OPTIONS:
            assert param.default == OPTIONS[name].default, name


def test_callback_keywords_split_into_options_and_parts() -> None:
    assert set(PART_NAMES) == PARTS
    options, parts = callback_job(zone="GB", power=False, precision=["fp32", "bf16"], devices=False, job="hf")
    assert (options.zone, options.power, options.precision, options.job) == ("GB", False, ["fp32", "bf16"], "hf")
    assert parts.devices is False and options.pause_mode == "checkpoint"  # a callback's default
    with pytest.raises(ConfigError, match="precision: 'fp16' needs a grad scaler"):
        StepDriver(*callback_job(precision=["fp32", "fp16"]))
    for module in ("hf", "lightning", "accelerate"):
        cls = {"hf": "GreenTrainCallback", "lightning": "GreenTrainCallback", "accelerate": "GreenAccelerate"}[module]
        pytest.importorskip({"hf": "transformers", "lightning": "lightning", "accelerate": "accelerate"}[module])
        mod = __import__(f"greentrain.integrations.{module}", fromlist=[cls])
        named = set(inspect.signature(getattr(mod, cls)).parameters) - {"self", "options", "accelerator",
                                                                       "after_pause"}
        assert named <= set(OPTIONS), (module, named - set(OPTIONS))


def test_runtime_section_keys_are_option_fields_with_their_choices() -> None:
    keys = {f.name for f in dataclasses.fields(GreentrainConfig)}
    assert keys == set(JOB_OPTION_FIELDS) | {"relaunch"} and keys <= set(OPTIONS)
    assert set(choices_of("relaunch")) | {"auto"} == {"auto", "exec", "exit", "none"}  # 'auto' is the runtime's
    for name in ("pause_mode", "deadline_policy", "actuation"):
        for choice in choices_of(name):
            config_from_dict({"greentrain": {name: choice}})
        with pytest.raises(ConfigError, match=f"greentrain.{name}: 'bogus' is not"):
            config_from_dict({"greentrain": {name: "bogus"}})
    for name, value in (("waiting_power_w", -1.0), ("max_emissions_g", 0.0), ("max_energy_j", -5.0)):
        (why,) = [w for n, w in option_problems(**{name: value})]
        with pytest.raises(ConfigError, match=f"greentrain.{name}: {why}"):
            config_from_dict({"greentrain": {name: value}})
    # Defaults that differ on purpose: a training config runs plain (no policy) and checkpoints by default.
    differ = {n for n in JOB_OPTION_FIELDS if getattr(GreentrainConfig(), n) != OPTIONS[n].default}
    assert differ == {"policy", "pause_mode", "actuation"}


def _params(command: click.Command) -> dict[str, click.Parameter]:
    return {p.name: p for p in command.params if p.name}


# Flags of each command that are not job options: training settings, or how `run` drives its command.
RUN_ONLY = {"estimate_hours", "checkpoint_signal", "checkpoint_timeout_s", "interval_s", "no_measure",
            "replay_speedup", "replay_start", "advise_only", "command", "scaling_profile"}


@pytest.mark.parametrize("command", [train_command, run_command], ids=["train", "run"])
def test_job_flags_are_option_fields_with_a_subset_of_their_choices(command: click.Command) -> None:
    params = _params(command)
    if command is train_command:
        job_flags = {flag: key for flag, (section, key) in FLAG_KEYS.items() if section == "greentrain"}
        assert set(job_flags.values()) <= set(JOB_OPTION_FIELDS)
    else:
        job_flags = {name: name for name in params if name not in RUN_ONLY}
    assert job_flags and set(job_flags.values()) <= set(OPTIONS)
    for flag, field_name in job_flags.items():
        kind = params[flag].type
        if isinstance(kind, click.Choice):
            assert set(kind.choices) <= set(choices_of(field_name)), flag
        elif field_name in ("waiting_power_w", "max_emissions_g", "max_energy_j"):
            assert isinstance(kind, click.types.FloatParamType), flag
    hints = typing.get_type_hints(JobOptions)
    assert hints["metrics_port"] == int | None and isinstance(params["metrics_port"].type, click.types.IntParamType)
