"""Where does profile_interleaved's time go on CUDA (pass 5: resnet50 fp32 profile 2.8 s per step)?"""

import cProfile, io, pstats, sys, time, os
import torch
from queuesgd.profiler import profile_interleaved
from queuesgd.profiler_step import training_step
from queuesgd.profiler_memory import backward_peak

dev = sys.argv[1]
out = sys.argv[2]
if dev == "cuda":
    import torchvision

    make = lambda: torchvision.models.resnet50()
    shape, bs = (3, 224, 224), 64
else:
    from queuesgd.harness.models import resnet18s

    make = lambda: resnet18s(width=16)
    shape, bs = (3, 32, 32), 16
pr = cProfile.Profile()
t = time.perf_counter()
pr.enable()
run = profile_interleaved(
    make(),
    batch_size=bs,
    input_shape=shape,
    blocks=2,
    block_steps=4,
    detailed=3,
    warmup=3,
    device=dev,
    threads=None,
)
pr.disable()
wall = time.perf_counter() - t
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("cumtime").print_stats(45)
s2 = io.StringIO()
pstats.Stats(pr, stream=s2).sort_stats("tottime").print_stats(25)
# the memory pass alone, timed
step = training_step(
    make(),
    batch_size=bs,
    input_shape=shape,
    inputs=None,
    loss=None,
    autocast=None,
    accumulation=1,
    device=dev,
    optimizer=None,
    seed=0,
)
for _ in range(2):
    step.run_micro(True)()
    step.update()
step.opt.zero_grad(set_to_none=True)
if dev == "cuda":
    torch.cuda.synchronize()
t0 = time.perf_counter()
m = backward_peak(step)
bp = time.perf_counter() - t0
with open(os.path.join(out, f"diag-{dev}.txt"), "w") as f:
    f.write(f"wall {wall:.2f} s; per step {run.workload.provenance['profile_seconds_per_step']:.4f}\n")
    f.write(f"backward_peak alone {bp:.2f} s: {m}\n")
    f.write(s.getvalue())
    f.write(s2.getvalue())
print(open(os.path.join(out, f"diag-{dev}.txt")).read()[:3000])
