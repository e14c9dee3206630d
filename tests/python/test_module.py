"""Tests of the iclprobe Python module, run by ctest with Debian's python3:
    python3 tests/python/test_module.py ICLPROBE_BINARY WORKDIR
Exits 77 (ctest: skipped) when numpy or the module cannot be imported, with the reason.
Known answers: the module's ridge probe on arrays equals the CLI's probes.h5 on the same states
bit for bit (the same code); targets equal their closed forms; bad shapes and dtypes raise
ValueError naming the argument."""

import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77

try:
    import numpy as np
except ImportError as e:  # the module needs numpy; without it the tests do not apply
    print("SKIP: numpy is not importable (%s); install python3-numpy" % e)
    sys.exit(SKIP)
try:
    import iclprobe
except ImportError as e:
    print("SKIP: the iclprobe module is not importable (%s); build with pybind11-dev" % e)
    sys.exit(SKIP)

BINARY = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="iclprobe_py_", dir=sys.argv[2] if len(sys.argv) > 2 else None)
failures = []


def check(name, fn):
    try:
        fn()
        print("ok   %s" % name)
    except Exception as e:  # noqa: BLE001 (report every failure, then exit non-zero)
        failures.append(name)
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e))


def run(*args):
    r = subprocess.run([BINARY] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("iclprobe %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))


def raises_value_error(fn, *words):
    try:
        fn()
    except ValueError as e:
        for w in words:
            assert w in str(e), "message %r lacks %r" % (str(e), w)
        return
    raise AssertionError("no ValueError")


# A compiled one-step gd model (d = 3, n = 6), its activations and the CLI's ridge probes.
ckpt = os.path.join(WORK, "gd.h5")
acts = os.path.join(WORK, "acts.h5")
probes = os.path.join(WORK, "probes.h5")
run("construct", "--program", "gd", "--d", "3", "--n", "6", "--out", ckpt)
run("extract", "-c", ckpt, "--prompts", "600", "--threads", "1", "--quiet", "--out", acts)
run("probe", "-a", acts, "--targets", "w_ols,xty", "--quiet", "--threads", "1", "--seed", "5",
    "--bootstrap", "200", "--out", probes)


def test_version():
    assert iclprobe.__version__.count(".") == 2, iclprobe.__version__


def test_ridge_equals_cli_bit_for_bit():
    a = iclprobe.open(acts)
    p = iclprobe.open(probes)
    assert isinstance(a, iclprobe.Activations) and isinstance(p, iclprobe.Probes)
    H = a.states_after_k()  # [N, L, K, H] at the y-token of example k
    T = {t: a.target(t) for t in ("w_ols", "xty")}
    res = iclprobe.ridge_probe(H, T, layers=a.layers, ks=range(1, 7), seed=5, bootstrap=200)
    tab = res.table
    for t in ("w_ols", "xty"):
        for metric in ("r2", "r2_lo", "r2_hi", "nmse", "mse"):
            cli = p.metric(t, metric)  # [L, K, S]
            for li, layer in enumerate(p.layers):
                for ki, k in enumerate(p.ks):
                    rows = [i for i in range(len(tab["r2"])) if tab["target"][i] == t
                            and tab["layer"][i] == layer and tab["k"][i] == k]
                    assert len(rows) == 1
                    got, want = tab[metric][rows[0]], cli[li, ki, 0]
                    assert got == want, "%s %s layer %d k %d: %r != %r" % (t, metric, layer, k,
                                                                           got, want)
        for layer in (0, p.layers[-1]):
            for k in (2, 6):
                w_cli = p.weights(t, layer, k)
                w_py = res.weights(t, layer, k)
                assert np.array_equal(w_cli["weights"], w_py["weights"])
                assert np.array_equal(w_cli["intercept"], w_py["intercept"])
                assert w_cli["lambda"] == w_py["lambda"]


def test_onsets_equal_report():
    # The compiled gd writes X'y at state 2 (block 2 of the construction): R2 1 from there on.
    p = iclprobe.open(probes)
    on = {o["target"]: o for o in p.onsets(k=6, margin=0.0)}
    assert on["xty"]["best_r2"] > 0.999 and on["xty"]["layer"] is not None
    assert on["w_ols"]["layer"] is None  # one GD step does not compute OLS weights
    r = subprocess.run([BINARY, "report", "--probes", probes, "--k", "6", "--margin", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    line = [l for l in r.stdout.splitlines() if l.strip().startswith("xty: decodable from")]
    assert line and ("from layer %d " % on["xty"]["layer"]) in line[0], (line, on["xty"])
    raises_value_error(lambda: p.onsets(k=99), "k=99")
    raises_value_error(lambda: p.onsets(k=6, relative=2.0), "relative")


def test_transformer_forward_equals_extract():
    a = iclprobe.open(acts)
    model = iclprobe.Transformer.load(ckpt)
    pr = a.read_prompts()
    pred, hidden = model.forward(pr["x"], pr["y"], threads=2)
    assert hidden.shape == (a.prompts, len(a.layers), 12, model.model_config["hidden"])
    for li, layer in enumerate(a.layers):
        assert np.array_equal(hidden[:, li], a.hidden(layer)), "state %d differs" % layer
    # A prompt's numbers do not depend on how many come with it (groups are padded).
    p5, h5 = model.forward(pr["x"][:5], pr["y"][:5])
    assert np.array_equal(h5, hidden[:5]) and np.array_equal(p5, pred[:5])
    raises_value_error(lambda: model.forward(pr["x"][:, :, :2], pr["y"]), "x", "[N, n, 3]")


def test_extract_equals_cli():
    out = os.path.join(WORK, "acts_py.h5")
    seen = []
    a = iclprobe.extract(ckpt, out, prompts=600, threads=2,
                         progress=lambda d, t: seen.append((d, t)))
    cli = iclprobe.open(acts)  # the CLI's extract of the same checkpoint, prompts and seed
    assert a.layers == cli.layers and a.prompts == 600 and a.positions == "all"
    for layer in a.layers:
        assert np.array_equal(a.hidden(layer), cli.hidden(layer)), layer
    for t in cli.targets:
        assert np.array_equal(a.target(t), cli.target(t)), t
    assert seen and seen[-1] == (600, 600), seen[-3:]
    raises_value_error(lambda: iclprobe.extract(ckpt, out, prompts=600), "exists")
    raises_value_error(lambda: iclprobe.extract(ckpt, out, prompts=600, positions="x",
                                                force=True), "positions")
    b = iclprobe.extract(ckpt, out, prompts=64, layers=[0, 3], positions="y", force=True,
                         learner_targets=["gd:0.05"])
    assert b.layers == [0, 3] and b.positions == "y" and b.prompts == 64
    assert np.array_equal(b.hidden(3), cli.hidden(3)[:64, 1::2])  # the y-tokens of the same


def test_progress_and_ctrl_c():
    import _thread
    import threading
    import time

    model = iclprobe.Transformer.load(ckpt)
    rng = np.random.default_rng(11)
    N = 60000
    x, y = rng.standard_normal((N, 6, 3)), rng.standard_normal((N, 6))
    seen = []
    t0 = time.perf_counter()
    pred, hidden = model.forward(x, y, return_hidden=False, progress=lambda d, t: seen.append((d, t)))
    full = time.perf_counter() - t0
    assert hidden is None and pred.shape == (N, 6)
    assert seen and seen[-1] == (N, N), seen[-3:]
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
    # Ctrl-C (SIGINT delivered to Python's main thread) stops the call at its next tick.
    timer = threading.Timer(0.05, _thread.interrupt_main)
    timer.start()
    t0 = time.perf_counter()
    try:
        model.forward(x, y, return_hidden=False)
        raise AssertionError("no KeyboardInterrupt (the call took %.2f s)" % full)
    except KeyboardInterrupt:
        pass
    finally:
        timer.cancel()
    assert time.perf_counter() - t0 < full, "the interrupt did not stop the work early"
    # An exception from the progress callback stops the work and is raised as it is.
    def fail(done, total):
        raise RuntimeError("stop here")
    try:
        model.forward(x, y, return_hidden=False, progress=fail)
        raise AssertionError("the callback's exception was lost")
    except RuntimeError as e:
        assert "stop here" in str(e)
    # The module still works after both.
    p2, _ = model.forward(x[:64], y[:64], return_hidden=False)
    assert np.array_equal(p2, pred[:64])


def test_ridge_recovers_planted_readout():
    # h = A z + small noise, target z: R2 near 1, and the readout maps h back to z.
    rng = np.random.default_rng(3)
    N, F, D = 2000, 16, 3
    z = rng.standard_normal((N, D))
    A = rng.standard_normal((D, F))
    h = (z @ A + 1e-3 * rng.standard_normal((N, F))).astype(np.float32)
    ctrl = rng.standard_normal((N, F)).astype(np.float32)
    res = iclprobe.ridge_probe(h, {"z": z}, controls={"random": ctrl}, lambdas=[1e-6, 1e-3])
    model = [i for i in range(len(res.table["r2"])) if res.table["source"][i] == "model"][0]
    assert res.table["r2"][model] > 0.9999, res.table["r2"][model]
    assert res.table["r2_lo"][model] <= res.table["r2"][model] <= res.table["r2_hi"][model]
    sel = res.selectivity
    assert list(sel["control"]) == ["random"]
    assert sel["lo"][0] > 0.9 and sel["lo"][0] <= sel["selectivity"][0] <= sel["hi"][0]
    w = res.weights("z")
    pred = h.astype(np.float64) @ w["weights"] + w["intercept"]
    err = np.mean((pred - z) ** 2)
    assert err < 1e-4, err
    # The test prompts are the roles' 2s, and per-prompt errors sum to the table's nMSE.
    test = res.roles[0] == 2
    assert res.per_prompt_sse.shape[1] == int(test.sum())
    nmse = res.per_prompt_sse[model].sum() / res.per_prompt_sst[model].sum()
    assert abs(nmse - res.table["nmse"][model]) <= 1e-12 * max(1.0, nmse)


def test_targets_closed_form():
    rng = np.random.default_rng(7)
    N, n, d = 5, 6, 3
    x = rng.standard_normal((N, n, d))
    w = rng.standard_normal((N, d))
    y = np.einsum("ind,id->in", x, w)
    t = iclprobe.targets(x, y, ridge_lambda=0.5, learners=["gd:0.1:2"])
    for i in range(N):
        for k in range(1, n + 1):
            X, Y = x[i, :k], y[i, :k]
            np.testing.assert_allclose(t["xty"][i, k - 1], X.T @ Y, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(t["xtx"][i, k - 1], X.T @ X, rtol=1e-12, atol=1e-12)
            ridge = np.linalg.solve(X.T @ X + 0.5 * np.eye(d), X.T @ Y)
            np.testing.assert_allclose(t["w_ridge"][i, k - 1], ridge, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(t["w_ols"][i, k - 1], np.linalg.pinv(X) @ Y, rtol=1e-9,
                                       atol=1e-9)
    assert t["gd:0.1:2"].shape == (N, n, d)


def test_gradient_probes_equal_cli_bit_for_bit():
    # The paper's attention-pooled linear probe and ridge, on [N, L, T, F] states with all 2n
    # tokens: the module's results equal the CLI's probes.h5 on the same states exactly.
    out = os.path.join(WORK, "probes_linear.h5")
    run("probe", "-a", acts, "--targets", "xty", "--probes", "ridge,linear", "--layers", "0,2",
        "--epochs", "3", "--quiet", "--threads", "1", "--seed", "5", "--bootstrap", "200",
        "--out", out)
    p = iclprobe.open(out)
    a = iclprobe.open(acts)
    assert a.positions == "all"
    H = np.stack([a.hidden(0), a.hidden(2)], axis=1)  # [N, 2, 12, F]
    res = iclprobe.probe(H, {"xty": a.target("xty")}, probes=["ridge", "linear"], layers=[0, 2],
                         epochs=3, seed=5, bootstrap=200)
    tab = res.table
    for fam in ("ridge", "linear"):
        for metric in ("r2", "r2_lo", "r2_hi", "nmse"):
            cli = p.metric("xty", metric, probe=fam)
            mine = res.metric("xty", metric, probe=fam)
            assert np.array_equal(cli, mine), (fam, metric, cli, mine)
    lin = [i for i in range(len(tab["r2"])) if tab["probe"][i] == "linear"]
    assert lin and all(tab["epochs"][i] >= 1 for i in lin)
    # Pooling weights per stored position; after k examples only positions 0..2k-1 count.
    for d in res.pooling:
        assert d["probe"] == "linear" and d["alpha"].shape == (12,), d
        # float32 softmax over <= 12 terms: each term and the normaliser rounded to 2^-24.
        assert abs(d["alpha"].sum() - 1) <= 2 * 12 * 2.0**-24 and not d["alpha"][2 * d["k"]:].any(), d
    # The onsets of the results in memory are those of the file.
    assert res.onsets(k=6, margin=0.0) == p.onsets(k=6, margin=0.0)
    assert iclprobe.onsets(res, 6, margin=0.0) == p.onsets(k=6, margin=0.0)


def test_save_writes_what_report_reads():
    rng = np.random.default_rng(5)
    N, L, K, F = 400, 3, 4, 8
    z = rng.standard_normal((N, K, 2))
    A = rng.standard_normal((L, 2, F))
    h = (np.einsum("nkd,ldf->nlkf", z, A) * np.arange(L)[None, :, None, None]
         + 0.3 * rng.standard_normal((N, L, K, F))).astype(np.float32)
    res = iclprobe.ridge_probe(h, {"z": z}, ks=[2, 4, 6, 8], lambdas=[1e-3, 1, 1e3],
                               bootstrap=200)
    out = os.path.join(WORK, "saved.h5")
    res.save(out)
    p = iclprobe.open(out)
    assert p.ks == [2, 4, 6, 8] and p.layers == [0, 1, 2]
    assert np.array_equal(p.metric("z"), res.metric("z"))
    assert p.onsets(k=8, margin=0.0) == res.onsets(k=8, margin=0.0)
    r = subprocess.run([BINARY, "report", "--probes", out, "--k", "8", "--margin", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    raises_value_error(lambda: res.save(out), "exists")
    res.save(out, force=True)
    # The embedding (layer 0, scale 0) holds noise only; layer 1 reads z.
    on = res.onsets(k=8, margin=0.0)[0]
    assert on["layer"] == 1 and on["best_layer"] in (1, 2), on


def test_family_equals_report():
    a = iclprobe.open(acts)
    H = a.states_after_k()
    T = {"xty": a.target("xty")}
    r1 = iclprobe.ridge_probe(H, T, layers=a.layers, seed=1, bootstrap=200)
    r2 = iclprobe.ridge_probe(H, T, layers=a.layers, seed=2, bootstrap=200)
    f1, f2 = os.path.join(WORK, "s1.h5"), os.path.join(WORK, "s2.h5")
    r1.save(f1)
    r2.save(f2)
    fam = iclprobe.family({"s1": r1, "s2": r2}, k=6, margin=0.0)
    r = subprocess.run([BINARY, "report", "--probes", f1, f2, "--k", "6", "--margin", "0",
                        "--format", "csv"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cli = iclprobe._parse_csv(r.stdout[r.stdout.index("target,probe,layer"):])
    for col in ("mean", "r2", "lo", "hi"):
        assert np.array_equal(cli[col], fam["table"][col]), col
    assert list(cli["learner"]) == list(fam["table"]["learner"])
    assert set(fam["onsets"]) == {"s1", "s2"}
    assert fam["onsets"]["s1"] == r1.onsets(k=6, margin=0.0)
    assert "s1" in fam["summary"] and "s2" in fam["summary"]
    # The same files read back give the same family.
    fam2 = iclprobe.family([iclprobe.open(f1), iclprobe.open(f2)], k=6, margin=0.0)
    assert np.array_equal(fam2["table"]["r2"], fam["table"]["r2"])
    raises_value_error(lambda: iclprobe.family({"only": r1}, k=6), "two or more")


def test_results_file_reads_what_the_cli_wrote():
    out = os.path.join(WORK, "swaps.h5")
    run("swap", "-c", ckpt, "--learners", "gd:0.05", "--pairs", "64", "--bootstrap", "200",
        "--threads", "1", "--quiet", "--out", out)
    r = iclprobe.open(out)
    assert isinstance(r, iclprobe.Results) and r.kind == "swaps"
    with open(os.path.splitext(out)[0] + ".csv") as f:
        cli = iclprobe._parse_csv(f.read())
    assert list(cli) == list(r.table)
    for col in cli:
        nan = cli[col].dtype.kind == "f"  # a correlation of constant changes is NaN in both
        assert np.array_equal(cli[col], r.table[col], equal_nan=nan), col
    assert isinstance(r.attrs["task_config"], dict) and r.attrs["task_config"]["d"] == 3
    names = r.datasets()
    assert names
    for name in names:
        a = r.read(name)
        labels = r.labels(name)
        assert not labels or len(labels) == a.ndim, (name, labels, a.shape)
    raises_value_error(lambda: r.read("no_such_dataset"), "no_such_dataset")


def test_a_different_torch_is_warned_about():
    import types
    import warnings
    saved = sys.modules.get("torch")
    sys.modules["torch"] = types.SimpleNamespace(__version__="2.1.0+cu121")
    iclprobe._torch_checked.clear()
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            iclprobe._check_torch()
        assert any("2.1.0" in str(x.message) and "not supported" in str(x.message) for x in w), w
        sys.modules["torch"] = types.SimpleNamespace(__version__=iclprobe._core.torch_version + ".0")
        iclprobe._torch_checked.clear()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            iclprobe._check_torch()
        assert not w, [str(x.message) for x in w]
    finally:
        if saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved


def test_bad_input_raises_value_error():
    h = np.zeros((50, 4), np.float32)
    raises_value_error(lambda: iclprobe.ridge_probe(h.astype(np.int32), np.zeros((50, 2))),
                       "hidden", "float32 or float64")
    raises_value_error(lambda: iclprobe.ridge_probe(h, np.zeros((49, 2))), "targets", "[50, 1, D]")
    raises_value_error(lambda: iclprobe.ridge_probe(h[None], np.zeros((50, 2))), "hidden")
    bad = np.ones((50, 4), np.float32)
    bad[3, 1] = np.nan
    raises_value_error(lambda: iclprobe.ridge_probe(bad, np.zeros((50, 2))), "hidden",
                       "not finite")
    raises_value_error(lambda: iclprobe.ridge_probe(h, np.zeros((50, 2)), bootstrap=5),
                       "bootstrap")
    raises_value_error(lambda: iclprobe.targets(np.zeros((2, 3, 2)), np.zeros((2, 4))), "y")
    assert isinstance(iclprobe.open(ckpt), iclprobe.Transformer)
    text = os.path.join(WORK, "text.h5")
    with open(text, "w") as f:
        f.write("not hdf5\n")
    raises_value_error(lambda: iclprobe.open(text), "not an HDF5 file")
    raises_value_error(lambda: iclprobe.probe(h, np.zeros((50, 2)), probes=["lasso"]), "probes",
                       "lasso")
    raises_value_error(lambda: iclprobe.probe(h[:, None], np.zeros((50, 3, 2))), "targets",
                       "T = 1")
    raises_value_error(lambda: iclprobe.probe(h, np.zeros((50, 2)), at="query"), "query")
    missing = os.path.join(WORK, "missing.h5")
    raises_value_error(lambda: iclprobe.open(missing), "missing.h5")


def test_probe_defaults_are_the_library_s():
    # The keyword defaults a reader sees in probe()'s signature are the probes library's own
    # (ProbeRequest's, through the settings object both front ends fill), not a second copy.
    import inspect
    lib = iclprobe._core.ProbeSettings()
    sig = inspect.signature(iclprobe.probe).parameters
    for name in ("seed", "seeds", "bootstrap", "shuffle_control", "codelength", "mlp_hidden",
                 "epochs", "patience", "batch", "lr", "at", "pooling", "name", "threads"):
        assert sig[name].default == getattr(lib, name), name
    assert list(sig["probes"].default) == list(lib.probes)
    assert list(sig["split"].default) == list(lib.default_split)
    for name in ("seed", "seeds", "bootstrap", "shuffle_control", "lambdas", "split"):
        assert inspect.signature(iclprobe.ridge_probe).parameters[name].default == sig[name].default


def test_lambdas_as_text_read_as_the_cli_reads_them():
    rng = np.random.default_rng(7)
    h = rng.standard_normal((60, 5)).astype(np.float32)
    z = h[:, :2].astype(np.float64) @ np.array([[1.0, -2.0], [0.5, 3.0]])
    a = iclprobe.ridge_probe(h, {"z": z}, lambdas="0.1, 1,10", bootstrap=100).table
    b = iclprobe.ridge_probe(h, {"z": z}, lambdas=[0.1, 1.0, 10.0], bootstrap=100).table
    assert np.array_equal(a["r2"], b["r2"]) and np.array_equal(a["lambda"], b["lambda"])
    raises_value_error(lambda: iclprobe.ridge_probe(h, {"z": z}, lambdas="1:0.1:3"), "lambdas",
                       "LO:HI:COUNT")
    raises_value_error(lambda: iclprobe.ridge_probe(h, {"z": z}, split=(0.9, 0.1)), "split",
                       "three")
    raises_value_error(lambda: iclprobe.ridge_probe(h, {"z": z}, split=(0.5, 0.1, 0.1)), "split",
                       "sum to 1")
    raises_value_error(lambda: iclprobe.probe(h, {"z": z}, codelength_blocks=[0.5, 1]),
                       "codelength_blocks", "codelength")


def test_forward_refuses_inputs_beyond_float32():
    # The model runs in float32: 1e300 becomes inf in the tokens and every prediction NaN.
    model = iclprobe.Transformer.load(ckpt)
    raises_value_error(lambda: model.forward(np.full((10, 6, 3), 1e300), np.zeros((10, 6))),
                       "x", "float32")
    raises_value_error(lambda: model.forward(np.zeros((10, 6, 3)), np.full((10, 6), -1e300)),
                       "y", "float32")
    pred, _ = model.forward(np.ones((10, 6, 3)), np.ones((10, 6)), return_hidden=False)
    assert np.isfinite(pred).all()


def test_targets_refuse_what_extract_refuses():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((4, 5, 3)), rng.standard_normal((4, 5))
    # knn has no weight vector (extract --learner-targets knn:3 is refused the same way).
    raises_value_error(lambda: iclprobe.targets(x, y, learners=["knn:3"]), "learners", "knn:3")
    raises_value_error(lambda: iclprobe.targets(x, y, learners=["zero"]), "learners", "zero")
    # Newton-Schulz from C = 10 I leaves its convergence region (C lambda_max(X'X) >= 2) on these
    # prompts: 12 squarings overflow to NaN, which no target may hold.
    raises_value_error(lambda: iclprobe.targets(x, y, learners=["newton:12:10"]), "learners",
                       "newton:12:10", "NaN or infinite")
    assert np.isfinite(iclprobe.targets(x, y, learners=["newton:3"])["newton:3"]).all()


for name, fn in list(globals().items()):
    if name.startswith("test_") and callable(fn):
        check(name, fn)
shutil.rmtree(WORK, ignore_errors=True)
if failures:
    print("%d failed: %s" % (len(failures), ", ".join(failures)))
    sys.exit(1)
print("all passed")
