"""The a-priori protocol of the parallel rows (FSDP, pipeline): measure, predict, then run, by the table.

A parallel row of :data:`~queuesgd.harness.live_schemes.LIVE` names the
profile it takes (``profile``: :data:`PROFILES`) and its calibration
(:meth:`~queuesgd.harness.live_schemes.LiveScheme.calibration`); these
functions ask the row and nothing else:

1. :func:`measure_inputs`: the row's profile, in runs of their own
   (``"sharded"``: the layer-wise profile of ``k`` copies in lock step and
   FSDP's own step without a network; ``"stages"``: one micro-batch through
   each unit); :func:`save_inputs` writes them;
2. the network: :func:`~queuesgd.harness.apriori_parallel.calibrate_parallel`
   of the row's kind (:func:`~queuesgd.harness.apriori_parallel.calibration_ranks`);
3. :func:`predict_parallel`: the row's prediction from those inputs alone;
4. :func:`run_parallel_apriori` around :func:`run_parallel` (the row's
   worker loop through :func:`queuesgd.harness.runners.run`): the result row.

The ``batch`` of a parallel row is its live model's ``batch_size``: the
samples of each gradient its records count (``applied``): a worker's batch
for FSDP, a micro-batch for a pipeline.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori.calibration import Calibration
from queuesgd.harness.apriori.profile import make_profile
from queuesgd.harness.apriori_parallel.predict import predict_fsdp, predict_pipeline
from queuesgd.harness.apriori_parallel.profile import profile_fsdp
from queuesgd.harness.live_schemes import LiveScheme, live_scheme
from queuesgd.harness.provenance import code_version, disjoint, stamp
from queuesgd.harness.records_json import read_json, write_json

__all__ = [
    "INFO_ROLES",
    "PROFILES",
    "load_inputs",
    "measure_inputs",
    "parallel_scheme",
    "predict_parallel",
    "rebuild_parallel",
    "run_parallel",
    "run_parallel_apriori",
    "save_inputs",
    "stored_input_paths",
    "stored_parallel_inputs",
]

#: The profiles of the parallel rows (a row's ``profile``): FSDP's (the layers and FSDP's own step),
#: and the pipeline's stage profile.
PROFILES = ("sharded", "stages")
#: Roles of the record a parallel run describes itself with (the pipeline's split and bytes; FSDP's units).
INFO_ROLES = ("stages", "units")


def parallel_scheme(scheme: Any) -> LiveScheme:
    """The row of a live scheme the parallel protocol runs (one with a profile of :data:`PROFILES`).

    Examples
    --------
    >>> parallel_scheme("fsdp").key, parallel_scheme("pipeline").profile
    ('sharded-dp', 'stages')
    >>> parallel_scheme("ddp")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: profile: got 'ddp'; accepted: one of 'sharded', 'stages'
    """
    row = live_scheme(scheme)
    _checks.choice("profile", row.profile, PROFILES)
    return row


def measure_inputs(
    scheme: Any,
    model: str,
    *,
    batch_size: int,
    workers: Iterable[int],
    repetitions: int = 20,
    model_options: Mapping[str, Any] | None = None,
    fsdp_profile: str = "solo",
    force: bool = False,
) -> dict[str, Any]:
    """The profile a parallel row's prediction takes, measured now in runs of its own.

    ``"sharded"`` (FSDP): ``"layers"``, the layer-wise profile with the bare
    model's lock-step span of ``k`` copies for each worker count ``k``
    (:func:`~queuesgd.harness.apriori.make_profile`), and ``"own"``, FSDP's
    step without a network (:func:`~queuesgd.harness.apriori_parallel.profile_fsdp`):
    of ``k`` single-rank copies (``fsdp_profile="solo"``), or of one group of
    ``k`` ranks with its collectives taken out (``"group"``). ``"stages"``
    (pipeline): ``"stages"``, one micro-batch of ``batch_size`` samples through each unit
    (:func:`~queuesgd.harness.pipelining.profile_stages`, one process).
    ``model_options``: the harness model's sizes (:func:`~queuesgd.harness.models.build`).
    ``force``: run more copies than 8 per CPU core
    (:func:`~queuesgd.harness.process_limit.process_limit`), refused without it before any run.
    """
    row = parallel_scheme(scheme)
    group = _checks.choice("fsdp_profile", fsdp_profile, ("solo", "group")) == "group"
    options = dict(model_options or {})
    if row.profile == "stages":
        from queuesgd.harness.pipelining import profile_stages

        return {
            "stages": profile_stages(
                model, microbatch=batch_size, repetitions=repetitions, model_options=options
            )
        }
    copies = sorted({_checks.integer("workers", k) for k in workers})
    layers = make_profile(
        model,
        batch_size=batch_size,
        copies=copies,
        repetitions=repetitions,
        synchronized=("plain",),
        model_options=options,
        force=force,
    )
    own = profile_fsdp(
        model, batch_size=batch_size, copies=copies, model_options=options, group=group, force=force
    )
    return {"layers": layers, "own": own}


#: File name of each input :func:`measure_inputs` returns, for a model.
_FILES = {"layers": "{model}.json", "own": "{model}.fsdp.json", "stages": "{model}.stages.json"}


def save_inputs(inputs: Mapping[str, Any], folder: str | os.PathLike[str], model: str) -> list[Path]:
    """Write :func:`measure_inputs`' inputs in ``folder``: ``<model>.json``, ``.fsdp.json``, ``.stages.json``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     [p.name for p in save_inputs({"own": {"measured": "now"}}, d, "mlp")]
    ['mlp.fsdp.json']
    """
    from queuesgd.harness.report import jsonable

    out = []
    for key, value in inputs.items():
        path = Path(folder) / _FILES[key].format(model=model)
        out.append(Path(value.save(path)) if hasattr(value, "save") else write_json(path, jsonable(value)))
    return out


def load_inputs(folder: str | os.PathLike[str], model: str) -> dict[str, Any]:
    """Read back what :func:`save_inputs` wrote for ``model`` in ``folder`` (the files that exist).

    Examples
    --------
    >>> import tempfile
    >>> own = {"compute": {2: [0.01, 0.012]}, "update": {2: 0.001}, "measured": "now"}
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = save_inputs({"own": own}, d, "mlp")
    ...     load_inputs(d, "mlp") == {"own": own}           # worker counts come back as integers
    True
    """
    out = {key: _read_input(key, path) for key, path in _input_files(folder, model).items()}
    if not out:
        raise InvalidParameterError(
            "folder", os.fspath(folder), f"inputs of {model!r} written by save_inputs"
        )
    return out


def _input_files(folder: str | os.PathLike[str], model: str) -> dict[str, Path]:
    """The files :func:`save_inputs` wrote for ``model`` in ``folder`` that exist, by input."""
    paths = {key: Path(folder) / name.format(model=model) for key, name in _FILES.items()}
    return {key: path for key, path in paths.items() if path.exists()}


def _read_input(key: str, path: Path) -> Any:
    """The input ``key`` of :func:`measure_inputs` read back from ``path`` (a file that cannot be read
    back is refused naming it)."""
    from queuesgd.harness.apriori.profile import Profile
    from queuesgd.harness.pipelining import StageProfile

    if key == "layers":
        return Profile.load(path)
    if key == "stages":
        return StageProfile.load(path)

    def build(doc: dict[str, Any]) -> dict[str, Any]:
        for field in ("compute", "update"):
            doc[field] = {int(k): v for k, v in doc.get(field, {}).items()}
        return doc

    return read_json(path, build, "profiles", "FSDP's own step as save_inputs writes it (profile_fsdp)")


def rebuild_parallel(record: Mapping[str, Any], folder: str | os.PathLike[str]) -> dict[str, Any]:
    """A stored parallel prediction made again from its stored inputs alone (what it records it read).

    ``record`` is a stored prediction of a campaign's FSDP or pipeline line (or a row made from it); its
    inputs are read back by :func:`stored_parallel_inputs`, then the row's model predicts. The result
    must equal the stored prediction to the last bit: the prediction was made from those files alone,
    and the code that made it still makes it.
    """
    inputs, calibration, extra = stored_parallel_inputs(record, folder)
    return predict_parallel(
        record["scheme"], inputs, calibration, record["workers"], record["params"], **extra
    )


def stored_parallel_inputs(
    record: Mapping[str, Any], folder: str | os.PathLike[str]
) -> tuple[dict[str, Any], Calibration, dict[str, Any]]:
    """The inputs a stored parallel prediction records it read: ``(inputs, calibration, probes)``.

    ``record``'s ``input_files`` name, relative to ``folder``, the profiles' stem, the calibration, and
    for a pipeline the exchange calibration, the tiny model's stage profile and the runtime probe; the
    runtime work per pass is solved again from the probe
    (:func:`~queuesgd.harness.apriori_parallel.action_overhead`). ``probes`` holds the keyword arguments
    :func:`predict_parallel` takes from them (``action_overhead``, ``exchange``; empty for FSDP).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> from queuesgd.harness.report import read_rows
    >>> root = Path(__file__).resolve().parents[3] / "validation"
    >>> rows = root / "results" / "parallel-pipeline-microbatches4-schedule1f1b-stages2-mlp-mb16-pass2.json"
    >>> if not rows.exists():
    ...     pytest.skip("the committed campaign is not beside this checkout")
    >>> row = read_rows(rows)[0]
    >>> inputs, calibration, probes = stored_parallel_inputs(row, root / "campaigns" / "parallel")
    >>> sorted(probes), probes["action_overhead"] > 0
    (['action_overhead', 'exchange'], True)
    """
    from queuesgd.harness.apriori_parallel.calibration import ShardedCalibration
    from queuesgd.harness.apriori_parallel.probes import ExchangeCalibration, action_overhead
    from queuesgd.harness.pipelining import StageProfile

    paths = stored_input_paths(record, folder)
    inputs = {key: _read_input(key, path) for key, path in paths.items() if key in _FILES}
    where = "input_files.calibration"
    cal_kind = read_json(paths["calibration"], lambda doc: doc.get("kind"), where, "a calibration")
    calibration = (ShardedCalibration if cal_kind == "sharded" else Calibration).load(paths["calibration"])
    extra: dict[str, Any] = {}
    bucket = float(record.get("link_bucket", 0.0))  # recorded by predictions that took one
    if "runtime_profile" in paths:  # the stages profiled inside the runtime, not the tiny model's probe
        from queuesgd.harness.pipelining.runtime_profile import runtime_inputs

        staged = read_json(paths["runtime_profile"], dict, "input_files.runtime_profile", "a runtime profile")
        inputs["stages"], h = runtime_inputs(inputs["stages"], staged)
        extra = {"action_overhead": h, "exchange": ExchangeCalibration.load(paths["exchange"])}
    elif "runtime" in paths:
        probe = read_json(paths["runtime"], dict, "input_files.runtime", "a runtime probe")
        tiny = StageProfile.load(paths["tiny"])
        h = action_overhead(probe, tiny, calibration, link_bucket=bucket)["action_overhead"]
        extra = {"action_overhead": h, "exchange": ExchangeCalibration.load(paths["exchange"])}
    if extra and bucket > 0:
        extra["link_bucket"] = bucket
    return inputs, calibration, extra


def stored_input_paths(record: Mapping[str, Any], folder: str | os.PathLike[str]) -> dict[str, Path]:
    """The files a stored parallel prediction records it read (its ``input_files``), by input.

    The profiles (``input_files["profiles"]``, a stem in ``folder/profiles``) are the files of
    :func:`save_inputs` of that stem that exist, keyed as :func:`measure_inputs` keys them
    (``"layers"``, ``"own"``, ``"stages"``); every other file named (not None) is
    ``folder / name`` under its own key, whether it exists or not.

    Raises
    ------
    InvalidParameterError
        ``input_files.profiles`` when no profile of that stem exists.

    Examples
    --------
    >>> import tempfile
    >>> record = {"input_files": {"profiles": "mlp", "calibration": "calibrations/c.json", "runtime": None}}
    >>> with tempfile.TemporaryDirectory() as d:
    ...     Path(d, "profiles").mkdir()
    ...     _ = save_inputs({"own": {"measured": "now"}}, Path(d, "profiles"), "mlp")
    ...     {k: p.relative_to(d).as_posix() for k, p in stored_input_paths(record, d).items()}
    {'own': 'profiles/mlp.fsdp.json', 'calibration': 'calibrations/c.json'}
    """
    root, files = Path(folder), record["input_files"]
    paths = _input_files(root / "profiles", files["profiles"])
    if not paths:
        raise InvalidParameterError(
            "input_files.profiles", files["profiles"], f"the stem of profiles in {root / 'profiles'}"
        )
    paths.update({key: root / name for key, name in files.items() if key != "profiles" and name is not None})
    return paths


def predict_parallel(
    scheme: Any,
    inputs: Mapping[str, Any],
    calibration: Calibration | None,
    workers: int,
    params: Mapping[str, Any] | None = None,
    *,
    action_overhead: float = 0.0,
    exchange: Any = None,
    link_bucket: float = 0.0,
) -> dict[str, Any]:
    """A parallel row's prediction of a run of ``workers`` from :func:`measure_inputs`' inputs alone.

    FSDP: :func:`~queuesgd.harness.apriori_parallel.predict_fsdp` with FSDP's
    own step. Pipeline: :func:`~queuesgd.harness.apriori_parallel.predict_pipeline`
    with the row's checked parameters (``stages``, ``microbatches``,
    ``schedule``, ``split``: None or ``"balanced"`` for the profile's
    balanced split), ``workers / stages`` replicas and the pipeline probes'
    inputs (:mod:`~queuesgd.harness.apriori_parallel.probes`):
    ``action_overhead`` (seconds per pass) and ``exchange`` (the link's
    :class:`~queuesgd.harness.apriori_parallel.ExchangeCalibration`, or
    None for full duplex), and ``link_bucket`` (bytes of the link's token bucket,
    0: none). FSDP takes none of them.

    Examples
    --------
    >>> predict_parallel("fsdp", {}, None, 2, action_overhead=1e-4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: action_overhead: got 0.0001; accepted: 0.0 for sharded-dp ...
    """
    row = parallel_scheme(scheme)
    n = _checks.integer("workers", workers)
    checked = row.check_params(params, n)
    if row.profile == "stages":
        split = None if checked["split"] in (None, "balanced") else checked["split"]
        return predict_pipeline(
            inputs["stages"],
            calibration,
            checked["stages"],
            checked["microbatches"],
            schedule=checked["schedule"],
            split=split,
            replicas=n // checked["stages"],
            action_overhead=action_overhead,
            exchange=exchange,
            link_bucket=link_bucket,
        )
    checks = (
        ("action_overhead", action_overhead, 0.0),
        ("exchange", exchange, None),
        ("link_bucket", link_bucket, 0.0),
    )
    for name, value, none in checks:
        if value != none:
            raise InvalidParameterError(name, value, f"{none} for {row.key} (a pipeline's probe input)")
    return predict_fsdp(inputs["layers"], calibration, n, fsdp=inputs["own"])


def run_parallel(
    scheme: Any,
    model: str,
    workers: int,
    steps: int,
    *,
    batch_size: int,
    params: Mapping[str, Any] | None = None,
    warmup: int = 5,
    timeout: float = 600.0,
    setup: Callable[[int], None] | None = None,
    host: str = "127.0.0.1",
    model_options: Mapping[str, Any] | None = None,
) -> list[dict]:
    """Run a parallel row live on ``workers`` processes: its loop on the harness model ``model``; the records.

    ``batch_size`` is the live model's (a worker's batch for FSDP, a
    micro-batch for a pipeline: the row's loop runs ``microbatches`` of
    them per step); ``model_options`` its sizes (:class:`~queuesgd.harness.live.RealModel`'s fields).
    Through :func:`queuesgd.harness.runners.run`.
    """
    from queuesgd.harness import runners
    from queuesgd.harness.live import RealModel

    row = parallel_scheme(scheme)
    live = RealModel(model, batch_size=batch_size, **dict(model_options or {}))
    return runners.run(
        row.key, live, workers, steps, params=params, warmup=warmup, timeout=timeout, setup=setup, host=host
    )


def run_parallel_apriori(
    scheme: str,
    prediction: Mapping[str, Any],
    run: Callable[[], list[dict]],
    batch: int,
) -> dict[str, Any]:
    """Run a live FSDP or pipeline job after its prediction; the result row with the measured throughput.

    ``prediction`` was made before (its ``predicted_at`` precedes the row's
    ``started``); ``run()`` runs the job (:func:`run_parallel`,
    :func:`~queuesgd.harness.fsdp.run_fsdp` or
    :func:`~queuesgd.harness.pipelining.run_pipeline`) and ``batch`` is
    the samples each of rank 0's ``applied`` gradients stands for (the
    per-worker batch for FSDP, the micro-batch for a pipeline). The row's
    ``scheme`` is ``scheme`` as given (``"fsdp"`` names the row of
    :class:`~queuesgd.ShardedDataParallel`). A field of the prediction that
    the row has already, with another value, is refused (``prediction.FIELD``).

    Examples
    --------
    >>> recs = [{"role": "worker", "rank": 0, "step": i, "warmup": i < 2, "t0": 0.1 * i,
    ...          "t_end": 0.1 * (i + 1), "applied": 4} for i in range(20)]
    >>> row = run_parallel_apriori("pipeline", {"predicted": 200.0, "predicted_at": "0"}, lambda: recs, 2)
    >>> round(row["measured"], 6), round(row["error"], 6)        # 4 x 2 samples per 0.1 s = 80/s
    (80.0, 1.5)
    """
    from queuesgd.harness.run_records import measured_throughput

    live = parallel_scheme(scheme)
    started = stamp()
    records = run()
    out = measured_throughput(records, live.update_role(), _checks.integer("batch", batch))
    run = {"scheme": scheme, "inputs": "a-priori", "started": started, "commit": code_version(), **out}
    row = {**run, **disjoint("prediction", prediction, run)}
    row["error"] = float(prediction["predicted"]) / out["measured"] - 1.0
    info = next((r for r in records if r.get("role") in INFO_ROLES), None)
    if info is not None:
        row["run_info"] = {k: v for k, v in info.items() if k not in ("role", "rank")}
    return row
