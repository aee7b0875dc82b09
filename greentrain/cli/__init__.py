"""The ``greentrain`` command.

Subcommands live one module each under ``greentrain.cli`` and are imported
only when invoked, so ``greentrain --help`` stays fast (no torch import).
Errors a user can fix surface as one line and exit code 2, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from greentrain import __version__
from greentrain.errors import GreentrainError

__all__ = ["main", "cli"]

# name -> (module, attribute, one-line help shown in `greentrain --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "doctor": ("greentrain.cli.doctor", "doctor", "Show what this machine can measure and control."),
    "monitor": ("greentrain.cli.monitor", "monitor", "Measure energy while a command runs."),
    "carbon": ("greentrain.cli.carbon", "carbon", "Read grid carbon intensity: now, forecast, history."),
    "policy": ("greentrain.cli.policy", "policy", "Validate and inspect policy files."),
    "simulate": ("greentrain.cli.simulate", "simulate", "Replay a carbon trace through a policy."),
    "run": ("greentrain.cli.run", "run", "Run an unmodified command under a timing policy."),
    "train": ("greentrain.cli.train", "train", "Train the reference model with hybrid parallelism."),
    "exporter": ("greentrain.cli.exporter", "exporter", "Serve node-wide Prometheus metrics."),
    "report": ("greentrain.cli.report", "report", "Render an HTML report of a run's JSONL log."),
    "daemon": ("greentrain.cli.daemon", "daemon", "Privileged helper that owns GPU knobs."),
    "submit": ("greentrain.cli.submit", "submit", "Submit a Slurm job at the lowest-carbon start."),
    "fleet": ("greentrain.cli.fleet", "fleet", "Plan many jobs on one cluster: simulate, or run on Slurm."),
    "k8s-controller": ("greentrain.cli.k8s", "k8s_controller", "Suspend/resume Kubernetes Jobs by policy."),
    "whatif": ("greentrain.cli.whatif", "whatif", "Say what greentrain would have done with CodeCarbon runs."),
    "demo": ("greentrain.cli.demo", "demo", "Train on CPU under the carbon-aware policy, end to end."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, attr, _help = entry
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name == module_name:
                return None
            raise
        return getattr(module, attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="greentrain")
def cli() -> None:
    """Energy- and carbon-aware training for PyTorch."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning GreentrainError into a one-line error, exit 2."""
    try:
        cli.main(args=argv, prog_name="greentrain", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.Abort:  # click's form of Ctrl-C (``greentrain.errors.Interrupted`` from a wait included)
        click.echo("greentrain: interrupted (Ctrl-C)", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as e:
        if e.ctx is not None and e.ctx.parent is None:  # plain `greentrain`: asking what it does is no error
            click.echo(e.ctx.get_help())
            sys.exit(0)
        click.echo(e.ctx.get_help() if e.ctx else e.format_message(), err=True)
        sys.exit(2)
    except click.UsageError as e:
        # One line, naming the argument and where to look; no usage dump.
        where = f"greentrain {e.ctx.command_path.partition(' ')[2]}".strip() if e.ctx else "greentrain"
        click.echo(f"greentrain: error: {e.format_message()} (see '{where} --help')", err=True)
        sys.exit(2)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except GreentrainError as e:
        # Several problems in one input come as several lines, each complete on its own.
        for line in str(e).splitlines() or [type(e).__name__]:
            click.echo(f"greentrain: error: {line}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("greentrain: interrupted (Ctrl-C)", err=True)
        sys.exit(130)
