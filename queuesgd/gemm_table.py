"""GEMM efficiency by shape: a measured (or user-given) table of matrix-product rates, interpolated.

A matrix product ``(m x k) @ (k x n)`` does ``2 m n k`` floating-point
operations; a GPU reaches its peak rate only on large ones. A
:class:`GemmTable` holds, for measured shapes, the *efficiency* -- achieved
FLOP/s over the device's peak -- and gives it for any shape:

- **One dimension, the product's volume.** The efficiency is interpolated
  linearly in ``log2(m n k)`` (rows of equal volume averaged: GPT-3's QKV
  product at ``t = 1``, ``2048 x 36864 x 12288``, and at ``t = 4`` with 8192
  tokens, ``8192 x 9216 x 12288``, measured 764 and 713 TFLOP/s), not per
  dimension. Why: a measured table is scattered, not a grid (its ``N`` and
  ``K`` are set by the hidden size and the tensor-parallel degree, so most
  ``(m, n, k)`` combinations are absent), and per-dimension interpolation
  of scattered points needs a triangulation whose answer depends on which
  neighbours it happens to join. On the H100 table shipped with queuesgd,
  leaving each shape out and predicting it from the others gives a median
  error of 3.8% (90th percentile 11%) in ``log2(m n k)`` against 4.3% (17%)
  for linear interpolation over a Delaunay triangulation in ``(log2 m,
  log2 n, log2 k)``: what sets a small product's rate is a fixed cost per
  kernel (about 19 us on the H100 at ``h = 1024``), which depends on the
  work, not on how it is laid out. The volume is also what the backward
  pass keeps: its two products (input and weight gradients) have the
  forward's volume, so each takes the forward's time and backward is
  exactly twice the forward. A batched product (``batch`` independent
  ones, attention's scores and context) is one kernel over
  ``batch x m n k``: its efficiency is read at that volume.
- **Outside the measured range** the efficiency is clamped to the nearest
  end's (the smallest or largest measured volume), as nccl-tests tables are
  in :mod:`queuesgd.busbw`. Above the range that is safe (large products
  sit on a plateau); *below* it, it overstates a tiny product's speed (its
  time is a fixed launch cost, so its efficiency keeps falling with its
  volume): :meth:`GemmTable.outside` says which shapes were clamped, and
  :meth:`~queuesgd.compute_model.ComputeModel.operation_times` reports it
  per operation.

Memory-bound operations (element-wise, softmax, layer norm) have their own
rows: achieved bandwidth against bytes moved, per kind (``"gelu"`` for
element-wise kernels, ``"layernorm"`` for layer norms, ``"softmax"`` for
the attention's softmax over rows of scores), interpolated in
``log2(bytes)`` and clamped the same way. A table without rows of a kind
times it on its stand-in's (:data:`STAND_INS`): a softmax whose row fits
on one multiprocessor (Megatron-LM's fused scale-mask-softmax kernels,
Narayanan et al., SC 2021, section 4.2) reads its input once and writes its
output once, as an element-wise kernel does, so a table that measured no
softmax times it on the ``"gelu"`` curve. (Tables written before 2026-11-27
have no softmax rows; until then queuesgd timed the softmax on the
``"layernorm"`` curve, PyTorch's layer norm: 1.6 to 2.8 times slower than the
element-wise curve on the H100, by size.)

The JSON format is the one ``shared/data/gpu/measure_gemm.py`` and
:func:`queuesgd.gemm_probe.probe_gemm` write: ``{"device", "torch", "date",
"dtype", "how", "gemm": [{"op", "h", "tp", "M", "K", "N", "seconds", "tflops", ...}],
"elementwise": [{"op", "numel", "seconds", "GBps"}]}``, optionally
``"peak_tflops"``. A GEMM row is read by its shape; its labels ``op``, ``h``
(hidden size) and ``tp`` (tensor-parallel degree) are optional, and a
layer product's (``qkv``, ``proj``, ``fc1``, ``fc2``) must be its shape's
(:func:`queuesgd.gemm_layer.check_row_labels`). The provenance fields are
kept (:attr:`GemmTable.provenance`). A key no probe writes (:data:`JSON_KEYS`)
is refused; a row's rate (``tflops``, ``GBps``) wins over its seconds.

Examples
--------
>>> t = load_gemm_table("h100-bf16")
>>> t.provenance["device"], t.peak_flops
('NVIDIA H100 80GB HBM3', 989400000000000.0)
>>> round(float(t.efficiency(2048, 36864, 12288)), 3)       # GPT-3's QKV at t = 1: 764 and 713 TFLOP/s
0.747
>>> round(float(t.efficiency(2048, 384, 1024)), 3)           # h = 1024's QKV at t = 8: 84 and 86 TFLOP/s
0.086
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import _checks, json_text
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_layer import check_row_labels

__all__ = [
    "BUILTIN",
    "JSON_KEYS",
    "MAX_ROWS",
    "MEMORY_KINDS",
    "STAND_INS",
    "GemmTable",
    "gemm_table_from_json",
    "load_gemm_table",
]

#: Tables shipped with queuesgd, by name: (file under ``queuesgd/data/gemm``, the device's dense peak
#: FLOP/s its efficiencies are relative to, where that peak comes from).
BUILTIN: dict[str, tuple[str, float, str]] = {
    "h100-bf16": (
        "h100-bf16.json",
        989.4e12,
        "NVIDIA H100 SXM5 dense bf16 peak (datasheet: 1,979 TFLOP/s with sparsity)",
    ),
}
#: The kinds of memory-bound rows: ``gelu`` stands for element-wise kernels, ``layernorm`` for layer
#: norms, ``softmax`` for the attention's softmax over rows of scores.
MEMORY_KINDS: tuple[str, ...] = ("gelu", "layernorm", "softmax")
#: The curve a kind is timed on where a table has no rows of its own (module docstring).
STAND_INS: dict[str, str] = {"softmax": "gelu"}
#: Most rows a table holds.
MAX_ROWS = 100_000
#: The keys of a table's JSON: those :func:`queuesgd.gemm_probe.probe_gemm` (with ``sustain`` and
#: ``window``), ``python -m queuesgd.flash_probe`` (alone or ``--table``) and
#: ``shared/data/gpu/measure_gemm.py`` write, and ``peak_tflops``.
JSON_KEYS: tuple[str, ...] = (
    "device", "torch", "date", "dtype", "how", "source", "peak_tflops", "truncated", "skipped",
    "gemm", "elementwise", "flash", "flash_how", "flash_device",
    "sustain", "window", "sustain_stopped", "sustained_seconds", "soak_product", "soak_calls", "soak_trace",
    "gpu_state",
)  # fmt: skip
#: Bytes per element of the data types a measured table names.
_ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}
#: Largest dimension of a product in a table or a query (far above any layer's).
MAX_DIMENSION = 2.0**40
_LOG2_MAX = math.log2(MAX_DIMENSION)
#: Most bytes a memory-bound row moves, and its log2.
_MAX_BYTES = 2.0**60
_LOG2_MAX_BYTES = math.log2(_MAX_BYTES)


def _log2_volume(m: Any, n: Any, k: Any, batch: Any = 1) -> np.ndarray:
    arrays = [np.asarray(x, dtype=float) for x in (m, n, k, batch)]
    for name, a in zip(("m", "n", "k", "batch"), arrays):
        if not np.all(np.isfinite(a)) or np.any(a < 1):
            raise InvalidParameterError(name, a if a.ndim == 0 else "an array", "numbers >= 1")
    # log2 of the exact product (integers up to 2**53 multiply exactly), so that equal volumes compare equal
    return np.log2(arrays[0] * arrays[1] * arrays[2] * arrays[3])


def _merged(x: np.ndarray, y: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Sorted unique ``x`` with the mean ``y`` of equal ``x``."""
    u, inv = np.unique(x, return_inverse=True)
    mean = np.bincount(inv, weights=y) / np.bincount(inv)
    return tuple(float(v) for v in u), tuple(float(v) for v in mean)


