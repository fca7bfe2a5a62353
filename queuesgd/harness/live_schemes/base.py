"""The contract of a scheme the harness runs live: :class:`LiveScheme`, one row of the table.

A row says everything the harness needs to know about one live scheme, so
that the runners, the campaigns, the a-priori protocol and the CLI ask the row
instead of testing the scheme's key. Step by step, a :class:`LiveScheme`:

1. names the model (``scheme``: the registered :mod:`queuesgd.schemes` class
   the harness's runs are predicted with) and its ``key`` (the class's
   registry key, or a name of its own where the live runner is another thing
   the same model describes, as DDP is a ring all-reduce);
2. declares its ``layout``: ``"allreduce"`` (ranks ``0 .. n-1`` are the
   workers) or ``"ps"`` (rank 0 is the parameter server or coordinator,
   ranks ``1 .. n`` the workers);
3. declares its parameters: ``params`` are the model's (their defaults and
   their validation are the scheme class's own: :meth:`check_params`
   constructs the class with them), ``renamed`` maps a live name to the
   class's field where the two differ, ``harness`` are the harness's own
   (:class:`Param`), and ``check`` the checks that need the worker count;
4. has a worker ``loop``: ``loop(ctx, key, live, steps, shaper, warmup,
   seed, params)``, run in every process of the world (:class:`Loop`);
5. says how its updates are counted (``role``: the records that carry them,
   ``"worker"``, ``"ps"`` or ``"round"``; ``applied``: gradients per update
   of the parameter server), which network calibration it takes
   (:meth:`calibration`: the role's, or ``calibrates`` where the row names
   another, as FSDP's collectives and a pipeline's link do), and which
   profile the a-priori protocol feeds it
   (``profile``, ``lock_step``; ``apriori``: the parameters the protocol
   needs, None where it does not run the scheme; ``same_run``: whether a
   run's own records time the compute apart, so that ``queuesgd validate``
   can profile and predict a run from them);
6. builds its model: :meth:`~LiveScheme.model` ``(params, inputs) -> (Scheme,
   method)``, by its ``model_fn`` (default: the class with the checked
   parameters, ``"auto"``), from the checked parameters and what was measured about the network
   (:class:`ModelInputs`); ``shared_link`` and ``duplex`` say which of those
   measurements the model reads.

Examples
--------
>>> from queuesgd.harness.live_schemes import live_scheme
>>> row = live_scheme("backup-workers")
>>> row.layout, row.world_size(4), row.check_params({"backups": 2}, 4)
('ps', 5, {'backups': 2, 'stragglers': 'finish'})
>>> row.model({"backups": 2, "stragglers": "finish"}, ModelInputs(emulation="app-shaper"))
(BackupWorkers(backups=2, stragglers='finish', link='phase', send_buffer=0.0), 'auto')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.base import Scheme

__all__ = [
    "CALIBRATIONS",
    "LAYOUTS",
    "ROLES",
    "Loop",
    "LiveScheme",
    "ModelInputs",
    "Param",
    "real_model",
    "real_model_loop",
]

#: World layouts: all-reduce (ranks = workers) or parameter server (rank 0 + workers).
LAYOUTS: tuple[str, ...] = ("allreduce", "ps")
#: Roles of the records that carry a live scheme's updates (see :meth:`LiveScheme.update_role`).
ROLES: tuple[str, ...] = ("worker", "ps", "round")
#: Network calibrations a row takes: the workers' all-reduce, the PS's (or a pipeline boundary's)
#: point-to-point link, FSDP's all-gathers and reduce-scatters.
CALIBRATIONS: tuple[str, ...] = ("allreduce", "p2p", "sharded")


class Loop(Protocol):
    """A live scheme's worker loop, run in every process of the world.

    ``key`` is the row's (every record's ``scheme``), ``live`` the workload
    (:mod:`queuesgd.harness.live`), ``params`` the checked parameters.
    """

    def __call__(
        self,
        ctx: Any,
        key: str,
        live: Any,
        steps: int,
        shaper: Any,
        warmup: int,
        seed: int,
        params: Mapping[str, Any],
    ) -> None: ...


@dataclass(frozen=True)
class Param:
    """A parameter of the harness's own (not the model's): its name, default and check.

    Examples
    --------
    >>> p = Param("period", 8, lambda v: _checks.integer("period", v, minimum=1))
    >>> p.check(p.default)
    8
    """

    name: str
    default: Any
    check: Callable[[Any], Any]
    doc: str = ""


@dataclass(frozen=True)
class ModelInputs:
    """What was measured about the network a live run used, for :meth:`LiveScheme.model`.

    Attributes
    ----------
    emulation : str
        ``"app-shaper"`` (the application-level shaper waits out the phase
        model's round), or a real or ``tc tbf``-shaped network (``"none"``,
        ``"netns-tbf"`` ...) where a push leaves as soon as its worker is done.
    duplex : float
        The share of its rate each direction of the PS's link keeps while
        both transmit (1: full duplex).
    send_buffer : float
        Bytes of a reply the PS's socket buffer takes at once.
    activation : float
        eager-SGD: seconds from a round's trigger to its start.

    Examples
    --------
    >>> ModelInputs().shared, ModelInputs(emulation="app-shaper").shared
    (True, False)
    """

    emulation: str = "none"
    duplex: float = 1.0
    send_buffer: float = 0.0
    activation: float = 0.0

    @property
    def shared(self) -> bool:
        """Whether pushes meet on the PS's link as they arrive (every network but the app shaper)."""
        return self.emulation != "app-shaper"


