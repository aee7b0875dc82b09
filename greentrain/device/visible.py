"""Map ``CUDA_VISIBLE_DEVICES`` to vendor (NVML) device indices, the way CUDA reads it.

CUDA accepts a comma-separated list of integer indices or ``GPU-<uuid>``
entries, where a UUID may be shortened to any unique prefix. Parsing stops at
the first entry that is invalid, out of range, ambiguous or repeated: CUDA
silently ignores it and everything after it, so we do the same and say so in a
note. ``MIG-`` entries name a slice of a GPU; power and energy are only
measurable per physical GPU, so they are refused with an explanation.
"""

from __future__ import annotations

from collections.abc import Sequence

from greentrain.errors import NotSupportedError

__all__ = ["resolve_visible_devices", "MIG_REFUSAL"]

MIG_REFUSAL = (
    "power and energy are only measurable per physical GPU, so greentrain cannot attribute them to one MIG slice; "
    "run on whole GPUs (disable MIG with `nvidia-smi -i <gpu> -mig 0`) or list GPU-<uuid>/index entries instead"
)


def _match_uuid(entry: str, uuids: Sequence[str]) -> tuple[int | None, str | None]:
    """Index of the one UUID that ``entry`` is a prefix of, or (None, why)."""
    prefix = entry.lower()
    hits = [i for i, uuid in enumerate(uuids) if uuid.lower().startswith(prefix)]
    if len(hits) == 1:
        return hits[0], None
    if not hits:
        return None, "matches no GPU on this machine"
    return None, f"is ambiguous (prefix of {len(hits)} GPU UUIDs)"


def _parse_entry(entry: str, uuids: Sequence[str]) -> tuple[int | None, str | None]:
    """Resolve one entry to a position in ``uuids``; (None, why) when CUDA would stop here."""
    if entry.upper().startswith("MIG-"):
        raise NotSupportedError(f"CUDA_VISIBLE_DEVICES entry {entry!r} is a MIG slice: {MIG_REFUSAL}")
    if entry.upper().startswith("GPU-"):
        return _match_uuid(entry, uuids)
    try:
        index = int(entry)
    except ValueError:
        return None, "is neither an index nor a GPU-<uuid>"
    if not 0 <= index < len(uuids):
        return None, f"is out of range (this machine has {len(uuids)} GPU(s))"
    return index, None


def resolve_visible_devices(value: str | None, uuids: Sequence[str]) -> tuple[list[int], list[str]]:
    """Return (positions in ``uuids`` in CUDA order, notes) for a ``CUDA_VISIBLE_DEVICES`` value.

    ``uuids`` lists every physical GPU in vendor index order. ``None`` (unset)
    selects all of them; an empty string selects none. Raises
    ``NotSupportedError`` for a ``MIG-`` entry.
    """
    if value is None:
        return list(range(len(uuids))), []
    if not value.strip():
        return [], ["CUDA_VISIBLE_DEVICES is set but empty: no GPUs are visible to this process"]
    selected: list[int] = []
    notes: list[str] = []
    entries = [part.strip() for part in value.split(",")]
    for position, entry in enumerate(entries):
        index, why = _parse_entry(entry, uuids)
        if index is not None and index in selected:
            index, why = None, "repeats an earlier entry"
        if index is None:
            ignored = ", ".join(repr(e) for e in entries[position:])
            notes.append(
                f"CUDA_VISIBLE_DEVICES entry {entry!r} {why}; CUDA ignores it and every entry after it ({ignored})"
            )
            break
        selected.append(index)
    return selected, notes
