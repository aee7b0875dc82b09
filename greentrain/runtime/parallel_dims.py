"""Parallel dimensions and the DeviceMesh they describe.

The world is a 6-D grid ``pp × dp_replicate × dp_shard × cp × ep × tp``
(outermost first, so tensor-parallel peers are neighbouring ranks, i.e. on one
node, and the all-to-all of expert parallelism next). The experts' FSDP
dimensions (``dp_shard × cp``) lie outside ``ep``, as FSDP2 needs for a
parameter already sharded over ``ep``. ``ParallelDims`` checks the
sizes against the world size and builds the ``DeviceMesh`` with named
dimensions plus the flattened meshes the transforms need:

- ``dp`` (``dp_replicate × dp_shard × ep``): the ranks that see different
  sequences (data loading). Expert-parallel ranks are data-parallel ranks
  for every parameter that is not an expert.
- ``dp_cp`` (``dp × cp``): every rank that holds different tokens (loss
  averaging, router statistics).
- FSDP2 shards the dense parameters over ``dp_shard × cp × ep`` and the
  experts (already split over ``ep``) over ``dp_shard × cp``; with
  ``dp_replicate > 1`` both are HSDP (DDP when the shard size is 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from greentrain.errors import ConfigError

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

__all__ = ["ParallelDims", "MESH_DIMS"]

MESH_DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "ep", "tp")
"""The mesh dimensions, outermost first."""


@dataclass(kw_only=True, slots=True)
class ParallelDims:
    """Validated mesh sizes for one world."""

    dp_replicate: int = 1
    dp_shard: int = -1
    """-1: fill with whatever the world size leaves over."""
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    world_size: int = 1
    _mesh: DeviceMesh | None = field(default=None, repr=False)
    _flat: dict[str, DeviceMesh] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for name in ("dp_replicate", "tp", "pp", "cp", "ep", "world_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(self, name)}")
        fixed = self.dp_replicate * self.tp * self.pp * self.cp * self.ep
        if self.dp_shard == -1:
            if self.world_size % fixed:
                raise ConfigError(
                    f"world size {self.world_size} does not divide by pp*dp_replicate*cp*ep*tp = {fixed}; "
                    "choose sizes whose product divides the number of processes")
            self.dp_shard = self.world_size // fixed
        if self.dp_shard < 1:
            raise ConfigError(f"--dp-shard: must be >= 1 or -1, got {self.dp_shard}")
        product = fixed * self.dp_shard
        if product != self.world_size:
            raise ConfigError(f"{self._product_text()} = {product}, but the world size is {self.world_size}; "
                              "make the product equal the process count")

    def _product_text(self) -> str:
        return " * ".join(f"{name}({getattr(self, name)})" for name in MESH_DIMS)

    # ---- what is enabled -------------------------------------------------
    @property
    def dp(self) -> int:
        """Ranks that see different sequences (replicas × shards × expert-parallel ranks): batch slices."""
        return self.dp_replicate * self.dp_shard * self.ep

    @property
    def dp_cp(self) -> int:
        """Ranks that hold different tokens (``dp × cp``): what the loss is averaged over."""
        return self.dp * self.cp

    @property
    def dp_enabled(self) -> bool:
        """Whether gradients are averaged across ranks (FSDP2/HSDP/DDP over ``dp × cp``)."""
        return self.dp_cp > 1

    @property
    def fsdp_enabled(self) -> bool:
        return self.dp_shard * self.ep * self.cp > 1

    @property
    def ddp_only(self) -> bool:
        return self.dp_replicate > 1 and self.dp_shard * self.ep * self.cp == 1

    @property
    def tp_enabled(self) -> bool:
        return self.tp > 1

    @property
    def pp_enabled(self) -> bool:
        return self.pp > 1

    @property
    def cp_enabled(self) -> bool:
        return self.cp > 1

    @property
    def ep_enabled(self) -> bool:
        return self.ep > 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def describe(self) -> str:
        extra = "".join(f" {name}={getattr(self, name)}" for name in ("cp", "ep") if getattr(self, name) > 1)
        return f"pp={self.pp} dp_replicate={self.dp_replicate} dp_shard={self.dp_shard}{extra} tp={self.tp}"

    # ---- the mesh --------------------------------------------------------
    def build_mesh(self, device_type: str) -> DeviceMesh:
        """Create the 6-D DeviceMesh and its flattened views (needs an initialised process group)."""
        from torch.distributed.device_mesh import init_device_mesh

        sizes = tuple(getattr(self, name) for name in MESH_DIMS)
        mesh = init_device_mesh(device_type, sizes, mesh_dim_names=MESH_DIMS)
        flat = {"dp": ("dp_replicate", "dp_shard", "ep"), "dp_cp": ("dp_replicate", "dp_shard", "cp", "ep"),
                "fsdp": ("dp_shard", "cp", "ep"), "expert_fsdp": ("dp_shard", "cp")}
        if self.tp > 1:
            # A gradient norm over FSDP x TP DTensors reduces over these dimensions at once when DTensor
            # finds them flattened (one all-reduce instead of one per dimension).
            flat.update(fsdp_tp=("dp_shard", "cp", "ep", "tp"), dp_cp_tp=("dp_replicate", "dp_shard", "cp", "ep", "tp"))
        self._flat = {name: mesh[dims]._flatten(mesh_dim_name=name) for name, dims in flat.items()}
        self._mesh = mesh
        return mesh

    @property
    def mesh(self) -> DeviceMesh:
        if self._mesh is None:
            raise RuntimeError("ParallelDims.build_mesh() has not been called")
        return self._mesh

    def _flat_mesh(self, name: str) -> DeviceMesh:
        if name not in self._flat:
            raise RuntimeError("ParallelDims.build_mesh() has not been called")
        return self._flat[name]

    def _shard_mesh(self, flat_name: str, ways: int) -> DeviceMesh:
        """The FSDP2 mesh whose shard dimension is ``flat_name`` (``dp_shard`` itself when that is all of it);
        with replicas, 2-D (replicate, shard): HSDP, or DDP when the shard size is 1."""
        flat = self._flat_mesh(flat_name)
        if ways == self.dp_shard:  # nothing else in the shard dimension: the mesh's own dims
            return self.mesh[("dp_replicate", "dp_shard")] if self.dp_replicate > 1 else self.mesh["dp_shard"]
        if self.dp_replicate > 1:
            # Slicing a flattened dim together with a root one is deprecated from torch 2.11: join them.
            from torch.distributed.device_mesh import DeviceMesh

            return DeviceMesh._concatenate([self.mesh["dp_replicate"], flat])
        return flat

    def fsdp_mesh(self) -> DeviceMesh:
        """The mesh FSDP2 shards dense parameters over (``dp_shard × cp × ep``): 2-D (replicate, shard) for
        HSDP/DDP, 1-D otherwise."""
        return self._shard_mesh("fsdp", self.dp_shard * self.cp * self.ep)

    def expert_fsdp_mesh(self) -> DeviceMesh:
        """The mesh FSDP2 shards expert parameters over (``dp_shard × cp``; experts are split over ``ep``)."""
        return self._shard_mesh("expert_fsdp", self.dp_shard * self.cp)

    def dp_mesh(self) -> DeviceMesh:
        """All ranks that see different sequences, flattened into one dimension (batch slicing)."""
        return self._flat_mesh("dp")

    def dp_cp_mesh(self) -> DeviceMesh:
        """All ranks that hold different tokens, flattened (loss averaging, router statistics)."""
        return self._flat_mesh("dp_cp")

    def dp_rank(self) -> int:
        """This rank's index among data-parallel ranks (0 when not distributed)."""
        return self._flat["dp"].get_local_rank() if "dp" in self._flat else 0

    def cp_rank(self) -> int:
        """This rank's index among context-parallel peers (0 when not distributed)."""
        return self.mesh["cp"].get_local_rank() if self._mesh is not None else 0