def _default_model(row: LiveScheme, params: Mapping[str, Any], inputs: ModelInputs) -> tuple[Scheme, str]:
    return row.make(params), "auto"


@dataclass(frozen=True)
class LiveScheme:
    """One scheme the harness runs live (see the module docstring for the contract, field by field).

    Examples
    --------
    >>> from queuesgd.harness.live_schemes import live_scheme
    >>> row = live_scheme("static-cutoff")
    >>> row.check_params({"timeout": "30ms"}, 4)
    {'cutoff': 0.03, 'stragglers': 'finish'}
    >>> row.make({"cutoff": 0.03, "stragglers": "finish"}).timeout
    0.03
    """

    scheme: type[Scheme]
    layout: str
    loop: Loop
    model_fn: Callable[[Mapping[str, Any], ModelInputs], tuple[Scheme, str]] | None = None
    params: tuple[str, ...] = ()
    renamed: Mapping[str, str] = field(default_factory=dict)
    harness: tuple[Param, ...] = ()
    check: Callable[[dict[str, Any], int], None] | None = None
    role: Callable[[Mapping[str, Any]], str] | None = None
    applied: Callable[[Mapping[str, Any], int], int] | None = None
    profile: str | None = None
    calibrates: str | None = None
    lock_step: bool = False
    shared_link: bool = False
    duplex: bool = False
    apriori: Mapping[str, Any] | None = None
    same_run: bool = True
    name: str | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if not (isinstance(self.scheme, type) and issubclass(self.scheme, Scheme)):
            raise InvalidParameterError("LiveScheme.scheme", self.scheme, "a Scheme subclass")
        _checks.choice("LiveScheme.layout", self.layout, LAYOUTS)
        if self.calibrates is not None:
            _checks.choice("LiveScheme.calibrates", self.calibrates, CALIBRATIONS)
        fields = set(self.scheme.parameters())
        for p in self.params:
            if self.renamed.get(p, p) not in fields:
                raise InvalidParameterError(
                    "LiveScheme.params",
                    p,
                    f"a parameter of {self.scheme.__name__}: {', '.join(sorted(fields))}",
                )
        object.__setattr__(self, "renamed", MappingProxyType(dict(self.renamed)))
        if self.apriori is not None:
            object.__setattr__(self, "apriori", MappingProxyType(dict(self.apriori)))

    @property
    def key(self) -> str:
        """The live scheme's name: the model class's registry key unless the row names itself."""
        return self.name or self.scheme.key

    # ---- world --------------------------------------------------------------------------------
    def world_size(self, workers: int) -> int:
        """Processes needed for ``workers`` workers: ``n``, or ``n + 1`` with a PS."""
        n = _checks.integer("workers", workers)
        return n if self.layout == "allreduce" else n + 1

    def workers(self, world_size: int) -> int:
        """Workers in a world of ``world_size`` processes (at least one)."""
        n = world_size if self.layout == "allreduce" else world_size - 1
        if n < 1:
            raise InvalidParameterError("world_size", world_size, "at least 2 (a PS and one worker)")
        return n

    # ---- parameters -----------------------------------------------------------------------------
    def defaults(self) -> dict[str, Any]:
        """The model's defaults of the row's model parameters (absent where the class has none)."""
        out = {}
        by_name = {f.name: f for f in dataclasses.fields(self.scheme)}  # type: ignore[arg-type]
        for p in self.params:
            f = by_name[self.renamed.get(p, p)]
            if f.default is not dataclasses.MISSING:
                out[p] = f.default
        return out

    def check_params(self, params: Mapping[str, Any] | None, workers: int) -> dict[str, Any]:
        """Validate the scheme's parameters; return them complete, with the defaults.

        The model's parameters are given to the scheme class, whose own checks
        and defaults apply (a renamed one is accepted under either name, not
        both); the harness's are checked by their :class:`Param`; then the
        row's ``check`` sees them with the worker count. Anything else is an
        error naming the accepted ones.
        """
        n = _checks.integer("workers", workers)
        given = dict(params or {})
        defaults = self.defaults()
        values: dict[str, Any] = {}
        for p in self.params:
            own = self.renamed.get(p, p)
            if p != own and p in given and own in given:
                raise InvalidParameterError(p, given[p], f"either {p} or {own}, not both")
            if p in given or own in given:
                values[p] = given.pop(p) if p in given else given.pop(own)
            elif p in defaults:
                values[p] = defaults[p]
            else:
                raise InvalidParameterError(p, None, f"a value ({self.scheme.__name__}.{own} has no default)")
        out = {p: getattr(self.make(values), self.renamed.get(p, p)) for p in self.params}
        for h in self.harness:
            out[h.name] = h.check(given.pop(h.name, h.default))
        if given:
            raise InvalidParameterError(
                "params", sorted(given), f"the parameters of {self.key!r}: {sorted(out) or 'none'}"
            )
        if self.check is not None:
            self.check(out, n)
        return out

    def make(self, params: Mapping[str, Any], **extra: Any) -> Scheme:
        """The model class built from the row's model parameters in ``params`` (and ``extra`` fields)."""
        own = {self.renamed.get(p, p): params[p] for p in self.params if p in params}
        return self.scheme(**own, **extra)

    # ---- updates, calibration, model -------------------------------------------------------------
    def update_role(self, params: Mapping[str, Any] | None = None) -> str:
        """The role of the records that carry the updates: ``"worker"``, ``"ps"`` or ``"round"``."""
        if self.role is not None:
            return self.role(params or {})
        return "worker" if self.layout == "allreduce" else "ps"

    def calibration(self, params: Mapping[str, Any] | None = None) -> str:
        """The calibration the scheme takes: ``"allreduce"`` (the workers' own) or ``"p2p"`` (the PS link),
        or the row's ``calibrates`` (one of :data:`CALIBRATIONS`)."""
        if self.calibrates is not None:
            return self.calibrates
        return "p2p" if self.update_role(params) == "ps" else "allreduce"

    def gradients_per_update(self, params: Mapping[str, Any], workers: int) -> int:
        """Gradients in one update of the parameter server (all ``n`` unless the row says otherwise)."""
        n = _checks.integer("workers", workers)
        return n if self.applied is None else self.applied(params, n)

    def model(self, params: Mapping[str, Any], inputs: ModelInputs | None = None) -> tuple[Scheme, str]:
        """The queuesgd scheme and method that predict a run of the row (``model_fn``; default: the
        class built from the checked parameters, ``"auto"``)."""
        inputs = ModelInputs() if inputs is None else inputs
        if self.model_fn is None:
            return _default_model(self, params, inputs)
        return self.model_fn(params, inputs)


