"""CUDA_VISIBLE_DEVICES -> NVML indices, as CUDA itself reads the variable."""

from __future__ import annotations

import pytest

from greentrain.device.visible import resolve_visible_devices
from greentrain.errors import NotSupportedError

pytestmark = pytest.mark.timeout(10)

UUIDS = [
    "GPU-5f3c1a2b-0000-1111-2222-333344445555",
    "GPU-5f3d9999-aaaa-bbbb-cccc-ddddeeeeffff",
    "GPU-a1b2c3d4-1234-5678-9abc-def012345678",
]


def test_unset_selects_every_gpu_in_nvml_order() -> None:
    assert resolve_visible_devices(None, UUIDS) == ([0, 1, 2], [])


def test_empty_selects_none_and_says_so() -> None:
    selected, notes = resolve_visible_devices("", UUIDS)
    assert selected == [] and "empty" in notes[0]


def test_indices_keep_cuda_order_and_ignore_spaces() -> None:
    assert resolve_visible_devices("2, 0", UUIDS) == ([2, 0], [])


def test_full_uuid_and_unique_prefixes() -> None:
    assert resolve_visible_devices(UUIDS[2], UUIDS)[0] == [2]
    assert resolve_visible_devices("GPU-a1b2,GPU-5f3d", UUIDS)[0] == [2, 1]
    assert resolve_visible_devices("gpu-A1B2", UUIDS)[0] == [2]  # case-insensitive like CUDA


def test_mixed_index_and_uuid() -> None:
    assert resolve_visible_devices("1,GPU-a1", UUIDS)[0] == [1, 2]


@pytest.mark.parametrize(
    ("value", "expected", "why"),
    [
        ("0,GPU-5f3,2", [0], "ambiguous"),  # prefix of two UUIDs
        ("1,7,0", [1], "out of range"),
        ("0,-1,1", [0], "out of range"),
        ("2,GPU-ffff,0", [2], "matches no GPU"),
        ("0,0,1", [0], "repeats"),
        ("1,abc,0", [1], "neither an index"),
    ],
)
def test_invalid_entry_stops_the_list_like_cuda(value: str, expected: list[int], why: str) -> None:
    selected, notes = resolve_visible_devices(value, UUIDS)
    assert selected == expected
    assert len(notes) == 1 and why in notes[0] and "ignores it and every entry after it" in notes[0]


def test_mig_entry_is_refused_with_the_reason() -> None:
    with pytest.raises(NotSupportedError, match="per physical GPU") as info:
        resolve_visible_devices("MIG-11111111-2222-3333-4444-555555555555", UUIDS)
    assert "MIG-1111" in str(info.value)
