"""The a-priori protocol as one object: :class:`Campaign` runs a campaign spec (:mod:`.spec`).

For every pass the spec registered, model by model (so that a profile is
measured shortly before the runs it predicts):

1. **profile** the model (:func:`~queuesgd.harness.apriori.make_profile`),
   again while the discard rule finds the profiling disturbed;
2. **calibrate** every network its runs use
   (:func:`~queuesgd.harness.apriori.calibrate_network`; shared by the models
   unless the gap is the profiled compute phase, or the all-reduces are timed
   at every model's buckets, when all models are profiled first), again
   while the discard rule finds the calibration disturbed;
3. **predict** every configuration from those files alone and **store** the
   predictions (``predictions-passN.json``, each with the time it was stored,
   and ``inputs_disturbed``: its inputs still disturbed after their last try,
   :meth:`~queuesgd.harness.apriori.discard.DiscardRule.measure`) before any
   of the model's runs;
4. **run** each configuration live (:func:`~queuesgd.harness.apriori.run_apriori`)
   with its stored prediction; a run the discard rule discards is kept, listed
   and uncounted, and the configuration runs again, up to ``attempts`` times;
5. optionally measure the one-worker DDP step again (**drift**).

Every row records the campaign, the pass, the attempt, whether it counts and
why not (:meth:`~queuesgd.harness.apriori.discard.DiscardRule.reason`), the
inputs it was predicted from that were disturbed, the commit of the code and
the spec's hash. :class:`CampaignResult` reports every pass (per-pass
figures) and all passes pooled; targets are judged on the pooled figures.
Nothing is overwritten: a folder that already holds any file the campaign
would write is refused unless ``overwrite``, which first removes every file
a previous campaign left in the folder (:meth:`Campaign.previous`), so that
nothing of it (a drift entry, a calibration, a stored prediction of a line
the new spec no longer has) is mixed with the new campaign's.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori.calibration import Calibration, calibrate_network
from queuesgd.harness.apriori.ddp_model import ddp_calibration_sizes
from queuesgd.harness.apriori.predict import predict_apriori
from queuesgd.harness.apriori.profile import DDP_LOCAL_STEP, DDP_STEP, Profile, make_profile
from queuesgd.harness.apriori.results import CampaignResult
from queuesgd.harness.apriori.run import run_apriori
from queuesgd.harness.apriori.spec import CampaignSpec, Configuration, load_spec, parse_spec
from queuesgd.harness.live_schemes import live_scheme
from queuesgd.harness.process_limit import check_processes
from queuesgd.harness.provenance import code_version, stamp
from queuesgd.harness.records_json import read_json, write_json

__all__ = ["Campaign"]


def _now() -> str:
    """The time to the microsecond (UTC, ISO 8601): what orders a stored prediction before its run."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


