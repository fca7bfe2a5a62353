"""Gradient compression with its cost: a transform of the fine-grained all-reduce model, and its breakeven.

The what-if analysis of Zhang et al., *Is Network the Bottleneck of
Distributed Training?* (NetAI 2020; :func:`queuesgd.scaling.whatif`,
:meth:`queuesgd.workload.Workload.compressed`) divides the bytes on the wire
by a compression ratio and charges nothing for compressing and
decompressing. :class:`CompressedAllReduce` charges for both: on every
worker, per message (bucket),

- a **compression task** on the worker's compute stream right after the
  bucket's last gradient is ready -- it sits *in* the compute chain, between
  two backward tasks, so it delays the rest of the backward pass (on a GPU
  and on a CPU the compression kernels run on the compute stream);
- the collective on the compressed message, on the shared FIFO network;
- a **decompression task** before the update, on the compute stream after
  the backward pass (deferring it there is the best order on one stream: it
  feeds only the update, so running it earlier would only delay the
  compressions and collectives behind it).

Three methods, with their sizes and collectives (``S`` the uncompressed
message bytes, fp32 gradients):

- ``"topk"`` (Aji and Heafield 2017; Lin et al., DGC, 2018): keep a fraction
  ``d`` of the elements, values and int32 indices, ``2 d S`` bytes per rank.
  Sparse vectors with different supports cannot be summed in a ring, so the
  collective is a ring **all-gather** of every rank's values and indices,
  ``(n-1) 2 d S / B + (n-1) alpha``; decompression sums the ``n`` sparse
  vectors into a dense gradient (``n`` times the per-vector cost).
- ``"powersgd"`` (Vogels, Karimireddy and Jaggi, NeurIPS 2019): a tensor of
  ``E`` elements is viewed as an ``a x b`` matrix; rank ``r`` factors
  ``P`` (``a x r``) and ``Q`` (``b x r``) are all-reduced, one ring
  all-reduce of all the ``P`` of the message, then one of all the ``Q``.
  The profile has no shapes, so the matrix is taken **square**,
  ``a = b = sqrt(E)``: ``4 r sqrt(E)`` bytes for each factor. A tensor whose
  factors would not be smaller (``2 r sqrt(E) >= E``, biases and other
  small tensors) goes uncompressed in the first all-reduce, as PyTorch's
  PowerSGD hook sends such tensors uncompressed. The orthogonalisation and
  the matrix products are the compression cost.
- ``"fp16"``: half the bytes, one ring all-reduce; a cast each way.

Costs of compressing and decompressing are ``compress_time`` and
``decompress_time``: seconds per byte of *uncompressed* gradient (a number
or a unit string, ``"1ns"``), or a :class:`~queuesgd.workload.CostCurve` of
seconds against uncompressed bytes (:func:`measure_compression` measures
one with PyTorch on this machine). For ``"topk"``, ``decompress_time`` is the
cost of adding *one* sparse vector into the dense gradient.

Closed form (no overlap, one message; :meth:`CompressedAllReduce.formula`):
``T(B) = E[max X] + compress(S) + comm_c(S, B) + decompress(S) + u`` against
``T_0(B) = E[max X] + allreduce(S, B) + u``. The **breakeven** bandwidth,
above which compression stops paying, solves ``T(B) = T_0(B)``
(:func:`compression_breakeven`); with overlap and fusion the fine model's
breakeven is found by bisection (:func:`fine_breakeven`). See
``docs/compression.md``.

Where each piece lives (every name below is importable from here):
:mod:`~.compressed_allreduce` holds the scheme (its parameters, checks,
memory and roads); :mod:`~.compression_costs` the bytes each method sends
and the seconds it spends; :mod:`~.compression_graph` the task graph of
the ``fine`` road; :mod:`~.compression_breakeven` and
:mod:`~.compression_formula` the breakeven, numeric and symbolic;
:mod:`~.compression_measure` the PyTorch measurement of the costs.

Examples
--------
>>> from queuesgd import Workload, Cluster
>>> s = CompressedAllReduce("topk", density=0.01, compress_time="0.1ns", decompress_time="0.01ns")
>>> w = Workload(0.1, "100MB")
>>> round(compression_breakeven(w, Cluster(4, "10Gbit/s"), s) / 1e9, 4)   # GB/s; 1.44e8 B / 14 ms
10.2857
"""

from __future__ import annotations

from queuesgd.schemes.allreduce.compressed_allreduce import CompressedAllReduce
from queuesgd.schemes.allreduce.compression_breakeven import compression_breakeven, fine_breakeven
from queuesgd.schemes.allreduce.compression_costs import METHODS
from queuesgd.schemes.allreduce.compression_graph import COMPRESSION, compressed_allreduce_graph
from queuesgd.schemes.allreduce.compression_measure import measure_compression

__all__ = [
    "COMPRESSION",
    "METHODS",
    "CompressedAllReduce",
    "compressed_allreduce_graph",
    "compression_breakeven",
    "fine_breakeven",
    "measure_compression",
]
