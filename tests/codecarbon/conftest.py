"""An ``emissions.csv`` written by the CodeCarbon the project depends on, offline, once per test session."""

from __future__ import annotations

import time
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def codecarbon_written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs tracked by CodeCarbon's own ``OfflineEmissionsTracker`` (country GBR), appended to one file."""
    from codecarbon import OfflineEmissionsTracker

    out = tmp_path_factory.mktemp("codecarbon")
    for project in ("first", "second"):
        tracker = OfflineEmissionsTracker(country_iso_code="GBR", output_dir=str(out), project_name=project,
                                          log_level="error", measure_power_secs=1)
        tracker.start()
        time.sleep(0.2)
        tracker.stop()
    return out / "emissions.csv"
