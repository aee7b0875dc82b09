"""What a job is built from around the engine: options, resources, hardware, checkpoints, saved state,
and process control for ``greentrain run``."""
