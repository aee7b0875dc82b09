"""Ending a distributed run without torch's teardown abort.

Objects that hold a process group (FSDP state, the DeviceMesh, DTensor
specs) sit in reference cycles, so Python frees them only at interpreter
teardown, after ``destroy_process_group`` and in no fixed order. With gloo,
a rank then now and again dies of ``terminate called without an active
exception`` (SIGABRT) after its training has finished, and torchrun reports
the whole run as failed (seen in the documented 4-rank commands under load).
Collecting them while the groups are still up, then destroying the groups,
leaves the interpreter's teardown nothing of torch.distributed to free.
"""

from __future__ import annotations

import gc

__all__ = ["release_process_groups"]


def release_process_groups() -> None:
    """Free unreachable objects (and the process groups they hold) now, then destroy every process group.

    Call it once the caller has dropped its own references (the trainer, the model). A no-op without an
    initialised default group."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    gc.collect()
    dist.destroy_process_group()
    gc.collect()
