"""`episodic compact LOG [OUT]`: a finished log rewritten with its datasets compressed
(episodic.logs.compression), every group, dataset, attribute and value as they were.

The copy is written beside its destination and renamed onto it when whole (a log compacted in
place replaces the original only then); a log still being written is refused. Readers read the
compacted log as the original (HDF5 undoes the filter), which :func:`compact` checks by reading
every dataset of both before the rename.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from episodic.interface.files import member, open_hdf5, readable_rows, replacing
from episodic.logs import being_written
from episodic.logs.compression import DEFAULT, Filter, creation, filters_of, get


class CompactError(Exception):
    """A log cannot be compacted; the message says why and what to do."""


@dataclass(frozen=True)
class Compacted:
    """What :func:`compact` did: ``out`` written with ``filter``, from ``bytes_before`` to
    ``bytes_after`` bytes for ``episodes`` episodes, in ``seconds`` s."""

    out: Path
    filter: str
    episodes: int
    bytes_before: int
    bytes_after: int
    seconds: float
    left_out: dict[str, int] = field(default_factory=dict)  # table -> its last rows that could not be read (values_of)

    @property
    def ratio(self) -> float:
        """How many times smaller the log became."""
        return self.bytes_before / max(self.bytes_after, 1)


def default_out(path: Path) -> Path:
    """<log name>_compact.h5 beside the log."""
    return path.with_name(f"{path.stem}_compact{path.suffix}")


def copy_attrs(source, target) -> None:
    """Every attribute of ``source`` onto ``target``, with its HDF5 type."""
    for name in source.attrs:
        attr = source.attrs.get_id(name)
        target.attrs.create(name, source.attrs[name], dtype=attr.dtype)


def values_of(source: h5py.Dataset) -> tuple[np.ndarray, int]:
    """Every value of ``source`` and 0; of a table of text whose last rows HDF5 cannot read (the
    rows of a write a kill cut short while the log was flushed: episodic.interface.files.
    readable_rows; readers leave those episodes out), the rows before them and how many were
    left out: the compacted log is the log without them. A row that cannot be read before one
    that can is damage, not a cut-short write: CompactError."""
    try:
        return source[()], 0
    except OSError as exc:
        if source.ndim != 1 or not source.dtype.hasobject:
            raise
        cause = str(exc)
    rows, lost = readable_rows(source)
    if lost != list(range(len(rows), source.shape[0])):
        raise CompactError(f"{source.file.filename}: row {lost[0]} of {source.name} cannot be read ({cause}) but a "
                           f"row after it can: the file is damaged, not a write cut short; it is not compacted")
    return rows, len(lost)


def copy_dataset(source: h5py.Dataset, parent: h5py.Group, name: str, use: Filter) -> int:
    """``source`` as dataset ``name`` of ``parent``: same type, maximum shape and values (of a
    table whose last rows cannot be read, those before them: values_of), stored with ``use``
    when big enough (episodic.logs.compression.creation); a resizable dataset keeps its own
    chunks. Returns the rows left out."""
    values, left_out = values_of(source) if source.size else (None, 0)
    space = source.id.get_space()  # its shape and maximum shape
    if values is not None and left_out:
        space = h5py.h5s.create_simple(values.shape, space.get_simple_extent_dims(maxdims=True))
    plain = source.id.get_create_plist().copy()
    resizable = source.chunks is not None and source.maxshape != source.shape
    if resizable:
        dcpl = plain
        if source.size and not source.dtype.hasobject:  # text (a log's JSON) is left unfiltered
            if use.shuffle:
                dcpl.set_shuffle()
            dcpl.set_filter(use.filter_id, h5py.h5z.FLAG_OPTIONAL, use.options)
    else:
        contiguous = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        contiguous.set_obj_track_times(False)
        dcpl = creation(source.shape, source.dtype.itemsize, contiguous, use)
    h5py.h5d.create(parent.id, name.encode(), source.id.get_type(), space, dcpl=dcpl)
    target = parent[name]
    if values is not None:
        target[()] = values
    copy_attrs(source, target)
    return left_out


def copy_group(source: h5py.Group, target: h5py.Group, use: Filter) -> dict[str, int]:
    """Everything below ``source`` into ``target``; the rows left out of each table whose last
    rows could not be read (values_of), by its path."""
    copy_attrs(source, target)
    left_out: dict[str, int] = {}
    for name, link in source.items():
        kind = source.get(name, getlink=True)
        if not isinstance(kind, h5py.HardLink):
            raise CompactError(f"{source.name}/{name} is a {type(kind).__name__}; a log has none")
        if isinstance(link, h5py.Group):
            left_out |= copy_group(link, target.create_group(name, track_order=None), use)
        elif rows := copy_dataset(link, target, name, use):
            left_out[link.name] = rows
    return left_out


def same_contents(a: h5py.Group, b: h5py.Group) -> str:
    """"" when ``a`` and ``b`` hold the same groups, datasets (values, types, shapes) and
    attributes; else the first difference."""
    if sorted(a.keys()) != sorted(b.keys()) or sorted(a.attrs.keys()) != sorted(b.attrs.keys()):
        return f"{a.name}: members or attributes differ"
    for name in a.attrs:
        if not _same(a.attrs[name], b.attrs[name]):
            return f"{a.name}: attribute {name} differs"
    for name, item in a.items():
        other = b[name]
        if isinstance(item, h5py.Group):
            found = same_contents(item, other)
            if found:
                return found
        elif item.dtype != other.dtype or np.shape(values := values_of(item)[0]) != other.shape or \
                not _same(values, other[()]) or sorted(item.attrs.keys()) != sorted(other.attrs.keys()):
            return f"{item.name}: values differ"
    return ""


def _same(a, b) -> bool:
    """Whether two values read from datasets are the same: bit for bit, text by its value."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.names:  # a table: field by field (its text fields by their values)
        return a.dtype.names == b.dtype.names and all(_same(a[name], b[name]) for name in a.dtype.names)
    return bool(np.array_equal(a, b)) if a.dtype.kind == "O" else a.tobytes() == b.tobytes()


