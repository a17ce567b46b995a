"""Copies of variables, for a checkpoint: pickled together, large buffers copied once, frames lazily.

Why pickle (protocol 5, https://peps.python.org/pep-0574/) rather than ``copy.deepcopy``:

- one pickle of several variables keeps their aliasing (the pickle memo): two names for one object
  are one object again after a restore;
- an object that cannot be copied says so (``TypeError: cannot pickle 'generator' object``): it is
  listed, not silently shared, as ``deepcopy`` does with what it cannot copy;
- NumPy arrays (and the frames made of them) hand over their memory out of band: each buffer is
  copied once here (memcpy speed), and a restore reads the copy without copying again;
- the size is known as it is written, so a budget holds, and a copy can go to disk as it is.

Kept by reference, never copied: functions, classes, modules (a restore rebinds the very object; a
function pickled by name would come back as whatever the name means *then*). pandas objects under
Copy-on-Write (always on from pandas 3, https://pandas.pydata.org/docs/user_guide/copy_on_write.html)
are kept as a shallow copy: free now, and pandas copies a block only when the live frame writes to
it, so a run that only reads a 1 GB frame costs nothing and one that changes it pays one copy.
"""

from __future__ import annotations

import io
import pickle
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

_KEPT = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type)


class OverBudget(Exception):
    """The copy would not fit in what the budget leaves."""


def _ref(index: int) -> Any:  # pragma: no cover - a name the pickle refers to; its loader swaps it
    raise RuntimeError("checkpoint references are read by their own loader")


def cow(obj: Any) -> bool:
    """A pandas DataFrame or Series whose pandas copies on write (pandas 3, or the option set)."""
    kind = type(obj)
    if kind.__module__.partition(".")[0] != "pandas" or kind.__name__ not in ("DataFrame", "Series"):
        return False
    pandas = sys.modules.get("pandas")
    if pandas is None:
        return False
    if int(str(pandas.__version__).split(".")[0]) >= 3:
        return True
    return getattr(pandas.options.mode, "copy_on_write", False) is True


class _Limited:
    """Where a pickle stream goes, counting: past ``limit`` bytes (buffers included), OverBudget."""

    def __init__(self, out: IO[bytes], limit: float) -> None:
        self.out, self.limit, self.size = out, limit, 0

    def write(self, data: Any) -> int:
        self.count(len(memoryview(data)))
        return self.out.write(data)

    def count(self, n: int) -> None:
        self.size += n
        if self.size > self.limit:
            raise OverBudget(f"{self.size:,} bytes")


class _Pickler(pickle.Pickler):
    """``full``: frames pickled whole (to disk), not kept as shallow copies; ``slots``: objects kept as
    they are (a rebound name's old object)."""

    def __init__(
        self,
        sink: _Limited,
        buffers: Callable[[pickle.PickleBuffer], None],
        refs: list[Any],
        *,
        full: bool = False,
        slots: tuple[Any, ...] = (),
    ) -> None:
        super().__init__(sink, protocol=5, buffer_callback=buffers)
        self.refs, self.full, self.slots = refs, full, slots

    def reducer_override(self, obj: Any) -> Any:
        if obj is _ref:
            return NotImplemented
        if isinstance(obj, _KEPT) or any(obj is slot for slot in self.slots):
            kept = obj
        elif not self.full and cow(obj):
            kept = obj.copy(deep=False)
        else:
            return NotImplemented
        self.refs.append(kept)
        return (_ref, (len(self.refs) - 1,))


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: IO[bytes], buffers: list[Any], refs: list[Any]) -> None:
        super().__init__(data, buffers=buffers)
        self.refs = refs

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_ref":
            return self.refs.__getitem__
        return super().find_class(module, name)


@dataclass
class Copy:
    """Several variables copied together: in memory (``stream``, ``buffers``, ``refs``) or on disk."""

    names: list[str]
    stream: bytes = b""
    buffers: list[bytearray] = field(default_factory=list)
    refs: list[Any] = field(default_factory=list)
    path: Path | None = None  # on disk: the stream then each buffer, at ``chunks``
    chunks: list[tuple[int, int]] = field(default_factory=list)
    disk: int = 0  # bytes on disk
    extra: int = 0  # memory its references hold alone now (see ``held``)

    @property
    def memory(self) -> int:
        return len(self.stream) + sum(len(b) for b in self.buffers) + self.extra

    @property
    def spillable(self) -> bool:
        """Writing it to disk frees memory: not a copy whose references the live variables still
        share (writing them would cost a disk write of what stays in memory anyway)."""
        if self.path is not None or not self.memory:
            return False
        return bool(self.extra) or all(isinstance(r, _KEPT) for r in self.refs)

    def load(self) -> dict[str, Any]:
        """The variables as they were copied (a restore: the copy is used up, not copied again)."""
        if self.path is None:
            return dict(_Unpickler(io.BytesIO(self.stream), list(self.buffers), self.refs).load())
        with self.path.open("rb") as f:
            parts = []
            for offset, length in self.chunks:
                f.seek(offset)
                part = bytearray(length)
                f.readinto(part)
                parts.append(part)
        return dict(_Unpickler(io.BytesIO(parts[0]), parts[1:], self.refs).load())

    def spill(self, path: Path, limit: float) -> None:
        """Move this copy to ``path`` (the shallow frame copies become full ones there); OverBudget past
        ``limit`` bytes, the copy then unchanged."""
        values = self.load() if self.extra or any(not isinstance(r, _KEPT) for r in self.refs) else None
        try:
            with path.open("wb") as f:
                if values is not None:  # copied anew, frames in full: their memory is let go
                    self.refs, self.chunks = _dump(values, f, limit, full=True)
                else:
                    self.chunks = _write([self.stream, *self.buffers], f, limit)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        self.disk = self.chunks[-1][0] + self.chunks[-1][1] if self.chunks else 0
        self.path, self.stream, self.buffers, self.extra = path, b"", [], 0

    def drop(self) -> None:
        self.stream, self.buffers, self.refs, self.extra = b"", [], [], 0
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None


