"""``greentrain demo``: train on CPU under the carbon-aware policy on a replayed real trace, end to end.

See ``docs/demo.md``. Everything lands in ``--out`` (default ``./greentrain-demo``):
``checkpoint/``, ``run.jsonl``, ``demo.json`` (the job and its simulated time),
``report/index.html``. Running it again on the same folder resumes the job.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from greentrain.cli.common import parse_deadline
from greentrain.cli.jobflags import job_flags, job_options, take_settings
from greentrain.errors import ConfigError
from greentrain.exitcodes import DEADLINE_MISSED_EXIT_CODE, INTERRUPTED_EXIT_CODE
from greentrain.units import format_time

if TYPE_CHECKING:
    from rich.console import Console

    from greentrain.demo.scenario import Scenario
    from greentrain.demo.summary import DemoSummary
    from greentrain.demo.state import DemoState
    from greentrain.job.options import DeadlinePolicy, JobOptions

__all__ = ["demo"]

MIN_STEPS = 20
"""Fewest steps a demo job has, however slow the machine: enough to pause and resume visibly."""
MAX_STEP_SIM_S = 300.0
"""Most simulated seconds one step may stand for: the plan's hourly slots are kept to within 5 minutes."""


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(width=120, stderr=stderr)


def _metrics_port(port: int) -> int:
    """The port to serve on, checked before anything is written: a busy port is one line, exit 2, and
    leaves no job behind. 0 picks a free one now, so the URL can be printed before the first wait."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the metrics server binds: a port left in TIME_WAIT by the last run's scrapes is free, a listener is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as e:
            raise ConfigError(f"--metrics-port {port}: cannot listen on 127.0.0.1 ({e.strerror}); "
                              "use another port, or 0 for any free one") from None
        return int(probe.getsockname()[1])


def _parse_start(text: str) -> datetime:
    from greentrain.cli.simulate import parse_time

    return parse_time(text, "--start")


def _trace_zone(trace: Path, zone: str | None) -> str:
    """The zone of ``trace`` (``zone`` None), or ``zone`` when the trace is for it; one line naming --zone if not."""
    from greentrain.signals.providers.csvtrace import CSVTraceProvider

    provider = CSVTraceProvider(trace)
    try:
        if zone is None:
            return provider.zone
        why = provider.zone_mismatch(zone)
        if why is not None:
            raise ConfigError(f"--zone: {why}")
        return zone
    finally:
        provider.close()


def _scenario(zone: str | None, trace: Path | None, start: str | None, work_h: float, deadline: str | None,
              speedup: float) -> Scenario:
    from greentrain.demo.scenario import (
        DEFAULT_DEADLINE_H,
        DEFAULT_STARTS,
        Scenario,
        shipped_trace,
    )

    if trace is None:
        zone = zone or "GB"
        trace_path = shipped_trace(zone)
        start_at = _parse_start(start) if start else DEFAULT_STARTS[zone]
    else:
        if start is None:
            raise ConfigError("--start: required with --trace (the simulated time the job is submitted)")
        trace_path, start_at = trace, _parse_start(start)
        zone = _trace_zone(trace, zone)  # read from the trace when --zone is not given
    deadline_at = parse_deadline(deadline or f"+{DEFAULT_DEADLINE_H.get(zone, 24.0):g}", start_at)
    deadline_h = (deadline_at - start_at).total_seconds() / 3600
    if deadline is not None and deadline_h < work_h:  # blame the flag, with the simulated times it compares
        when = "before" if deadline_h <= 0 else f"only {deadline_h:g} h after"
        raise ConfigError(f"--deadline: {deadline_at:%Y-%m-%d %H:%M} UTC is {when} the simulated start "
                          f"{start_at:%Y-%m-%d %H:%M} UTC; the job needs {work_h:g} h (--work-hours)")
    return Scenario(zone=zone, trace=trace_path, start=start_at, work_h=work_h, deadline_h=deadline_h,
                    speedup=speedup)


def _check_trace_covers(scenario: Scenario) -> None:
    from greentrain.cli.common import history_notes
    from greentrain.signals.trace import load_trace
    from greentrain.sim import TraceIndex

    points = load_trace(scenario.trace)
    index = TraceIndex(points, str(scenario.trace))
    index.index(scenario.start, "--start")
    index.require_cover(scenario.start, scenario.deadline, "the deadline")
    history_notes(points, scenario.start)  # the engine forecasts from the trace before the start


def _new_state(scenario: Scenario, policy: str, reserve_h: float, steps: int | None, deadline_policy: DeadlinePolicy,
               say: Callable[[str], None]) -> DemoState:
    from greentrain.demo.runner import measure_step_time_s
    from greentrain.demo.state import DemoState

    import math

    step_s = measure_step_time_s()
    work_real_s = scenario.work_h * 3600 / scenario.speedup
    # The work is fixed in simulated hours; the machine (or --steps) only sets how finely it is cut.
    steps_total = steps if steps is not None else max(
        MIN_STEPS, math.ceil(scenario.work_h * 3600 / MAX_STEP_SIM_S - 1e-9), round(work_real_s / step_s))
    step_job_s = scenario.work_h * 3600 / steps_total
    work_h = steps_total * step_job_s / 3600
    say(f"sized the job: {steps_total} steps of {step_job_s / 60:.3g} simulated minutes each = {work_h:.1f} "
        f"simulated hours of work, whatever the machine's load (each step is real training: "
        f"{step_s * 1000:.0f} ms here now)")
    if deadline_policy == "strict" and work_h > scenario.deadline_h:
        raise ConfigError(f"--deadline: {scenario.deadline_h:g} h is shorter than the work as sized on this machine "
                          f"({work_h:.1f} h); give a later --deadline, fewer --steps or --work-hours, or "
                          "--deadline-policy best-effort")
    return DemoState(zone=scenario.zone, trace=str(scenario.trace), start=scenario.start.isoformat(),
                     deadline=scenario.deadline.isoformat(), work_h=scenario.work_h, speedup=scenario.speedup,
                     policy=policy, reserve_h=reserve_h, steps_total=steps_total, step_time_real_s=step_s,
                     sim_now=scenario.start.isoformat(), deadline_policy=deadline_policy, step_job_s=step_job_s)


def _scenario_of(state: DemoState) -> Scenario:
    from greentrain.demo.scenario import Scenario

    start = state.time("start")
    return Scenario(zone=state.zone, trace=Path(state.trace), start=start, work_h=state.work_h,
                    deadline_h=(state.time("deadline") - start).total_seconds() / 3600, speedup=state.speedup)


def _explicit(ctx: click.Context, names: tuple[str, ...]) -> list[str]:
    from click.core import ParameterSource

    return [n for n in names if ctx.get_parameter_source(n) == ParameterSource.COMMANDLINE]


@click.command("demo")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("greentrain-demo"),
              show_default=True, help="Folder for the checkpoint, run.jsonl and report/; run again to resume.")
@job_flags("demo", defaults={"zone": "GB", "metrics_port": 9464, "deadline_policy": "strict"}, notes={
    "zone": "Here: GB or US-CAL-CISO (the shipped traces), or the zone of --trace.",
    "deadline": "Here '+H' counts from the simulated start (default: +24; +30 for US-CAL-CISO).",
    "metrics_port": "Here on 127.0.0.1."})
@click.option("--trace", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Another Electricity Maps hourly CSV to replay (needs --start).")
@click.option("--start", default=None, help="Simulated submit time, ISO-8601 with timezone, a whole hour "
              "(default: the day chosen for the zone).")
@click.option("--speedup", type=click.FloatRange(min=0, min_open=True), default=480.0, show_default=True,
              help="Simulated seconds per real second (480: a day in 3 minutes).")
@click.option("--work-hours", type=click.FloatRange(min=0, min_open=True), default=8.0, show_default=True,
              help="Simulated running time of the job at full speed (sets the number of steps).")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Number of steps the --work-hours are cut into (default: one per 5 simulated minutes at least, "
                   "more on a fast machine).")
@click.option("--reserve-hours", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Extra simulated hours the policy keeps free before the deadline (each step's simulated time "
                   "is fixed, so a busy machine needs none).")
@click.option("--report/--no-report", default=True, show_default=True, help="Write OUT/report/index.html at the end.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the end summary as one JSON object on stdout (messages go to stderr).")
@click.pass_context
def demo(ctx: click.Context, out_dir: Path, trace: Path | None, start: str | None, speedup: float, work_hours: float,
         steps: int | None, reserve_hours: float, report: bool, as_json: bool, **flags: object) -> None:
    """Train the reference model on CPU under a carbon-aware policy while a real carbon trace replays.

    Waits for a clean window, pauses through a dirty one, resumes from its checkpoint without losing a
    step and finishes before the deadline; then prints a summary and writes an HTML report. Ctrl-C
    stops cleanly with a checkpoint; run the same command again to resume.
    """
    from greentrain.demo.runner import demo_policy
    from greentrain.demo.scenario import ATTRIBUTION
    from greentrain.demo.state import load_demo_state, save_demo_state

    settings = take_settings(flags, "demo")
    options = job_options(settings)
    policy, zone, deadline = str(options.policy), str(options.zone), settings.get("deadline")
    deadline_policy = options.deadline_policy or "strict"

    console = _console(stderr=as_json)

    def say(message: str) -> None:
        console.print(f"[bold green]greentrain demo:[/bold green] {message}", highlight=False, soft_wrap=True)
        sys.stdout.flush()

    created = not out_dir.exists()
    state = None if created else load_demo_state(out_dir)
    if state is not None and state.finished:
        say(f"the job in {out_dir} already finished; showing its summary (use another --out for a new run)")
        _exit_for(_finish(console, out_dir, state, report, say), state)
        return
    port = _metrics_port(int(options.metrics_port or 0))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--out {out_dir}: cannot create the folder ({e.strerror})") from None
    fresh = state is None
    try:
        from greentrain.userfile import check_writable_dir

        check_writable_dir(out_dir, what="--out")  # a read-only folder fails now, not at the first save
        if state is None:
            given = ctx.get_parameter_source("zone") not in (None, click.core.ParameterSource.DEFAULT)
            scenario = _scenario(zone if given else None, trace, start, work_hours,
                                 str(deadline) if deadline else None, speedup)
            _check_trace_covers(scenario)
            demo_policy(policy, reserve_hours)  # a bad --policy fails now, before any training
            state = _new_state(scenario, policy, reserve_hours, steps, deadline_policy, say)
            save_demo_state(out_dir, state)
        else:
            ignored = _explicit(ctx, ("zone", "trace", "start", "speedup", "deadline", "work_hours", "steps",
                                      "policy", "reserve_hours", "deadline_policy"))
            if ignored:
                say(f"resuming the job in {out_dir}; its saved settings win over "
                    f"{', '.join('--' + n for n in ignored)}")
            scenario = _scenario_of(state)
        state.runs += 1
        _header(console, state, scenario, ATTRIBUTION, port, out_dir)
        end = _run(state, scenario, out_dir, port, say, options)
    except BaseException:
        if fresh and (state is None or not state.began):  # nothing ran: leave nothing a later run would 'resume'
            _forget_job(out_dir, remove_folder=created)
        raise
    if end == "interrupted":
        say(f"stopped cleanly; resume with: greentrain demo --out {out_dir}")
        sys.exit(INTERRUPTED_EXIT_CODE)
    _exit_for(_finish(console, out_dir, state, report, say, as_json), state)


def _exit_for(summary: DemoSummary, state: DemoState) -> None:
    """Status 3 after a late finish, unless the job runs best-effort (the miss was said either way)."""
    if summary.finished_at is not None and not summary.deadline_met and state.deadline_policy != "best-effort":
        sys.exit(DEADLINE_MISSED_EXIT_CODE)


def _forget_job(out_dir: Path, *, remove_folder: bool) -> None:
    """Remove what a start that never reached its first step wrote (state, log, empty checkpoint dir)."""
    import shutil

    from greentrain.demo.state import STATE_FILE
    from greentrain.job.state import STATE_FILE_NAME

    for name in (STATE_FILE, "run.jsonl", STATE_FILE_NAME):
        (out_dir / name).unlink(missing_ok=True)
    shutil.rmtree(out_dir / "checkpoint", ignore_errors=True)
    if remove_folder:
        try:
            out_dir.rmdir()  # only if empty: never delete what the user put there
        except OSError:
            pass


def _header(console: Console, state: DemoState, scenario: Scenario, attribution: str, port: int,
            out_dir: Path) -> None:
    resumed = f" (run {state.runs}, resuming at {format_time(state.time('sim_now'), simulated=True)})" \
        if state.began else ""
    console.print(f"[bold]greentrain demo[/bold]{resumed}", highlight=False, soft_wrap=True)
    console.print(f"  carbon trace: {scenario.trace.name} (zone {scenario.zone}), replayed ×{scenario.speedup:g}",
                  highlight=False, soft_wrap=True)
    console.print(f"  {attribution}", highlight=False, soft_wrap=True)
    reserve = f" (keeping {state.reserve_h:g} h before the deadline free)" if state.reserve_h else ""
    console.print(f"  job: {state.steps_total} steps (~{scenario.work_h:g} h of work), submitted "
                  f"{format_time(scenario.start)}, deadline {format_time(scenario.deadline)} (simulated), "
                  f"policy {state.policy}{reserve}", highlight=False, soft_wrap=True)
    if state.step_job_s:
        console.print(f"  time: each training step (real training, measured energy) stands for "
                      f"{state.step_job_s / 60:.3g} simulated minutes of work, however long it takes here; "
                      f"waits run at ×{scenario.speedup:g}", highlight=False, soft_wrap=True)
    console.print(f"  metrics: http://127.0.0.1:{port}/metrics", highlight=False, soft_wrap=True)
    console.print(f"  output: {out_dir}", highlight=False, soft_wrap=True)
    sys.stdout.flush()


def _run(state: DemoState, scenario: Scenario, out_dir: Path, port: int, say: Callable[[str], None],
         options: JobOptions) -> str:
    from greentrain.demo.runner import DemoRunner

    runner = DemoRunner(scenario, state, out_dir, metrics_port=port, say=say, progress=options.progress,
                        actuation=options.actuation, codecarbon_csv=options.codecarbon_csv)
    return runner.run()


def _finish(console: Console, out_dir: Path, state: DemoState, report: bool, say: Callable[[str], None],
            as_json: bool = False) -> DemoSummary:
    from greentrain.demo.summary import render_summary, summarize_run, summary_json

    jsonl = out_dir / "run.jsonl"
    if not jsonl.exists():
        raise ConfigError(f"{jsonl}: no run log; the demo did not run in this folder")
    summary = summarize_run(jsonl, state)
    if as_json:
        import json

        click.echo(json.dumps(summary_json(summary)))
    else:
        render_summary(summary, console)
    if report:
        from greentrain.report import build_report

        index = build_report(jsonl, out_dir / "report")
        say(f"report: {index}")
    return summary
