"""iclprobe from Python: numpy arrays in, numpy arrays out, over the same C++ libraries as the
``iclprobe`` program (exact leave-one-out ridge probes, bootstrap intervals, paired
selectivity, regression targets, the activations file reader).

Set these before Python starts (a module cannot re-execute itself as the CLI does):

* ``OPENBLAS_CORETYPE`` -- OpenBLAS 0.3.21 does not recognise recent Xeons and falls back to
  its generic SSE3 kernels; ``import iclprobe`` warns when that happened and names the value
  to set (e.g. ``OPENBLAS_CORETYPE=SkylakeX``).
* ``OMP_WAIT_POLICY=passive`` -- LibTorch's OpenMP workers otherwise spin and starve
  OpenBLAS's threads.

Only Debian's python3 with Debian's python3-torch shares LibTorch 1.13 with this module; a
different torch in the same process is not supported.
"""

import json as _json
import os as _os
import warnings as _warnings

try:
    import numpy as _np
except ImportError:
    # An interpreter without numpy of its own (pyenv's python3 ahead of Debian's on PATH, say):
    # use Debian's python3-numpy when it has a build for this interpreter's ABI, appended last
    # so that it shadows nothing.
    import sys as _sys
    import sysconfig as _sysconfig

    _debian = "/usr/lib/python3/dist-packages"
    _core_so = _os.path.join(_debian, "numpy", "core",
                             "_multiarray_umath" + str(_sysconfig.get_config_var("EXT_SUFFIX")))
    if not _os.path.isfile(_core_so) or _debian in _sys.path:
        raise
    _sys.path.append(_debian)
    import numpy as _np

from . import _core

__version__ = _core.__version__
git_commit = _core.git_commit

__all__ = ["targets", "extract", "probe", "ridge_probe", "ProbeResult", "onsets", "family", "open",
           "thread_count", "Activations", "Probes", "Results", "Transformer", "__version__"]

_advice = _core.blas_core_advice()
if _advice and not _os.environ.get("OPENBLAS_CORETYPE"):
    _warnings.warn(
        "iclprobe: OpenBLAS runs its generic kernels (%s) on this CPU; set "
        "OPENBLAS_CORETYPE=%s before Python starts for several times the speed"
        % (_core.blas_core(), _advice),
        RuntimeWarning,
        stacklevel=2,
    )

_torch_checked = []


def _check_torch():
    """Warns once when the torch in this process is not the LibTorch 1.13 this module links
    (Debian's python3-torch): two torch builds in one process may clash."""
    import sys
    torch = sys.modules.get("torch")
    if torch is None or _torch_checked:
        return
    _torch_checked.append(True)
    version = str(getattr(torch, "__version__", "?"))
    if not version.startswith(_core.torch_version):
        _warnings.warn(
            "iclprobe: this process runs torch %s, the module was built with LibTorch %s "
            "(Debian's python3-torch); a different torch in the same process is not supported"
            % (version, _core.torch_version), RuntimeWarning, stacklevel=3)


_check_torch()


def _array(name, a):
    """A numpy view of `a` (numpy arrays, anything with __array__, or DLPack producers such as
    CPU torch tensors), refused with ValueError naming `name` when it is not a float array."""
    if type(a).__module__.startswith("torch"):
        _check_torch()
    if isinstance(a, _np.ndarray):
        out = a
    elif hasattr(a, "__dlpack__"):
        try:
            out = _np.from_dlpack(a)
        except (TypeError, RuntimeError, BufferError):
            out = _np.asarray(a)
    else:
        out = _np.asarray(a)
    if out.dtype not in (_np.float32, _np.float64):
        raise ValueError(
            "iclprobe: %s: expected a float32 or float64 array, got dtype %s" % (name, out.dtype)
        )
    return out


_INT_MIN, _INT_MAX = -2 ** 31, 2 ** 31 - 1  # a C int, what the settings hold


