"""PyTorch DistributedDataParallel's gradient buckets, as a fusion policy of the fine-grained model.

DDP packs the gradients into buckets and all-reduces each bucket, in bucket
order, as soon as all its gradients are ready (wait-free back-propagation with
tensor fusion). Its rule is *assignment by size* (``compute_bucket_assignment_by_size``
in ``torch/csrc/distributed/c10d/reducer.cpp``, callable from Python as
``torch._C._distributed_c10d._compute_bucket_assignment_by_size``): tensors are
taken in order, each adds its bytes (``numel * element_size``) to the open
bucket, and the bucket closes once its bytes reach the current limit
(``>=``). The limits come from a list: the first bucket uses the first one,
every later bucket the next one, and the last limit repeats. Tensors of
different dtypes or devices go to separate buckets; here all gradients have
one dtype, so the buckets are contiguous ranges of the order used.

Which order and which limits (PyTorch 2.13, ``torch/nn/parallel/distributed.py``
and the C++ ``Reducer``):

- *Steady state* (from the second iteration on): after the first backward
  pass, ``Reducer::rebuild_buckets`` (called from Python as
  ``reducer._rebuild_buckets()`` at the start of the next forward pass)
  reassigns the buckets over the parameters **in the order their gradients
  became ready** with the limits ``[first_bucket_bytes_cap, bucket_bytes_cap]``.
  ``bucket_bytes_cap = int(bucket_cap_mb * 2**20)`` (25 MiB by default) and
  ``first_bucket_bytes_cap`` is ``dist._DEFAULT_FIRST_BUCKET_BYTES`` (1 MiB)
  when ``bucket_cap_mb`` is left at its default, else **equal to the bucket
  cap** (an explicit ``bucket_cap_mb`` turns the small first bucket off). The
  rebuilt buckets keep the ready order (no re-sorting), so the first bucket
  holds the first gradients to be ready. With the environment variable
  ``DDP_SET_LAST_BUCKET_CAP=1`` the assignment runs over the reversed ready
  order and the buckets are reversed back, so that the small bucket is the
  *last* one (``small_last=True`` here).
- *First iteration*: DDP assigns over the parameters in **reverse
  registration order**; in 2.13, unless ``find_unused_parameters=True`` or
  ``static_graph=True`` is given, it does not bucket at all before the rebuild
  (one bucket, limit ``sys.maxsize``). A :class:`~queuesgd.workload.Workload`
  carries the ready order only, so this module models the steady state.

:func:`ddp_buckets` gives the steady-state buckets of a workload whose layers
are in backward (gradient-ready) order, as the
:class:`~queuesgd.schemes.fine.fine.Bucket` ranges that
:func:`~queuesgd.schemes.fine.fine.allreduce_graph` consumes; the fine-grained
schemes use it with ``fusion="ddp"``. See ``docs/fine-grained.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.fine.fine import Bucket, require_layers

if TYPE_CHECKING:
    from queuesgd.workload import Workload

__all__ = ["DEFAULT_BUCKET_CAP", "DEFAULT_FIRST_BUCKET", "assign_by_size", "ddp_buckets", "parse_cap"]

#: DDP's default bucket cap (``bucket_cap_mb=25``), bytes.
DEFAULT_BUCKET_CAP = 25 * 1024 * 1024
#: DDP's small first bucket (``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``), bytes.
DEFAULT_FIRST_BUCKET = 1024 * 1024


def parse_cap(field: str, value: float | str) -> float:
    """A bucket size limit in bytes, ``>= 0`` (``0`` puts every tensor in a bucket of its own, as in DDP).

    Examples
    --------
    >>> parse_cap("bucket_cap", "25MiB"), parse_cap("first_bucket", 0)
    (26214400.0, 0.0)
    >>> parse_cap("bucket_cap", -1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: bucket_cap: got -1; accepted: a size in bytes >= 0...
    """
    accepted = "a size in bytes >= 0, at most 1 EiB: a number or a string such as '25MiB'"
    try:
        return _checks.size(field, value)
    except InvalidParameterError:
        raise InvalidParameterError(field, value, accepted) from None


def assign_by_size(sizes: Sequence[float] | np.ndarray, limits: Sequence[float]) -> list[tuple[int, int]]:
    """DDP's assignment by size over tensors of one dtype: ``(first, last)`` index ranges, inclusive.

    Tensors are taken in the given order; each adds its bytes to the open
    bucket, which closes as soon as it holds ``>= limit`` bytes, the limit
    being ``limits[k]`` for the ``k``-th bucket and ``limits[-1]`` from then
    on; the last bucket takes whatever is left. This is
    ``compute_bucket_assignment_by_size`` of PyTorch's reducer for tensors of
    a single dtype and device, with the tensors given in the order the
    buckets are to follow.

    Parameters
    ----------
    sizes : sequence of float
        Bytes of each tensor, ``>= 0``.
    limits : sequence of float
        Size limits, bytes, ``>= 0``; at least one.

    Returns
    -------
    list of (int, int)

    Examples
    --------
    >>> assign_by_size([12, 12, 12, 20, 4], [16, 24])   # 24 >= 16, then 32 >= 24, then the rest
    [(0, 1), (2, 3), (4, 4)]
    """
    s = np.asarray(sizes, dtype=float)
    if s.ndim != 1 or s.size == 0 or not np.all(np.isfinite(s)) or np.any(s < 0):
        raise InvalidParameterError("sizes", sizes, "a non-empty sequence of byte counts >= 0")
    caps = [parse_cap(f"limits[{i}]", v) for i, v in enumerate(limits)]
    if not caps:
        raise InvalidParameterError("limits", limits, "at least one size limit in bytes")
    out: list[tuple[int, int]] = []
    first, acc = 0, 0.0
    for i, size in enumerate(s):
        acc += size
        if acc >= caps[min(len(out), len(caps) - 1)]:
            out.append((first, i))
            first, acc = i + 1, 0.0
    if first < s.size:
        out.append((first, int(s.size) - 1))
    return out


def ddp_buckets(
    workload: Workload,
    bucket_cap: float | str = "25MiB",
    first_bucket: float | str | None = "1MiB",
    *,
    small_last: bool = False,
) -> tuple[Bucket, ...]:
    """DDP's buckets in steady state (after the rebuild): assignment by size over the ready order.

    The workload's layers are in backward order, the order in which their
    gradients become ready, which is the order DDP's reducer records in the
    first iteration and buckets by from the second on. The limits are
    ``[first_bucket, bucket_cap]``: the first bucket (the first gradients to
    be ready) closes at ``first_bucket`` bytes, every later one at
    ``bucket_cap``. All gradients are taken to share one dtype, so every
    bucket is a contiguous range of layers. Before the rebuild (the first
    iteration) DDP buckets differently; see the module's notes.

    Parameters
    ----------
    workload : Workload
        Needs a per-tensor profile (``layers``), in backward order.
    bucket_cap : float or str
        ``bucket_cap_mb`` in bytes (``"25MiB"``, DDP's default); ``>= 0``.
        DDP truncates ``bucket_cap_mb * 2**20`` to an integer.
    first_bucket : float, str or None
        The first bucket's limit: ``"1MiB"`` when DDP's ``bucket_cap_mb`` is
        left at its default; ``None`` for the same limit as ``bucket_cap``,
        which is what DDP does when ``bucket_cap_mb`` is given.
    small_last : bool
        The small bucket last instead of first (DDP with the environment
        variable ``DDP_SET_LAST_BUCKET_CAP=1``): the assignment runs over the
        reversed ready order.

    Returns
    -------
    tuple of Bucket
        In sending order; ``ready`` is when the bucket's last gradient is ready.

    Examples
    --------
    >>> from queuesgd import Workload, Layer
    >>> layers = [Layer(f"t{i}", "600KiB", "2ms") for i in range(6)]
    >>> w = Workload(0.05, None, layers=layers)
    >>> [(b.first, b.last, b.nbytes / 2**10) for b in ddp_buckets(w, "1.5MiB", "1MiB")]
    [(0, 1, 1200.0), (2, 4, 1800.0), (5, 5, 600.0)]
    >>> [(b.first, b.last) for b in ddp_buckets(w, "1.5MiB", "1MiB", small_last=True)]
    [(0, 0), (1, 3), (4, 5)]
    >>> round(ddp_buckets(w)[0].ready, 9)          # 1 MiB reached by the second gradient, at 4 ms
    0.004
    """
    cap = parse_cap("bucket_cap", bucket_cap)
    first_cap = cap if first_bucket is None else parse_cap("first_bucket", first_bucket)
    small_last = _checks.boolean("small_last", small_last)
    layers = require_layers(workload)
    sizes = np.array([layer.gradient_bytes for layer in layers], dtype=float)
    ready = np.cumsum([layer.backward_time for layer in layers])
    n = len(layers)
    if small_last:
        ranges = [(n - 1 - b, n - 1 - a) for a, b in reversed(assign_by_size(sizes[::-1], [first_cap, cap]))]
    else:
        ranges = assign_by_size(sizes, [first_cap, cap])
    return tuple(Bucket(a, b, float(sizes[a : b + 1].sum()), float(ready[b])) for a, b in ranges)
