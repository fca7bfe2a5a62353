"""The a-priori protocol: predict a real training run from inputs measured before it, then run it.

A prediction of a live run may use only

1. a **profile** from a separate profiling run (:func:`make_profile`): the
   model's layer-wise :class:`~queuesgd.Workload` measured on one worker by
   :func:`queuesgd.profile`, and the step times of ``k`` concurrent copies on
   this machine (:func:`~queuesgd.harness.contention.measure_concurrency`),
   which is how the prediction knows what ``k`` workers sharing the cores do;
2. a **network calibration** from a separate run made beforehand
   (:func:`calibrate_network`): timed all-reduces (DDP) or point-to-point
   messages (parameter server) on the emulated network, fitted to alpha-beta;
3. the **cluster description**: workers, the cores of the machine, the link.

Nothing measured in the run being predicted enters its prediction: the
predictions are computed and stored (with the time they were made) before
the runs start, and each result row records where every input came from
(``inputs: "a-priori"``, the profile's and the calibration's files and times).
The same-run mode of :func:`queuesgd.harness.validate` stays for diagnosis.

The records are JSON files, so a campaign can be split over sessions:
profile once, calibrate once per network and worker count, then predict and
run. :class:`Campaign` runs a whole campaign written down beforehand as a
spec (:func:`load_spec`: models, schemes, worker counts, links, passes and
the discard rule), as ``queuesgd validate --apriori SPEC.json`` does.

Examples
--------
>>> from queuesgd.workload import Layer, Workload
>>> from queuesgd.distributions import Empirical
>>> w = Workload(Empirical([0.010, 0.012]), None, batch_size=8, update_time=0.001,
...              layers=[Layer("b", 40.0, 0.002, 0.001), Layer("w", 4000.0, 0.004, 0.002)])
>>> p = Profile("mlp", 8, {}, w, {1: [0.010, 0.012], 2: [0.020, 0.024]}, {1: 0.001, 2: 0.002}, 2, "now")
>>> w2 = p.workload_at(2)                          # two copies sharing the cores: twice as slow here
>>> round(w2.compute_time, 6), [round(x.backward_time, 6) for x in w2.layers], w2.update_time
(0.022, [0.004, 0.008], 0.002)
"""

from queuesgd.harness.apriori.calibration import Calibration, calibrate_network
from queuesgd.harness.apriori.campaign import Campaign
from queuesgd.harness.apriori.ddp_model import ddp_calibration_sizes, ddp_scheme
from queuesgd.harness.apriori.discard import DiscardRule
from queuesgd.harness.apriori.inputs import StoredInputs, inputs_of, stored_inputs
from queuesgd.harness.apriori.predict import (
    SCHEMES,
    predict_apriori,
    predict_ddp,
    prediction_record,
    ps_update_per_gradient,
    straggler_recipe,
)
from queuesgd.harness.apriori.profile import STEPS, Profile, make_profile
from queuesgd.harness.apriori.results import CampaignResult, figures, pass_figures
from queuesgd.harness.apriori.run import run_apriori, step_phases
from queuesgd.harness.apriori.spec import CampaignSpec, load_spec, parse_spec

__all__ = [
    "SCHEMES",
    "STEPS",
    "Calibration",
    "Campaign",
    "CampaignResult",
    "CampaignSpec",
    "DiscardRule",
    "Profile",
    "StoredInputs",
    "calibrate_network",
    "ddp_calibration_sizes",
    "ddp_scheme",
    "figures",
    "inputs_of",
    "load_spec",
    "make_profile",
    "parse_spec",
    "pass_figures",
    "predict_apriori",
    "predict_ddp",
    "prediction_record",
    "ps_update_per_gradient",
    "run_apriori",
    "step_phases",
    "stored_inputs",
    "straggler_recipe",
]
