"""``greentrain policy``: list presets, validate policy files, show what a policy resolves to."""

from __future__ import annotations

import dataclasses

import click

from greentrain.policies import PRESETS, Policy, load_policy
from greentrain.policies.loader import preset_text

__all__ = ["policy"]


def _describe(policy: Policy) -> str:
    parts = [f"kind {policy.name}"]
    config = getattr(policy, "config", None)
    if config is not None and dataclasses.is_dataclass(config) and not isinstance(config, type):
        parts += [f"{k}={v}" for k, v in dataclasses.asdict(config).items()]
    for inner in ("timing", "power"):
        part = getattr(policy, inner, None)
        if part is not None:
            parts.append(f"{inner}: {_describe(part)}")
    return ", ".join(parts)


@click.group("policy")
def policy() -> None:
    """Validate and inspect policy files."""


@policy.command("validate")
@click.argument("files", nargs=-1, required=True)
def validate(files: tuple[str, ...]) -> None:
    """Check policy FILES (or preset names); one line per file, exit 2 on the first error."""
    for spec in files:
        loaded = load_policy(spec)
        settings = loaded.settings
        click.echo(f"{spec}: ok ({_describe(loaded)}; pause_mode={settings.pause_mode}, "
                   f"resume_overhead_s={settings.resume_overhead_s}, deadline_policy={settings.deadline_policy})")


@policy.command("list")
def list_presets() -> None:
    """List the shipped presets."""
    for name in PRESETS:
        click.echo(f"{name}: {_describe(load_policy(name))}")


@policy.command("show")
@click.argument("name")
def show(name: str) -> None:
    """Print a preset's TOML (a starting point for your own file)."""
    click.echo(preset_text(name), nl=False)