def _integer(name, value, lo=_INT_MIN, hi=_INT_MAX):
    """value as an int in lo..hi, or a ValueError naming the argument: the settings' fields are
    C integers, whose own conversion would raise pybind11's TypeError naming no argument. The
    range a setting must satisfy is checked by the code that runs it (the CLI's checks)."""
    try:
        v = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("iclprobe: %s: expected an integer, got %r" % (name, value)) from None
    if v != value and not isinstance(value, str):
        raise ValueError("iclprobe: %s: expected an integer, got %r" % (name, value))
    if not lo <= v <= hi:
        raise ValueError("iclprobe: %s: expected an integer in %d..%d, got %d" % (name, lo, hi, v))
    return v


def _threads(value):
    """threads=: at least 1; more than the usable cores runs on the cores (thread_count)."""
    return _integer("threads", value, 1, _INT_MAX)


def _list(name, value):
    """A list argument: a str is one item (it may be a comma list: "gd:0.05:3,newton:3")."""
    if isinstance(value, str):
        return [value]
    try:
        return [str(v) for v in value]
    except TypeError:
        raise ValueError("iclprobe: %s: expected a list of strings, got %r"
                         % (name, value)) from None


def thread_count(threads):
    """The worker threads a call with ``threads=`` runs: at most the cores this process may use
    (its CPU affinity; under mpirun, its share of the machine's), as ``iclprobe --threads``."""
    return _core.thread_count(_threads(threads))


def targets(x, y, ridge_lambda=0.1, learners=(), noise=0.0, w_scale=1.0):
    """Regression targets after k = 1..n examples of each prompt.

    Arguments:
        x: float array [N, n, d], the examples' inputs x_1..x_n of each prompt.
        y: float array [N, n], their labels.
        ridge_lambda: the penalty of w_ridge (>= 0).
        learners: classical-learner specs whose weights after k examples are returned too
            ("gd:0.05:3", "newton:3", "ridge:0.1", ... as ``iclprobe extract
            --learner-targets`` takes them).
        noise, w_scale: the task's sigma and tau (learners such as "bayes" use them).

    Returns a dict of float64 arrays: w_ols, w_ridge, xty [N, n, d]; xtx [N, n, d, d]; one
    [N, n, d] entry per learner, under its canonical spec. Entry [i, k-1] is the value after
    the first k examples of prompt i.

    Example:
        >>> t = iclprobe.targets(x, y, learners=["gd:0.05:3"])
        >>> t["w_ols"].shape
        (1000, 12, 4)
    """
    return _core.targets(
        _array("x", x), _array("y", y), float(ridge_lambda), _list("learners", learners),
        float(noise),
        float(w_scale))