def real_model(live: Any, what: str) -> Any:
    """``live`` if it is a real model without random delays, else the error naming ``what`` trains.

    The loops of schemes that train a real model (DDP, FSDP, pipelines) take no emulated compute.

    Examples
    --------
    >>> real_model(object(), "DDP trains")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: live: ...; accepted: a RealModel ... (DDP trains a real model)
    """
    if not hasattr(live, "sizes") or getattr(live, "random_delay", None) is not None:
        raise InvalidParameterError("live", live, f"a RealModel without random delays ({what} a real model)")
    return live


def real_model_loop(worker: Callable[..., None], what: str, *harness: str) -> Loop:
    """The :class:`Loop` of a row whose every rank trains a real model with ``worker`` (DDP, FSDP).

    The loop checks the workload with :func:`real_model` (``what`` names the
    trainer in its error) and calls ``worker(ctx, live.kind, steps,
    batch_size=live.batch_size, warmup=warmup, seed=seed,
    model_options=live.sizes(), key=key)``, plus each parameter named in
    ``harness`` from the checked ``params`` (DDP's ``device``).

    Parameters
    ----------
    worker : callable
        The worker function (:func:`~queuesgd.harness.ddp.ddp_worker`,
        :func:`~queuesgd.harness.fsdp.fsdp_worker`).
    what : str
        Who trains, for the error (``"DDP trains"``).
    *harness : str
        The row's parameters passed on to ``worker`` by name.

    Returns
    -------
    Loop

    Examples
    --------
    >>> class Live:
    ...     kind, batch_size, random_delay = "mlp", 8, None
    ...     def sizes(self): return {"hidden": 16}
    >>> calls = []
    >>> loop = real_model_loop(lambda *a, **k: calls.append((a, k)), "DDP trains", "device")
    >>> loop("ctx", "ddp", Live(), 5, None, 1, 0, {"device": "cpu"})
    >>> calls[0][0], sorted(calls[0][1])
    (('ctx', 'mlp', 5), ['batch_size', 'device', 'key', 'model_options', 'seed', 'warmup'])
    """

    def loop(
        ctx: Any,
        key: str,
        live: Any,
        steps: int,
        shaper: Any,
        warmup: int,
        seed: int,
        params: Mapping[str, Any],
    ) -> None:
        live = real_model(live, what)
        worker(
            ctx,
            live.kind,
            steps,
            batch_size=live.batch_size,
            warmup=warmup,
            seed=seed,
            model_options=live.sizes(),
            key=key,
            **{name: params[name] for name in harness},
        )

    return loop
