"""Distributed checkpoints with ``torch.distributed.checkpoint`` (DCP).

A checkpoint is a folder ``step-N`` written collectively by all ranks; each
rank writes only its shards, and names are global (no wrapper prefixes, no
stage numbers), so a checkpoint saved on one mesh loads on any other (DCP
reshards on load). The folder is complete once its ``.metadata`` file exists.
Async saves stage the state on the CPU, then write in a background thread over
a separate gloo group while training continues.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.planner import ReadItem
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from greentrain.errors import ConfigError

__all__ = ["Checkpointer", "latest_step"]

_STEP_DIR = re.compile(r"^step-(\d+)$")
_OPTIM_OPTS = StateDictOptions(flatten_optimizer_state_dict=True)


def latest_step(folder: str | Path) -> int | None:
    """Highest step with a complete checkpoint in ``folder`` (None if there is none)."""
    root = Path(folder)
    if not root.is_dir():
        return None
    steps = [int(m.group(1)) for p in root.iterdir()
             if (m := _STEP_DIR.match(p.name)) and (p / ".metadata").is_file()]
    return max(steps, default=None)


class _HostLoadPlanner(DefaultLoadPlanner):
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

    def __init__(self, folder: str | Path, parts: list[nn.Module], optimizers: list[torch.optim.Optimizer], *,
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
        self._pending: Any = None
        self._distributed = dist.is_available() and dist.is_initialized()
        # Background writes must not share a communicator with training collectives.
        self._async_group = dist.new_group(backend="gloo") if async_save and self._distributed else None

    # ---- state dicts ------------------------------------------------------
    def _state(self, train_state: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[list[str], list[str]]]]:
        model_sd: dict[str, Any] = {}
        optim_sd: dict[str, Any] = {}
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

    # ---- save -------------------------------------------------------------
    def save(self, step: int, train_state: dict[str, Any]) -> None:
        """Write ``step-<step>`` (collective: every rank calls it)."""
        self.wait()
        path = self.path(step)
        with _quiet_single_process():
            state, _ = self._state(train_state)
            if self.async_save:
                self._pending = dcp.async_save(state, checkpoint_id=str(path), process_group=self._async_group)
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
    def load(self, step: int | None = None) -> dict[str, Any] | None:
        """Load ``step`` (default: the latest complete one) into the parts; returns the train state."""
        step = latest_step(self.folder) if step is None else step
        if step is None:
            return None
        path = self.path(step)
        if not (path / ".metadata").is_file():
            raise ConfigError(f"--checkpoint-dir {self.folder}: step-{step} is missing or incomplete")
        with _quiet_single_process():
            state, keys = self._state({"step": 0, "tokens": 0})
            dcp.load(state, checkpoint_id=str(path), planner=_HostLoadPlanner())
        for (part, optim), (mkeys, okeys) in zip(zip(self.parts, self.optimizers), keys):
            set_model_state_dict(part, {k: state["model"][k] for k in mkeys})
            set_optimizer_state_dict(part, optim, {k: state["optim"][k] for k in okeys}, options=_OPTIM_OPTS)
        return state["train"]

    def close(self) -> None:
        self.wait()
