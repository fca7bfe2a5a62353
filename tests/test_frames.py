"""pandas / xarray conversions and the notebook displays (_repr_html_, _repr_latex_) of the results."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
import sympy

import queuesgd as q
from queuesgd.errors import MissingDependencyError

pd = pytest.importorskip("pandas")

#: 32 samples per step; one worker alone: 32 / (0.1 s + 2 x 10 MB / 125 MB/s) = 123.0769 samples/s.
W = q.Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
C = q.Cluster(1, "1Gbit/s")


def _sweep(**kw):
    return q.sweep(q.AsyncPS(), W, C, workers=[1, 2, 4], bandwidth=["1Gbit/s", "10Gbit/s"], **kw)


def test_sweep_to_pandas_has_the_result_columns_and_values():
    t = _sweep()
    df = t.to_pandas()
    assert list(df.columns) == list(t.columns)
    assert len(df) == len(t) == 6
    for k, v in t.columns.items():
        if v.dtype == object or v.dtype.kind == "U":
            assert df[k].tolist() == list(v)
        else:
            np.testing.assert_array_equal(df[k].to_numpy(), v)
    # the first row by hand (one worker on 1 Gbit/s), and bandwidths in bytes/s
    assert df["throughput"].iloc[0] == pytest.approx(32 / (0.1 + 2 * 10e6 / 125e6), rel=1e-12)
    assert df["bandwidth"].iloc[0] == 125e6 and df["bandwidth"].iloc[1] == 1.25e9
    assert df.attrs["scheme"] == "async-ps"
    assert df.attrs["units"]["throughput"] == "samples/s" and df.attrs["units"]["bandwidth"] == "B/s"


def test_sweep_to_pandas_keeps_swept_scheme_parameters():
    t = q.sweep(q.BackupWorkers(backups=0), W, q.Cluster(4, "1Gbit/s"), backups=[0, 1])
    df = t.to_pandas()
    assert df["backups"].tolist() == [0, 1]
    np.testing.assert_array_equal(df["throughput"].to_numpy(), t["throughput"])


def test_sweep_column_of_a_parameter_with_a_unit_is_si_and_sorts():
    t = q.sweep(q.StaticCutoff("25ms", "cancel"), W, q.Cluster(4, "1Gbit/s"), timeout=["25ms", 0.03, "20ms"])
    assert t["timeout"].dtype == np.float64 and t["timeout"].tolist() == [0.025, 0.03, 0.02]
    df = t.to_pandas()
    assert df.sort_values("timeout")["timeout"].tolist() == [0.02, 0.025, 0.03]
    assert df.attrs["units"]["timeout"] == "s" and t.parameter_units == {"timeout": "s"}


# Every scheme parameter that takes a unit (the schemes' docs): a value with a unit, its SI value.
UNIT_PARAMETERS = [
    (q.SyncPS(), "fusion_time", "2ms", 0.002, "s"),
    (q.SyncPS(), "fusion_bytes", "2MB", 2e6, "B"),
    (q.SyncPS(fusion="ddp"), "bucket_cap", "4MB", 4e6, "B"),
    (q.RingAllReduce(fusion="ddp"), "first_bucket", "1kB", 1e3, "B"),
    (q.TreeAllReduce(), "fusion_bytes", "1kB", 1e3, "B"),
    (q.HierarchicalAllReduce(per_node=2), "intra_bandwidth", "8Gbit/s", 1e9, "B/s"),
    (q.HierarchicalAllReduce(per_node=2), "intra_latency", "5us", 5e-6, "s"),
    (q.CompressedAllReduce("fp16"), "compress_time", "2ns", 2e-9, "s/B"),
    (q.CompressedAllReduce("fp16"), "decompress_time", "3ns", 3e-9, "s/B"),
    (q.CompressedAllReduce("fp16"), "fusion_time", "1ms", 1e-3, "s"),
    (q.BackupWorkers(backups=1, link="shared"), "send_buffer", "1MB", 1e6, "B"),
    (q.StaticCutoff("25ms", "finish", link="shared"), "send_buffer", "2kB", 2e3, "B"),
    (q.StaticCutoff("25ms", "cancel"), "timeout", "40ms", 0.04, "s"),
    (q.StaleSynchronous(staleness=1, link="shared"), "send_buffer", "3kB", 3e3, "B"),
    (q.EagerSGD(), "activation", "7ms", 0.007, "s"),
    (q.ShardedDataParallel(), "activation_bytes", "5MB", 5e6, "B"),
    (q.Pipeline(2, 2), "activation_bytes", "6MB", 6e6, "B"),
    (q.Pipeline(2, 2), "stash_bytes", "7MB", 7e6, "B"),
    (q.Pipeline(2, 2), "action_overhead", "8us", 8e-6, "s"),
    (q.Pipeline(2, 2, p2p="rendezvous"), "link_bucket", "9kB", 9e3, "B"),
    (q.HybridParallel(), "hidden_bytes", "2kB", 2e3, "B"),
]


@pytest.mark.parametrize(
    ("scheme", "name", "given", "si", "unit"),
    UNIT_PARAMETERS,
    ids=[f"{type(c[0]).__name__}-{c[1]}" for c in UNIT_PARAMETERS],
)
def test_every_parameter_with_a_unit_is_swept_in_si(scheme, name, given, si, unit):
    t = q.sweep(scheme, W, q.Cluster(4, "1Gbit/s"), **{name: [given, si]})
    assert t[name].dtype == np.float64 and t[name].tolist() == pytest.approx([si, si], rel=1e-12)
    assert t.parameter_units == {name: unit} and type(scheme).parameter_unit(name) == unit
    assert t.rows()[0][name] == pytest.approx(si, rel=1e-12)


def test_no_other_parameter_has_a_unit():
    fusion = {"fusion_bytes", "fusion_time", "bucket_cap", "first_bucket"}  # one mixin, tested above
    listed = {(type(s).__name__, n) for s, n, *_ in UNIT_PARAMETERS}
    from queuesgd.registry import SCHEMES

    for cls in SCHEMES.values():
        for name in cls.parameters():
            if cls.parameter_unit(name) is not None and name not in fusion:
                assert (cls.__name__, name) in listed, (cls.__name__, name)
    assert q.AsyncPS.parameter_unit("duplex") is None and q.StaticCutoff.parameter_unit("link") is None


def test_sweep_to_pandas_without_pandas_names_the_extra(monkeypatch):
    t = _sweep()
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(
        MissingDependencyError,
        match=r'pandas is not installed: pip install -e "\.\[pandas\]" in the queuesgd checkout$',
    ):
        t.to_pandas()


def _cells(html: str) -> list[list[str]]:
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)
    return [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r) for r in rows]


def test_sweep_html_shows_every_row_of_a_short_table():
    t = _sweep()
    html = t._repr_html_()
    cells = _cells(html)
    assert cells[0][:4] == ["workers", "bandwidth", "latency", "samples/s"]
    assert len(cells) == 1 + 6
    assert cells[1][0] == "1" and cells[1][1] == "1 Gbit/s"
    assert cells[1][3] == "123.08"  # 32 / 0.26 s, two decimals
    assert [c[0] for c in cells[1:]] == ["1", "1", "2", "2", "4", "4"]
    assert "<caption>async-ps: 6 configurations" in html


def test_sweep_html_elides_the_middle_of_a_long_table():
    t = q.sweep(q.AsyncPS(), W, C, workers=list(range(1, 41)))
    cells = _cells(t._repr_html_())
    body = cells[1:]
    # 25 first rows, an ellipsis row, the 5 last rows, and the note with the total
    assert [r[0] for r in body[:25]] == [str(n) for n in range(1, 26)]
    assert body[25] == ["..."] * len(cells[0])
    assert [r[0] for r in body[26:31]] == [str(n) for n in range(36, 41)]
    assert body[31] == ["40 rows; .to_pandas() or .rows() gives them all"]


def test_prediction_html_shows_the_hand_computed_numbers():
    p = q.predict(q.AsyncPS(), W, C)
    html = p._repr_html_()
    table = dict(c for c in _cells(html)[1:] if len(c) == 2)
    assert table["throughput"] == "123.08 samples/s"
    assert table["updates per second"] == f"{32 / 0.26 / 32:.6g}"  # 3.84615 updates/s
    assert table["iteration time"] == "260 ms"
    assert table["method"] == "mva" and table["bottleneck"] == p.bottleneck
    assert "<caption>async-ps with 1 workers</caption>" in html


def test_prediction_html_escapes_text():
    p = q.predict(q.AsyncPS(), W, C)
    import dataclasses

    odd = dataclasses.replace(p, reason="a < b & c")
    assert "a &lt; b &amp; c" in odd._repr_html_()


def test_whatif_to_pandas_equals_the_columns():
    r = q.whatif("resnet50", workers=[16, 64], bandwidth=["10Gbit/s", "100Gbit/s"], compression=[1, 5])
    df = r.to_pandas()
    assert len(df) == len(r) == 8
    for k, v in r.columns.items():
        if v.dtype.kind in "OU":
            assert df[k].tolist() == v.tolist()
        else:
            np.testing.assert_array_equal(df[k].to_numpy(), v)
    assert df.attrs["units"]["overhead"] == "s"
    # scaling factor = t_batch / (t_batch + overhead), row by row (the paper's definition)
    np.testing.assert_allclose(df["scaling_factor"], df["batch_time"] / (df["batch_time"] + df["overhead"]))


def test_whatif_to_xarray_is_the_grid():
    xr = pytest.importorskip("xarray")
    r = q.whatif("resnet50", workers=[16, 32, 64], bandwidth="10Gbit/s", compression=[1, 2, 5])
    ds = r.to_xarray()
    assert isinstance(ds, xr.Dataset)
    assert ds["scaling_factor"].dims == ("workers", "compression") == r.axes
    np.testing.assert_array_equal(ds["scaling_factor"].values, r.scaling_factor)
    np.testing.assert_array_equal(ds["overhead"].values, r.overhead)
    np.testing.assert_array_equal(ds["messages"].values, r.messages)
    assert ds["workers"].values.tolist() == [16, 32, 64]
    assert ds["compression"].values.tolist() == [1, 2, 5]
    # scalar arguments are scalar coordinates
    assert ds["bandwidth"].item() == 1.25e9 and ds["bandwidth"].attrs["units"] == "B/s"
    assert ds["workload"].item() == "resnet50"
    # a label lookup gives the same number as whatif with those scalars
    one = q.whatif("resnet50", workers=32, bandwidth="10Gbit/s", compression=2)
    assert ds["scaling_factor"].sel(workers=32, compression=2).item() == pytest.approx(one.scaling_factor)


def test_whatif_to_xarray_four_axes():
    pytest.importorskip("xarray")
    r = q.whatif(
        ["resnet50", "vgg16"], workers=[16, 64], bandwidth=["10Gbit/s", "40Gbit/s"], compression=[1, 4]
    )
    ds = r.to_xarray()
    assert ds["scaling_factor"].shape == r.shape == (2, 2, 2, 2)
    np.testing.assert_array_equal(ds["scaling_factor"].values, r.scaling_factor)
    assert ds["workload"].values.tolist() == ["resnet50", "vgg16"]
    assert ds["bandwidth"].values.tolist() == [1.25e9, 5e9]
    v = q.whatif("vgg16", workers=64, bandwidth="40Gbit/s", compression=4).scaling_factor
    got = ds["scaling_factor"].sel(workload="vgg16", workers=64, bandwidth=5e9, compression=4).item()
    assert got == pytest.approx(v)


def test_whatif_scalars_only():
    pytest.importorskip("xarray")
    r = q.whatif("resnet50", workers=64, bandwidth="100Gbit/s")
    ds = r.to_xarray()
    assert ds["scaling_factor"].dims == ()
    assert ds["scaling_factor"].item() == r.scaling_factor


def test_whatif_without_xarray_or_pandas_names_the_extra(monkeypatch):
    r = q.whatif("resnet50", workers=[16, 64])
    monkeypatch.setitem(sys.modules, "xarray", None)
    with pytest.raises(
        MissingDependencyError,
        match=r'xarray is not installed: pip install -e "\.\[xarray\]" in the queuesgd checkout$',
    ):
        r.to_xarray()
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(
        MissingDependencyError, match=r'pip install -e "\.\[pandas\]" in the queuesgd checkout$'
    ):
        r.to_pandas()


def test_formula_latex_display_is_sympy_latex_of_the_expression():
    f = q.derive(q.SyncPS())
    assert f._repr_latex_() == "$\\displaystyle X = " + sympy.latex(f.expr) + "$"
    n = sympy.Symbol("n", positive=True)
    g = q.Formula(n / (1 + n), {"n": n}, {}, "saturating")
    assert g._repr_latex_() == r"$\displaystyle X = \frac{n}{n + 1}$"