class ProbeResult:
    """The outcome of probe (or ridge_probe).

    Attributes:
        table: dict of equal-length numpy columns, one row per (target, probe, source, layer,
            k, seed): r2, r2_lo, r2_hi (95% percentile bootstrap over the seed's test prompts),
            nmse (and its interval), mse, lambda (ridge: the penalty chosen by exact
            leave-one-out; -1 otherwise), epochs (linear/mlp: epochs trained), and with
            codelength code_bits and uniform_bits. ``pandas.DataFrame(result.table)`` makes it
            a frame.
        selectivity: dict of columns, one row per control cell: R2(model) - R2(control) with a
            paired 95% interval (lo, hi) on the same resamples.
        per_prompt_sse, per_prompt_sst: [rows of table, test prompts] squared errors of the
            probe and of the test mean, what the intervals resample.
        pooling: the linear/MLP probes' attention weights over the positions up to the one
            read: a list of dicts (target, probe, source, layer, k, seed, alpha).
        roles: per seed, the role of each prompt (0 train, 1 validation, 2 test).
        request: the settings as JSON (what the CLI stores as probe_config).
        layers, ks: the labels of the probed layers and k.

    Methods: weights() (a ridge readout), onsets() (the report's onset rule), metric() (one
    score over the grid), save() (a probes.h5 file, as ``iclprobe probe --out`` writes).
    """

    def __init__(self, run, layers, ks):
        self._run = run
        self.table = run.table()
        self.selectivity = run.selectivity()
        self.per_prompt_sse, self.per_prompt_sst = run.per_prompt()
        self.roles = run.roles()
        self.pooling = run.pooling()
        self.request = _json.loads(run.request())
        self._ridge = run.ridge()
        self.layers = list(layers)
        self.ks = list(ks)
        self.threads = run.threads  # workers the run had: threads=, at most the usable cores

    def weights(self, target=None, layer=None, k=None, seed=0, source="model"):
        """The fitted ridge readout of one cell: a dict with weights [F, D] (on the raw
        features), intercept [D], lambda, loo_mse (per penalty of the grid) and feature_scale
        [F]. Predictions are ``h @ weights + intercept``. Arguments left out must be
        unambiguous."""
        found = [
            w for w in self._ridge
            if (target is None or w["target"] == target) and (layer is None or w["layer"] == layer)
            and (k is None or w["k"] == k) and w["seed"] == seed and w["source"] == source
        ]
        if len(found) != 1:
            raise ValueError(
                "iclprobe: %d probes match target=%r layer=%r k=%r seed=%r source=%r; name the "
                "cell" % (len(found), target, layer, k, seed, source))
        return found[0]

    def onsets(self, k, threshold=-1.0, relative=0.9, margin=0.1):
        """The onset layer of every (target, probe) at k: the rule of ``iclprobe report`` (see
        Probes.onsets), on these results."""
        return self._run.results().onsets(int(k), float(threshold), float(relative),
                                          float(margin))

    def metric(self, target, metric="r2", probe="ridge", source="model"):
        """One score over the grid: float64 [layers, ks, seeds] (r2, r2_lo, r2_hi, nmse, mse,
        ...), as Probes.metric reads it from a file."""
        return self._run.results().metric(str(target), str(probe), str(source), str(metric))

    def save(self, path, force=False):
        """Writes the results as a probes.h5 file (what ``iclprobe probe --out`` writes; ``iclprobe
        report`` reads it). Written under a temporary name and renamed when complete; an
        existing file is replaced only with force=True."""
        self._run.save(_os.fspath(path), bool(force))

    def __repr__(self):
        return "ProbeResult(%d rows: targets %s, probes %s, layers %s, k %s)" % (
            len(self.table["r2"]), sorted(set(self.table["target"])),
            sorted(set(self.table["probe"])), self.layers, self.ks)


def _as_4d(name, a):
    """[N, F] -> [N, 1, 1, F]; [N, T, F] -> [N, 1, T, F]; [N, L, T, F] as is."""
    if a.ndim == 2:
        return a.reshape(a.shape[0], 1, 1, a.shape[1])
    if a.ndim == 3:
        return a.reshape(a.shape[0], 1, a.shape[1], a.shape[2])
    if a.ndim == 4:
        return a
    raise ValueError("iclprobe: %s: expected [N, F], [N, T, F] or [N, L, T, F], got %d "
                     "dimensions" % (name, a.ndim))


