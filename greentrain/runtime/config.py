"""Training configuration: the sections of ``greentrain.runtime.sections`` loaded from TOML into a JobConfig.

Unknown keys and bad values raise :class:`~greentrain.errors.ConfigError`
naming ``section.key`` (or the command-line flag it came from) and the file;
every problem in a file is reported, one line each. Built-in presets live in
``greentrain/runtime/presets/<name>.toml``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError
from greentrain.fields import did_you_mean
from greentrain.runtime.checks import Checks, InvalidConfig
from greentrain.runtime import sections
from greentrain.runtime.sections import (  # noqa: F401 (re-exported through __all__)
    AC_MODES,
    JOB_OPTION_FIELDS,
    PP_SCHEDULES,
    PRECISIONS,
    RUNTIME_DEFAULTS,
    SECTIONS,
    CheckpointConfig,
    DataConfig,
    GreentrainConfig,
    MetricsConfig,
    ModelConfig,
    ParallelConfig,
    TrainConfig,
)
from greentrain.runtime.greentrain_section import GreentrainSection
from greentrain.tables import read_table
from greentrain.userfile import TOMLTable, load_toml, parse_toml

# The sections are re-exported: ``greentrain.runtime.config`` is where users find the whole configuration.
__all__ = ["JobConfig", "config_from_dict", "list_presets", "load_config", "load_config_data",
           *sections.__all__]


@dataclass(kw_only=True, slots=True)
class JobConfig:
    """A whole training job."""

    model: ModelConfig = field(default_factory=ModelConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    greentrain: GreentrainSection = field(default_factory=GreentrainConfig)

    def __post_init__(self) -> None:
        c = Checks("train", self.train)
        c.need(self.train.seq_len <= self.model.max_seq_len, "seq_len",
               f"{self.train.seq_len} exceeds model.max_seq_len={self.model.max_seq_len}")
        p = Checks("parallel", self.parallel)
        cp, ep, seq = self.parallel.cp, self.parallel.ep, self.train.seq_len
        p.need(seq % (2 * cp) == 0, "cp",
               f"train.seq_len={seq} must divide by 2 x cp = {2 * cp} (each rank holds two of the 2 x cp "
               "chunks of a sequence, so causal attention work is balanced); change the sequence length or cp")
        if self.model.moe:
            p.need(self.model.n_experts % ep == 0, "ep",
                   f"model.n_experts={self.model.n_experts} must divide by ep={ep} (each rank holds "
                   "n_experts / ep experts)")
        else:
            p.need(ep == 1, "ep", f"{ep}: expert parallelism needs a mixture-of-experts model "
                                  "(model.n_experts > 0, e.g. --config tiny-moe); this model is dense")
        c.problems.extend(p.problems)
        c.done()

    def replace(self, section: str, **changes: object) -> "JobConfig":
        """A copy with ``changes`` applied to one section (validated again)."""
        data = self.to_dict()
        data[section].update(changes)
        return config_from_dict(data, origin="overrides")

    def to_dict(self) -> dict[str, dict[str, object]]:
        return {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}


def config_from_dict(data: Mapping[str, object], origin: str = "<dict>",
                     sources: dict[str, str] | None = None) -> JobConfig:
    """Build and validate a JobConfig; every problem is reported, one line each.

    A line names ``origin`` and ``section.key``, or, for a key in ``sources``
    (``{"train.steps": "--steps"}``), the flag the value came from.
    """
    sources = sources or {}
    problems: list[tuple[str, str]] = []

    def add(key: str, why: str) -> None:
        problems.append((key, why))

    sections: dict[str, Any] = {}
    for name, value in data.items():
        if name not in SECTIONS:
            add("", f"unknown section [{name}]{did_you_mean(name, SECTIONS)}; valid: {', '.join(SECTIONS)}")
            continue
        if not isinstance(value, dict):
            add(name, f"must be a table [{name}]")
            continue
        section = read_table(SECTIONS[name], value, name, problems)
        if section is not None:
            sections[name] = section
    if not problems:
        try:
            return JobConfig(**sections)
        except InvalidConfig as e:
            problems.extend(e.problems)
    lines = [f"{sources[key]}: {why}" if key in sources else f"{origin}: {key}: {why}" if key else f"{origin}: {why}"
             for key, why in problems]
    raise ConfigError("\n".join(lines))


def list_presets() -> list[str]:
    """Names of the built-in presets."""
    folder = resources.files("greentrain.runtime") / "presets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_config(name_or_path: str | Path) -> JobConfig:
    """Load a TOML file, or a built-in preset by name (``tiny``, ``125m``, ``1b``)."""
    return config_from_dict(*load_config_data(name_or_path))


def load_config_data(name_or_path: str | Path) -> tuple[TOMLTable, str]:
    """The parsed (not yet validated) TOML of a file or preset, and the name to blame in errors."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        return load_toml(path, what="config file"), str(path)
    presets = list_presets()
    if str(name_or_path) not in presets:
        raise ConfigError(f"--config {name_or_path!r}: no such file or preset; presets: {', '.join(presets)}")
    folder = resources.files("greentrain.runtime") / "presets"
    text = (folder / f"{name_or_path}.toml").read_text("utf-8")
    return parse_toml(text, f"preset {name_or_path}"), f"preset {name_or_path}"
