"""Distributed checkpoints with ``torch.distributed.checkpoint`` (DCP).

A checkpoint is a folder ``step-N`` written collectively by all ranks; each
rank writes only its shards, and names are global (no wrapper prefixes, no
stage numbers), so a checkpoint saved on one mesh loads on any other (DCP
reshards on load). The folder is complete once its ``.metadata`` file exists.
Async saves stage the state on the CPU, then write in a background thread over
a separate gloo group while training continues. Each rank also keeps its RNG
streams (``rng-rank<r>.pt`` in the folder: Python, numpy, torch CPU/CUDA), so a
resume on the same mesh draws what the uninterrupted run would have; a rank
with no file of its own (a larger mesh) keeps its fresh state.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import shutil
import warnings
from pathlib import Path
from collections.abc import Mapping, Sequence
from concurrent.futures import Future

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch import nn
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import STATE_DICT_TYPE
from torch.distributed.checkpoint.planner import ReadItem
from torch.distributed.checkpoint.state_dict import (
    OptimizerStateType,
    StateDictOptions,
    ValueType,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from greentrain.errors import ConfigError
from greentrain.job.rngstate import RNGState

__all__ = ["Checkpointer", "complete_steps", "latest_step"]

log = logging.getLogger("greentrain.checkpoint")
# DCP gathers every rank's read error into a CheckpointException, which derives from BaseException.
_LOAD_ERRORS = (Exception, CheckpointException)

_STEP_DIR = re.compile(r"^step-(\d+)$")
_OPTIM_OPTS = StateDictOptions(flatten_optimizer_state_dict=True)


def complete_steps(folder: str | Path) -> list[int]:
    """Steps with a complete checkpoint (``.metadata`` written last) in ``folder``, ascending."""
    root = Path(folder)
    if not root.is_dir():
        return []
    return sorted(int(m.group(1)) for p in root.iterdir()
                  if (m := _STEP_DIR.match(p.name)) and (p / ".metadata").is_file())


def latest_step(folder: str | Path) -> int | None:
    """Highest step with a complete checkpoint in ``folder`` (None if there is none)."""
    return max(complete_steps(folder), default=None)


def _brief(error: BaseException) -> str:
    """One line about ``error``; for DCP's gathered error, the first rank's underlying one."""
    if isinstance(error, CheckpointException) and error.failures:
        rank, (inner, _trace) = next(iter(error.failures.items()))
        return f"rank {rank}: {_brief(inner)}"
    text = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {text[:200]}" if text else type(error).__name__


class _DropDCPLogs(logging.Filter):
    """DCP logs each read failure with a full traceback on the root logger; our one line replaces it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "distributed/checkpoint" not in record.pathname.replace("\\", "/")


@contextlib.contextmanager
def _quiet_dcp_failures():
    root, dropper = logging.getLogger(), _DropDCPLogs()
    root.addFilter(dropper)
    try:
        yield
    finally:
        root.removeFilter(dropper)


class HostLoadPlanner(DefaultLoadPlanner):
    """DCP's default load planner, but non-tensor items are unpickled onto the CPU.

    DCP reads tensor items with ``map_location="cpu"``, but unpickles the other
    items (``BYTE_IO``) with the location tag recorded at save time. A tag this
    process cannot restore (seen on a GPU host under torch 2.11 after an async
    save on HSDP: "don't know how to restore data location ... (tagged with
    cpu:0)") then fails the whole load. Mapping them to the CPU, as the tensor
    items already are, makes the tag irrelevant; the state-dict setters move
    everything to the model's device afterwards.
    """

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        # The same as DefaultLoadPlanner.load_bytes (torch 2.11-2.14) plus map_location.
        obj = torch.load(value, map_location="cpu", weights_only=False)
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
        else:
            self.state_dict[read_item.dest_index.fqn] = obj


@contextlib.contextmanager
def _quiet_single_process():
    """DCP warns that it 'assumes' one process when no group exists; for us that is the intent."""
    with warnings.catch_warnings():
        if not (dist.is_available() and dist.is_initialized()):
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