def probe(hidden, targets, *, probes=("ridge",), positions=None, at="state", layers=None,
          ks=None, controls=None, lambdas=None, split=(0.8, 0.1, 0.1), seed=0, seeds=1,
          bootstrap=1000, shuffle_control=False, pooling="attention", mlp_hidden=256, lr=1e-3,
          epochs=30, patience=4, batch=64, codelength=False, codelength_blocks=None,
          name="hidden", threads=1, progress=None):
    """Probes of hidden states for targets -- ``iclprobe probe`` on arrays, with its options as
    keyword arguments (the same code: exact leave-one-out ridge, the paper's attention-pooled
    linear and MLP probes, bootstrap intervals, controls, codelength).

    Arguments:
        hidden: float array [N, F] (one state per prompt), [N, T, F] (one layer, T positions)
            or [N, L, T, F] (L layers). Used as float32, the precision files store.
        targets: float array [N, K, D] (the value after k = 1..K examples) or [N, D] (the same
            for every k, e.g. the true w), or a dict name -> array.
        probes: families, any of "ridge", "linear", "mlp".
        positions: what the T axis holds: "y" (T = K states, the one after k examples at k-1)
            or "all" (T = 2K tokens x_1 y_1 ... x_K y_K: after k examples is 2k-1, the query
            x_{k+1} is 2k). Default: "y" when T equals the targets' K, "all" when T = 2K.
        at: "state" (the state after k examples), "query" (the x-token of example k+1; needs
            positions "all"; k = 1..K-1) or "both"; a query target is named "<target>.query".
        layers: labels of the L axis (default 0..L-1); ks: labels of the K axis (default
            1..K; only with positions "y").
        controls: dict name -> (or list of) arrays shaped like hidden: the same prompts through
            a control model (a random-init twin, say). Each gets the same probes, and
            ``result.selectivity`` holds model minus control with paired intervals.
        lambdas: the ridge penalty grid: values, or a text as the CLI's --lambdas takes it
            ("LO:HI:COUNT" log-spaced, or "a,b,c"); default "1e-3:1e5:20", as the CLI.
        split: train/validation/test fractions; seed: the split's seed; seeds: several splits.
        bootstrap: replicates of the bootstrap over test prompts (100..100000).
        shuffle_control: also probe targets permuted across training prompts.
        pooling: linear/mlp input: "attention" (learned softmax weights over the states up to
            the one read) or "position" (that state alone).
        mlp_hidden, lr, epochs, patience, batch: the linear/MLP probes' training (Adam, early
            stopping on the validation split).
        codelength: also the online codelength (MDL) of every probe; codelength_blocks: where
            its blocks end, as increasing fractions of the training prompts ending at 1.
        name: names these states in messages, saved files and family reports.
        threads: worker threads, at most the usable cores (thread_count(threads); the result's
            threads attribute); results do not depend on it.
        progress: None, or a function progress(done, total) called from Python's thread at
            most every 0.1 s. Ctrl-C stops the run at its next progress tick and raises
            KeyboardInterrupt.

    Returns a ProbeResult.

    Example (states of any model, here [N, T, F] with T = 2K tokens):
        >>> res = iclprobe.probe(h, {"w_ols": w_ols}, probes=["ridge", "mlp"], epochs=10)
        >>> res.table["r2"], res.onsets(k=4)
    """
    h = _as_4d("hidden", _array("hidden", hidden))
    if not isinstance(targets, dict):
        targets = {"target": targets}
    if not targets:
        raise ValueError("iclprobe: targets: at least one is needed")
    tarrays = {str(n): _array("targets['%s']" % n, t) for n, t in targets.items()}
    L = h.shape[1]
    # positions (y or all), [N, D] targets (the same value after every k) and the K axis's
    # labels (default 1..K) are read by the library, which knows what the T axis holds.
    layers = list(range(L)) if layers is None else [int(v) for v in layers]
    if len(layers) != L or len(set(layers)) != L:
        raise ValueError("iclprobe: layers: expected %d distinct labels for the L axis, got %r"
                         % (L, layers))
    ks = [] if ks is None else [int(v) for v in ks]
    if controls is None:
        controls = {}
    elif not isinstance(controls, dict):
        controls = {"control_%d" % (i + 1): c for i, c in enumerate(controls)}
    carr = [(str(n), _as_4d("controls['%s']" % n, _array("controls['%s']" % n, c)))
            for n, c in controls.items()]
    arrays = _core.ProbeArrays()
    arrays.hidden = h
    arrays.targets = tarrays
    arrays.controls = carr
    arrays.layers = layers
    arrays.ks = ks
    s = _core.ProbeSettings()
    s.probes = _list("probes", probes)
    s.positions = "" if positions is None else str(positions)  # "": as the shapes say
    s.at = str(at)
    s.pooling = str(pooling)
    if isinstance(lambdas, str):
        s.lambda_grid = lambdas  # "LO:HI:COUNT" or "a,b,c", read as the CLI reads --lambdas
    elif lambdas is not None:
        s.lambdas = [float(v) for v in lambdas]
    try:
        s.split = [float(v) for v in split]
    except (TypeError, ValueError):
        raise ValueError("iclprobe: split: expected three fractions (train, validation, test) "
                         "like (0.8, 0.1, 0.1), got %r" % (split,)) from None
    s.seed = _integer("seed", seed, 0, 2 ** 64 - 1)
    s.seeds = _integer("seeds", seeds)
    s.bootstrap = _integer("bootstrap", bootstrap)
    s.shuffle_control = bool(shuffle_control)
    s.mlp_hidden = _integer("mlp_hidden", mlp_hidden)
    s.lr = float(lr)
    s.epochs = _integer("epochs", epochs)
    s.patience = _integer("patience", patience)
    s.batch = _integer("batch", batch)
    s.codelength = bool(codelength)
    s.codelength_blocks = (None if codelength_blocks is None
                           else [float(v) for v in codelength_blocks])
    s.name = str(name)
    s.threads = _threads(threads)
    run = _core.probe(arrays, s, progress)
    return ProbeResult(run, layers, sorted(set(int(v) for v in run.table()["k"])))