def _dimension(field: str, value: Any) -> float:
    """A measured product's dimension or element count: an integer from 1 to :data:`MAX_DIMENSION`.

    A GEMM of ``M = 1.5`` was never run: a fraction is refused, not read as a volume (``4.0`` is 4).
    """
    return float(_checks.integer(field, value, maximum=int(MAX_DIMENSION)))


@dataclass(frozen=True)
class GemmTable:
    """GEMM efficiency (achieved over peak FLOP/s) by shape, and memory-bound bandwidth by size.

    Build one with :meth:`from_rows`, :meth:`constant`, :func:`load_gemm_table`
    or :func:`gemm_table_from_json`; the fields are the merged, sorted curves,
    checked (built directly too) by the bounds :meth:`from_rows` puts on its rows.

    Attributes
    ----------
    volumes, efficiencies : tuple of float
        ``log2(m n k)`` of the measured shapes, increasing, and the mean
        efficiency there.
    peak_flops : float
        The peak FLOP/s the efficiencies are relative to.
    memory : tuple of (kind, log2 bytes, bytes/s curves)
        Per kind of :data:`MEMORY_KINDS`: ``log2`` of the bytes moved
        (read + written) and the achieved bandwidth.
    provenance : dict
        Where the table came from (device, software, date, how), as read.
    flash : (log2 volumes, efficiencies)
        Measured fused-attention kernels (FlashAttention), by their scores
        product's volume ``log2(batch q s d)``, efficiency counting the
        whole ``q x s`` square's ``4 batch q s d`` FLOPs; empty where none
        was measured (a flash core is then timed as its scores product).

    Examples
    --------
    >>> t = GemmTable.from_rows([(1024, 1024, 1024, 0.25), (4096, 4096, 4096, 0.75)], peak_flops=1e15)
    >>> float(t.efficiency(2048, 2048, 2048))          # halfway in log2(m n k)
    0.5
    >>> float(t.efficiency(64, 64, 64)), bool(t.outside(64, 64, 64))    # clamped below the range
    (0.25, True)
    >>> GemmTable((float("nan"),), (0.5,), 1e15)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: GemmTable.volumes[0]: got nan; accepted: a finite number in ...
    """

    volumes: tuple[float, ...]
    efficiencies: tuple[float, ...]
    peak_flops: float
    memory: tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...] = ()
    provenance: dict[str, Any] = field(default_factory=dict, compare=False)
    flash: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())

    def __post_init__(self) -> None:
        """Check every field by the rules :meth:`from_rows` and :func:`gemm_table_from_json` build them by."""
        object.__setattr__(self, "peak_flops", _checks.positive("GemmTable.peak_flops", self.peak_flops))
        n = "GemmTable"
        gemm = _curve(f"{n}.volumes", f"{n}.efficiencies", self.volumes, self.efficiencies, hi=3 * _LOG2_MAX)
        if not gemm[0]:
            raise InvalidParameterError(f"{n}.volumes", self.volumes, "a volume per efficiency, one at least")
        fl = self.flash
        if isinstance(fl, (str, bytes)) or not isinstance(fl, Sequence) or len(fl) != 2:
            raise InvalidParameterError(f"{n}.flash", fl, "(increasing log2 volumes, efficiencies)")
        flash = _curve(f"{n}.flash volumes", f"{n}.flash efficiencies", *fl, hi=4 * _LOG2_MAX)
        object.__setattr__(self, "volumes", gemm[0])
        object.__setattr__(self, "efficiencies", gemm[1])
        object.__setattr__(self, "flash", flash)
        object.__setattr__(self, "memory", _checked_memory(self.memory))
        object.__setattr__(self, "provenance", _checks.json_record(f"{n}.provenance", self.provenance))

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def from_rows(
        cls,
        rows: Iterable[Sequence[Any]],
        *,
        peak_flops: float,
        memory: Iterable[Sequence[Any]] = (),
        provenance: Mapping[str, Any] | None = None,
        rates: bool = False,
        flash: Iterable[Sequence[Any]] = (),
    ) -> GemmTable:
        """A table from ``(m, n, k, efficiency)`` rows (``(m, n, k, FLOP/s)`` with ``rates=True``).

        The dimensions are integers from 1 to :data:`MAX_DIMENSION` (a measured product's).

        ``memory`` rows are ``(kind, bytes, bytes/s)`` with ``kind`` one of
        :data:`MEMORY_KINDS`. ``flash`` rows are ``(batch, q, s, d,
        efficiency)`` (FLOP/s with ``rates=True``) of fused-attention kernels
        over ``batch`` heads. A rate above ``peak_flops`` is refused: the
        peak is then wrong.

        Examples
        --------
        >>> t = GemmTable.from_rows([(512, 512, 512, 100e12)], peak_flops=400e12, rates=True)
        >>> t.efficiencies
        (0.25,)
        """
        peak = _checks.positive("peak_flops", peak_flops)
        vol, eff = _rated_rows(rows, "rows", ("m", "n", "k"), peak, rates)
        if not vol:
            raise InvalidParameterError("rows", rows, "at least one (m, n, k, efficiency) row")
        volumes, efficiencies = _merged(np.array(vol), np.array(eff))
        fvol, feff = _rated_rows(flash, "flash", ("batch", "q", "s", "d"), peak, rates)
        curve = _merged(np.array(fvol), np.array(feff)) if fvol else ((), ())
        return cls(volumes, efficiencies, peak, _memory_curves(memory), dict(provenance or {}), curve)

    @classmethod
    def constant(
        cls, efficiency: float, *, peak_flops: float, memory: Iterable[Sequence[Any]] = ()
    ) -> GemmTable:
        """Every product at one efficiency (a user-given table without a shape effect).

        Examples
        --------
        >>> float(GemmTable.constant(0.5, peak_flops=1e15).efficiency([1, 10**6], 7, 3)[1])
        0.5
        """
        e = _checks.positive("efficiency", efficiency, maximum=1.0)
        return cls((0.0,), (e,), _checks.positive("peak_flops", peak_flops), _memory_curves(memory))

    # ---- queries -----------------------------------------------------------------------------
    def efficiency(self, m: Any, n: Any, k: Any, batch: Any = 1) -> Any:
        """Efficiency of ``batch`` products ``(m x k) @ (k x n)``: linear in ``log2(batch m n k)``, clamped.

        Vectorized (NumPy broadcasting over the arguments).
        """
        v = _log2_volume(m, n, k, batch)
        if len(self.volumes) == 1:
            return np.full(v.shape, self.efficiencies[0]) if v.ndim else np.float64(self.efficiencies[0])
        return np.interp(v, self.volumes, self.efficiencies)

    def outside(self, m: Any, n: Any, k: Any, batch: Any = 1) -> Any:
        """Whether a shape's volume lies outside the measured range (its efficiency clamped).

        A one-row or :meth:`constant` table covers every shape.
        """
        v = _log2_volume(m, n, k, batch)
        if len(self.volumes) == 1:
            return np.zeros(v.shape, dtype=bool) if v.ndim else np.False_
        return (v < self.volumes[0]) | (v > self.volumes[-1])

    def flash_efficiency(self, m: Any, n: Any, k: Any, batch: Any = 1) -> Any:
        """A fused-attention kernel's efficiency at its scores product ``batch`` x ``(m x k) @ (k x n)``.

        From the measured ``flash`` rows (linear in ``log2(batch m n k)``,
        clamped) where the table has them, else the GEMM curve at that volume
        (the stand-in).

        Examples
        --------
        >>> t = GemmTable.from_rows([(64, 64, 64, 0.8)], peak_flops=1e15,
        ...                         flash=[(16, 1024, 1024, 128, 0.3), (16, 4096, 4096, 128, 0.5)])
        >>> float(t.flash_efficiency(2048, 2048, 128, 16)), float(t.efficiency(2048, 2048, 128, 16))
        (0.4, 0.8)
        """
        fv, fe = self.flash
        if not fv:
            return self.efficiency(m, n, k, batch)
        v = _log2_volume(m, n, k, batch)
        if len(fv) == 1:
            return np.full(v.shape, fe[0]) if v.ndim else np.float64(fe[0])
        return np.interp(v, fv, fe)

    def flash_outside(self, m: Any, n: Any, k: Any, batch: Any = 1) -> Any:
        """Whether a fused-attention kernel's volume lies outside its measured rows (or the GEMM curve's)."""
        fv, _ = self.flash
        if not fv:
            return self.outside(m, n, k, batch)
        v = _log2_volume(m, n, k, batch)
        if len(fv) == 1:
            return np.zeros(v.shape, dtype=bool) if v.ndim else np.False_
        return (v < fv[0]) | (v > fv[-1])

    def bandwidth(self, kind: str, nbytes: Any) -> Any:
        """Achieved bandwidth (bytes/s) of a ``kind`` memory-bound op moving ``nbytes``, or None.

        Linear in ``log2(bytes)`` between the rows of that kind, clamped
        beyond them; where the table has no rows of that kind, its stand-in's
        (:data:`STAND_INS`: a softmax on the element-wise curve); ``None``
        where it has neither.

        Examples
        --------
        >>> rows = [("gelu", 2**20, 1e11), ("gelu", 2**30, 2e12)]
        >>> t = GemmTable.constant(0.5, peak_flops=1e15, memory=rows)
        >>> float(t.bandwidth("gelu", 2**25)), t.bandwidth("layernorm", 2**25)
        (1050000000000.0, None)
        >>> float(t.bandwidth("softmax", 2**25))        # no softmax rows: the element-wise curve
        1050000000000.0
        """
        kind = _checks.choice("kind", kind, MEMORY_KINDS)
        curves = {name: (sizes, bws) for name, sizes, bws in self.memory}
        curve = curves.get(kind, curves.get(STAND_INS.get(kind, kind)))
        if curve is None:
            return None
        b = np.log2(np.maximum(np.asarray(nbytes, dtype=float), 1.0))
        return np.interp(b, *curve)


