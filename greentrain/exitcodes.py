"""Exit statuses greentrain's commands use, each defined once.

``greentrain`` passes a wrapped command's own status through; these are the
statuses greentrain itself chooses.
"""

from __future__ import annotations

__all__ = [
    "BAD_INPUT_EXIT_CODE", "BUDGET_SPENT_EXIT_CODE", "COMMAND_NOT_EXECUTABLE_EXIT_CODE", "COMMAND_NOT_FOUND_EXIT_CODE",
    "DEADLINE_MISSED_EXIT_CODE", "INTERRUPTED_EXIT_CODE", "RESUME_EXIT_CODE",
]

BAD_INPUT_EXIT_CODE = 2
"""A flag, file or key was refused (one line on stderr names it); nothing ran."""

DEADLINE_MISSED_EXIT_CODE = 3
"""The job ran to the end but finished after its deadline (``--deadline-policy strict``, the default).

With ``--deadline-policy best-effort`` the miss is reported the same way and the status is the job's own."""

BUDGET_SPENT_EXIT_CODE = 4
"""A carbon or energy budget (``max_emissions_g``, ``max_energy_j``) was spent: checkpoint saved, job stopped."""

RESUME_EXIT_CODE = 75
"""Paused by policy with a checkpoint saved: relaunch me later (EX_TEMPFAIL, 'try again later').

``Session(relaunch="exit")``, the integrations' ``exit_for_requeue`` and the Slurm batch template use it."""

INTERRUPTED_EXIT_CODE = 130
"""Stopped by Ctrl-C (128 + SIGINT) after a clean checkpoint."""

COMMAND_NOT_EXECUTABLE_EXIT_CODE = 126
"""``greentrain run``: COMMAND exists but is not executable (the shell's status); one line, nothing ran."""

COMMAND_NOT_FOUND_EXIT_CODE = 127
"""``greentrain run``: COMMAND is not on PATH nor a file (the shell's status); one line, nothing ran."""
