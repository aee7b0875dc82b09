"""Parallel dimensions and the DeviceMesh they describe.

The world is a 4-D grid ``pp × dp_replicate × dp_shard × tp`` (outermost
first, so tensor-parallel peers are neighbouring ranks, i.e. on one node).
``ParallelDims`` checks the sizes against the world size and builds the
``DeviceMesh`` with named dimensions plus the flattened ``dp`` mesh (all data
parallel ranks: data loading, loss averaging). FSDP2 shards over
``dp_shard``, or over ``dp_replicate × dp_shard`` (HSDP; DDP when the shard
size is 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from greentrain.errors import ConfigError

__all__ = ["ParallelDims"]


@dataclass(kw_only=True, slots=True)
class ParallelDims:
    """Validated mesh sizes for one world."""

    dp_replicate: int = 1
    dp_shard: int = -1
    """-1: fill with whatever the world size leaves over."""
    tp: int = 1
    pp: int = 1
    world_size: int = 1
    _mesh: Any = field(default=None, repr=False)
    _dp_mesh: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("dp_replicate", "tp", "pp", "world_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(self, name)}")
        fixed = self.dp_replicate * self.tp * self.pp
        if self.dp_shard == -1:
            if self.world_size % fixed:
                raise ConfigError(
                    f"world size {self.world_size} does not divide by dp_replicate*tp*pp = {fixed}; "
                    "choose sizes whose product divides the number of processes")
            self.dp_shard = self.world_size // fixed
        if self.dp_shard < 1:
            raise ConfigError(f"--dp-shard: must be >= 1 or -1, got {self.dp_shard}")
        product = fixed * self.dp_shard
        if product != self.world_size:
            raise ConfigError(
                f"pp({self.pp}) * dp_replicate({self.dp_replicate}) * dp_shard({self.dp_shard}) * tp({self.tp}) "
                f"= {product}, but the world size is {self.world_size}; make the product equal the process count")

    # ---- what is enabled -------------------------------------------------
    @property
    def dp(self) -> int:
        """All data-parallel ranks (replicas × shards): how many batch slices there are."""
        return self.dp_replicate * self.dp_shard

    @property
    def dp_enabled(self) -> bool:
        return self.dp > 1

    @property
    def fsdp_enabled(self) -> bool:
        return self.dp_shard > 1

    @property
    def ddp_only(self) -> bool:
        return self.dp_replicate > 1 and self.dp_shard == 1

    @property
    def tp_enabled(self) -> bool:
        return self.tp > 1

    @property
    def pp_enabled(self) -> bool:
        return self.pp > 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def describe(self) -> str:
        return f"pp={self.pp} dp_replicate={self.dp_replicate} dp_shard={self.dp_shard} tp={self.tp}"

    # ---- the mesh --------------------------------------------------------
    def build_mesh(self, device_type: str) -> Any:
        """Create the 4-D DeviceMesh (needs an initialised process group)."""
        from torch.distributed.device_mesh import init_device_mesh

        names = ("pp", "dp_replicate", "dp_shard", "tp")
        mesh = init_device_mesh(device_type, (self.pp, self.dp_replicate, self.dp_shard, self.tp), mesh_dim_names=names)
        self._dp_mesh = mesh[("dp_replicate", "dp_shard")]._flatten(mesh_dim_name="dp")
        self._mesh = mesh
        return mesh

    @property
    def mesh(self) -> Any:
        if self._mesh is None:
            raise RuntimeError("ParallelDims.build_mesh() has not been called")
        return self._mesh

    def fsdp_mesh(self) -> Any:
        """The mesh FSDP2 shards over: 2-D (replicate, shard) for HSDP/DDP, 1-D otherwise."""
        if self.dp_replicate > 1:
            return self.mesh[("dp_replicate", "dp_shard")]
        return self.mesh["dp_shard"]

    def dp_mesh(self) -> Any:
        """All data-parallel ranks flattened into one dimension (batch slicing, loss averaging)."""
        if self._dp_mesh is None:
            raise RuntimeError("ParallelDims.build_mesh() has not been called")
        return self._dp_mesh

    def dp_rank(self) -> int:
        """This rank's index among data-parallel ranks (0 when not distributed)."""
        return self._dp_mesh.get_local_rank() if self._dp_mesh is not None else 0
