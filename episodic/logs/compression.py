"""Compact logs: the HDF5 filters a log's datasets may be stored with, and the creation property
lists that set them.

A log is written uncompressed unless asked: compression costs the writer CPU time during the
episodes (see benchmarks/log_compression.py for the figures behind the choice). ``episodic serve
--compress`` and ``episodic evaluate --compress`` set the EPISODIC_LOG_FILTER environment variable
of their process (so of the runners it starts) to a filter's name, by which the writer stores every
dataset of at least MIN_BYTES bytes chunked and filtered (:func:`creation`); ``episodic compact``
rewrites a finished log so (episodic.tools.compact). HDF5 undoes the filters when a dataset is
read, so every reader reads a compressed log as it reads one written plain.

The filters, chosen by measurement on ball-in-a-cup and reach logs (benchmarks/log_compression.py):
``gzip`` (HDF5's deflate at level DEFLATE_LEVEL after its byte shuffle; in every HDF5, so every
reader reads it), and ``blosc`` (Blosc's zstd at level 5 after its bit shuffle: as small, for about
three quarters of gzip's write time; only with the optional hdf5plugin package, ``pip install
'episodic[compact]'``, and readable only where hdf5plugin is installed too).
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

import h5py
import numpy as np

if importlib.util.find_spec("hdf5plugin") is not None:  # its filters (Blosc's) registered for every reader
    import hdf5plugin  # noqa: F401

ENV = "EPISODIC_LOG_FILTER"  # the filter the writer of this process uses ("" or unset: none)
DEFAULT = "gzip"
MIN_BYTES = 1024  # a dataset smaller than this stays contiguous: its chunk index costs about as much as it saves
CHUNK_BYTES = 1 << 20  # a chunk holds at most about this many bytes (whole datasets up to it)
# gzip's level. Measured (benchmarks/log_compression.py, 10 episodes each, 2 shared cores): after the
# shuffle, level 1 packs a ball-in-a-cup episode 1.50x (reach 1.33x) for 51 ms of write CPU per episode
# (reach 33 ms), level 4 1.52x for 61 ms, 9 1.52x for 116 ms; without the shuffle 1.43x
DEFLATE_LEVEL = 1
BLOSC_EXTRA = "pip install 'episodic[compact]'"


class CompressionError(ValueError):
    """A filter cannot be used here; the message says what to do."""


@dataclass(frozen=True)
class Filter:
    """One way to store a dataset: ``name``, and how to set it on a dataset creation property
    list (HDF5 filter id, its options), each after the byte shuffle when ``shuffle``."""

    name: str
    filter_id: int
    options: tuple[int, ...]
    shuffle: bool
    plugin: bool = False  # an HDF5 plugin's filter (hdf5plugin's)

    def available(self) -> bool:
        """Whether this HDF5 can write and read the filter (importing hdf5plugin for a plugin's)."""
        return bool(h5py.h5z.filter_avail(self.filter_id))  # a plugin's once hdf5plugin is imported (above)


def _blosc_zstd() -> tuple[int, tuple[int, ...]]:
    """hdf5plugin's Blosc filter id and options for zstd level 5 with the bit shuffle, written out
    so that they are known without the package (hdf5plugin.Blosc(cname="zstd", clevel=5,
    shuffle=BITSHUFFLE).filter_options)."""
    return 32001, (0, 0, 0, 0, 5, 2, 5)


FILTERS: dict[str, Filter] = {
    "gzip": Filter("gzip", h5py.h5z.FILTER_DEFLATE, (DEFLATE_LEVEL,), shuffle=True),
    "blosc": Filter("blosc", *_blosc_zstd(), shuffle=False, plugin=True),
}


def chosen() -> Filter | None:
    """The filter this process's writer uses (EPISODIC_LOG_FILTER), or None for none."""
    name = os.environ.get(ENV, "").strip()
    return get(name) if name else None


def get(name: str) -> Filter:
    """The filter called ``name``; CompressionError when it is unknown or cannot be used here."""
    if name not in FILTERS:
        raise CompressionError(f"unknown log filter '{name}'; use one of {', '.join(FILTERS)}")
    found = FILTERS[name]
    if not found.available():
        raise CompressionError(f"the log filter '{name}' needs the hdf5plugin package: {BLOSC_EXTRA}, "
                               f"or use --filter {DEFAULT}")
    return found


def chunk_shape(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The chunk of a dataset of ``shape``: whole rows, at most about CHUNK_BYTES."""
    row_bytes = itemsize * int(np.prod(shape[1:], dtype=np.int64))
    return (max(1, min(shape[0], CHUNK_BYTES // max(row_bytes, 1))), *shape[1:])


def creation(shape: tuple[int, ...], itemsize: int, plain: h5py.h5p.PropDCID,
             use: Filter | None = None) -> h5py.h5p.PropDCID:
    """The dataset creation property list of a new dataset of ``shape`` and ``itemsize`` bytes per
    element: ``plain`` (the writer's own, contiguous) when no filter is ``use``d (default: the
    process's, :func:`chosen`) or the dataset is a scalar, empty or smaller than MIN_BYTES; else a
    copy of it, chunked (:func:`chunk_shape`) and filtered."""
    use = chosen() if use is None else use
    if use is None or not shape or 0 in shape or itemsize * int(np.prod(shape)) < MIN_BYTES:
        return plain
    dcpl = plain.copy()
    dcpl.set_chunk(chunk_shape(shape, itemsize))
    if use.shuffle:
        dcpl.set_shuffle()
    dcpl.set_filter(use.filter_id, h5py.h5z.FLAG_OPTIONAL, use.options)
    return dcpl


def resizable(chunk: tuple[int, ...], plain: h5py.h5p.PropDCID, use: Filter | None = None) -> h5py.h5p.PropDCID:
    """The dataset creation property list of a table that grows by rows (a log's run-wide
    tables): a copy of ``plain`` in chunks of ``chunk``, filtered with ``use`` (none when None)."""
    dcpl = plain.copy()
    dcpl.set_chunk(chunk)
    if use is not None:
        if use.shuffle:
            dcpl.set_shuffle()
        dcpl.set_filter(use.filter_id, h5py.h5z.FLAG_OPTIONAL, use.options)
    return dcpl


def filters_of(dataset: h5py.Dataset) -> list[str]:
    """The names of the filters ``dataset`` is stored with (HDF5's own names), [] for none."""
    dcpl = dataset.id.get_create_plist()
    return [dcpl.get_filter(i)[3].decode(errors="replace") or str(dcpl.get_filter(i)[0])
            for i in range(dcpl.get_nfilters())]