def compact(path: str | Path, out: str | Path | None = None, filter_name: str = DEFAULT,
            overwrite: bool = False) -> Compacted:
    """Rewrite the log at ``path`` to ``out`` (default :func:`default_out`; ``path`` itself to
    compact it in place) with its datasets stored with the filter ``filter_name``
    (episodic.logs.compression.FILTERS), checked to read back the same before it is renamed into
    place, owner-only as a log is written. An existing ``out`` other than ``path`` is replaced
    only with ``overwrite``."""
    path = Path(path)
    out = default_out(path) if out is None else Path(out)
    in_place = out.resolve() == path.resolve()
    try:
        use = get(filter_name)
    except ValueError as exc:
        raise CompactError(str(exc)) from None
    if out.exists() and not (overwrite or in_place):
        raise CompactError(f"{out} exists; choose another OUT, or replace it (--overwrite)")
    if being_written(path):
        raise CompactError(f"{path} is being written by a runner; compact it once the run has ended")
    start = time.perf_counter()
    before = path.stat().st_size
    out.parent.mkdir(parents=True, exist_ok=True)
    with open_hdf5(path) as source:
        if "episodes" not in source or "format" not in source.attrs:
            raise CompactError(f"{path} is not an episodic log (no /episodes or format); nothing was written")
        with replacing(out, overwrite=overwrite or in_place) as tmp:
            with h5py.File(tmp, "w", track_order=None) as target:
                left_out = copy_group(source, target, use)
            with h5py.File(tmp, "r") as target:
                differs = same_contents(source, target)
                episodes = len(target["episodes"])
            if differs:
                raise CompactError(f"the compacted copy of {path} does not read the same ({differs}); "
                                   f"{out} was not written")
    return Compacted(out, use.name, episodes, before, out.stat().st_size, time.perf_counter() - start, left_out)


def describe_storage(f: h5py.File) -> str:
    """How the step data of the log ``f`` is stored: the filters of the step columns of its first
    episode (\"plain\" without, \"-\" for a log without one); links to other files are refused
    (episodic.interface.files.member)."""
    steps = member(f, "steps")  # a log of format 2's table of steps
    if isinstance(steps, h5py.Dataset):
        return "+".join(sorted(filters_of(steps))) or "plain"
    episodes = member(f, "episodes")
    for name in sorted(episodes) if isinstance(episodes, h5py.Group) else ():
        group = member(episodes, name)
        steps = member(group, "steps") if isinstance(group, h5py.Group) else None
        if isinstance(steps, h5py.Group):
            found: set[str] = set()
            for column in steps:
                item = member(steps, column)
                if isinstance(item, h5py.Dataset):
                    found.update(filters_of(item))
            return "+".join(sorted(found)) or "plain"
    return "-"
