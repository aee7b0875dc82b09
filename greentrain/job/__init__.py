"""What a job is built from around the engine: its options (``JobOptions``), the builder (``build_job``),
resources, hardware, checkpoints, saved state, and process control for ``greentrain run``."""