class Campaign:
    """The a-priori protocol of a spec: profile, calibrate, predict and store, then run (see the module).

    Parameters
    ----------
    spec : CampaignSpec, mapping or path
        A checked spec, a spec document, or a spec file (:func:`load_spec`).

    Examples
    --------
    >>> spec = {"name": "demo", "models": {"mlp": {"batch_size": 8}}, "rates": ["loopback"],
    ...         "steps": 30, "warmup": 5, "passes": 2, "discard": {"rule": "none"},
    ...         "lines": [{"scheme": "ddp", "models": ["mlp"], "workers": [1, 2]}]}
    >>> c = Campaign(spec)
    >>> [p.name for p in c.planned("out")[:3]]
    ['spec.json', 'summary.json', 'mlp-pass1.json']
    """

    def __init__(self, spec: CampaignSpec | Mapping[str, Any] | str | os.PathLike[str]) -> None:
        self._annotate: dict[str, Any] = {}
        if isinstance(spec, CampaignSpec):
            self.spec = spec
        elif isinstance(spec, Mapping):
            self.spec = parse_spec(spec)
        else:
            self.spec = load_spec(spec)

    def check_models(self) -> None:
        """Build every named model once and pass two samples through it, before anything runs.

        A wrong name, wrong arguments, an input shape the model does not take or
        a number of classes it does not give is one error naming the spec's field.
        """
        from queuesgd.harness._torch import require_torch
        from queuesgd.harness.model_build import build_model
        from queuesgd.harness.models import is_named

        for label, m in self.spec.models.items():
            if not is_named(m.model):
                continue
            where = f"spec.models.{label}"
            try:
                net, shape = build_model(m.model, **m.options)
            except InvalidParameterError as err:
                raise InvalidParameterError(f"{where}.{err.field}", err.got, err.accepted) from None
            torch = require_torch()
            try:
                with torch.no_grad():
                    out = net(torch.zeros((2, *shape)))
            except Exception as exc:  # the model's own failure on the shape: one line, named by the field
                raise InvalidParameterError(
                    f"{where}.input_shape",
                    list(shape),
                    f"a sample shape the model takes ({type(exc).__name__}: {exc})",
                ) from None
            got = tuple(getattr(out, "shape", ()))
            if got != (2, m.options["classes"]):
                raise InvalidParameterError(
                    f"{where}.classes",
                    m.options["classes"],
                    f"the logits per sample the model gives (its output: {got})",
                )

    # ---- files ------------------------------------------------------------------------------------
    def _tag(self, number: int) -> str:
        return f"-pass{number}" if self.spec.passes > 1 else ""

    def planned(
        self, out: str | os.PathLike[str], results: str | os.PathLike[str] | None = None
    ) -> list[Path]:
        """The files the campaign writes besides calibrations and probes: spec, summary, profiles,
        predictions, drift (where the spec measures it), rows."""
        root, rows = Path(out), Path(results) if results is not None else Path(out) / "results"
        paths = [root / "spec.json", root / "summary.json"]
        configs = self.spec.configurations()
        for p in range(1, self.spec.passes + 1):
            tag = self._tag(p)
            paths += [root / "profiles" / f"{m}{tag}.json" for m in dict.fromkeys(c.model for c in configs)]
            paths.append(root / f"predictions{tag}.json")
            paths += [root / f"drift{tag}.json"] if self.spec.drift else []
            paths += [rows / f"{s}{tag}.json" for s in dict.fromkeys(c.stem(self.spec.name) for c in configs)]
        return paths

    @staticmethod
    def previous(out: str | os.PathLike[str]) -> list[Path]:
        """The files a campaign left in ``out`` that :meth:`run` with ``overwrite`` removes before it starts.

        Its spec, summary, stored predictions and drift (``predictions*.json``, ``drift*.json``: the
        campaign appends to them), and every JSON file in ``profiles/``, ``calibrations/`` and
        ``probes/``; not the rows (``results``, possibly shared with other campaigns: the campaign's own
        are rewritten whole) nor any other file.

        Examples
        --------
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     for name in ("spec.json", "drift-pass1.json", "calibrations/c.json", "notes.txt"):
        ...         (Path(d) / name).parent.mkdir(exist_ok=True)
        ...         _ = (Path(d) / name).write_text("{}")
        ...     [p.relative_to(d).as_posix() for p in Campaign.previous(d)]
        ['calibrations/c.json', 'drift-pass1.json', 'spec.json']
        """
        root = Path(out)
        found = [root / "spec.json", root / "summary.json"]
        found += [*root.glob("predictions*.json"), *root.glob("drift*.json")]
        for sub in ("profiles", "calibrations", "probes"):
            found += (root / sub).glob("*.json")
        return sorted(p for p in found if p.is_file())

    # ---- the protocol -------------------------------------------------------------------------------
    def run(
        self,
        out: str | os.PathLike[str],
        *,
        results: str | os.PathLike[str] | None = None,
        overwrite: bool = False,
        predict_only: bool = False,
        annotate: Mapping[str, Any] | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> CampaignResult:
        """Run every registered pass; write the spec, inputs, predictions, rows and ``summary.json``.

        Parameters
        ----------
        out : path
            The folder of the campaign's inputs (``profiles/``, ``calibrations/``,
            ``predictions*.json``), its spec and its summary.
        results : path, optional
            The folder of the rows (default ``out/results``).
        overwrite : bool
            Start afresh in a folder a previous campaign left: its files (:meth:`previous`) are removed
            first (refused by default).
        predict_only : bool
            Stop every pass after its predictions are stored.
        annotate : mapping, optional
            Fields every row gets besides the protocol's (e.g. the device's name); they
            cannot replace any of the protocol's.
        progress : callable, optional
            Called with one line per step done.
        """
        from queuesgd.harness.report import make_folder, write_rows

        say = progress or (lambda line: None)
        self._annotate = dict(annotate or {})
        self.check_models()
        unforced = "a machine with more cores (a campaign's runs are not forced)"
        for c in self.spec.configurations():  # past the process limit: refused now, not mid-way
            processes = live_scheme(c.scheme).world_size(c.workers)
            check_processes("spec.lines.workers", c.workers, processes, option=unforced)
        root = Path(out)
        rows_dir = Path(results) if results is not None else root / "results"
        if not overwrite:
            taken = next((p for p in self.planned(root, rows_dir) if p.exists()), None)
            if taken is not None:
                raise InvalidParameterError(
                    "out",
                    os.fspath(out),
                    f"a folder without this campaign's files ({taken} exists; or overwrite)",
                )
        else:
            for path in self.previous(root):
                path.unlink()
        for folder in (root / "profiles", root / "calibrations", rows_dir):
            make_folder("out", folder)
        # The registration: the spec as checked, its hash and when it was fixed, before anything runs.
        record = {
            "hash": self.spec.hash,
            "registered": _now(),
            "commit": code_version(),
            "spec": self.spec.document,
        }
        write_json(root / "spec.json", record)
        rows: list[dict[str, Any]] = []
        for number in range(1, self.spec.passes + 1):
            say(f"pass {number} of {self.spec.passes}")
            rows += self._pass(number, root, rows_dir, predict_only, say, write_rows)
        result = CampaignResult(self.spec, tuple(rows), root)
        if not predict_only:
            write_json(root / "summary.json", result.summary())
        return result

    def _pass(
        self,
        number: int,
        root: Path,
        rows_dir: Path,
        predict_only: bool,
        say: Callable[[str], None],
        write_rows: Any,
    ) -> list[dict[str, Any]]:
        from queuesgd.harness.apriori_parallel.run import PROFILES
        from queuesgd.harness.report import jsonable

        spec, tag = self.spec, self._tag(number)
        every = spec.configurations()
        # FSDP and pipelines take their rows' own inputs and probes (apriori_parallel.campaign_pass).
        parallel = [c for c in every if live_scheme(c.scheme).profile in PROFILES]
        configs = [c for c in every if c not in parallel]
        labels = list(dict.fromkeys(c.model for c in configs))
        per_model = spec.calibration_gap == "profiled"
        profiles: dict[str, Profile] = {}
        cals: dict[tuple, Calibration] = {}
        loads: dict[Any, dict[str, Any]] = {}  # each input's measurement record, by label or calibration key
        if spec.calibrate_at_buckets and not per_model:
            # Every model profiled first, then the all-reduces timed at the sizes of all their buckets.
            for label in labels:
                profiles[label] = self._profile(label, configs, root, tag, say, loads)
            every_bucket = ddp_calibration_sizes(profiles.values())
            cals = self._calibrate(configs, None, every_bucket, root, tag, say, loads)
        elif not per_model:
            cals = self._calibrate(configs, None, None, root, tag, say, loads)
        predictions: list[dict[str, Any]] = []
        rows: list[dict[str, Any]] = []
        for label in labels:
            mine = [c for c in configs if c.model == label]
            prof = profiles.get(label) or self._profile(label, configs, root, tag, say, loads)
            if per_model:
                sizes = ddp_calibration_sizes([prof]) if spec.calibrate_at_buckets else None
                cals.update(self._calibrate(mine, prof, sizes, root, tag, say, loads))
            values = [
                predict_apriori(
                    c.scheme, prof, self._calibration(cals, c, per_model), c.workers,
                    params=c.params, random_delay=c.random_delay,
                )
                for c in mine
            ]  # fmt: skip
            for c, v in zip(mine, values):  # decided with the prediction, before its runs
                used = [loads[label]] + ([loads[self._key(c, per_model)]] if c.workers > 1 else [])
                v["inputs_disturbed"] = spec.discard.still_disturbed(used)
            # Stored with the time the file holding them was written: every run of the model starts later.
            stored = _now()
            predictions += [{**self.identity(c, number), **v, "stored": stored} for c, v in zip(mine, values)]
            write_json(root / f"predictions{tag}.json", jsonable(predictions))
            say(f"{len(values)} predictions of {label} stored before its runs")
            if predict_only:
                continue
            for c, value in zip(mine, values):
                cal = self._calibration(cals, c, per_model)
                rows += self._runs(c, value, stored, prof, cal, number, say)
                stem = c.stem(spec.name)
                write_rows([r for r in rows if r["stem"] == stem], rows_dir, stem=f"{stem}{tag}")
            if spec.drift:
                self._drift(label, prof, root, tag, say)
        if parallel:
            from queuesgd.harness.apriori_parallel.campaign_pass import parallel_pass

            rows += parallel_pass(self, number, tag, parallel, root, rows_dir, predict_only, say)
        return rows

    #: The time to the microsecond (UTC, ISO 8601) that orders a stored prediction before its runs.
    now = staticmethod(_now)

    def identity(self, c: Configuration, number: int) -> dict[str, Any]:
        """What a stored prediction of ``c`` in pass ``number`` starts with (scheme, model, link, pass...)."""
        return {
            "scheme": c.scheme,
            "model": c.model,
            "rate": c.rate,
            "workers": c.workers,
            "params": dict(c.params),
            "random_delay": c.random_delay,
            "pass": number,
        }

    def _profile(
        self, label: str, configs: Sequence[Configuration], root: Path, tag: str, say: Any, loads: dict
    ) -> Profile:
        spec, model = self.spec, self.spec.models[label]
        mine = [c for c in configs if c.model == label]
        rows = [live_scheme(c.scheme) for c in mine]
        ddp = any(r.profile == DDP_STEP for r in rows) or spec.drift
        lock = any(r.lock_step and r.profile != DDP_STEP for r in rows)
        steps = ((DDP_STEP,) + ((DDP_LOCAL_STEP,) if spec.device != "cpu" else ()) if ddp else ()) + (
            ("plain",) if lock else ()
        )
        copies = sorted({c.workers for c in mine})
        only_ddp = all(r.profile == DDP_STEP for r in rows)
        prof, loads[label] = spec.discard.measure(
            f"profiles/{label}{tag}.json",
            lambda: make_profile(
                model.model,
                batch_size=model.batch_size,
                copies=copies,
                repetitions=spec.repetitions,
                model_options=dict(model.options),
                synchronized=steps,
                eager=sorted({c.workers for c, r in zip(mine, rows) if r.profile == "eager"}),
                device=spec.device,
                independent=(1,) if only_ddp else None,
                ps=any(r.update_role(c.params) == "ps" for c, r in zip(mine, rows)),
            ),
            say,
        )
        prof.save(root / "profiles" / f"{label}{tag}.json")
        say(f"profiled {label} ({model.model}) with copies {copies}")
        return prof

    def _key(self, c: Configuration, per_model: bool) -> tuple[Any, ...]:
        row = live_scheme(c.scheme)
        kind = row.calibration(row.check_params(c.params if not self._on_device(c) else None, c.workers))
        # Asynchronous schemes: while one worker's message crosses the link the others compute, so their
        # point-to-point calibration runs beside n - 1 busy processes; lock-step ones on idle cores.
        if kind == "allreduce":
            return kind, c.rate, c.workers, 0, c.model if per_model else None
        return kind, c.rate, 2, 0 if row.lock_step else c.workers - 1, c.model if per_model else None

    @staticmethod
    def _on_device(c: Configuration) -> bool:
        return any(h.name == "device" for h in live_scheme(c.scheme).harness)

    def _calibration(self, cals: Mapping[tuple, Calibration], c: Configuration, per_model: bool) -> Any:
        return None if c.workers == 1 else cals[self._key(c, per_model)]

    def _calibrate(
        self,
        configs: Sequence[Configuration],
        prof: Profile | None,
        sizes: Any,
        root: Path,
        tag: str,
        say: Any,
        loads: dict,
    ) -> dict[tuple, Calibration]:
        from queuesgd import units

        per_model = prof is not None
        out = {}
        for key in sorted({self._key(c, per_model) for c in configs if c.workers > 1}, key=repr):
            kind, rate, n, busy, label = key
            # a 'profiled' gap: DDP's compute phase of n workers, per model
            gap = float(np.mean(prof.sync_span[DDP_STEP][n]) if per_model else self.spec.calibration_gap)
            at = {"sizes": sizes} if sizes is not None and kind == "allreduce" else {}
            device = {"device": self.spec.device} if kind == "allreduce" else {}
            where = (
                "loopback" if rate is None else units.format_bandwidth(rate).replace("/", "").replace(" ", "")
            )
            name = f"{kind}-{where}-n{n}" + (f"-busy{busy}" if busy else "") + (f"-{label}" if label else "")
            cal, loads[key] = self.spec.discard.measure(
                f"calibrations/{name}{tag}.json",
                lambda: calibrate_network(kind, n, rate, gap=gap, busy=busy, **at, **device),  # noqa: B023
                say,
            )
            cal.save(root / "calibrations" / f"{name}{tag}.json")
            out[key] = cal
            say(
                f"calibrated {kind} n={n} at {where} beside {busy} busy: {cal.fit_text()}, r2 {cal.r2:.4f}"
            )
        return out

    def _runs(
        self,
        c: Configuration,
        pred: Mapping[str, Any],
        stored: str,
        prof: Profile,
        cal: Any,
        number: int,
        say: Any,
    ) -> list[dict[str, Any]]:
        """The configuration's runs with its stored prediction: again while the discard rule discards one."""
        spec = self.spec

        def once() -> dict[str, Any]:
            return run_apriori(
                c.scheme, prof, cal, c.workers, steps=spec.steps, warmup=spec.warmup, prediction=pred,
                **({} if self._on_device(c) else {"params": c.params, "random_delay": c.random_delay}),
            )  # fmt: skip

        return self.attempts(c, pred, stored, number, say, once, prof.model)

    def attempts(
        self,
        c: Configuration,
        pred: Mapping[str, Any],
        stored: str,
        number: int,
        say: Any,
        once: Callable[[], dict[str, Any]],
        workload: str,
    ) -> list[dict[str, Any]]:
        """``once()`` (one live run of ``c``, its result row) again while the discard rule discards one.

        Every attempt is a row with the protocol's fields (campaign, spec hash, pass, attempt, whether it
        counts and why not); a run that raises is a row too (``failure``), never hidden.
        """
        from queuesgd.harness.load import disturbed

        spec, rule = self.spec, self.spec.discard
        out = []
        for attempt in range(1, rule.attempts + 1):
            started = _now()
            try:
                row = once()
            except Exception as exc:  # a failed run is reported as a row, never hidden; the campaign goes on
                row = {
                    "scheme": c.scheme, "workers": c.workers, "workload": workload, "inputs": "a-priori",
                    "bandwidth": c.rate, "started": stamp(), "commit": code_version(),
                    "failure": f"{type(exc).__name__}: {exc}", "measured": None,
                    "predicted": pred["predicted"], "error": None,
                }  # fmt: skip
            row.setdefault("inputs_disturbed", pred.get("inputs_disturbed", []))
            reason = rule.reason(row)
            row.update(
                campaign=spec.name,
                spec_hash=spec.hash,
                model_label=c.model,
                stem=c.stem(spec.name),
                run_started=started,
                prediction_stored=stored,
                disturbed=disturbed(row.get("load"), rule.limit),
                attempt=attempt,
                counted=reason is None,
                discarded=reason,
            )
            row["pass"] = number
            row.update({k: v for k, v in self._annotate.items() if k not in row})
            out.append(row)
            shown = "FAILED " + row["failure"] if row.get("failure") else f"error {100 * row['error']:+6.1f}%"
            say(
                f"{c.scheme} {c.model} n={c.workers} {'loopback' if c.rate is None else c.rate}: {shown}"
                + (f" (not counted: {reason})" if reason else "")
            )
            if reason != "disturbed":
                break
        return out

    def _drift(self, label: str, prof: Profile, root: Path, tag: str, say: Any) -> None:
        """The one-worker DDP step measured again after the model's runs, against the profile's: a floor
        under any prediction's error from this machine's own drift (never an input)."""
        from queuesgd.harness.contention import measure_synchronized

        model = self.spec.models[label]
        again = measure_synchronized(
            model.model, (1,), batch_size=model.batch_size, repetitions=self.spec.repetitions,
            model_options=dict(model.options), device=prof.device,
        )[1]["span"]  # fmt: skip
        before, after = float(np.mean(prof.sync_span[DDP_STEP][1])), float(np.mean(again))
        path = root / f"drift{tag}.json"
        kept = read_json(path, list, "drift", "drift entries", document=list) if path.exists() else []
        entry = {
            "model": label,
            "profiled": before,
            "after_runs": after,
            "ratio": after / before,
            "when": stamp(),
        }
        write_json(path, [d for d in kept if d.get("model") != label] + [entry])
        say(
            f"drift of {label}: one-worker DDP step {before:.5f} s at profiling, {after:.5f} s after its runs"
        )
