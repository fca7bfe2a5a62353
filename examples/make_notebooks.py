"""Write the example notebooks of this folder from the cells below.

The notebooks are committed without outputs; ``tests/test_examples.py``
executes each one and checks that the committed files are what this script
writes. After editing a cell here, run::

    python examples/make_notebooks.py            # rewrite the .ipynb files
    python examples/make_notebooks.py --check    # exit 1 if one differs

A cell is a string: ``md(...)`` for Markdown, ``code(...)`` for Python.
"""

from __future__ import annotations

import sys
from pathlib import Path
from textwrap import dedent

import nbformat

HERE = Path(__file__).resolve().parent


def md(text: str) -> tuple[str, str]:
    return ("markdown", dedent(text).strip())


def code(text: str) -> tuple[str, str]:
    return ("code", dedent(text).strip())


DERIVE = [
    md(
        """
        # Derive a throughput formula and plot it

        `queuesgd.derive` turns a coordination scheme into its throughput (training samples per
        second) as a SymPy formula in named symbols. This notebook derives the synchronous parameter
        server's formula, plots it against the number of workers `n`, takes its limit, and asks
        `Formula.optimize` where the throughput is largest, for the workers and for the number of
        backup workers. The last cell checks the formula against `queuesgd.predict`.

        Runs in a few seconds; needs `pip install -e ".[examples]"` in the queuesgd checkout.
        """
    ),
    code(
        """
        import matplotlib.pyplot as plt
        import numpy as np

        import queuesgd as q
        """
    ),
    md(
        """
        ## The formula

        With exponential compute times of rate `mu` (the default `compute="exponential"`), the
        slowest of `n` workers takes `H_n / mu` on average; then every worker pushes its gradient
        (`G` bytes) and pulls the parameters (`P` bytes) through the parameter server's links
        (`s` shards of bandwidth `B`).
        """
    ),
    code(
        """
        f = q.derive(q.SyncPS())
        print(f)  # the expression and the meaning of each symbol
        """
    ),
    code(
        """
        f  # shown as LaTeX in Jupyter
        """
    ),
    md(
        """
        ## Plotted against the number of workers

        `Formula.evaluate` broadcasts NumPy arrays and reads unit strings. The values: a
        ResNet-50-sized model (97.5 MiB of gradient and of parameters), 128 ms of compute per step on
        average, 32 samples per worker step, 50 us of latency, one PS shard, no update time.
        """
    ),
    code(
        """
        values = dict(mu=1 / 0.128, m=32, G="97.5MiB", P="97.5MiB", alpha="50us", u=0, s=1)
        bandwidths = ["10Gbit/s", "25Gbit/s", "100Gbit/s"]
        n = np.arange(1, 129)
        curves = {B: f.evaluate(n=n, B=B, **values) for B in bandwidths}
        {B: round(float(x[-1]), 1) for B, x in curves.items()}  # samples/s at n = 128
        """
    ),
    md(
        """
        ## The cap: the limit as `n` grows

        Every added worker adds a push and a pull to the same PS link, so the throughput tends to a
        cap that no compute speed changes:
        """
    ),
    code(
        """
        f.limit("n")
        """
    ),
    code(
        """
        # Substitute the numbers first, then take the limit: one number per bandwidth.
        caps = {B: float(f.subs(B=B, **values).limit("n")) for B in bandwidths}

        fig, ax = plt.subplots(figsize=(7, 4))
        for B, x in curves.items():
            (line,) = ax.plot(n, x, label=f"B = {B}")
            ax.axhline(caps[B], color=line.get_color(), linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("workers n")
        ax.set_ylabel("samples/s")
        ax.set_title("Synchronous PS: throughput and its limit (dotted)")
        ax.legend()
        caps
        """
    ),
    md(
        """
        ## Where is the throughput largest?

        `Formula.optimize` never reports a point it has not checked. With numbers for every other
        symbol it evaluates every integer of the search interval; here the largest throughput is at
        the upper bound, and the result says that this is no interior maximum: the synchronous PS
        gains from every worker, ever more slowly.
        """
    ),
    code(
        """
        print(f.optimize("n", B="10Gbit/s", upper=1024, **values))
        """
    ),
    md(
        """
        Backup workers (Chen et al. 2016) change the picture: the PS applies the first `n - b`
        gradients of each step and the `b` late workers abort (`stragglers="cancel"`). Dropping
        more gradients shortens the wait for the slowest workers but applies fewer samples per
        update; with 16 workers, 100 ms of exponential compute and 1 MB messages on 10 Gbit/s
        there is a best `b`, an interior maximum with its neighbours as evidence:
        """
    ),
    code(
        """
        g = q.derive(q.BackupWorkers(backups=1, stragglers="cancel"))
        g
        """
    ),
    code(
        """
        bvalues = dict(n=16, mu=10, m=32, G="1MB", P="1MB", B="10Gbit/s", alpha=0, u=0, s=1)
        best = g.optimize("b", upper=15, **bvalues)
        print(best)

        b = np.arange(16)
        xb = g.evaluate(b=b, **bvalues)
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(b, xb, marker="o")
        ax.plot([best.argmax], [best.maximum], "*", markersize=16, color="C3", label="verified optimum")
        ax.set_xlabel("backup workers b (of n = 16)")
        ax.set_ylabel("samples/s")
        ax.legend();
        """
    ),
    md(
        """
        ## Check: the formula against `predict`

        `predict` computes the same scheme through its own road (the order statistics of
        `queuesgd.orderstats`, the cost model of `queuesgd.schemes`), without SymPy. The formula,
        its limit and its optimum must agree with it, and the cap with the hand formula
        `m B s / (G + P)`.
        """
    ),
    code(
        """
        w = q.Workload(q.Exponential(mean=0.128), "97.5MiB", parameter_bytes="97.5MiB", batch_size=32)
        for B in bandwidths:
            for k in (1, 2, 8, 64, 128):
                p = q.predict(q.SyncPS(), w, q.Cluster(k, B, latency="50us"))
                assert np.isclose(curves[B][k - 1], p.throughput, rtol=1e-9), (B, k, p.throughput)
            gbit = float(B.removesuffix("Gbit/s"))
            hand = 32 * (gbit * 1e9 / 8) / (2 * 97.5 * 2**20)  # m B s / (G + P) in bytes/s and bytes
            assert np.isclose(caps[B], hand, rtol=1e-12), (B, caps[B], hand)

        wb = q.Workload(q.Exponential(mean=0.1), "1MB", parameter_bytes="1MB", batch_size=32)
        by_b = [
            q.predict(q.BackupWorkers(k, stragglers="cancel"), wb, q.Cluster(16, "10Gbit/s")).throughput
            for k in range(16)
        ]
        assert np.allclose(xb, by_b, rtol=1e-9)
        assert best.interior and best.argmax == int(np.argmax(by_b)) == 10
        assert np.isclose(best.maximum, max(by_b), rtol=1e-9)
        print("formula = predict at", 5 * len(bandwidths) + 16, "points; verified optimum b =", best.argmax)
        """
    ),
]


