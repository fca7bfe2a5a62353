"""Where does ``profile_interleaved``'s own time go on a CUDA device? (issue 21, pass 5 on an H200)

    python validation/diagnose_profile_cuda.py cuda OUT     # torchvision ResNet-50, batch 64, fp32
    python validation/diagnose_profile_cuda.py cpu OUT      # resnet18s (width 16), batch 16: a dry run

Pass 5 on an H200 profiled ResNet-50 fp32 in 204 s (2.8 s per step counted)
while its timed steps ran at the plain loop's 32 ms. This profiles the same
model under ``cProfile`` with a tiny protocol (3 warm-up steps, 2 blocks of
4, 3 detailed steps), then times the memory pass (``backward_peak``) alone.

A diagnosis, not evidence. Its first run (2026-11-26, a fresh H200) passed
its 190 s limit before it wrote anything; since then each phase is written to
``OUT/diag-<device>.txt`` as it ends, and every thread's stack to
``OUT/stacks-<device>.txt`` every 30 s.
"""

from __future__ import annotations

import cProfile
import faulthandler
import io
import pstats
import sys
import time
from pathlib import Path

from queuesgd.profiler import profile_interleaved
from queuesgd.profiler_memory import backward_peak
from queuesgd.profiler_step import training_step


def model_and_batch(device: str) -> tuple[object, tuple[int, ...], int]:
    """A model factory, one sample's shape and the batch size for ``device``."""
    if device == "cuda":
        import torchvision

        return torchvision.models.resnet50, (3, 224, 224), 64
    from queuesgd.harness.models import resnet18s

    return (lambda: resnet18s(width=16)), (3, 32, 32), 16


def main(device: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / f"diag-{device}.txt", "w")  # noqa: SIM115 - written as each phase ends
    stacks = open(out / f"stacks-{device}.txt", "w")  # noqa: SIM115
    faulthandler.dump_traceback_later(30, repeat=True, file=stacks)

    def say(text: str) -> None:
        log.write(f"{time.strftime('%H:%M:%S')} {text}\n")
        log.flush()

    make, shape, batch = model_and_batch(device)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    run = profile_interleaved(
        make(),
        batch_size=batch,
        input_shape=shape,
        blocks=2,
        block_steps=4,
        detailed=3,
        warmup=3,
        device=device,
        threads=None,
    )
    prof.disable()
    per = run.workload.provenance["profile_seconds_per_step"]
    say(f"profile_interleaved {time.perf_counter() - t0:.2f} s; its own time per step {per:.4f} s")
    for order in ("cumtime", "tottime"):
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats(order).print_stats(40)
        log.write(text.getvalue())
    step = training_step(
        make(),
        batch_size=batch,
        input_shape=shape,
        inputs=None,
        loss=None,
        autocast=None,
        accumulation=1,
        device=device,
        optimizer=None,
        seed=0,
    )
    for _ in range(2):
        step.run()
    t0 = time.perf_counter()
    memory = backward_peak(step)
    say(f"backward_peak alone {time.perf_counter() - t0:.2f} s: {memory}")
    faulthandler.cancel_dump_traceback_later()
    stacks.close()
    log.close()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
