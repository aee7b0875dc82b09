"""Secrets come from the environment or a file, never from the command line.

``ps`` shows every process's arguments to every user, so API keys are read
from an environment variable or a file named in the config. Values are only
ever passed to the HTTP layer, which redacts them from any error text.
"""

from __future__ import annotations

import os
from pathlib import Path

from greentrain.errors import ConfigError

__all__ = ["read_secret"]


def read_secret(env_var: str, file: str | Path | None = None, *, env: dict[str, str] | None = None) -> str | None:
    """The secret in ``file`` if given, else in ``$env_var``, else in the file named by ``$env_var_FILE``.

    None when none is set.

    Raises ConfigError naming the file (not its content) when it cannot be read or is empty.
    """
    if file is not None:
        from greentrain.userfile import read_text

        path = Path(file).expanduser()
        # Regular file, size cap, and errors that never quote a byte of the secret.
        text = read_text(path, what="secret file", max_bytes=64 << 10, secret=True).strip()
        if not text:
            raise ConfigError(f"{path}: secret file is empty")
        return text
    environ = env if env is not None else os.environ
    value = environ.get(env_var, "").strip()
    if value:
        return value
    # ``$NAME_FILE`` names a file holding the secret (e.g. a mounted Kubernetes secret).
    file_var = environ.get(f"{env_var}_FILE", "").strip()
    return read_secret(env_var, file_var) if file_var else None