def _numbers(field: str, values: Any) -> Sequence[Any]:
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values.tolist()
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
        raise InvalidParameterError(field, values, "a sequence of numbers")
    return values


def _curve(
    xname: str, yname: str, xs: Any, ys: Any, *, lo: float = 0.0, hi: float, top: float | None = 1.0
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(xs, ys)`` as float tuples: ``xs`` increasing log2 sizes in ``[lo, hi]``, one ``ys`` value (finite,
    > 0, at most ``top``) each: the bounds :meth:`GemmTable.from_rows` puts on its rows' sizes and rates."""
    xs, ys = _numbers(xname, xs), _numbers(yname, ys)
    if len(xs) != len(ys) or len(xs) > MAX_ROWS:
        accepted = f"one per {yname} value, at most {MAX_ROWS:,}"
        raise InvalidParameterError(xname, f"{len(xs)} values", accepted)
    accepted = f"a finite number in [{lo:g}, {hi:g}] (a log2 size)"
    if lo == -math.inf:
        accepted = f"a finite number, at most {hi:g} (a log2 size)"
    x = tuple(_checks.real(f"{xname}[{i}]", v, accepted=accepted) for i, v in enumerate(xs))
    for i, v in enumerate(x):
        if not lo <= v <= hi:
            raise InvalidParameterError(f"{xname}[{i}]", xs[i], accepted)
    if list(x) != sorted(set(x)):
        raise InvalidParameterError(xname, xs, "increasing log2 sizes, each once")
    y = tuple(_checks.positive(f"{yname}[{i}]", v, maximum=top) for i, v in enumerate(ys))
    return x, y


def _checked_memory(memory: Any) -> tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...]:
    """:attr:`GemmTable.memory` checked: a ``(kind, log2 bytes, bytes/s)`` curve per kind, each non-empty."""
    field_name = "GemmTable.memory"
    accepted = f"a sequence of (kind, increasing log2 bytes, bytes/s) curves, kinds of {MEMORY_KINDS} once"
    if isinstance(memory, (str, bytes, Mapping)) or not isinstance(memory, Sequence):
        raise InvalidParameterError(field_name, memory, accepted)
    out = []
    for j, curve in enumerate(memory):
        name = f"{field_name}[{j}]"
        if isinstance(curve, (str, bytes)) or not isinstance(curve, Sequence) or len(curve) != 3:
            raise InvalidParameterError(name, curve, "a (kind, log2 bytes, bytes/s) curve")
        kind = _checks.choice(f"{name}.kind", curve[0], MEMORY_KINDS)
        sizes, rates = _curve(
            f"{name} log2 bytes", f"{name} bandwidths", *curve[1:], lo=-math.inf, hi=_LOG2_MAX_BYTES, top=None
        )
        if not sizes:
            raise InvalidParameterError(f"{name} log2 bytes", curve[1], "at least one size")
        out.append((kind, sizes, rates))
    if len({kind for kind, *_ in out}) != len(out):
        raise InvalidParameterError(field_name, [kind for kind, *_ in out], accepted)
    return tuple(sorted(out))


