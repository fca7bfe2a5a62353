"""The profile of eager-SGD's own loop: its restarts and its activations, on loopback, before any run.

:class:`~queuesgd.schemes.eager.eager.EagerSGD` restarts a waiting process at the
end of a round and starts the next round at its trigger. The harness's loop
(:mod:`~queuesgd.harness.eager_loops`, ``collective="ring"``) needs time for
both that the model's bare compute law does not hold: waking the worker's
thread at a round's end, its record, the hand-off of the gradient, and the
activation (a notification to rank 0 and its start message back). It also
computes beside its communication thread and rank 0 on the same cores. A
probe on 2026-11-25 (mlp, two workers, 1 Gbit/s) measured a step of
2.36 ms where two concurrent copies of the bare model took 2.06 ms, a
release 0.45 ms (median; 1.4 ms at the 90th percentile) after the round's
end, and 1.9 ms (mean) from a round's trigger to its start, 1.3 ms of it
until rank 0 had the notification.

:func:`measure_eager` runs that loop with the real model on loopback (no
emulated network, no straggler recipe) for ``k`` workers and returns, per
``k``:

- ``step``: every step from the end of the round that restarted the worker
  (or the run's start) to its hand-off of the next gradient: the compute law
  :class:`~queuesgd.schemes.eager.eager.EagerSGD` should restart a process with;
- ``activation``: every round's time from the hand-off that triggered it
  (the one whose notification rank 0 started the round on) until every
  worker has taken its start (``EagerSGD(activation=...)`` takes the mean);
- ``update``: the median time a worker's thread took to apply a round.

:func:`queuesgd.harness.apriori.predict_apriori` predicts eager-SGD from
these (:attr:`~queuesgd.harness.apriori.Profile.eager`), measured in the
profiling step, before any run.

Examples
--------
>>> recs = [
...     {"role": "activator", "step": 0, "t_trigger": 0.95, "trigger_worker": 0},
...     {"role": "round", "step": 0, "t_start": 1.0, "t_end": 1.5, "t_update": 0.01, "warmup": False},
...     {"role": "worker", "worker": 0, "step": 0, "t0": 0.0, "t_end": 1.6, "t_wait": 0.7,
...      "delay": 0.0, "buffered": False, "warmup": False},
...     {"role": "worker", "worker": 0, "step": 1, "t0": 1.6, "t_end": 2.5, "t_wait": 0.5,
...      "delay": 0.0, "buffered": False, "warmup": False},
... ]
>>> out = eager_loop_times(recs)
>>> [round(x, 12) for x in out["step"]], [round(x, 12) for x in out["activation"]], out["update"]
([0.5], [0.1], 0.01)
>>> [round(x, 12) for x in out["round"]]             # trigger (0.9) to the round's end (1.5)
[0.6]
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.harness.process_limit import check_processes

__all__ = ["eager_loop_times", "measure_eager"]


def eager_loop_times(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Steps (restart to hand-off), activations and the update of an eager-SGD ring run's records.

    Worker 0's step ``i`` hands its gradient off at ``t_end - t_wait``; it
    was restarted by the last round to end (worker 0's ``role="round"``
    records, on its own clock) before its step ``i - 1`` was released
    (``t_end``); the other workers' releases can come before worker 0 has
    recorded the round's end, so their steps are left out. A round's
    activation runs from its trigger, the hand-off whose notification rank 0
    started it on (``role="activator"``: ``trigger_worker``'s latest fresh
    hand-off before ``t_trigger``), to the moment the last worker's thread
    took the round's start (``role="starts"``; worker 0's ``t_start`` where
    they are absent): the all-reduce cannot begin before. Warm-up records
    are left out, and the injected delays taken off the steps. ``round``:
    every round's time from its trigger to its end at worker 0 (activation,
    all-reduce and update, as run).
    """
    rounds = sorted((r for r in records if r.get("role") == "round"), key=lambda r: r["t_end"])
    ends = [float(r["t_end"]) for r in rounds]
    workers: dict[int, list[Mapping[str, Any]]] = {}
    for r in records:
        if r.get("role") == "worker":
            workers.setdefault(int(r["worker"]), []).append(r)
    steps: list[float] = []
    hands: dict[int, list[float]] = {}
    for w, recs in workers.items():
        recs.sort(key=lambda r: r["step"])
        hands[w] = sorted(float(r["t_end"]) - float(r["t_wait"]) for r in recs if not r.get("buffered"))
        if recs[0]["worker"] != 0:  # the round ends are worker 0's: its own restarts only
            continue
        for prev, cur in zip(recs, recs[1:], strict=False):
            if cur.get("warmup"):
                continue
            hand = float(cur["t_end"]) - float(cur["t_wait"])
            i = bisect.bisect_right(ends, float(prev["t_end"])) - 1
            if i < 0:
                continue
            steps.append(hand - ends[i] - float(cur.get("delay") or 0.0))
    # A round's trigger is the notification rank 0 started it on: the latest fresh hand-off of its
    # trigger_worker before that notification arrived. Its all-reduce starts when the last worker's
    # thread has taken the start (worker 0's own, where the workers did not report theirs).
    starts = {int(r["step"]): float(r["t_start"]) for r in rounds if not r.get("warmup")}
    ends_of = {int(r["step"]): float(r["t_end"]) for r in rounds if not r.get("warmup")}
    for s in records:
        if s.get("role") == "starts":
            for step, t in zip(s["rounds"], s["t_start"], strict=True):
                if int(step) in starts:
                    starts[int(step)] = max(starts[int(step)], float(t))
    activation, whole = [], []
    for a in records:
        if a.get("role") != "activator" or int(a["step"]) not in starts:
            continue
        mine = hands.get(int(a["trigger_worker"]), [])
        j = bisect.bisect_right(mine, float(a["t_trigger"])) - 1
        if j >= 0:
            activation.append(starts[int(a["step"])] - mine[j])
            whole.append(ends_of[int(a["step"])] - mine[j])
    updates = [float(r["t_update"]) for r in rounds if not r.get("warmup")]
    return {
        "step": steps,
        "activation": activation,
        "update": float(np.median(updates)) if updates else 0.0,
        "round": whole,
    }


