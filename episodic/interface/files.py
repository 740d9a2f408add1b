"""Files read and written safely: outputs never follow a planted link and never race a check
against an open, inputs that are not regular files (a FIFO, a device) or that lead elsewhere (an
HDF5 external link) are refused, and an array's declared size is checked before it is allocated.

Writing: ``create_exclusive`` makes a new file (O_CREAT|O_EXCL|O_NOFOLLOW, owner-only unless asked);
``replacing`` gives a temporary name in the target's folder, made the same way, and moves the
finished file onto the target in one rename (a link at the target is replaced, never followed;
a failed write leaves the target as it was and no temporary file).
Reading: ``check_regular`` refuses what is not a regular file without opening it for reading (a
FIFO would block the reader); ``open_hdf5`` opens an HDF5 file after that check; ``member`` and
``check_links`` refuse external links inside it; ``read_array`` checks a dataset's declared bytes
(shape x dtype) against MAX_ARRAY_BYTES and, for a filtered (compressed) dataset, against its
stored bytes times MAX_RATIO before reading it. Every refusal is a HostileFileError (a ValueError)
with a one-line message naming the file.
"""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np

MAX_ARRAY_BYTES = 1 << 30   # bytes: the largest array read from a file at once (1 GiB)
MAX_RATIO = 1000            # declared / stored bytes of a compressed dataset above which it is refused
SMALL_ARRAY_BYTES = 1 << 24  # bytes: an array this small is read whatever its compression ratio
OWNER_ONLY = 0o600          # mode of a file created without another mode asked for (logs)
SHARED = 0o644              # mode of an export, a plot, a demonstration: readable by all, as under umask 022


class HostileFileError(ValueError):
    """A file that cannot be read or written safely; the message says why and what to do."""