def ridge_probe(hidden, targets, *, layers=None, ks=None, controls=None, lambdas=None,
                split=(0.8, 0.1, 0.1), seed=0, seeds=1, bootstrap=1000, shuffle_control=False,
                threads=1, progress=None):
    """Ridge probes of hidden states for targets: iclprobe's exact leave-one-out ridge (penalty
    chosen on the training prompts from one eigendecomposition), scored on held-out prompts
    with bootstrap intervals -- the code ``iclprobe probe`` runs, on arrays. probe() with
    probes=["ridge"] and hidden states after k examples.

    Arguments:
        hidden: float array [N, F] (one state per prompt), or [N, L, K, F] (L layers and K
            numbers of examples at once). Used as float32, the precision files store.
        targets: float array [N, D] ([N, K, D] with 4-d hidden), or a dict name -> array.
        layers: labels of the L axis (default 0..L-1); ks: labels of the K axis (default 1..K).
        controls: dict name -> (or list of) arrays shaped like hidden: the same prompts through
            a control model (a random-init twin, say). Each gets the same probes, and
            ``result.selectivity`` holds model minus control with paired intervals.
        lambdas: the penalty grid, values or a text as the CLI takes ("1e-3:1e5:20", the
            default).
        split: train/validation/test fractions; seed: the split's seed; seeds: several splits.
        bootstrap: replicates of the bootstrap over test prompts (100..100000).
        shuffle_control: also probe targets permuted across training prompts.
        threads: worker threads, at most the usable cores (thread_count(threads); the result's
            threads attribute); results do not depend on it.
        progress: None, or a function progress(done, total) called from Python's thread at
            most every 0.1 s (units: probes fitted). Ctrl-C stops the run at its next progress
            tick and raises KeyboardInterrupt.

    Returns a ProbeResult.

    Example (plain PyTorch or numpy arrays, no iclprobe file):
        >>> res = iclprobe.ridge_probe(h, {"w": w}, seed=1)
        >>> res.table["r2"], res.table["r2_lo"], res.table["r2_hi"]
    """
    h = _array("hidden", hidden)
    if h.ndim not in (2, 4):
        raise ValueError("iclprobe: hidden: expected [N, F] or [N, L, K, F], got %d dimensions"
                         % h.ndim)
    if not isinstance(targets, dict):
        targets = {"target": targets}
    tmap = {}
    for name, t in targets.items():
        a = _array("targets['%s']" % name, t)
        if h.ndim == 2:
            if a.ndim != 2:
                raise ValueError("iclprobe: targets['%s']: expected [N, D] with hidden [N, F], "
                                 "got %d dimensions" % (name, a.ndim))
            a = a.reshape(a.shape[0], 1, a.shape[1])
        elif a.ndim != 3:
            raise ValueError("iclprobe: targets['%s']: expected [N, K, D] with hidden "
                             "[N, L, K, F], got %d dimensions" % (name, a.ndim))
        tmap[str(name)] = a
    return probe(h, tmap, probes=("ridge",), positions="y", layers=layers, ks=ks,
                 controls=controls, lambdas=lambdas, split=split, seed=seed, seeds=seeds,
                 bootstrap=bootstrap, shuffle_control=shuffle_control, threads=threads,
                 progress=progress)


