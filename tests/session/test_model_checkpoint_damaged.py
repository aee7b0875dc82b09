"""The Session's single-file checkpoint: a truncated or garbage file is one line, never a torch traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from greentrain.errors import ConfigError
from greentrain.job.modelcheckpoint import ModelCheckpoint

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_damaged_file_is_one_line(damage: str, tmp_path: Path) -> None:
    model = torch.nn.Linear(4, 4)
    checkpoint = ModelCheckpoint(tmp_path, model, torch.optim.SGD(model.parameters(), lr=0.1))
    checkpoint.save(7)
    assert checkpoint.load() == 7
    blob = checkpoint.path.read_bytes()
    checkpoint.path.write_bytes({"truncated": blob[: len(blob) // 2], "garbage": b"\x80\x04not a pickle",
                                 "empty": b""}[damage])
    with pytest.raises(ConfigError) as info:
        checkpoint.load()
    message = str(info.value)
    assert message.startswith(f"{checkpoint.path}: cannot restore checkpoint (") and "\n" not in message
    assert "move it aside" in message
