"""One live worker loop per coordination scheme, run inside :func:`~queuesgd.harness.launch.run_workers`.

:func:`run_scheme` runs the loop of one scheme in the calling worker process
and reports one record per step (workers) and per update (parameter server).
:func:`run` is the whole thing from the parent: launch, run, collect. Which
loop runs, with which parameters and world, is the scheme's row in
:data:`queuesgd.harness.live_schemes.LIVE` (nothing here tests a key). The
loops themselves: :mod:`~queuesgd.harness.allreduce_loops` (ring all-reduce),
:mod:`~queuesgd.harness.ps_loops` (PS worker, barrier PS),
:mod:`~queuesgd.harness.event_loops` (async/SSP PS, eager-SGD coordinator), on
the shared :mod:`~queuesgd.harness.plumbing`.

World layout: all-reduce schemes use ranks ``0 .. n-1`` as the workers;
parameter-server (PS) schemes use rank 0 as the PS (or, for eager-SGD, as the
coordinator of the partial collectives, which gloo lacks) and ranks
``1 .. n`` as the workers, so ``world_size = n + 1`` (:func:`world_size`).

Messages (PS schemes). Workers send ``[gradient..., tag]`` on the default
group, the tag being the parameter version the gradient was computed on
(``-1``: "I am done", the worker's last message); the PS sends
``[parameters..., version]`` back on a second gloo group. The PS receives in
a thread (``recv`` from any source, time-stamped on arrival), so it can wait
for "the first ``k`` gradients", "until the cutoff" or "until the round
ends" without polling.

What each loop does (the semantics of the matching :mod:`queuesgd.schemes`
model, emulated network times from a :class:`~queuesgd.harness.shaping.Shaper`):

- ``"ring-allreduce"``: compute; ``all_reduce`` (sum) / n; shaper
  ``"allreduce"`` counted from the last rank's arrival (every rank puts its
  arrival time in two extra slots of the reduced buffer); apply.
- ``"local-sgd"`` (``period`` H): compute and apply the worker's own gradient
  H times, then average the models (``all_reduce`` of the parameters / n,
  shaped as above); ``applied = n`` on every step record.
- ``"sync-ps"``, ``"backup-workers"`` (``backups``, ``stragglers``),
  ``"static-cutoff"`` (``cutoff``, ``stragglers``): per iteration the PS takes
  fresh gradients (tag = current version) until it has all ``n`` / the first
  ``n - b`` / the cutoff passed (at least one), drops stale ones, applies
  the average, waits for the model round ``2 alpha + (k G + p P)/B`` plus the
  measured update after the barrier, and sends the new parameters.
  ``stragglers="finish"`` (the scheme default): late workers finish, their
  gradient is dropped and answered with the current parameters;
  ``"cancel"``: every worker gets the new parameters at once and aborts a
  computation in progress.
- ``"async-ps"``: the PS applies each gradient as it arrives and replies to
  its sender; shaped as the closed network of
  :class:`~queuesgd.schemes.ps.async_ps.AsyncPS` (latency, then an FCFS uplink
  ``G/B``, the update, an FCFS downlink ``P/B``, latency).
- ``"stale-synchronous"`` (``staleness``): the same PS without link
  contention (``alpha + G/B`` and ``alpha + P/B`` per worker, as
  :class:`~queuesgd.schemes.ssp.ssp.StaleSynchronous` models), and a worker at
  clock ``c`` gets its reply only when every worker's clock is ``>= c - s``.
- ``"eager-sgd"`` (``mode``, ``max_stale``): rounds of a partial all-reduce
  emulated by the coordinator, as :class:`~queuesgd.schemes.eager.eager.EagerSGD`
  models: a round starts when the first gradient is in (solo), when a
  random initiator's is in (majority), or when all are in (every
  ``max_stale + 1``-th round); it lasts the ring all-reduce model time plus
  the update; gradients arriving during a round are buffered into the next
  and their workers restart at its end with the others that took part.
  ``collective="ring"``: the same rounds with the gradients in a real
  ``all_reduce`` among the workers (:mod:`~queuesgd.harness.eager_loops`);
  rank 0 only activates them, and worker 0 records each round
  (``role="round"``).

Records: every record has ``scheme``, ``role`` (``"worker"`` or ``"ps"``),
``step``, ``warmup`` (``True`` for the first ``warmup`` steps / iterations /
rounds), ``t0`` and ``t_end`` (:func:`time.time`), ``emulation`` and
``rank``. Worker records add ``worker`` (index ``0 .. n-1``), ``t_compute``,
``delay`` (injected), ``t_wait`` (from sending to getting parameters) or
``t_comm`` / ``t_shaped`` / ``t_update`` (all-reduce), ``version``,
``aborted`` (a computation cancelled by new parameters: its ``t_compute`` is
partial, leave it out of compute-time profiles); the all-reduce and PS
records add ``applied`` (gradients in the update) and ``t_update`` (seconds
to apply it). The last step's record of every all-reduce worker, and the
last iteration's (round's) record of a synchronous PS or eager-SGD
coordinator, add ``params_sum``, a checksum of the parameters.

PS fields: synchronous PS schemes -- ``t_barrier``, ``dropped``,
``contributors`` (worker indices), ``t_shaped``, ``version``; async-ps and
stale-synchronous -- one record per update with ``sender``, ``worker_step``,
``staleness`` (updates since the sender last read the parameters),
``t_apply``; eager-sgd -- one record per round with ``t_trigger``,
``round_end``, ``sync``, ``initiator``, ``fresh``, ``buffered``,
``contributors`` and ``staleness`` (a list, one per gradient applied).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from queuesgd import _checks
from queuesgd.harness.launch import WorkerContext, run_workers
from queuesgd.harness.layout import world_size
from queuesgd.harness.live_schemes import live_scheme
from queuesgd.harness.process_limit import check_processes
from queuesgd.harness.shaping import Shaper

__all__ = ["check_params", "run", "run_scheme", "world_size"]


def check_params(scheme_key: str, params: Mapping[str, Any] | None, workers: int) -> dict[str, Any]:
    """Validate a scheme's parameters; return them complete, with the scheme's defaults.

    The row's :meth:`~queuesgd.harness.live_schemes.LiveScheme.check_params`:
    the model's parameters with the :mod:`queuesgd.schemes` class's own
    defaults and checks (backup-workers ``backups=1, stragglers="finish"``;
    static-cutoff ``cutoff`` (or ``timeout``) seconds, ``stragglers="finish"``;
    eager-sgd ``mode="solo", max_stale=32``; stale-synchronous
    ``staleness=1`` (``math.inf`` is asynchronous); local-sgd ``period=8``),
    and the harness's own (eager-sgd ``collective="coordinator"``, or
    ``"ring"``: a real all-reduce among the workers, see
    :mod:`~queuesgd.harness.eager_loops`; ddp ``device="cpu"``). The other
    schemes take none.

    Examples
    --------
    >>> check_params("backup-workers", {"backups": 2}, workers=4)
    {'backups': 2, 'stragglers': 'finish'}
    >>> check_params("static-cutoff", {"cutoff": "30ms"}, 4)
    {'cutoff': 0.03, 'stragglers': 'finish'}
    >>> check_params("backup-workers", {"backups": 4}, 4)
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: backups: got 4; accepted: an integer 0 <= backups < workers (= 4)
    """
    return live_scheme(scheme_key).check_params(params, workers)


# ---- entry points -------------------------------------------------------------------------------
def run_scheme(
    ctx: WorkerContext,
    scheme_key: str,
    live: Any,
    steps: int,
    shaper: Shaper | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    warmup: int = 0,
    seed: int = 0,
) -> None:
    """Run this process's part of a scheme for ``steps`` steps, reporting one record per step.

    Call it from the function given to :func:`~queuesgd.harness.launch.run_workers`
    with ``world_size(scheme_key, n)`` processes (or use :func:`run`).

    Parameters
    ----------
    ctx : WorkerContext
        This process's context.
    scheme_key : str
        One of :data:`~queuesgd.harness.layout.LIVE_SCHEMES` (a row of
        :data:`~queuesgd.harness.live_schemes.LIVE`, whose loop runs).
    live : EmulatedCompute or RealModel
        The workload (:mod:`queuesgd.harness.live`).
    steps : int
        Steps per worker (async, SSP), iterations (synchronous PS schemes,
        all-reduce) or rounds (eager-SGD).
    shaper : Shaper, optional
        The emulated network (default: none, loopback speed).
    params : mapping, optional
        The scheme's parameters (:func:`check_params`).
    warmup : int
        Steps, iterations or rounds flagged ``"warmup": True`` in the records.
    seed : int
        Seed shared by all processes (compute times, random delays, initiators).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> from queuesgd.harness.live import EmulatedCompute
    >>> from queuesgd.harness.launch import run_workers
    >>> live = EmulatedCompute("5ms", "4KB")
    >>> recs = run_workers(lambda ctx: run_scheme(ctx, "sync-ps", live, 3), world_size("sync-ps", 2))
    >>> sorted((r["role"], r["step"]) for r in recs if r["role"] == "ps")
    [('ps', 0), ('ps', 1), ('ps', 2)]
    >>> [r["applied"] for r in recs if r["role"] == "ps"]
    [2, 2, 2]
    """
    row = live_scheme(scheme_key)
    steps = _checks.integer("steps", steps)
    warmup = _checks.integer("warmup", warmup, minimum=0)
    shaper = Shaper() if shaper is None else shaper
    p = row.check_params(params, row.workers(ctx.world_size))
    row.loop(ctx, row.key, live, steps, shaper, warmup, seed, p)


def run(
    scheme_key: str,
    live: Any,
    workers: int,
    steps: int,
    *,
    shaper: Shaper | None = None,
    params: Mapping[str, Any] | None = None,
    warmup: int = 0,
    seed: int = 0,
    timeout: float = 120.0,
    progress_timeout: float | None = 60.0,
    setup: Callable[[int], None] | None = None,
    on_record: Callable[[dict], None] | None = None,
    host: str = "127.0.0.1",
    force: bool = False,
) -> list[dict]:
    """Launch a scheme with ``workers`` workers for ``steps`` steps; return every record.

    The parameters are checked in the parent first (:func:`check_params`),
    and the processes against :func:`~queuesgd.harness.process_limit.process_limit`
    (8 per CPU core; ``force=True`` starts more); the rest are those of
    :func:`run_scheme` and :func:`~queuesgd.harness.launch.run_workers`.

    Raises
    ------
    WorkerFailure
        A process crashed, raised, or the run timed out (records kept in ``.partial``).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> from queuesgd.harness.live import EmulatedCompute
    >>> recs = run("ring-allreduce", EmulatedCompute("5ms", "4KB"), workers=2, steps=3)
    >>> sorted((r["rank"], r["step"], r["applied"]) for r in recs)
    [(0, 0, 2), (0, 1, 2), (0, 2, 2), (1, 0, 2), (1, 1, 2), (1, 2, 2)]
    """
    row = live_scheme(scheme_key)
    checked = row.check_params(params, workers)
    size = check_processes("workers", workers, row.world_size(workers), force=force)

    def fn(ctx: WorkerContext) -> None:
        run_scheme(ctx, row.key, live, steps, shaper, checked, warmup=warmup, seed=seed)

    return run_workers(
        fn,
        size,
        timeout=timeout,
        progress_timeout=progress_timeout,
        setup=setup,
        on_record=on_record,
        host=host,
        force=force,
    )