def extract(checkpoint, out, *, prompts=2000, seed=7, layers=None, positions="all",
            ridge_lambda=0.1, learner_targets=(), n=None, noise=None, w_scale=None,
            float16=False, compress=False, batch=256, force=False, resume=False, threads=1,
            progress=None):
    """``iclprobe extract`` with its options as keyword arguments (the same stage: every layer's
    states, the predictions and the regression targets of a seeded prompt set to an activations
    file, written as <out>.partial and renamed when complete).

    Arguments:
        checkpoint: the learner (trained, constructed or imported); out: the file to write.
        prompts, seed: the prompt set (prompt i is the same whatever the count).
        layers: the states to store (0 = embedding .. L; default all).
        positions: "all" (2n tokens) or "y" (the states after k examples only).
        ridge_lambda: lambda of the w_ridge target; learner_targets: classical learners whose
            weights after k examples are stored too ("gd:0.05:3", "newton:3", ...).
        n, noise, w_scale: the task's, overriding the checkpoint's.
        float16, compress: storage of the states; batch: prompts per write.
        force: replace an existing file; resume: continue <out>.partial.
        threads: worker threads over groups of 32 prompts (the file does not depend on it).
        progress: None, or progress(done, total) in prompts. Ctrl-C stops at the next batch and
            raises KeyboardInterrupt, leaving <out>.partial for resume=True.

    Returns the Activations of the written file.
    """
    s = _core.ExtractSettings()
    s.prompts = _integer("prompts", prompts, -2 ** 63, 2 ** 63 - 1)
    s.seed = _integer("seed", seed, 0, 2 ** 64 - 1)
    s.layers = None if layers is None else [int(v) for v in layers]
    s.positions = "" if positions is None else str(positions)  # "": as the shapes say
    s.ridge_lambda = float(ridge_lambda)
    s.learner_targets = _list("learner_targets", learner_targets)
    s.n = None if n is None else _integer("n", n)
    s.noise = None if noise is None else float(noise)
    s.w_scale = None if w_scale is None else float(w_scale)
    s.float16 = bool(float16)
    s.compress = bool(compress)
    s.batch = _integer("batch", batch)
    s.force = bool(force)
    s.resume = bool(resume)
    s.threads = _threads(threads)
    written = _core.extract(_os.fspath(checkpoint), _os.fspath(out), s, progress)
    if written != _os.fspath(out):
        raise RuntimeError("iclprobe: extract stopped early; %s holds the prompts done "
                           "(resume=True continues)" % written)
    return Activations(written)


class Activations:
    """An activations file written by ``iclprobe extract``, read through the CLI's reader (the
    same checks of format, shapes and finite values).

    Attributes: path, prompts (N), layers (stored states), positions ("all": 2n tokens, or
    "y"), targets (names under /targets), model_config and task_config (dicts), seed,
    checkpoint_sha256.
    """

    def __init__(self, path):
        self._f = _core.Activations(_os.fspath(path))
        self.path = self._f.path
        self.prompts = self._f.prompts
        self.layers = list(self._f.layers)
        self.positions = self._f.positions
        self.targets = list(self._f.targets)
        self.model_config = _json.loads(self._f.model_config)
        self.task_config = _json.loads(self._f.task_config)
        self.seed = self._f.seed
        self.checkpoint_sha256 = self._f.checkpoint_sha256

    def hidden(self, layer):
        """State `layer` (0 = embedding .. L) of every prompt: float32 [N, T, H], T the stored
        positions (2n tokens, or the n y-tokens)."""
        return self._f.hidden(int(layer))

    def target(self, name):
        """/targets/<name>: [N, n, d] per k ([N, n, d, d] for xtx), or [N, d] for w."""
        return self._f.target(str(name))

    def read_prompts(self):
        """The prompts: dict x [N, n, d], y [N, n], w [N, d] (float64)."""
        return self._f.read_prompts()

    def states_after_k(self, layers=None, ks=None):
        """Hidden states after k examples (the y-token of example k) as [N, L, K, H], the
        layout ridge_probe takes. Default: every stored layer, k = 1..n."""
        layers = self.layers if layers is None else list(layers)
        n = self.task_config["n"]
        ks = list(range(1, n + 1)) if ks is None else list(ks)
        pos = self._f.after_k_positions(ks)  # the library's token layout
        return _np.stack([self.hidden(l)[:, pos, :] for l in layers], axis=1)

    def __repr__(self):
        return "Activations(%r: %d prompts, layers %s)" % (self.path, self.prompts, self.layers)