# -- reading -----------------------------------------------------------------------------
def check_regular(path: str | Path) -> int:
    """The size in bytes of the regular file at ``path`` (a link to one is followed: it is only
    read); HostileFileError for a missing file, a FIFO, a device, a socket or a directory."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise HostileFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise HostileFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) \
            else "a device or socket"
        raise HostileFileError(f"{path} is {kind}, not a regular file; give a file")
    return st.st_size


def open_hdf5(path: str | Path) -> h5py.File:
    """The HDF5 file at ``path`` opened for reading, after ``check_regular`` (HostileFileError for
    what is not an HDF5 file)."""
    check_regular(path)
    try:
        return h5py.File(path, "r")
    except BlockingIOError:
        raise HostileFileError(f"{path} is open for writing in another process; try again once it is closed") from None
    except OSError as exc:
        raise HostileFileError(f"{path} is not a readable HDF5 file ({str(exc).splitlines()[0]})") from None


def member(group: h5py.Group, name: str):
    """``group[name]`` (None when absent), refused (HostileFileError) when it is an external link:
    following one opens another file, which may be a FIFO that blocks the reader forever."""
    link = group.get(name, getlink=True)
    if link is None:
        return None
    if isinstance(link, h5py.ExternalLink):
        raise HostileFileError(f"{group.file.filename}: {group.name.rstrip('/')}/{name} is an external link "
                               f"(to {link.filename}); files with external links are not read")
    return group[name]


def check_links(group: h5py.Group) -> None:
    """HostileFileError when anything below ``group`` is an external link."""
    found = group.visititems_links(lambda name, link: name if isinstance(link, h5py.ExternalLink) else None)
    if found is not None:
        raise HostileFileError(f"{group.file.filename}: {group.name.rstrip('/')}/{found} is an external link; "
                               f"files with external links are not read")


def read_array(dset: h5py.Dataset) -> np.ndarray:
    """The whole of ``dset``, read only when its declared bytes (shape x dtype) are at most
    MAX_ARRAY_BYTES and, when it is larger than SMALL_ARRAY_BYTES, at most MAX_RATIO times the bytes it
    takes in the file (a small compressed "bomb" that would expand to gigabytes is refused)."""
    declared = int(np.prod(dset.shape, dtype=object)) * dset.dtype.itemsize if dset.shape is not None else 0
    stored = dset.id.get_storage_size()
    where = f"{dset.file.filename}: {dset.name}"
    if declared > MAX_ARRAY_BYTES:
        raise HostileFileError(f"{where} declares {declared} bytes (shape {dset.shape} of {dset.dtype.itemsize}-byte "
                               f"values), over "
                               f"the {MAX_ARRAY_BYTES >> 20} MiB read at once; the file is damaged or not one of ours")
    if declared > SMALL_ARRAY_BYTES and declared > MAX_RATIO * stored:
        raise HostileFileError(f"{where} declares {declared} bytes stored in {stored}; a file whose data "
                               f"expands over {MAX_RATIO} times is not read")
    return dset[()]


def readable_rows(table: h5py.Dataset, block: int = 1024) -> tuple[np.ndarray, list[int]]:
    """The rows of the 1-D ``table`` that HDF5 can read, in order, and the positions of those it
    cannot: ``block`` rows at a time, a block that fails row by row. A table of text can hold
    rows whose text never reached the file (a run killed while its log was flushed: HDF5 writes a
    table's rows first and its metadata in address order, which can put the table's length on
    disk before the text the rows name, "bad heap index"); a whole read fails on them."""
    parts, lost = [], []
    for start in range(0, table.shape[0], block):
        try:
            parts.append(table[start : start + block])
        except OSError:
            for k in range(start, min(start + block, table.shape[0])):
                try:
                    parts.append(table[k : k + 1])
                except OSError:
                    lost.append(k)
    return (np.concatenate(parts) if parts else np.zeros(0, table.dtype)), lost


# -- writing -----------------------------------------------------------------------------
def create_exclusive(path: str | Path, mode: int = OWNER_ONLY) -> int:
    """A file descriptor of a new file at ``path``, opened for writing, created here (O_EXCL)
    and never through a link (O_NOFOLLOW): FileExistsError when anything, a link included, is
    there already."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def temporary_beside(path: str | Path, mode: int = OWNER_ONLY, suffix: str = ".partial") -> Path:
    """A new empty file in ``path``'s folder, named ``.<name>.<random><suffix>``, created
    exclusively and without following links (tempfile.mkstemp), with ``mode``."""
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        if mode != OWNER_ONLY:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return Path(name)


def publish(tmp: Path, path: str | Path, overwrite: bool) -> None:
    """Give the file ``tmp`` (from ``temporary_beside``) the name ``path`` in one step and drop
    the name ``tmp``: with ``overwrite`` whatever is at ``path`` is replaced (a link too, never
    followed); without, FileExistsError when anything is there (a hard link is made, which fails
    then; nothing that appeared since a check is replaced)."""
    if overwrite:
        os.replace(tmp, path)
    else:
        os.link(tmp, path, follow_symlinks=False)
        os.unlink(tmp)


@contextlib.contextmanager
def replacing(path: str | Path, overwrite: bool = True, mode: int = OWNER_ONLY,
              suffix: str = ".partial") -> Iterator[Path]:
    """A temporary path in ``path``'s folder (``temporary_beside``) to write the new file to;
    when the block ends without an exception it is published at ``path`` (``publish``: one
    step, readers see the old file or the new, a link at ``path`` is replaced, not followed),
    else removed. Without ``overwrite`` an existing ``path`` is refused (HostileFileError), also
    one that appeared while the file was written. ``suffix`` ends the temporary name (a writer
    that picks the format by the name's ending needs it)."""
    path = Path(path)
    if os.path.isdir(path):
        raise HostileFileError(f"{path} is a directory; give a file name")
    if os.path.lexists(path) and not overwrite:
        raise HostileFileError(f"{path} exists; choose another path, or replace it (--overwrite)")
    tmp = temporary_beside(path, mode, suffix)
    try:
        yield tmp
        try:
            publish(tmp, path, overwrite)
        except FileExistsError:
            raise HostileFileError(f"{path} was created by another process meanwhile; choose another path") from None
    finally:
        tmp.unlink(missing_ok=True)