def _memory_curves(
    rows: Iterable[Sequence[Any]],
) -> tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...]:
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise InvalidParameterError("memory", rows, "a sequence of (kind, bytes, bytes/s) rows")
    by_kind: dict[str, tuple[list[float], list[float]]] = {}
    for i, row in enumerate(rows):
        if i == MAX_ROWS:
            raise InvalidParameterError("memory", f"more than {MAX_ROWS:,} rows", f"at most {MAX_ROWS:,}")
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence) or len(row) != 3:
            raise InvalidParameterError(f"memory[{i}]", row, "a (kind, bytes, bytes/s) row")
        kind = _checks.choice(f"memory[{i}].kind", row[0], MEMORY_KINDS)
        nbytes = _checks.positive(f"memory[{i}].bytes", row[1], maximum=_MAX_BYTES)
        bw = _checks.positive(f"memory[{i}].bandwidth", row[2])
        xs, ys = by_kind.setdefault(kind, ([], []))
        xs.append(math.log2(nbytes))
        ys.append(bw)
    return tuple((kind, *_merged(np.array(xs), np.array(ys))) for kind, (xs, ys) in sorted(by_kind.items()))


def _rated_rows(
    rows: Iterable[Sequence[Any]], field_name: str, dims: tuple[str, ...], peak: float, rates: bool
) -> tuple[list[float], list[float]]:
    """``(log2 volumes, efficiencies)`` of rows ``(*dims, efficiency)`` (FLOP/s with ``rates``)."""
    what = f"({', '.join(dims)}, efficiency)"
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise InvalidParameterError(field_name, rows, f"a sequence of {what} rows")
    vol: list[float] = []
    eff: list[float] = []
    for i, row in enumerate(rows):
        name = f"{field_name}[{i}]"
        if i == MAX_ROWS:
            raise InvalidParameterError(field_name, f"more than {MAX_ROWS:,} rows", f"at most {MAX_ROWS:,}")
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence) or len(row) != len(dims) + 1:
            raise InvalidParameterError(name, row, f"a {what} row")
        size = math.prod(_dimension(f"{name}.{d}", row[j]) for j, d in enumerate(dims))
        if rates:
            rate = _checks.positive(f"{name}.flops", row[-1])
            if rate > peak:
                raise InvalidParameterError(
                    "peak_flops", peak, f"at least the measured rate {rate:.4g} FLOP/s of {name}"
                )
            e = rate / peak
        else:
            e = _checks.positive(f"{name}.efficiency", row[-1], maximum=1.0)
        vol.append(math.log2(size))
        eff.append(e)
    return vol, eff


