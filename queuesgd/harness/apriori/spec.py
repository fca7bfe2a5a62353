"""A campaign of the a-priori protocol written down before anything runs: :class:`CampaignSpec`.

A spec is a JSON object. It names the models (a harness model, or a named
one: ``"module.path:callable"``, ``"torchvision:NAME"``, ``"queuesgd:KIND"``),
the lines (a live scheme of :data:`~queuesgd.harness.apriori.SCHEMES` with its
parameters, models and worker counts), the links, the run's length, the
number of passes and the discard rule. :func:`load_spec` reads one (a bounded
read) and checks it field by field, so that a mistake is one error naming
the field before any process starts; :attr:`CampaignSpec.hash` is the sha256
of its canonical JSON (:func:`~queuesgd.harness.apriori.spec_text.spec_hash`),
which every row of the campaign records.

Fields (``*``: required)::

    name*                 the campaign: letters, digits, '.', '_' and '-'
    description           free text
    device                "cpu" (default) or "cuda[:N]" (DDP alone runs there)
    models*               {label: {"model": NAME (default: the label), "batch_size"*: int,
                                   "model_options": {...} (a harness model's sizes),
                                   "input_shape": [int, ...], "classes": int, "model_args": {...}
                                   (a named model's)}}
    rates*                links of the runs of n > 1 workers: "1Gbit/s", ... (8 kbit/s to 2**60 B/s, with
                          a unit) or "loopback" (``spec_checks``)
    latency               "0" (the netns links add none; anything else is refused)
    steps*, warmup*       per run (steps - warmup >= 10 measured updates)
    repetitions           profiled steps per copy (default 20)
    calibration_gap       idle seconds before each timed message (default 0, at most 1), or "profiled"
                          (DDP: the profiled compute phase of n workers, per model)
    calibrate_at_buckets  all-reduces timed at the sizes of DDP's buckets (default false)
    sharded_calibration, fsdp_profile, link_bucket, pipeline_profile
                          the FSDP and pipeline lines' inputs (:mod:`~queuesgd.harness.apriori.spec_parallel`)
    passes*               how many times the whole campaign runs (every pass is reported)
    discard*              {"rule": "disturbed" | "none", "attempts": int, "limit": share,
                           "inputs": bool (default false: rows from disturbed inputs still count)}
                          (:mod:`~queuesgd.harness.apriori.discard`)
    drift                 measure the one-worker DDP step again after each model's runs
    targets               {"median": share, "max": share}: judged on the pooled figures
    probes                pipeline probes: {"runtime": {...}, "exchange": {...}} (apriori_parallel.probes)
    lines*                [{"scheme"*, "models"*, "workers"*, "params", "model_params",
                            "random_delay" ("K:DELAY" or {label: "K:DELAY"}), "rates"}]
                          (no configuration run by two lines)

A key given twice in one object is refused (JSON would keep the last value).

Examples
--------
>>> spec = parse_spec({"name": "demo", "models": {"mlp": {"batch_size": 8}}, "rates": ["loopback"],
...                    "steps": 30, "warmup": 5, "passes": 2, "discard": {"rule": "none"},
...                    "lines": [{"scheme": "ddp", "models": ["mlp"], "workers": [1, 2]}]})
>>> [(c.scheme, c.model, c.workers, c.rate) for c in spec.configurations()]
[('ddp', 'mlp', 1, None), ('ddp', 'mlp', 2, None)]
>>> len(spec.hash), spec.passes, spec.discard.rule
(64, 2, 'none')
>>> parse_spec({"name": "demo"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: spec.models: got None; accepted: a required field ...
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori.discard import DISCARD_RULES, DiscardRule
from queuesgd.harness.apriori.profile import DDP_STEP
from queuesgd.harness.apriori.spec_checks import (
    LOOPBACK,
    calibration_gap,
    check_distinct,
    line_runs,
    link_rates,
)
from queuesgd.harness.apriori.spec_parallel import DEFAULTS as PARALLEL_DEFAULTS
from queuesgd.harness.apriori.spec_parallel import check_profile_link, parallel_settings
from queuesgd.harness.apriori.spec_text import canonical_json, spec_document, spec_hash
from queuesgd.harness.run_args import steps_and_warmup

__all__ = [
    "DISCARD_RULES",
    "LOOPBACK",
    "MAX_SPEC_BYTES",
    "CampaignSpec",
    "Configuration",
    "DiscardRule",
    "Line",
    "ModelSpec",
    "canonical_json",
    "load_spec",
    "parse_spec",
]

#: The largest spec file read (a spec is a page of JSON).
MAX_SPEC_BYTES = 1 << 20

#: Most worker processes of one configuration, and most passes, steps and retries a spec may ask for.
MAX_WORKERS, MAX_PASSES, MAX_STEPS, MAX_ATTEMPTS = 64, 100, 100_000, 10

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

_TOP = {
    "name": True,
    "description": False,
    "device": False,
    "models": True,
    "rates": True,
    "latency": False,
    "steps": True,
    "warmup": True,
    "repetitions": False,
    "calibration_gap": False,
    "calibrate_at_buckets": False,
    **dict.fromkeys(PARALLEL_DEFAULTS, False),
    "passes": True,
    "discard": True,
    "drift": False,
    "targets": False,
    "probes": False,
    "lines": True,
}
_MODEL = ("model", "batch_size", "model_options", "input_shape", "classes", "model_args")
_LINE = ("scheme", "models", "workers", "params", "model_params", "random_delay", "rates")


@dataclass(frozen=True)
class ModelSpec:
    """A model of the campaign: its label (file names, rows), what builds it, and its options.

    ``options`` are what :class:`~queuesgd.harness.live.RealModel` and
    :func:`~queuesgd.harness.models.build` take besides the name: a harness
    model's sizes, or a named model's ``input_shape``, ``classes`` and
    ``model_args``.
    """

    label: str
    model: str
    batch_size: int
    options: Mapping[str, Any]


@dataclass(frozen=True)
class Line:
    """A line of the campaign: one live scheme, its parameters, models, worker counts and links."""

    scheme: str
    models: tuple[str, ...]
    workers: tuple[int, ...]
    params: Mapping[str, Any]
    model_params: Mapping[str, Mapping[str, Any]]
    random_delay: Mapping[str, str | None]
    rates: tuple[float | None, ...] | None


@dataclass(frozen=True)
class Configuration:
    """One configuration: a scheme on a model at ``workers`` workers over a link (None: loopback)."""

    scheme: str
    model: str
    workers: int
    rate: float | None
    params: Mapping[str, Any]
    random_delay: str | None

    def stem(self, campaign: str) -> str:
        """The rows' file of the configuration: one per campaign, scheme, parameters and model.

        Examples
        --------
        >>> c = Configuration("static-cutoff", "cnn", 2, None, {"cutoff": "40ms", "stragglers": "x"}, None)
        >>> c.stem("a")
        'a-static-cutoff-cutoff40ms-cnn'
        """
        tag = "".join(
            f"-{k}{v}" for k, v in sorted(self.params.items()) if k not in ("stragglers", "collective")
        )
        return f"{campaign}-{self.scheme}{tag}-{self.model}".replace(":", "").replace("/", "")


@dataclass(frozen=True)
class CampaignSpec:
    """A checked campaign spec (see the module docstring); build one with :func:`parse_spec`."""

    name: str
    description: str
    device: str
    models: Mapping[str, ModelSpec]
    lines: tuple[Line, ...]
    rates: tuple[float | None, ...]
    steps: int
    warmup: int
    repetitions: int
    calibration_gap: float | str
    calibrate_at_buckets: bool
    passes: int
    discard: DiscardRule
    drift: bool
    targets: tuple[float, float] | None
    document: Mapping[str, Any]
    hash: str
    probes: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    sharded_calibration: str = "idle-median"
    fsdp_profile: str = "solo"
    link_bucket: bool = False
    pipeline_profile: str = "probe"

    def configurations(self) -> list[Configuration]:
        """Every configuration, line by line, model by model, worker count by worker count.

        One worker runs once, on loopback, with no calibration (it sends nothing);
        ``n > 1`` workers run at each of the line's rates (the campaign's where
        the line gives none).
        """
        return [
            Configuration(line.scheme, model, n, rate, params, line.random_delay[model])
            for _, line, model, params, n, rate in line_runs(self.lines, self.rates)
        ]


def load_spec(path: str | os.PathLike[str]) -> CampaignSpec:
    """Read a campaign spec (a regular file of at most :data:`MAX_SPEC_BYTES`, a JSON object) and check it.

    Raises
    ------
    InvalidParameterError
        Naming the file, and the first bad field in it
        (``mine.json: spec.models.net.model_args.layers`` ...).
    """
    raw = _checks.read_bytes("spec", path, max_bytes=MAX_SPEC_BYTES)
    where = os.fspath(path)
    doc = spec_document(raw, where)
    try:
        return parse_spec(doc)
    except InvalidParameterError as err:  # a field's error, naming the file it is in
        raise InvalidParameterError(f"{where}: {err.field}", err.got, err.accepted) from None


def parse_spec(document: Any) -> CampaignSpec:
    """Check a spec document (a mapping, as JSON gives it) field by field; the :class:`CampaignSpec`.

    Everything that can be checked before a process starts is: field names
    (an unknown one is refused, not ignored), numbers, rates, models' names
    and options (a project model's ``model_args`` against the types its
    parameters declare; no user code is imported, nothing is built), schemes and their parameters
    at every worker count (the live table's checks), the straggler recipes.
    """
    if not isinstance(document, Mapping):
        raise InvalidParameterError("spec", type(document).__name__, "a JSON object")
    doc = dict(document)
    _fields("spec", doc, _TOP)
    name = doc["name"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidParameterError("spec.name", name, "1 to 64 letters, digits, '.', '_' or '-'")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise InvalidParameterError("spec.description", description, "a string")
    device = _checks.device("spec.device", doc.get("device", "cpu"))
    latency = units.parse_seconds(doc.get("latency", 0), "spec.latency")
    if latency != 0:
        raise InvalidParameterError(
            "spec.latency",
            doc["latency"],
            "0 (the runs' links are netns with tc tbf, which adds no delay here)",
        )
    models = _models(doc["models"])
    rates = link_rates("spec.rates", doc["rates"])
    steps = _int("spec.steps", doc["steps"], 2, MAX_STEPS)
    steps, warmup = steps_and_warmup(steps, doc["warmup"], "spec.")
    if steps - warmup < 10:
        raise InvalidParameterError(
            "spec.steps", steps, f"at least warmup + 10 ({warmup + 10}): measured updates"
        )
    repetitions = _int("spec.repetitions", doc.get("repetitions", 20), 2, 10_000)
    gap = calibration_gap(doc.get("calibration_gap", 0.0))
    at_buckets = _checks.boolean("spec.calibrate_at_buckets", doc.get("calibrate_at_buckets", False))
    parallel = parallel_settings(doc)
    passes = _int("spec.passes", doc["passes"], 1, MAX_PASSES)
    discard = _discard(doc["discard"])
    drift = _checks.boolean("spec.drift", doc.get("drift", False))
    targets = _targets(doc.get("targets"))
    from queuesgd.harness.apriori_parallel.probes import probe_settings

    probes = probe_settings(doc.get("probes"))
    lines = doc["lines"]
    if not isinstance(lines, list) or not lines:
        raise InvalidParameterError("spec.lines", lines, "a list of one or more lines")
    checked = tuple(_line(f"spec.lines[{i}]", line, models, device) for i, line in enumerate(lines))
    check_distinct(checked, rates)  # two lines that run one configuration would run it twice
    from queuesgd.harness.live_schemes import live_scheme

    ddp_only = all(live_scheme(line.scheme).profile == DDP_STEP for line in checked)
    if gap == "profiled" and not ddp_only:
        raise InvalidParameterError(
            "spec.calibration_gap", gap, "seconds (a 'profiled' gap is DDP's compute phase: DDP lines only)"
        )
    if at_buckets and not ddp_only:
        raise InvalidParameterError(
            "spec.calibrate_at_buckets", True, "false (the sizes of DDP's buckets serve DDP lines only)"
        )
    spec = CampaignSpec(
        name,
        description,
        device,
        MappingProxyType(models),
        checked,
        rates,
        steps,
        warmup,
        repetitions,
        gap,
        at_buckets,
        passes,
        discard,
        drift,
        targets,
        json.loads(canonical_json(doc)),
        spec_hash(doc),
        MappingProxyType(probes),
        **parallel,
    )
    check_profile_link(spec)
    return spec


def _fields(where: str, doc: Mapping[str, Any], known: Mapping[str, bool] | Sequence[str]) -> None:
    required = [k for k, need in known.items() if need] if isinstance(known, Mapping) else []
    extra = sorted(str(k) for k in doc if k not in known)
    if extra:
        raise InvalidParameterError(
            f"{where}.{extra[0]}", doc[extra[0]], f"a field of {where}: {', '.join(known)}"
        )
    for key in required:
        if key not in doc:
            raise InvalidParameterError(
                f"{where}.{key}", None, f"a required field (fields: {', '.join(known)})"
            )


def _int(field: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidParameterError(field, value, f"an integer from {low} to {high:,}")
    return value


def _share(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise InvalidParameterError(field, value, "a share: a number > 0 and <= 1 (0.1 is 10%)")
    return float(value)


def _models(value: Any) -> dict[str, ModelSpec]:
    from queuesgd.harness.live import RealModel
    from queuesgd.harness.models import check_model, is_named

    if not isinstance(value, Mapping) or not value:
        raise InvalidParameterError("spec.models", value, "an object of one or more models by label")
    out = {}
    for label, entry in value.items():
        where = f"spec.models.{label}"
        if not isinstance(label, str) or not _NAME.fullmatch(label):
            raise InvalidParameterError("spec.models", label, "labels of letters, digits, '.', '_' or '-'")
        if not isinstance(entry, Mapping):
            raise InvalidParameterError(where, entry, f"an object with {', '.join(_MODEL)}")
        _fields(where, entry, {k: k == "batch_size" for k in _MODEL})
        model = check_model(entry.get("model", label), f"{where}.model")
        batch = _int(f"{where}.batch_size", entry["batch_size"], 1, 1 << 20)
        if is_named(model):
            if "model_options" in entry:
                raise InvalidParameterError(
                    f"{where}.model_options",
                    entry["model_options"],
                    "none for a named model: its input_shape, classes and model_args",
                )
            options = {
                "input_shape": entry.get("input_shape"),
                "classes": _int(f"{where}.classes", entry.get("classes", 10), 2, 1 << 20),
                "model_args": entry.get("model_args") or {},
            }
        else:
            named_only = [k for k in ("input_shape", "classes", "model_args") if k in entry]
            if named_only:
                raise InvalidParameterError(
                    f"{where}.{named_only[0]}",
                    entry[named_only[0]],
                    f"none for the harness model {model!r} (its sizes go in model_options)",
                )
            options = entry.get("model_options", {})
            if not isinstance(options, Mapping):
                raise InvalidParameterError(
                    f"{where}.model_options", options, "an object of the model's sizes"
                )
            options = dict(options)
        try:  # the sizes' and a named model's fields' own checks; no user code imported, nothing built
            RealModel(model, batch_size=batch, **options)
        except TypeError as err:
            raise InvalidParameterError(
                f"{where}.model_options", options, f"the sizes RealModel takes ({err})"
            ) from None
        except InvalidParameterError as err:
            raise InvalidParameterError(
                f"{where}.{err.field.removeprefix('RealModel.')}", err.got, err.accepted
            ) from None
        out[label] = ModelSpec(label, model, batch, MappingProxyType(options))
    return out


def _discard(value: Any) -> DiscardRule:
    where = "spec.discard"
    if not isinstance(value, Mapping):
        raise InvalidParameterError(
            where, value, f"an object: rule ({' or '.join(DISCARD_RULES)}), attempts, limit"
        )
    _fields(where, value, {"rule": True, "attempts": False, "limit": False, "inputs": False})
    rule = _checks.choice(f"{where}.rule", value["rule"], DISCARD_RULES)
    attempts = _int(f"{where}.attempts", value.get("attempts", 1), 1, MAX_ATTEMPTS)
    if rule == "none" and attempts != 1:
        raise InvalidParameterError(
            f"{where}.attempts", attempts, "1 with the rule 'none' (every run counts)"
        )
    limit = _share(f"{where}.limit", value.get("limit", 0.10))
    inputs = _checks.boolean(f"{where}.inputs", value.get("inputs", False))
    if inputs and rule == "none":
        raise InvalidParameterError(f"{where}.inputs", True, "false with the rule 'none' (every run counts)")
    return DiscardRule(rule, attempts, limit, inputs)


def _targets(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidParameterError("spec.targets", value, "an object: median, max (shares, 0.1 is 10%)")
    _fields("spec.targets", value, {"median": True, "max": True})
    return _share("spec.targets.median", value["median"]), _share("spec.targets.max", value["max"])


def _line(where: str, value: Any, models: Mapping[str, ModelSpec], device: str) -> Line:
    from queuesgd.harness.apriori.predict import SCHEMES
    from queuesgd.harness.apriori_parallel.run import PROFILES
    from queuesgd.harness.live_schemes import LIVE, live_scheme
    from queuesgd.harness.models import is_named
    from queuesgd.harness.pipelining.units import SEQUENTIAL_MODELS
    from queuesgd.specs import random_delay

    if not isinstance(value, Mapping):
        raise InvalidParameterError(where, value, f"an object with {', '.join(_LINE)}")
    _fields(where, value, {k: k in ("scheme", "models", "workers") for k in _LINE})
    parallel = tuple(k for k, r in LIVE.items() if r.profile in PROFILES)  # FSDP, pipelines
    row = live_scheme(_checks.choice(f"{where}.scheme", value["scheme"], (*SCHEMES, *parallel)))
    on_device = any(h.name == "device" for h in row.harness)
    if device != "cpu" and not on_device:
        raise InvalidParameterError(f"{where}.scheme", row.key, f"a scheme that runs on {device!r} (ddp)")
    names = value["models"]
    if not isinstance(names, list) or not names or len(set(map(str, names))) != len(names):
        raise InvalidParameterError(f"{where}.models", names, "a list of model labels, each once")
    for i, label in enumerate(names):
        if label not in models:
            raise InvalidParameterError(
                f"{where}.models[{i}]", label, f"a label of spec.models: {', '.join(models)}"
            )
        if row.key in parallel and is_named(models[label].model):
            raise InvalidParameterError(f"{where}.models[{i}]", label, f"a harness model for {row.key}")
        if row.profile == "stages" and models[label].model not in SEQUENTIAL_MODELS:
            accepted = f"a model that cuts into pipeline units: {', '.join(SEQUENTIAL_MODELS)}"
            raise InvalidParameterError(f"{where}.models[{i}]", label, accepted)
    workers = _checks.integers(f"{where}.workers", value["workers"])
    if len(set(workers)) != len(workers) or max(workers) > MAX_WORKERS:
        raise InvalidParameterError(
            f"{where}.workers", value["workers"], f"distinct counts from 1 to {MAX_WORKERS}"
        )
    params = _mapping(f"{where}.params", value.get("params", {}))
    per_model = _mapping(f"{where}.model_params", value.get("model_params", {}))
    for label, extra in per_model.items():
        if label not in names:
            raise InvalidParameterError(
                f"{where}.model_params", label, f"a model of the line: {', '.join(names)}"
            )
        _mapping(f"{where}.model_params.{label}", extra)
    delays = value.get("random_delay")
    if isinstance(delays, Mapping):
        by_model = {label: delays.get(label) for label in names}
        stray = [k for k in delays if k not in names]
        if stray:
            raise InvalidParameterError(
                f"{where}.random_delay", stray[0], f"a model of the line: {', '.join(names)}"
            )
    else:
        by_model = dict.fromkeys(names, delays)
    for label, text in by_model.items():
        if text is None:
            continue
        field = f"{where}.random_delay" + (f".{label}" if isinstance(delays, Mapping) else "")
        if not isinstance(text, str):
            raise InvalidParameterError(
                field, text, "'K:DELAY', e.g. '1:30ms' (K workers each step wait DELAY)"
            )
        recipe = random_delay(text, field)
        if recipe.count > min(workers):
            raise InvalidParameterError(
                field, text, f"at most {min(workers)} delayed workers (the fewest of the line)"
            )
    for label in names:  # the live table's checks of the parameters, at every worker count, before any run
        mine = {**params, **per_model.get(label, {})}
        for n in workers:
            try:
                checked = row.check_params({"device": device} if on_device else mine, n)
            except InvalidParameterError as err:
                raise InvalidParameterError(f"{where}.params.{err.field}", err.got, err.accepted) from None
            if on_device and (mine or by_model[label] is not None):
                raise InvalidParameterError(
                    f"{where}.params",
                    mine or by_model[label],
                    f"none for {row.key} (no parameters or stragglers)",
                )
            needs = row.apriori or {}
            if any(checked.get(k) != v for k, v in needs.items()):
                raise InvalidParameterError(
                    f"{where}.params",
                    mine,
                    ", ".join(f"{k}={v!r}" for k, v in needs.items()) + " (what the a-priori "
                    "model describes)",
                )
    rates = None if value.get("rates") is None else link_rates(f"{where}.rates", value["rates"])
    return Line(
        row.key,
        tuple(names),
        workers,
        MappingProxyType(dict(params)),
        MappingProxyType({k: MappingProxyType(dict(v)) for k, v in per_model.items()}),
        MappingProxyType(by_model),
        rates,
    )


def _mapping(field: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidParameterError(field, value, "an object of names to values")
    return dict(value)
