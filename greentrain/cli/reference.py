"""Render the CLI reference (docs/cli.md) from the commands' own ``--help``.

``python -m greentrain.cli.reference > docs/cli.md`` regenerates it; a test keeps
the committed file equal to the output, so the docs cannot drift from the CLI.
"""

from __future__ import annotations

import click

from greentrain.cli import cli

__all__ = ["render_reference"]


def _help_text(command: click.Command, path: list[str]) -> str:
    # Fixed width and help names, so the output is the same whatever ran before (click caches options).
    ctx = click.Context(command, info_name=" ".join(path), terminal_width=100, max_content_width=100,
                        help_option_names=["-h", "--help"])
    return command.get_help(ctx)


def _walk(command: click.Command, path: list[str]) -> list[str]:
    sections = [f"## `{' '.join(path)}`\n\n```text\n{_help_text(command, path)}\n```\n"]
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name=" ".join(path))
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                sections.extend(_walk(sub, path + [name]))
    return sections


def render_reference() -> str:
    """Markdown with the help of ``greentrain`` and every subcommand, in order."""
    parts = ["# CLI reference\n\nGenerated from the commands' own `--help` by "
             "`python -m greentrain.cli.reference > docs/cli.md`; do not edit by hand.\n"]
    parts.extend(_walk(cli, ["greentrain"]))
    return "\n".join(parts)


if __name__ == "__main__":
    print(render_reference(), end="")