def _rate(name: str, row: Mapping[str, Any], key: str, unit: float, work: float) -> float:
    """A row's rate: its ``key`` x ``unit`` where it has one (its seconds unused), else ``work / seconds``."""
    if key in row:
        if "seconds" in row:  # unused beside the rate, but a NaN or a word there is a damaged row
            _checks.positive(f"{name}.seconds", row["seconds"])
        return _checks.positive(f"{name}.{key}", row[key]) * unit
    if "seconds" not in row:
        raise InvalidParameterError(name, row, f"an object with {key} or seconds")
    return work / _checks.positive(f"{name}.seconds", row["seconds"])


def _rows(data: Mapping[str, Any], key: str, where: str, required: bool = False) -> list[Any]:
    """The list of rows under ``key`` (at most ``MAX_ROWS + 1``, so that the builder refuses the rest)."""
    rows = data.get(key)
    if rows is None and not required:
        return []
    if not isinstance(rows, list) or (required and not rows):
        what = "a non-empty list of rows with M, N, K, tflops" if required else "a list of row objects"
        raise InvalidParameterError(f"{where}.{key}", rows, what)
    return rows[: MAX_ROWS + 1]


def gemm_table_from_json(
    data: Mapping[str, Any], *, peak_flops: float | None = None, where: str = "table"
) -> GemmTable:
    """A :class:`GemmTable` from the parsed JSON of a measured table (see the module docstring).

    Each ``gemm`` row gives ``M``, ``N``, ``K`` and ``tflops`` or
    ``seconds``, the rate then ``2 M N K / seconds``, and may carry the
    labels ``op``, ``h``, ``tp`` (a layer product's must be its shape's:
    :func:`~queuesgd.gemm_layer.check_row_labels`); the dimensions and
    element counts below are integers from 1 to :data:`MAX_DIMENSION`
    (``M = 1.5`` is refused, ``8.0`` read as 8); each
    ``elementwise`` row ``op`` (:data:`MEMORY_KINDS`), ``numel`` and
    ``GBps`` or ``seconds``, bytes read + written being ``2 numel x``
    the ``dtype``'s bytes (the writer's convention; 2 where ``dtype`` is
    missing or unknown); each ``flash`` row (optional, a fused-attention
    kernel: :func:`queuesgd.flash_probe.probe_flash`) ``batch``, ``heads``,
    ``sequence``, ``head_dim`` and ``tflops`` or ``seconds``, the rate then
    ``4 batch heads sequence^2 head_dim / seconds``, the whole square's
    FLOPs. A row that gives both is read at its ``tflops`` (``GBps``), its
    ``seconds`` unread: the probes write both, the rate computed from the
    seconds by these formulas, so they agree (to 1.2e-16 relative in the
    shipped table). ``peak_flops`` defaults to the table's ``peak_tflops``.
    A key outside :data:`JSON_KEYS` (what the probes write) is refused: a
    misspelt ``"element_wise"`` would drop every memory row.

    Examples
    --------
    >>> data = {"device": "cpu", "gemm": [{"M": 8, "N": 8, "K": 8, "seconds": 1e-6}], "peak_tflops": 0.002}
    >>> gemm_table_from_json(data).efficiencies                  # 1024 FLOPs / 1 us = 1.024 GFLOP/s of 2
    (0.512,)
    >>> gemm_table_from_json({**data, "element_wise": []})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: table: got ['element_wise']; accepted: only the keys ...
    """
    if not isinstance(data, Mapping):
        raise InvalidParameterError(where, type(data).__name__, "a JSON object with a 'gemm' list")
    unknown = [k for k in data if k not in JSON_KEYS]
    if unknown:
        raise InvalidParameterError(where, unknown, f"only the keys the probes write: {', '.join(JSON_KEYS)}")
    if peak_flops is None:
        if "peak_tflops" not in data:
            raise InvalidParameterError(
                "peak_flops", None, f"the device's peak FLOP/s ({where} has no 'peak_tflops' field)"
            )
        peak = _checks.positive(f"{where}.peak_tflops", data["peak_tflops"]) * 1e12
    else:
        peak = _checks.positive("peak_flops", peak_flops)
    rows = []
    for i, r in enumerate(_rows(data, "gemm", where, required=True)):
        name = f"{where}.gemm[{i}]"
        if not isinstance(r, Mapping) or not all(d in r for d in "MNK"):
            raise InvalidParameterError(name, r, "an object with M, N, K and tflops or seconds")
        m, n, k = (_dimension(f"{name}.{d}", r[d]) for d in "MNK")
        check_row_labels(name, r, int(k), int(n))  # op, h, tp: the shape's, or refused
        rows.append((m, n, k, _rate(name, r, "tflops", 1e12, 2 * m * n * k)))
    dtype = data.get("dtype", "bfloat16")
    if not isinstance(dtype, str):
        raise InvalidParameterError(f"{where}.dtype", dtype, f"a data type's name ({', '.join(_ITEMSIZE)})")
    itemsize = _ITEMSIZE.get(dtype, 2)
    memory = []
    for i, r in enumerate(_rows(data, "elementwise", where)):
        name = f"{where}.elementwise[{i}]"
        if not isinstance(r, Mapping) or "numel" not in r or r.get("op") not in MEMORY_KINDS:
            raise InvalidParameterError(name, r, f"an object with op (one of {MEMORY_KINDS}), numel, GBps")
        nbytes = 2.0 * itemsize * _dimension(f"{name}.numel", r["numel"])
        memory.append((r["op"], nbytes, _rate(name, r, "GBps", 1e9, nbytes)))
    flash = []
    for i, r in enumerate(_rows(data, "flash", where)):
        name = f"{where}.flash[{i}]"
        if not isinstance(r, Mapping) or not all(x in r for x in ("batch", "heads", "sequence", "head_dim")):
            raise InvalidParameterError(name, r, "an object with batch, heads, sequence, head_dim, tflops")
        bh = _dimension(f"{name}.batch", r["batch"]) * _dimension(f"{name}.heads", r["heads"])
        sq, d = _dimension(f"{name}.sequence", r["sequence"]), _dimension(f"{name}.head_dim", r["head_dim"])
        flash.append((bh, sq, sq, d, _rate(name, r, "tflops", 1e12, 4 * bh * sq * sq * d)))
    keep = ("device", "torch", "date", "dtype", "how", "source", "peak_tflops", "truncated")
    provenance = _checks.json_record(f"{where} provenance", {k: data[k] for k in keep if k in data})
    return GemmTable.from_rows(
        rows, peak_flops=peak, memory=memory, provenance=provenance, rates=True, flash=flash
    )