class Checkpointer:
    """Save/load model parts, their optimizers and a small train state, sharded."""

    def __init__(self, folder: str | Path, parts: Sequence[nn.Module], optimizers: list[torch.optim.Optimizer], *,
                 async_save: bool = False, keep: int = 2) -> None:
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"--checkpoint-dir {self.folder}: cannot create ({e.strerror})") from None
        self.parts = parts
        self.optimizers = optimizers
        self.async_save = async_save
        self.keep = keep
        self._pending: Future[object] | None = None
        self._distributed = dist.is_available() and dist.is_initialized()
        # Background writes must not share a communicator with training collectives.
        self._async_group = dist.new_group(backend="gloo") if async_save and self._distributed else None

    # ---- state dicts ------------------------------------------------------
    def _state(self, train_state: Mapping[str, int]) -> tuple[STATE_DICT_TYPE, list[tuple[list[str], list[str]]]]:
        model_sd: dict[str, ValueType] = {}
        optim_sd: OptimizerStateType = {}
        keys = []
        for part, optim in zip(self.parts, self.optimizers):
            msd = get_model_state_dict(part)
            osd = get_optimizer_state_dict(part, optim, options=_OPTIM_OPTS)
            model_sd.update(msd)
            optim_sd.update(osd)
            keys.append((list(msd), list(osd)))
        return {"model": model_sd, "optim": optim_sd, "train": dict(train_state)}, keys

    def path(self, step: int) -> Path:
        return self.folder / f"step-{step}"

    def _rng_path(self, step: int) -> Path:
        rank = dist.get_rank() if self._distributed else 0
        return self.path(step) / f"rng-rank{rank}.pt"

    # ---- save -------------------------------------------------------------
    def save(self, step: int, train_state: Mapping[str, int]) -> None:
        """Write ``step-<step>`` (collective: every rank calls it)."""
        self.wait()
        path = self.path(step)
        rng = RNGState.capture(import_torch=True)  # before DCP runs any code of its own
        path.mkdir(parents=True, exist_ok=True)
        tmp = self._rng_path(step).with_suffix(".tmp")
        torch.save(rng.to_dict(), tmp)
        os.replace(tmp, self._rng_path(step))
        with _quiet_single_process():
            state, _ = self._state(train_state)
            if self.async_save:
                pending = dcp.async_save(state, checkpoint_id=str(path), process_group=self._async_group)
                assert isinstance(pending, Future)  # an AsyncSaveResponse only comes back for an async_stager
                self._pending = pending
            else:
                dcp.save(state, checkpoint_id=str(path))
        if not self.async_save:
            self._prune()

    def wait(self) -> None:
        """Block until a pending async save is on disk."""
        if self._pending is not None:
            self._pending.result()
            self._pending = None
            self._prune()

    def _prune(self) -> None:
        if self._distributed and dist.get_rank() != 0:
            return
        done = sorted((int(m.group(1)), p) for p in self.folder.iterdir() if (m := _STEP_DIR.match(p.name)))
        complete = [(s, p) for s, p in done if (p / ".metadata").is_file()]
        for _, p in complete[:-self.keep]:
            shutil.rmtree(p, ignore_errors=True)

    # ---- load -------------------------------------------------------------
    def load(self, step: int | None = None) -> dict[str, int] | None:
        """Load ``step`` (default: the newest complete one that reads) into the parts; returns the train state.

        A damaged checkpoint (truncated or missing shard, garbage metadata) is
        reported in one line, set aside as ``step-N.corrupt`` (kept, never
        deleted, and out of the pruning) and the next older complete one is
        tried. Only when none loads is it an error.
        """
        if step is not None:
            try:
                return self._load(step)
            except ConfigError:
                raise
            except _LOAD_ERRORS as e:
                raise ConfigError(f"--checkpoint-dir {self.folder}: step-{step} is unreadable ({_brief(e)})") from None
        failures: list[str] = []
        for candidate in complete_steps(self.folder)[::-1]:
            try:
                with _quiet_dcp_failures():
                    state = self._load(candidate)
                if failures:
                    log.warning("greentrain: resuming from %s instead", self.path(candidate))
                return state
            except _LOAD_ERRORS as e:  # whatever a damaged file raises (pickle, torch, DCP): try an older one
                if not self._peers_alive():  # a rank died mid-load (preempted, killed): the files are not at fault
                    raise RuntimeError(f"--checkpoint-dir {self.folder}: a rank was lost while loading "
                                       f"step-{candidate} ({_brief(e)}); the checkpoint is kept for the relaunch"
                                       ) from None
                failures.append(f"step-{candidate}: {_brief(e)}")
                log.warning("greentrain: checkpoint %s is damaged (%s); set aside, trying an older one",
                            self.path(candidate), _brief(e))
                self._set_aside(candidate)
        if failures:
            raise ConfigError(f"--checkpoint-dir {self.folder}: no checkpoint could be loaded ({'; '.join(failures)}); "
                              "they are set aside as step-N.corrupt: run again to start from step 0")
        return None

    def _peers_alive(self) -> bool:
        """After a failed load: whether every rank is still there (a barrier). A lost peer fails every other
        rank's load too; only when all ranks answer is the checkpoint itself to blame."""
        if not self._distributed:
            return True
        try:
            dist.barrier()
        except Exception:  # gloo/NCCL report a lost peer as RuntimeError or DistError
            return False
        return True

    def _set_aside(self, step: int) -> None:
        """Rename a damaged ``step-N`` so neither resume nor pruning picks it again (rank 0; all ranks wait)."""
        if not self._distributed or dist.get_rank() == 0:
            path = self.path(step)
            target = path.with_name(f"{path.name}.corrupt")
            n = 1
            while target.exists():
                n += 1
                target = path.with_name(f"{path.name}.corrupt{n}")
            with contextlib.suppress(OSError):
                path.rename(target)
        if self._distributed:
            dist.barrier()

    def _load(self, step: int) -> dict[str, int]:
        path = self.path(step)
        if not (path / ".metadata").is_file():
            raise ConfigError(f"--checkpoint-dir {self.folder}: step-{step} is missing or incomplete")
        with _quiet_single_process():
            state, keys = self._state({"step": 0, "tokens": 0})
            dcp.load(state, checkpoint_id=str(path), planner=HostLoadPlanner())
        for (part, optim), (mkeys, okeys) in zip(zip(self.parts, self.optimizers), keys):
            set_model_state_dict(part, {k: state["model"][k] for k in mkeys})
            set_optimizer_state_dict(part, optim, {k: state["optim"][k] for k in okeys}, options=_OPTIM_OPTS)
        if self._rng_path(step).is_file():
            RNGState.from_dict(torch.load(self._rng_path(step), weights_only=False)).restore()
        return state["train"]

    def close(self) -> None:
        self.wait()
