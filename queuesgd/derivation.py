"""``derive``: a scheme's throughput as a SymPy formula.

Examples
--------
>>> from queuesgd import SyncPS, derive
>>> f = derive(SyncPS(), compute="deterministic")
>>> sorted(f.free_names)
['B', 'G', 'P', 'alpha', 'm', 'n', 's', 't', 'u']
"""

from __future__ import annotations

import inspect
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.formula import Formula
from queuesgd.schemes.base import Scheme

__all__ = ["derive", "COMPUTE_LAWS", "MAX_EXPANDED_WORKERS", "default_compute"]

#: Most workers a scheme's formula is expanded for (:class:`~queuesgd.StaticCutoff`'s sum has one term
#: per worker); above, ``n`` is substituted into the formula in ``n`` instead (its sum kept unexpanded).
MAX_EXPANDED_WORKERS = 256

#: Compute-time laws ``derive`` knows: exponential (rate ``mu``) and deterministic (time ``t``).
COMPUTE_LAWS = ("exponential", "deterministic")


def default_compute(scheme: Scheme) -> str:
    """The compute law ``derive`` uses for ``scheme`` when none is given: its ``formula``'s default.

    ``"exponential"`` for every scheme but :class:`~queuesgd.Pipeline`, whose
    closed form holds for deterministic stages only.

    Examples
    --------
    >>> from queuesgd import Pipeline, SyncPS
    >>> default_compute(SyncPS()), default_compute(Pipeline(4, 8))
    ('exponential', 'deterministic')
    """
    default = inspect.signature(scheme.formula).parameters["compute"].default
    return default if default in COMPUTE_LAWS else COMPUTE_LAWS[0]


def derive(
    scheme: Scheme | str, compute: str = "exponential", *, workers: int | None = None, **options: Any
) -> Formula:
    """The throughput of ``scheme`` (samples per second) as a :class:`~queuesgd.formula.Formula`.

    Parameters
    ----------
    scheme : Scheme or str
        A scheme object, or its CLI name (``"sync-ps"``) for its default parameters.
    compute : {"exponential", "deterministic"}
        The law of a worker's compute time: exponential of rate ``mu`` (the
        expected maximum of ``n`` is ``H_n / mu``) or deterministic ``t``
        (a :class:`~queuesgd.Pipeline` has a formula for deterministic compute
        only; :func:`default_compute` is the law a scheme's formula takes by
        default, which the command line uses).
    workers : int, optional
        A fixed number of workers. Schemes whose formula needs it
        (:class:`~queuesgd.AsyncPS`: the MVA has a closed form only for a
        fixed population) or takes it (:class:`~queuesgd.StaticCutoff`: the
        sum expanded) build the formula for it; for the others the symbol
        ``n`` is replaced by it, and for a :class:`~queuesgd.Pipeline` (``S``
        stages times ``D`` replicas) ``S`` and ``D = workers / S``.
    **options
        Other keyword arguments of the scheme's ``formula`` (e.g.
        ``quantity=`` of :class:`~queuesgd.CompressedAllReduce`).

    Returns
    -------
    Formula

    Raises
    ------
    NotRepresentable
        The scheme has no closed form (the message says which method to use).
    InvalidParameterError
        ``workers`` is not an integer >= 1, does not fit the scheme (a pipeline
        needs a multiple of its stages), or ``options`` names a keyword the
        scheme's formula does not take.

    Examples
    --------
    >>> from queuesgd import derive
    >>> f = derive("ring-allreduce", compute="deterministic")
    >>> round(f.evaluate(n=8, t=0.1, m=32, S=100e6, B=1.25e9, alpha=0, u=0), 3)   # 256 / (0.1 + 0.14)
    1066.667
    >>> derive("sync-ps", workers=4).expr                       # n = 4: H_4 kept as harmonic(4)
    4*m/(2*alpha + 4*u/s + harmonic(4)/mu + (4*G + 4*P)/(B*s))
    """
    if isinstance(scheme, str):
        from queuesgd.registry import make

        scheme = make(scheme)
    if not isinstance(scheme, Scheme):
        raise InvalidParameterError("scheme", scheme, "a scheme object such as SyncPS(), or its name")
    compute = _checks.choice("compute", compute, COMPUTE_LAWS)
    takes = [name for name in inspect.signature(scheme.formula).parameters if name != "compute"]
    for name in options:
        if name not in takes or name == "workers":
            raise InvalidParameterError(
                name,
                options[name],
                f"a keyword of {type(scheme).__name__}.formula: {', '.join(takes) or 'none'}",
            )
    if workers is None:
        return scheme.formula(compute, **options)
    workers = _checks.integer("workers", workers)
    _check_workers(scheme, workers)
    if "workers" in takes and workers <= MAX_EXPANDED_WORKERS:
        return scheme.formula(compute, workers=workers, **options)
    try:
        f = scheme.formula(compute, **options)
    except NotRepresentable:
        if "workers" not in takes:
            raise
        return scheme.formula(compute, workers=workers, **options)  # its own guard says how to go on
    if "n" in f.symbols:
        return _named(_at_workers(f, workers), f"n = {workers}")
    return _pipeline_workers(scheme, f, workers)


def _at_workers(f: Formula, workers: int) -> Formula:
    """``f`` with ``n = workers``, harmonic numbers ``H_N`` kept as ``harmonic(N)``.

    SymPy would write ``H_N`` as an exact fraction, whose digits (and time)
    grow with ``N``: 40 digits at 100 workers, 45 s at 30,000.
    :meth:`~queuesgd.formula.Formula.evaluate` and ``.doit()`` still evaluate it.
    """
    import sympy

    n = f.symbols["n"]
    held = {
        h: sympy.harmonic(h.args[0].subs(n, workers), evaluate=False) for h in f.expr.atoms(sympy.harmonic)
    }
    return Formula(f.expr.xreplace(held), f.symbols, f.meaning, f.name, f.assumptions).subs(n=workers)


def _check_workers(scheme: Scheme, workers: int) -> None:
    """Refuse ``workers`` the scheme cannot run on (``backups >= workers``: a formula of 0 samples/s).

    :meth:`~queuesgd.schemes.base.Scheme.check` asks a workload too; derive has
    none, so only the refusals about the workers are kept (one about the
    workload's layers is not the formula's: it has no layers).
    """
    from queuesgd.workload import Cluster, Workload

    try:
        scheme.check(Workload(1.0, 1.0), Cluster(workers, 1.0))
    except InvalidParameterError as err:
        if "workers" in err.field.lower() or "workers" in err.accepted:
            raise


def _named(f: Formula, values: str) -> Formula:
    """``f`` whose name says which values were substituted."""
    return Formula(f.expr, f.symbols, f.meaning, f"{f.name}, {values}", f.assumptions)


def _pipeline_workers(scheme: Scheme, f: Formula, workers: int) -> Formula:
    """``f`` of a pipeline of ``S`` stages on ``workers = S x D`` workers (a multiple of ``S``: its
    :meth:`~queuesgd.Pipeline.check`); a scheme without ``n`` refuses."""
    stages = getattr(scheme, "stages", None)
    if not {"S", "D"} <= set(f.symbols) or not isinstance(stages, int):
        raise InvalidParameterError(
            "workers", workers, f"none for {type(scheme).__name__}: its formula has no symbol for workers"
        )
    return _named(f.subs(S=stages, D=workers // stages), f"S = {stages}, D = {workers // stages}")