def load_gemm_table(source: str | Path, *, peak_flops: float | None = None) -> GemmTable:
    """Load a measured table: a name of :data:`BUILTIN` (``"h100-bf16"``) or a JSON file's path.

    The file is read with the bounded reader (:func:`queuesgd._checks.read_bytes`).
    ``peak_flops`` defaults to the file's ``peak_tflops``, else, for a
    built-in table, the device's datasheet peak. A file that is not JSON
    Python reads (not UTF-8, not JSON, an integer of more than 4,300 digits,
    nesting deeper than the parser's recursion limit) is refused naming ``source``.

    Examples
    --------
    >>> t = load_gemm_table("h100-bf16")
    >>> len(t.volumes) < 240, sorted(k for k, *_ in t.memory)   # 240 rows, equal volumes merged
    (True, ['gelu', 'layernorm'])
    """
    if isinstance(source, str) and source in BUILTIN:
        file, peak, _ = BUILTIN[source]
        path: Any = Path(__file__).resolve().parent / "data" / "gemm" / file
        peak_flops = peak if peak_flops is None else peak_flops
    else:
        path = source
    raw = _checks.read_bytes("source", path)
    try:
        data = json_text.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, an int of > 4,300 digits: ValueErrors
        why = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise InvalidParameterError("source", str(path), f"a JSON GEMM table ({why})") from None
    return gemm_table_from_json(data, peak_flops=peak_flops, where="source")