class Transformer:
    """A transformer learner from an iclprobe checkpoint (trained, constructed or imported),
    run exactly as ``iclprobe extract`` runs it: its states equal an activations file's bit for
    bit. ``Transformer.load("checkpoints/d4_l8_h64.h5")``.

    Attributes: path, model_config and train_config (dicts), step.
    """

    def __init__(self, path):
        self._m = _core.Transformer(_os.fspath(path))
        self.path = self._m.path
        self.model_config = _json.loads(self._m.model_config)
        self.train_config = _json.loads(self._m.train_config)
        self.step = self._m.step

    @classmethod
    def load(cls, path):
        """Loads a checkpoint (the CLI's checks: format, shapes, finite weights)."""
        return cls(path)

    def forward(self, x, y, return_hidden=True, threads=1, progress=None):
        """Runs prompts through the model.

        Arguments:
            x: float array [N, n, d] (n <= the model's n_max), y: float array [N, n].
            return_hidden: also return every state (0 = embedding .. L).
            threads: worker threads over groups of 32 prompts (results do not depend on it).
            progress: None, or progress(done, total) in prompts, at most every 0.1 s; Ctrl-C
                stops at the next group and raises KeyboardInterrupt.

        Returns (predictions, hidden): predictions float32 [N, n] (prediction k read at the
        x-token of example k+1, after k examples), hidden float32 [N, L+1, 2n, H] or None.
        The state after k examples is hidden[:, l, 2k-1]; the query of example k+1 is 2k.
        """
        return self._m.forward(_array("x", x), _array("y", y), bool(return_hidden),
                               _threads(threads),
                               progress)

    def __repr__(self):
        c = self.model_config
        return "Transformer(%r: d=%d, L=%d, H=%d, step %d)" % (self.path, c["d"], c["layers"],
                                                               c["hidden"], self.step)


class Probes:
    """A probes file written by ``iclprobe probe``, read through the CLI's reader.

    Attributes: path, targets, probes (families), sources ("model" first, then controls),
    layers, ks, seeds.
    """

    def __init__(self, path):
        self._f = _core.Probes(_os.fspath(path))
        self.path = self._f.path
        self.targets = list(self._f.targets)
        self.probes = list(self._f.probes)
        self.sources = list(self._f.sources)
        self.layers = list(self._f.layers)
        self.ks = list(self._f.ks)
        self.seeds = self._f.seeds

    def metric(self, target, metric="r2", probe="ridge", source="model"):
        """One score over the grid: float64 [layers, ks, seeds] (r2, r2_lo, r2_hi, nmse, mse, ...)."""
        return self._f.metric(str(target), str(probe), str(source), str(metric))

    def onsets(self, k, threshold=-1.0, relative=0.9, margin=0.1):
        """The onset layer of every (target, probe) at k, the rule ``iclprobe report`` applies:
        the first layer whose R2 (its interval's lower bound, when the file has intervals)
        reaches the threshold (threshold < 0: `relative` times the best layer's R2) and whose
        paired margin over every control (its lower bound) exceeds `margin`. Returns a list of
        dicts: target, probe, k, layer (None: never), threshold, best_layer, best_r2, controls
        (each control's own first layer reaching the threshold), and with intervals best,
        at_onset and margins as (mean, lo, hi) and the layers indistinguishable from the best."""
        return self._f.onsets(int(k), float(threshold), float(relative), float(margin))

    def weights(self, target, layer, k, seed=0, source="model"):
        """The ridge readout of one cell: dict weights [F, D], intercept [D], feature_scale [F],
        lambda."""
        return self._f.ridge(str(target), int(layer), int(k), int(seed), str(source))

    def __repr__(self):
        return "Probes(%r: targets %s, layers %s, k %s)" % (self.path, self.targets, self.layers,
                                                            self.ks)


def onsets(results, k, threshold=-1.0, relative=0.9, margin=0.1):
    """The onset layer of every (target, probe) at k, for a ProbeResult or a Probes file: the
    rule of ``iclprobe report`` (see Probes.onsets for the rule and the returned dicts)."""
    if not isinstance(results, (ProbeResult, Probes)):
        raise ValueError("iclprobe: results: expected a ProbeResult or Probes, got %s"
                         % type(results).__name__)
    return results.onsets(k, threshold, relative, margin)


def _parse_csv(text):
    """CSV text -> dict of numpy columns (numbers as float64 where every cell is one)."""
    import csv
    import io
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return {}
    out = {}
    for j, col in enumerate(rows[0]):
        cells = [r[j] if j < len(r) else "" for r in rows[1:]]
        try:
            out[col] = _np.array([float(c) if c != "" else _np.nan for c in cells])
        except ValueError:
            out[col] = _np.array(cells)
    return out