def reference(name: str, value: Any) -> Copy:
    """``value`` kept as it is, for a name the run may only rebind or delete: the binding comes back
    with the very object; its memory counts once nothing else holds it (``held``), and a spill to
    disk pickles it then."""
    out = Copy([name])
    stream = io.BytesIO()
    _Pickler(_Limited(stream, float("inf")), lambda b: None, out.refs, slots=(value,)).dump({name: value})
    out.stream = stream.getvalue()
    return out


def copy(values: dict[str, Any], limit: float, path: Path | None = None) -> Copy:
    """``values`` copied together, in memory, or written to ``path``; OverBudget past ``limit`` bytes,
    a ``pickle`` error (or any other the objects raise) if one cannot be copied."""
    out = Copy(list(values))
    if path is not None:
        try:
            with path.open("wb") as f:
                out.refs, out.chunks = _dump(values, f, limit)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        out.path = path
        out.disk = out.chunks[-1][0] + out.chunks[-1][1] if out.chunks else 0
        return out
    stream = io.BytesIO()
    sink = _Limited(stream, limit)

    def keep(buffer: pickle.PickleBuffer) -> None:
        raw = buffer.raw()
        sink.count(raw.nbytes)
        out.buffers.append(bytearray(raw))  # the one copy: live memory may change after this

    _Pickler(sink, keep, out.refs).dump(values)
    out.stream = stream.getvalue()
    return out


def _dump(values: dict[str, Any], f: IO[bytes], limit: float, *, full: bool = False) -> tuple[list[Any], list[Any]]:
    """Pickle ``values`` to ``f``: the stream, then the buffers after it; (refs, chunks)."""
    stream = io.BytesIO()
    sink = _Limited(stream, limit)
    buffers: list[memoryview] = []
    refs: list[Any] = []

    def keep(buffer: pickle.PickleBuffer) -> None:
        raw = buffer.raw()
        sink.count(raw.nbytes)
        buffers.append(raw)

    _Pickler(sink, keep, refs, full=full).dump(values)
    chunks = _write([stream.getvalue(), *buffers], f, limit)
    return refs, chunks


def _write(parts: list[Any], f: IO[bytes], limit: float) -> list[tuple[int, int]]:
    chunks, offset = [], 0
    for part in parts:
        n = memoryview(part).nbytes
        if offset + n > limit:
            raise OverBudget(f"{offset + n:,} bytes")
        f.write(part)
        chunks.append((offset, n))
        offset += n
    return chunks


def held(copied: Copy, namespace: dict[str, Any]) -> int:
    """Bytes ``copied``'s references hold alone now: an old object no variable holds any more (its
    size as :func:`size_of` estimates it), and the blocks of shallow frame copies that the live
    frames no longer share (pandas copied them when the run wrote to them). A block that cannot be
    compared counts whole: the budget errs on the safe side."""
    live = list(namespace.values())
    theirs = [m for value in live if cow(value) for m in _memory(value)]
    total = 0
    for ref in copied.refs:
        if isinstance(ref, _KEPT) or any(ref is value for value in live):
            continue
        if not cow(ref):
            total += size_of(ref)
            continue
        for size, where in _memory(ref):
            if not any(_overlap(where, other) for _, other in theirs):
                total += size
    return total


def size_of(value: Any) -> int:
    """An object's memory, estimated cheaply: a frame's or an array's data, else its own size
    (``sys.getsizeof``: not what a container holds)."""
    try:
        if cow(value) or hasattr(value, "memory_usage"):
            usage = value.memory_usage(index=True, deep=False)
            return int(usage.sum() if hasattr(usage, "sum") else usage)
        nbytes = getattr(value, "nbytes", None)
        if isinstance(nbytes, int):
            return nbytes
        return sys.getsizeof(value)
    except Exception:
        return 0


def _memory(frame: Any) -> list[tuple[int, Any]]:
    """(bytes, where) of each block of a frame: a NumPy array, or the addresses of Arrow buffers."""
    out: list[tuple[int, Any]] = []
    for block in getattr(getattr(frame, "_mgr", None), "blocks", ()):
        values = block.values
        values = getattr(values, "_ndarray", values)  # pandas' own extension arrays (strings, categories)
        arrow = getattr(values, "_pa_array", None)
        if arrow is not None:
            where = {b.address for chunk in arrow.chunks for b in chunk.buffers() if b is not None}
            out.append((int(arrow.nbytes), where))
        else:
            out.append((int(getattr(values, "nbytes", 0)), values))
    return out


def _overlap(a: Any, b: Any) -> bool:
    if isinstance(a, set) or isinstance(b, set):
        return isinstance(a, set) and isinstance(b, set) and bool(a & b)
    numpy: Any = sys.modules.get("numpy")
    if numpy is None or not (isinstance(a, numpy.ndarray) and isinstance(b, numpy.ndarray)):
        return False
    return bool(numpy.may_share_memory(a, b))