def measure_eager(
    kind: str,
    workers: Iterable[int],
    *,
    batch_size: int,
    rounds: int = 120,
    warmup: int = 10,
    model_options: Mapping[str, Any] | None = None,
    seed: int = 0,
    timeout: float = 300.0,
    force: bool = False,
) -> dict[int, dict[str, Any]]:
    """Run eager-SGD's ring loop with a harness model on loopback for each worker count; its loop times.

    Parameters
    ----------
    kind : str
        A harness model (``"mlp"``, ``"cnn"``, ``"resnet18s"``).
    workers : iterable of int
        The worker counts ``k`` to measure (``k + 1`` processes each: rank 0 activates).
    batch_size, model_options, seed
        As :func:`~queuesgd.harness.apriori.make_profile`.
    rounds, warmup : int
        Rounds per run, and how many are left out at its start.
    timeout : float
        Wall-clock limit per run, seconds.
    force : bool
        Start more processes than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it before any run starts.

    Returns
    -------
    dict
        ``k`` -> :func:`eager_loop_times` of its run (``step``,
        ``activation``, ``update``).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> out = measure_eager("mlp", [2], batch_size=8, rounds=20, warmup=2,
    ...                     model_options={"hidden": 16, "inputs": 32, "classes": 4})
    >>> len(out[2]["step"]) > 10 and min(out[2]["step"]) > 0 and min(out[2]["activation"]) > 0
    True
    """
    from queuesgd.harness import runners
    from queuesgd.harness.live import RealModel
    from queuesgd.harness.live_schemes.eager import EAGER

    ks = sorted({_checks.integer("workers", k) for k in workers})
    if ks:  # the largest run's processes, before any run
        check_processes("workers", ks, EAGER.world_size(ks[-1]), force=force)
    n_rounds = _checks.integer("rounds", rounds, minimum=10)
    warm = _checks.integer("warmup", warmup, minimum=0)
    live = RealModel(kind, batch_size=batch_size, **dict(model_options or {}))
    out = {}
    for k in ks:
        recs = runners.run(
            EAGER.key,
            live,
            k,
            n_rounds,
            params=EAGER.apriori,
            warmup=warm,
            seed=seed,
            timeout=timeout,
            force=force,
        )
        out[k] = eager_loop_times(recs)
    return out
