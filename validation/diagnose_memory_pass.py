"""Why did the memory pass take 127-173 s on an H200? (issue 21, pass 6) A diagnosis, not evidence.

    PYTHONPATH=. python validation/diagnose_memory_pass.py cuda OUT.json   # torchvision ResNet-50, batch 64
    PYTHONPATH=. python validation/diagnose_memory_pass.py cpu OUT.json    # resnet18s (width 16), batch 16

Pass 6 (``validation/fidelity/h200-pass6.json``) spent 127.7 s and 173.3 s of
the profile of ResNet-50 (fp32, bf16) in ``backward_peak``, against 0.4 s for
a ResNet-50 on this machine's CPU; its stack dumps were in the graph walk's
hook registration and in the replay, all Python. Suspected: the walk deduplicated
nodes by ``id()`` of their Python objects without holding them, and autograd
makes a new object for a node each time it is reached once the last is gone,
so a node could be walked and hooked again once per path through the
residual blocks. This measures, on the same model:

- the old walk (as it stood at commit d44b3bd, hooks registered as it did,
  no object held): nodes walked, hooks registered and seconds, stopped at
  ``LIMIT`` visits or ``SECONDS``;
- the same walk holding every node (the fix): nodes walked;
- ``backward_peak`` as it now stands: seconds and its result.

Each entry is written to ``OUT.json`` as it ends. Its run on the H200 that ran pass 6:
``validation/fidelity/probes/h200-diag-memory.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from queuesgd.profiler_memory import backward_peak
from queuesgd.profiler_step import training_step

LIMIT = 3_000_000
SECONDS = 15.0


def _walk(loss: Any, hold: bool) -> dict[str, Any]:
    """The walk of ``_Trace`` (d44b3bd), with no-op hooks; ``hold`` keeps each node's object."""
    t0 = time.perf_counter()
    seen: set[int] = set()
    held: list[Any] = []
    handles: list[Any] = []
    visits = 0
    todo = [loss.grad_fn]
    stopped = None
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        if hold:
            held.append(node)
        seen.add(id(node))
        visits += 1
        handles.append(node.register_prehook(lambda g: None))
        if not hasattr(node, "variable"):
            handles.append(node.register_hook(lambda gi, go: None))
        todo.extend(n for n, _ in node.next_functions)
        if visits >= LIMIT or time.perf_counter() - t0 > SECONDS:
            stopped = f"stopped at {visits} visits, {time.perf_counter() - t0:.1f} s"
            break
    out = {"visits": visits, "hooks": len(handles), "seconds": time.perf_counter() - t0, "stopped": stopped}
    for h in handles:
        h.remove()
    return out


def main() -> None:
    device, out = sys.argv[1], Path(sys.argv[2])
    doc: dict[str, Any] = {"device": device}
    import torch

    if device == "cuda":
        import torchvision

        doc["device_name"] = torch.cuda.get_device_name(0)
        make, shape, batch = torchvision.models.resnet50, (3, 224, 224), 64
    else:
        from queuesgd.harness.models import resnet18s

        make, shape, batch = (lambda: resnet18s(width=16)), (3, 32, 32), 16
    doc["torch"] = torch.__version__

    def save() -> None:
        out.write_text(json.dumps(doc, indent=1) + "\n")
        print(json.dumps(doc), flush=True)

    for amp in (None, torch.bfloat16):
        tag = "bf16" if amp is not None else "fp32"
        step = training_step(make(), batch_size=batch, input_shape=shape, inputs=None, loss=None,
                             autocast=amp, accumulation=1, device=device, optimizer=None, seed=0)
        for hold in (True, False):
            loss = step.forward(True)
            doc[f"{tag} walk {'holding' if hold else 'old'}"] = _walk(loss, hold)
            del loss
            save()
        t0 = time.perf_counter()
        m = backward_peak(step)
        doc[f"{tag} backward_peak"] = {"seconds": time.perf_counter() - t0, **m}
        save()


if __name__ == "__main__":
    main()