SWEEP = [
    md(
        """
        # Solve and sweep a model: async PS against ring all-reduce

        How do an asynchronous parameter server and a ring all-reduce scale when training ResNet-50
        (the catalog's profile, measured on a V100: 128 ms per step, 97.5 MiB of gradient) on more
        workers and faster networks? This notebook predicts one configuration, sweeps workers x
        bandwidth in one vectorized call per scheme, turns the results into pandas tables and plots
        them, and asks `whatif` how much gradient compression the ring would need. The last cell
        checks the sweep against `predict`, row by row.

        Runs in a few seconds; needs `pip install -e ".[examples]"` in the queuesgd checkout.
        """
    ),
    code(
        """
        import matplotlib.pyplot as plt
        import numpy as np
        import pandas as pd

        import queuesgd as q
        """
    ),
    md(
        """
        ## One configuration

        `predict` chooses a solution method and says why (`reason`); the result carries the
        throughput, the bottleneck and a per-phase breakdown, and Jupyter shows it as a table.
        """
    ),
    code(
        """
        schemes = {"async-ps": q.AsyncPS(), "ring-allreduce": q.RingAllReduce()}
        c16 = q.Cluster(workers=16, bandwidth="10Gbit/s")
        for s in schemes.values():
            p = q.predict(s, "resnet50", c16)
            print(f"{p.scheme:15} {p.throughput:7.1f} samples/s  bottleneck: {p.bottleneck:8} via {p.method}")
            print("   ", p.reason)
        p
        """
    ),
    md(
        """
        ## A sweep: workers x bandwidth

        `sweep` evaluates every combination at once (one batched exact MVA for the asynchronous
        PS, one vectorized closed form for the ring). `to_pandas()` gives a DataFrame with one row
        per configuration; bandwidths are in bytes/s, as everywhere inside queuesgd.
        """
    ),
    code(
        """
        workers = [1, 2, 4, 8, 16, 32, 64]
        bandwidths = ["10Gbit/s", "25Gbit/s", "100Gbit/s"]
        base = q.Cluster(workers=1, bandwidth="10Gbit/s")
        tables = {}
        for key, s in schemes.items():
            tables[key] = q.sweep(s, "resnet50", base, workers=workers, bandwidth=bandwidths)
        frames = [t.to_pandas().assign(scheme=key) for key, t in tables.items()]
        df = pd.concat(frames, ignore_index=True)
        df["Gbit/s"] = (df["bandwidth"] * 8 / 1e9).round().astype(int)
        df.head()
        """
    ),
    md(
        """
        The scaling factor divides the throughput by `n` times one worker's compute-bound
        throughput (Zhang et al., NetAI 2020): 1 is linear scaling.
        """
    ),
    code(
        """
        df.pivot_table(index="workers", columns=["scheme", "Gbit/s"], values="scaling_factor").round(2)
        """
    ),
    code(
        """
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        for (key, gbit), rows in df.groupby(["scheme", "Gbit/s"]):
            style = "-" if key == "ring-allreduce" else "--"
            label = f"{key}, {gbit} Gbit/s"
            left.plot(rows["workers"], rows["throughput"], style, marker="o", label=label)
            right.plot(rows["workers"], rows["scaling_factor"], style, marker="o", label=label)
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("workers")
        left.set_yscale("log")
        left.set_ylabel("samples/s")
        right.set_ylabel("scaling factor")
        right.set_ylim(0, 1.05)
        right.legend(fontsize=8)
        fig.tight_layout()
        """
    ),
    md(
        """
        Every worker of the asynchronous PS pushes and pulls the whole 97.5 MiB model through the
        PS's one link, so its throughput stops growing once that link is saturated (the
        `bottleneck` column says `uplink`); a ring all-reduce moves `2 (n-1)/n` of the gradient per
        worker, less than twice the gradient whatever `n`.

        ## What if the network ran at full line rate?

        `whatif` is the analysis of *Is Network the Bottleneck of Distributed Training?*: the ring
        all-reduce's layer-wise task graph (gradients fused into messages and all-reduced while the
        backward pass goes on), with a compression ratio dividing the bytes on the wire.
        """
    ),
    code(
        """
        wi = q.whatif("resnet50", workers=[16, 32, 64], bandwidth=bandwidths, compression=[1, 2, 5, 10])
        wf = wi.to_pandas()
        wf["Gbit/s"] = (wf["bandwidth"] * 8 / 1e9).round().astype(int)
        wf.pivot_table(index=["workers", "Gbit/s"], columns="compression", values="scaling_factor").round(3)
        """
    ),
    code(
        """
        fig, ax = plt.subplots(figsize=(7, 4))
        for gbit, rows in wf[wf["workers"] == 64].groupby("Gbit/s"):
            ax.plot(rows["compression"], rows["scaling_factor"], marker="o", label=f"{gbit} Gbit/s")
        ax.set_xscale("log")
        ax.set_xlabel("compression ratio")
        ax.set_ylabel("scaling factor, 64 workers")
        ax.legend();
        """
    ),
    md(
        """
        ## Check: the sweep row by row, and `whatif` against the fine task graph

        Every row of a sweep must be the number `predict` gives for that one configuration. And
        `predict(RingAllReduce(), w, cluster, method="fine")` is `whatif`'s task graph with the
        forward pass in front and the local update after the last all-reduce, so its iteration time
        is `whatif`'s plus exactly the update time (see `docs/whatif.md`).
        """
    ),
    code(
        """
        checked = 0
        for key, t in tables.items():
            for row in t.rows():
                p = q.predict(schemes[key], "resnet50", q.Cluster(row["workers"], row["bandwidth"]))
                assert np.isclose(row["throughput"], p.throughput, rtol=1e-9), (key, row, p.throughput)
                assert row["method"] == p.method
                checked += 1

        r50 = q.load_workload("resnet50")
        for row in wi.rows():
            if row["compression"] == 1:
                cluster = q.Cluster(row["workers"], row["bandwidth"])
                fine = q.predict(q.RingAllReduce(), r50, cluster, method="fine")
                expected = row["iteration_time"] + r50.update_time
                assert np.isclose(fine.iteration_time, expected, rtol=1e-12), row
                checked += 1
        print(checked, "rows agree")
        """
    ),
]


