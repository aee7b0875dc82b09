"""Timeline of one pipeline-parallel iteration from per-stage forward/backward times.

Stages run their operations in the schedule's fixed order (GPipe: all
forwards then all backwards; 1F1B: warm-up forwards, then one forward / one
backward alternating, then cool-down backwards). A forward of microbatch m
on stage s waits for stage s-1's forward of m; a backward waits for stage
s+1's backward of m (the last stage's for its own forward). List scheduling
gives every operation's start; the iteration time is the last end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from greentrain.errors import ConfigError

__all__ = ["Schedule", "Timeline", "stage_order", "simulate"]

Schedule = Literal["1f1b", "gpipe"]


@dataclass(frozen=True, slots=True)
class Timeline:
    """Result of one simulated iteration."""

    iteration_s: float
    busy_s: tuple[float, ...]
    """Per stage: time spent computing (the rest of ``iteration_s`` is idle)."""


def stage_order(stage: int, stages: int, microbatches: int, schedule: Schedule) -> list[tuple[str, int]]:
    """Operations ('F'|'B', microbatch) of one stage in execution order."""
    if schedule == "gpipe":
        return [("F", m) for m in range(microbatches)] + [("B", m) for m in reversed(range(microbatches))]
    if schedule != "1f1b":
        raise ConfigError(f"schedule: {schedule!r} is not '1f1b' or 'gpipe'")
    warmup = min(stages - stage - 1, microbatches)
    order = [("F", m) for m in range(warmup)]
    next_f, next_b = warmup, 0
    while next_b < microbatches:
        if next_f < microbatches:
            order.append(("F", next_f))
            next_f += 1
        order.append(("B", next_b))
        next_b += 1
    return order


def simulate(forward_s: list[float], backward_s: list[float], microbatches: int,
             schedule: Schedule = "1f1b", p2p_s: float = 0.0) -> Timeline:
    """Iteration time for per-stage forward/backward durations of one microbatch (seconds)."""
    stages = len(forward_s)
    if stages == 0 or len(backward_s) != stages:
        raise ConfigError("forward_s and backward_s: need one duration per stage, same length")
    if microbatches < 1:
        raise ConfigError(f"microbatches: must be >= 1, got {microbatches}")
    if min(forward_s + backward_s) < 0:
        raise ConfigError("forward_s/backward_s: durations must be >= 0")
    orders = [stage_order(s, stages, microbatches, schedule) for s in range(stages)]
    done: dict[tuple[str, int, int], float] = {}
    position = [0] * stages
    free_at = [0.0] * stages
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(stages):
            while position[s] < len(orders[s]):
                kind, m = orders[s][position[s]]
                dep = (("F", s - 1, m) if s > 0 else None) if kind == "F" else (
                    ("B", s + 1, m) if s < stages - 1 else ("F", s, m))
                if dep is not None and dep not in done:
                    break
                ready = done[dep] + (p2p_s if dep is not None and dep[1] != s else 0.0) if dep else 0.0
                start = max(free_at[s], ready)
                free_at[s] = start + (forward_s[s] if kind == "F" else backward_s[s])
                done[(kind, s, m)] = free_at[s]
                position[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # cannot happen for the two schedules above; guards against edits
            raise ConfigError("pipeline schedule deadlocks")
    busy = tuple(microbatches * (forward_s[s] + backward_s[s]) for s in range(stages))
    return Timeline(max(free_at), busy)
