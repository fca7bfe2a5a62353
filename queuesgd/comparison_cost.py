"""The cost guard of :func:`~queuesgd.compare`: predictions counted and timed before any runs.

A log can name thousands of configurations, and a simulated prediction takes
seconds; :func:`check_count` and :func:`check_time` refuse, before anything
is predicted, more configurations than :data:`MAX_CONFIGURATIONS` or more
estimated seconds than :data:`MAX_SECONDS` (each prediction estimated by
:func:`prediction_seconds` from :data:`PREDICTION_SECONDS`), and say how to go on.

Examples
--------
>>> check_time([0.5, 0.5], ["ctmc", "ctmc"], MAX_SECONDS)
>>> check_time([20.0, 20.0], ["simulate", "simulate"], MAX_SECONDS)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: max_seconds: got 30.0; accepted: at least the estimated 40 s of 2 ...
"""

from __future__ import annotations

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.prediction_inputs import prediction_inputs
from queuesgd.schemes.base import Scheme
from queuesgd.sequence_checks import items
from queuesgd.workload import Cluster, Workload

__all__ = [
    "MAX_CONFIGURATIONS",
    "MAX_SECONDS",
    "PREDICTION_SECONDS",
    "check_count",
    "check_time",
    "prediction_seconds",
]

#: Most configurations one comparison predicts unless ``max_configurations=`` says more.
MAX_CONFIGURATIONS = 1000
#: Longest estimated run of the predictions, in seconds, unless ``max_seconds=`` says more.
MAX_SECONDS = 30.0
#: Rough seconds of one prediction per method, for the cost guard (measured on one CPU core with
#: resnet50 at 2-64 workers, rounded up): ``mva`` grows with the square of the workers (capped at
#: 3 s, where it switches algorithm), ``simulate`` with the iterations over the scheme's default.
PREDICTION_SECONDS = {
    "closed_form": 0.001,
    "mva": 0.003,
    "coarse": 0.002,
    "fine": 0.02,
    "ctmc": 0.5,
    "simulate": 2.0,
}


def prediction_seconds(
    scheme: Scheme, workload: Workload, cluster: Cluster, method: str, iterations: int | None
) -> float:
    """Rough seconds :func:`~queuesgd.predict` takes for one configuration (:data:`PREDICTION_SECONDS`).

    ``method`` may be ``"auto"`` (the scheme's choice for this configuration).

    Examples
    --------
    >>> import queuesgd as q
    >>> w = q.Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
    >>> twice = 2 * q.SyncPS.simulation_iterations
    >>> prediction_seconds(q.SyncPS(), w, q.Cluster(4, "1Gbit/s"), "simulate", twice)
    4.0

    The arguments are checked as :func:`~queuesgd.predict` checks them
    (:func:`~queuesgd.prediction_inputs.prediction_inputs`): ``iterations=-1`` is refused, not
    estimated as a negative time.
    """
    scheme, workload, cluster, method, _, iterations = prediction_inputs(
        scheme, workload, cluster, method, None, iterations
    )
    used = scheme.auto_method(workload, cluster)[0] if method == "auto" else method
    per = PREDICTION_SECONDS.get(used, 0.1)
    if used == "mva":
        per = min(3.0, per + 2e-6 * cluster.workers**2)
    if used == "simulate" and iterations is not None:
        per *= iterations / scheme.simulation_iterations
    return per


def check_count(n: int, max_configurations: int) -> None:
    """Refuse, before anything is built, more configurations than allowed (and say how to go on).

    Parameters
    ----------
    n : int
        The configurations of the measurements (one prediction each).
    max_configurations : int
        The most allowed (:data:`MAX_CONFIGURATIONS` unless the caller says more).

    Raises
    ------
    InvalidParameterError
        ``n > max_configurations``, naming ``max_configurations``.

    Examples
    --------
    >>> check_count(1000, MAX_CONFIGURATIONS)
    """
    n = _checks.integer("n", n, minimum=0)
    max_configurations = _checks.integer("max_configurations", max_configurations)
    if n > max_configurations:
        raise InvalidParameterError(
            "max_configurations",
            max_configurations,
            f"at least the {n:,} configurations of the measurements (each is one prediction): raise "
            "max_configurations= (CLI: --max-configurations), or check that no column varies from row "
            "to row (leave it out with ignore= / --ignore)",
        )


def check_time(seconds: list[float], methods: list[str], max_seconds: float) -> None:
    """Refuse, before any prediction, predictions estimated to run longer than allowed.

    Parameters
    ----------
    seconds : list of float
        The estimated seconds of each prediction (:func:`prediction_seconds`).
    methods : list of str
        The method of each prediction, named in the message.
    max_seconds : float
        The longest total allowed (:data:`MAX_SECONDS` unless the caller says more).

    Raises
    ------
    InvalidParameterError
        A total over ``max_seconds``, naming ``max_seconds`` and how to go on; ``seconds`` that are
        not finite numbers >= 0, ``methods`` that are not one name per estimate.

    Examples
    --------
    >>> check_time([0.5, 0.5], ["ctmc", "mva"], MAX_SECONDS)
    >>> check_time([0.5, -1.0], ["ctmc", "mva"], MAX_SECONDS)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: seconds[1]: got -1.0; accepted: a finite number >= 0
    """
    seconds = [
        _checks.positive(f"seconds[{i}]", x, allow_zero=True)
        for i, x in enumerate(items("seconds", seconds, "estimated seconds, one per prediction"))
    ]
    methods = [
        _checks.name(f"methods[{i}]", m)
        for i, m in enumerate(items("methods", methods, "method names, one per estimate"))
    ]
    if len(methods) != len(seconds):
        raise InvalidParameterError("methods", methods, f"one method per estimate ({len(seconds)} names)")
    max_seconds = _checks.positive("max_seconds", max_seconds)
    total, n = float(sum(seconds)), len(seconds)
    if total > max_seconds:
        used = ", ".join(dict.fromkeys(methods))
        raise InvalidParameterError(
            "max_seconds",
            max_seconds,
            f"at least the estimated {total:,.0f} s of {n:,} predictions (method {used}, about "
            f"{total / n:.3g} s each): raise max_seconds= (CLI: --max-seconds), use a faster method "
            "(closed_form or mva where the scheme has one), fewer simulated iterations, or fewer "
            "configurations",
        )