COMPARE = [
    md(
        """
        # Cross-check predictions against measured runs

        `queuesgd.compare` takes throughput you measured (a CSV, a DataFrame, columns or rows),
        predicts the same configurations with `predict`, and reports each error. The file
        `measured-runs.csv` next to this notebook holds nine real runs of queuesgd's own validation
        campaign, copied from `validation/results/` (section 2 of `validation/REPORT.md`, recorded on
        2026-11-22): a ring all-reduce, a synchronous PS and an asynchronous PS with 2, 4 and 8
        workers, each a PyTorch process in its own network namespace, links shaped to 1 Gbit/s with
        `tc tbf` on one 2-core machine. Compute was a timed wait (lognormal, mean 50 ms, squared
        coefficient of variation 0.05), the gradient 1 MB, the batch 32 samples per worker. The
        comments at the top of the file say what each column is.

        Runs in a few seconds; needs `pip install -e ".[examples]"` in the queuesgd checkout.
        """
    ),
    code(
        """
        import matplotlib.pyplot as plt
        import numpy as np
        import pandas as pd

        import queuesgd as q

        runs = pd.read_csv("measured-runs.csv", comment="#")
        runs
        """
    ),
    md(
        """
        `bandwidth` and `latency` are the alpha-beta fits the harness measured on the same links just
        before each run; `compare` reads them as configuration columns, one cluster per row. The
        other extra columns are left out with `ignore=`. The workload is what the campaign
        configured; the parameter server's measured time to apply a gradient was 0.13-0.42 ms, so
        we take 0.2 ms.
        """
    ),
    code(
        """
        IGNORE = ["started", "interval_low", "interval_high", "harness_predicted"]
        compute = q.LogNormal.from_mean_scv("50ms", 0.05)
        w = q.Workload(compute, "1MB", batch_size=32, update_time="0.2ms", name="emulated")

        first = q.compare("measured-runs.csv", workload=w, ignore=IGNORE)
        print(first.table())
        """
    ),
    md(
        """
        The ring all-reduce's predictions are within 8.1% of the measurements. The two parameter
        servers miss by up to 19%, and their scheme pages say why (`docs/schemes/sync-ps.md`,
        `docs/schemes/async-ps.md`):

        - **sync PS**: the closed form starts every push after the barrier (when the slowest worker
          is done) and sends the `n` pushes and `n` pulls one after the other on the PS's link. On a
          real network a worker pushes as soon as it is done, while the stragglers still compute,
          and pushes and pulls use the two directions of a full-duplex link. The fine-grained model
          (`method="fine"`, here with the gradient as one tensor, a `Layer`) follows each message.
        - **async PS**: exact MVA takes the PS's transfers and updates as exponential service times
          (the product-form assumption), so the workers queue more than they do when a 1 MB
          transfer takes a nearly fixed time. `AsyncPS(service="deterministic")` simulates fixed
          transfer times.

        These are the models the validation harness itself predicts these runs with. One
        `compare` per scheme, on the rows of that scheme:
        """
    ),
    code(
        """
        one_tensor = q.Workload(
            compute,
            "1MB",
            batch_size=32,
            update_time="0.2ms",
            name="emulated",
            layers=[q.Layer("gradient", "1MB", 0.0)],
        )
        models = {  # scheme column -> (scheme, workload, method)
            "ring-allreduce": (q.RingAllReduce(), w, "auto"),
            "sync-ps": (q.SyncPS(), one_tensor, "fine"),
            "async-ps": (q.AsyncPS(service="deterministic"), w, "auto"),
        }
        refined = {}
        for key, (s, wl, method) in models.items():
            rows = runs[runs["scheme"] == key].drop(columns="scheme")
            refined[key] = q.compare(rows, s, wl, method=method, ignore=IGNORE)
        second = pd.concat([r.to_pandas() for r in refined.values()], ignore_index=True)
        shown = ["scheme", "workers", "measured", "predicted", "predicted_low", "predicted_high", "error"]
        second[shown + ["method"]]
        """
    ),
    code(
        """
        before = first.to_pandas()
        fig, ax = plt.subplots(figsize=(6, 6))
        lim = np.array([400, 4000])
        ax.fill_between(lim, lim / 1.15, lim * 1.15, color="0.9", label="within 15%")
        ax.plot(lim, lim, color="0.5", linewidth=1)
        for i, key in enumerate(models):
            rec = runs[runs["scheme"] == key]
            measured = rec["samples_per_second"]
            xerr = [measured - rec["interval_low"], rec["interval_high"] - measured]
            predicted = refined[key].to_pandas()["predicted"]
            ax.errorbar(measured, predicted, xerr=xerr, fmt="o", color=f"C{i}", label=key)
            ax.plot(measured, before[before["scheme"] == key]["predicted"], "x", color=f"C{i}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(*lim)
        ax.set_ylim(*lim)
        ax.set_xlabel("measured samples/s (95% interval)")
        ax.set_ylabel("predicted samples/s (x: default model)")
        ax.legend();
        """
    ),
    md(
        """
        ## Check: the comparison against `predict` and the recorded predictions

        Each predicted number of `compare` must be what `predict` gives for the same configuration
        (simulations are seeded with 0 in both), each measured number the file's. Independently,
        the harness predicted these runs when they ran, from the compute times measured in each run
        (not from the configured law used here): the refined predictions must be within 2% of those
        recorded ones, and within the validation report's 15% of the measurements.
        """
    ),
    code(
        """
        assert np.allclose(before["measured"], runs["samples_per_second"], rtol=1e-12)
        for key, (s, wl, method) in models.items():
            table = refined[key].to_pandas()
            recorded = runs[runs["scheme"] == key]
            for (_, row), (_, rec) in zip(table.iterrows(), recorded.iterrows(), strict=True):
                cluster = q.Cluster(int(row["workers"]), row["bandwidth"], latency=row["latency"])
                p = q.predict(s, wl, cluster, method, rng=0)
                assert np.isclose(row["predicted"], p.throughput, rtol=1e-12), (key, row["workers"])
                assert row["measured"] == rec["samples_per_second"]
                assert abs(row["predicted"] / rec["harness_predicted"] - 1) < 0.02, (key, row["workers"])
        errors = second["error"].abs()
        assert errors.max() < 0.15, errors.max()
        print(f"refined: median |error| {errors.median():.1%}, max {errors.max():.1%} over 9 runs")
        """
    ),
]


NOTEBOOKS = {
    "01-derive-a-formula.ipynb": DERIVE,
    "02-predict-and-sweep.ipynb": SWEEP,
    "03-compare-measured-runs.ipynb": COMPARE,
}


def build(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    """One notebook without outputs, with stable cell ids: an unchanged notebook is rewritten unchanged."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for i, (kind, text) in enumerate(cells):
        cell = nbformat.v4.new_markdown_cell(text) if kind == "markdown" else nbformat.v4.new_code_cell(text)
        cell["id"] = f"cell-{i:02d}"
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def render(cells: list[tuple[str, str]]) -> str:
    return nbformat.writes(build(cells)) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, cells in NOTEBOOKS.items():
        path = HERE / name
        text = render(cells)
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print("out of date (run python examples/make_notebooks.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