def family(results, k, threshold=-1.0, relative=0.9, margin=0.1):
    """Learners of one configuration (several seeds, say) side by side: what ``iclprobe report``
    prints for several probes files, on ProbeResults and/or Probes files.

    Arguments:
        results: dict learner name -> ProbeResult or Probes (two or more; names plain: letters,
            digits, _ -), or a list (named by their files, or learner_1, ...).
        k: the number of examples compared; threshold, relative, margin: the onset rule.

    Returns a dict: table (columns target, probe, layer, k, learners, mean, sd, min, max, learner,
    r2, lo, hi: per layer the mean, SD and range over the learners, and each learner's R2 with
    its interval), summary (each learner's onset and whether they agree, as text), onsets
    (learner name -> that learner's onsets, as onsets() gives them).
    """
    if not isinstance(results, dict):
        named = {}
        for i, r in enumerate(results):
            if isinstance(r, Probes):
                stem = _os.path.splitext(_os.path.basename(r.path))[0]
                named[stem if stem not in named else "learner_%d" % (i + 1)] = r
            else:
                named["learner_%d" % (i + 1)] = r
        results = named
    learners = []
    for n, r in results.items():
        if isinstance(r, ProbeResult):
            learners.append((str(n), r._run.results()))
        elif isinstance(r, Probes):
            learners.append((str(n), r._f))
        else:
            raise ValueError("iclprobe: results['%s']: expected a ProbeResult or Probes, got %s"
                             % (n, type(r).__name__))
    raw = _core.family_report(learners, int(k), float(threshold), float(relative), float(margin))
    return {"table": _parse_csv(raw["csv"]), "summary": raw["summary"], "onsets": raw["onsets"]}


class Results:
    """A results file of ``iclprobe intervene``, ``das``, ``swap``, ``erase`` or ``trace``, checked
    by its format's own reader (shapes, names, finite values) before anything is returned.

    Attributes: path, kind ("interventions", "das", "swaps", "erasure", "trace"), attrs (the
    root attributes; JSON ones such as task_config as dicts), table (the tidy CSV the CLI writes
    for the file, as a dict of numpy columns; ``pandas.DataFrame(results.table)``).
    """

    def __init__(self, path):
        self._f = _core.ResultsFile(_os.fspath(path))
        self.path = self._f.path
        self.kind = self._f.kind
        self.attrs = {}
        for k, v in self._f.attrs().items():
            if isinstance(v, str) and v[:1] in "{[":
                try:
                    v = _json.loads(v)
                except ValueError:
                    pass
            self.attrs[k] = v
        self.table = _parse_csv(self._f.csv())

    def datasets(self):
        """The paths of every dataset in the file."""
        return list(self._f.datasets())

    def read(self, name):
        """One dataset as a float64 numpy array in its stored shape (the file documents each axis;
        ``labels(name)`` names them)."""
        return self._f.read(str(name))[0]

    def labels(self, name):
        """The axis labels of a dataset (e.g. ["control", "layer", "k"])."""
        return list(self._f.read(str(name))[1])

    def __repr__(self):
        return "Results(%r: %s, %d rows)" % (self.path, self.kind,
                                             len(next(iter(self.table.values()), [])))


def open(path):  # noqa: A001 (the module's reader, as h5py.File)
    """Opens a file iclprobe wrote, told apart by its ``format`` attribute: an activations file
    (Activations), a probes file (Probes), a checkpoint (Transformer), or the results of
    intervene, das, swap, erase or trace (Results). ``iclprobe.open("acts.h5")``."""
    kind = _core.file_kind(_os.fspath(path))
    if kind == "probes":
        return Probes(path)
    if kind == "activations":
        return Activations(path)
    if kind == "checkpoint":
        return Transformer(path)
    if kind in ("interventions", "das", "swaps", "erasure", "trace"):
        return Results(path)
    raise ValueError("iclprobe: '%s' has format '%s'; open reads the files iclprobe writes "
                     "(activations, probes, checkpoints, and the results of intervene, das, "
                     "swap, erase and trace)" % (_os.fspath(path), kind))
