"""The arguments of :func:`~queuesgd.predict` and :func:`~queuesgd.sweep`, checked before anything is solved.

One function, :func:`prediction_inputs`, so that the two check the same things the same way: the
scheme, the workload (or a catalog name), the cluster, the method, and the simulation's ``rng`` and
``iterations`` (:func:`queuesgd.run_options.run_options`, whatever the method).

Examples
--------
>>> from queuesgd import AsyncPS, Cluster
>>> scheme, workload, cluster, method, rng, iterations = prediction_inputs(
...     AsyncPS(), "resnet50", Cluster(2, "10Gbit/s"), "auto", 0, None)
>>> workload.name, method, rng, iterations
('resnet50', 'auto', 0, None)
"""

from __future__ import annotations

from typing import Any

from queuesgd.errors import InvalidParameterError
from queuesgd.run_options import run_options
from queuesgd.schemes.base import Scheme
from queuesgd.workload import Cluster, Workload

__all__ = ["check_cluster", "check_scheme", "prediction_inputs", "resolve_workload"]


def resolve_workload(workload: Any) -> Workload:
    """``workload`` if it is a :class:`~queuesgd.Workload`, or the catalog's workload of that name."""
    if isinstance(workload, str):
        from queuesgd.catalog import load_workload

        return load_workload(workload)
    if not isinstance(workload, Workload):
        raise InvalidParameterError("workload", workload, "a Workload or the name of a catalog workload")
    return workload


def check_scheme(scheme: Any) -> Scheme:
    """``scheme`` if it is a scheme object, else an error naming the registered schemes."""
    if not isinstance(scheme, Scheme):
        from queuesgd.registry import SCHEMES

        raise InvalidParameterError(
            "scheme",
            scheme,
            "a scheme object such as " + ", ".join(f"{c.__name__}()" for c in SCHEMES.values()),
        )
    return scheme


def check_cluster(cluster: Any) -> Cluster:
    """``cluster`` if it is a :class:`~queuesgd.Cluster`."""
    if not isinstance(cluster, Cluster):
        raise InvalidParameterError("cluster", cluster, "a Cluster")
    return cluster


def prediction_inputs(
    scheme: Any, workload: Any, cluster: Any, method: Any, rng: Any, iterations: Any
) -> tuple[Scheme, Workload, Cluster, str, Any, int | None]:
    """Every argument :func:`~queuesgd.predict` and :func:`~queuesgd.sweep` share, checked, in order.

    ``method`` may be ``"auto"``; ``rng`` and ``iterations`` are checked even
    where no method simulates (:func:`~queuesgd.run_options.run_options`).
    """
    scheme = check_scheme(scheme)
    workload = resolve_workload(workload)
    cluster = check_cluster(cluster)
    method = scheme.check_method(method, auto=True)
    rng, iterations = run_options(rng, iterations)
    return scheme, workload, cluster, method, rng, iterations
