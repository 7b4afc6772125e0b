"""Issue 75, item 5: sizes bounded everywhere. The API's constructors and loaders refuse,
in one line naming the argument, sizes beyond memory and data they would silently
mangle; each refusal beside a neighbouring input that still works."""

import hashlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import meanfield as mf
from meanfield.io.text import batches, load_text
from meanfield.models.transformer import Transformer, check_ids
from meanfield.studies import StudyInputError
from meanfield.studies.resnet_phases import study as resnet_phases
from meanfield.studies.shared.embedded_options import duplicated_rows, load_data
from meanfield.studies.two_layer_phases import study as two_layer_phases
from meanfield.training.transformer import adam, train

SMALL = {"vocab": 5, "context": 4, "width": 8, "depth": 2}


def _refused(call, match: str, error=ValueError) -> str:
    with pytest.raises(error, match=match) as err:
        call()
    assert "\n" not in str(err.value), str(err.value)
    return str(err.value)


# --- 1. the Transformer's sizes ----------------------------------------------------------


def test_a_transformer_beyond_memory_is_refused_before_it_is_drawn(monkeypatch):
    """`Transformer(width=2**20).init(key)` tried to allocate 10^5 GB; now the constructor
    refuses, naming the size that sets most of the parameters."""
    monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", "1e9")  # the same verdicts on every machine
    cases = [
        ({"width": 2**20}, "width"),
        ({"depth": 2**30}, "depth"),
        ({"vocab": 2**30}, "vocab"),
        ({"context": 2**30}, "context"),
        ({"expansion": 2**30}, "expansion"),
    ]
    for size, name in cases:
        _refused(
            lambda size=size: Transformer(**{**SMALL, **size}),
            f"^{name}: a Transformer of .* parameters, .* GB .* more than the 1 GB of memory "
            r"available \(MEANFIELD_MEMORY_LIMIT",
        )
    for size in ({"width": 8.5}, {"width": 0}, {"depth": -1}, {"context": 2.0}, {"vocab": "5"}):
        name = next(iter(size))
        _refused(lambda size=size: Transformer(**{**SMALL, **size}), f"^{name} must be a positive")
    # the count is what `init` draws, with and without biases and norms
    for extra in ({}, {"bias": False, "norm": False}, {"expansion": 3, "heads": 2}):
        model = Transformer(**{**SMALL, **extra})
        params = model.init(jax.random.key(0))
        assert model.parameter_count() == sum(a.size for a in jax.tree.leaves(params))
    # the stated limit: a network of 1872 parameters (7.5 kB in float32) fits in 1e5 bytes
    monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", "1e5")
    Transformer(**SMALL).init(jax.random.key(0))
    _refused(lambda: Transformer(**{**SMALL, "width": 64}), "^width: .* than the 0.0001 GB")


# --- 2. token ids ------------------------------------------------------------------------


def test_token_ids_outside_the_vocabulary_or_not_integers_are_refused():
    """`loss` on ids >= vocab was NaN, negative ids wrapped round the embedding and float
    ids were taken; now refused where they are concrete, their dtype under jit too."""
    model = Transformer(**SMALL)
    params = model.init(jax.random.key(0))
    x = jnp.array([[0, 1, 2, 3], [4, 3, 2, 1]])
    y = jnp.array([[1, 2, 3, 4], [3, 2, 1, 0]])  # the neighbours: every id up to vocab - 1
    assert np.isfinite(model.loss(params, x, y))
    assert np.isfinite(jax.jit(model.loss)(params, x, y))
    assert model(params, x[0]).shape == (4, 5)
    bound = r"outside \[0, vocab\) = \[0, 5\)"
    cases = [
        (lambda: model.loss(params, x, y + 1), f"^y: token id 5 is {bound}"),
        (lambda: model.loss(params, x - 1, y), f"^x: token id -1 is {bound}"),
        (lambda: model.loss(params, np.asarray(x), np.asarray(y) * 9), "^y: token id 36 is"),
        (lambda: model.loss(params, x.astype(float), y), "^x: token ids must have an integer"),
        (lambda: model.loss(params, x, y.astype(float)), "^y: token ids must have an integer"),
        (lambda: model.loss(params, x, y > 1), "^y: token ids must .* got bool"),
        (lambda: jax.jit(model.loss)(params, x, y * 1.0), "^y: token ids must have an integer"),
        (lambda: model(params, x[1] + 1), f"^tokens: token id 5 is {bound}"),
        (lambda: model.residual(params, x[1] - 5), f"^tokens: token id -4 is {bound}"),
        (lambda: check_ids("abc", "x", 5), "^x: token ids must have an integer dtype"),
    ]  # fmt: skip
    for call, match in cases:
        _refused(call, match)
    # the training entry point checks its whole batches once, before the compiled steps
    opt = adam(model, lr=1e-3)
    _, losses = train(model, params, x[None], y[None], opt)
    assert np.isfinite(losses).all()
    _refused(lambda: train(model, params, x[None], y[None] + 1, opt), "^y: token id 5 is")
    _refused(lambda: train(model, params, x[None] * 0.5, y[None], opt), "^x: token ids must")


# --- 3. batches --------------------------------------------------------------------------


def test_batches_beyond_the_arrays_or_memory_are_refused(monkeypatch):
    """`batches(key, ids, batch=2**31, ...)` returned without complaint; now refused, and
    so are float ids (they were gathered and cast)."""
    key, ids = jax.random.key(0), np.arange(100, dtype=np.uint8)
    x, y = batches(key, ids, batch=4, context=8)  # the neighbour
    assert x.shape == y.shape == (4, 8)
    cases = [
        (lambda: batches(key, ids, batch=2**31, context=8),
         "^batch, context: 2147483648 windows of 9 ids are .* more than the 2147483647"),
        (lambda: batches(key, ids, batch=2**16, context=2**16), "^batch, context: .* elements"),
        (lambda: batches(key, ids.astype(float), batch=4, context=8),
         "^ids: must be integer byte ids .* got dtype float64"),
        (lambda: batches(key, [0.5] * 20, batch=4, context=8), "^ids: must be integer byte ids"),
        (lambda: batches(key, ids, batch=4, context=100), "^context: 100 needs a text of"),
        (lambda: batches(key, ids, batch=-1, context=8), "^batch: must be a positive integer"),
        (lambda: batches(key, ids, batch=4, context=0), "^context: must be a positive integer"),
    ]  # fmt: skip
    for call, match in cases:
        _refused(call, match)
    monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", "1e4")
    batches(key, ids, batch=4, context=8)  # 576 bytes
    _refused(
        lambda: batches(key, ids, batch=64, context=80),
        r"^batch, context: 64 windows of 81 ids need about .* GB of memory, more than the "
        r"1e-05 GB available \(MEANFIELD_MEMORY_LIMIT",
    )


# --- 5. load_text's max_bytes ------------------------------------------------------------


def _library(root, files: int = 30):
    (root / "pkg").mkdir(parents=True)
    for i in range(files):
        lines = (hashlib.sha256(f"{i}/{j}".encode()).hexdigest() for j in range(40))
        (root / "pkg" / f"m{i}.py").write_text("\n".join(lines) + "\n")


def test_a_huge_max_bytes_reads_the_text_there_is_and_memory_bounds_it(tmp_path, monkeypatch):
    """`load_text(root=..., max_bytes=10**15)` was a MemoryError (each file's read(n)
    allocated n); a user's file's was fixed before (`test_text`). Text whose index would
    not fit in the memory available is refused naming max_bytes."""
    _library(tmp_path / "lib")
    whole = load_text(root=str(tmp_path / "lib"), max_bytes=10**15)
    size = sum(f.stat().st_size for f in (tmp_path / "lib" / "pkg").iterdir())
    assert whole.train.size + whole.validation.size + whole.dropped_bytes == size
    assert load_text(root=str(tmp_path / "lib"), max_bytes=2**20).train.size == whole.train.size
    text = tmp_path / "t.txt"
    text.write_text("".join(f"{hashlib.sha256(str(i).encode()).hexdigest()}\n" for i in range(50)))
    load_text(text, max_bytes=10**15)
    _refused(lambda: load_text(123), "^path: a file's path")  # (issue 75, fixed before)
    monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", "2e6")  # 50 kB of text fit, 78 kB not
    load_text(text, max_bytes=10**15)
    load_text(root=str(tmp_path / "lib"), max_bytes=40000, validation=0.5)
    _refused(
        lambda: load_text(root=str(tmp_path / "lib"), max_bytes=10**15),
        r"^max_bytes: \d+ bytes of the stdlib text of the library at .* need about .* GB of "
        r"memory to index their windows, more than the 0.002 GB available",
    )
    text.write_text("abc\n" * 10**5)
    _refused(lambda: load_text(text, max_bytes=10**15), f"^max_bytes: 400000 bytes of {text}")
    load_text(text, max_bytes=4000, dedup=False)


# --- 4. duplicated inputs ----------------------------------------------------------------


def test_duplicated_rows():
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, -0.0], [2.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    assert duplicated_rows(x) == [[0, 2, 5], [1, 4]]
    assert duplicated_rows(x[[0, 1, 3]]) == []


class _Reached(Exception):
    """The study got past its data checks: it opens its folder."""


@pytest.mark.parametrize("name", ["two-layer-phases", "resnet-phases"])
def test_phase_studies_refuse_duplicated_inputs(tmp_path, monkeypatch, name):
    """Duplicated inputs ran and failed criterion 1 unwarned (their Gram is singular at
    every D; measured at D = 8, 16, 32, 8 draws: ‖h‖_D's slope 0.70 [0.56, 0.87] against
    0.5, the built-in inputs' 0.58 [0.45, 0.71]). `two-layer` and `shapes` take them."""
    x = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [1.0, 0.0, 0.0], [0.6, 0.8, 0.0]])
    y = np.array([[1.0], [-0.5], [0.2], [0.3]])
    np.savez(tmp_path / "dup.npz", x=x, y=y)
    np.savez(tmp_path / "distinct.npz", x=x[:2], y=y[:2])
    options = {"D": [8, 16], "s_v_sweep": [0.5, 2.0], "M": 32, "seeds": 2, "dt": 0.5}
    _refused(
        lambda: mf.run_study(
            name, out=str(tmp_path / "out"), data=str(tmp_path / "dup.npz"), **options
        ),
        f"^--data: x has duplicated inputs, rows 0 and 2; rows 1 and 3: {name} needs distinct "
        "inputs",
        StudyInputError,
    )
    assert not (tmp_path / "out").exists()
    load_data(str(tmp_path / "dup.npz"))  # two-layer's loader takes them
    module = two_layer_phases if name == "two-layer-phases" else resnet_phases

    def reached(*_args, **_kw):
        raise _Reached

    monkeypatch.setattr(module, "start_study", reached)
    with pytest.raises(_Reached):  # the neighbour: distinct inputs reach the folder
        mf.run_study(
            name, out=str(tmp_path / "out"), data=str(tmp_path / "distinct.npz"), **options
        )


# -- the generated corpus's API rows (issue 75): sizes beyond 2^31 - 1, sizes given as
# fractions, NaN thresholds, a path that is no path, each refused in one line naming it


def _sample(L, M):
    block, law = mf.TwoLayerBlock("tanh"), mf.TwoLayerGaussianLaw(2)
    return mf.ResNet.sample(block, law, L=L, M=M, scaling=0.1, key=jax.random.key(0))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: _sample(L=2**63, M=2), "^L must be at most"),
        (lambda: _sample(L=2, M=2**31), "^M must be at most"),
        (lambda: mf.BrownianLaw(d=2**31, n_fine=64), "^d must be at most 2"),
        (lambda: mf.mean_ode_sgd(0.1, L=2.5, M=2), "^L must be a positive integer"),
        (lambda: mf.mean_ode_sgd(0.1, L=4, M=0), "^M must be a positive integer"),
        (lambda: mf.gd_loop(lambda t, k: (t, t), 1.0, optax.sgd(0.1), 2**31),
         "^steps must be at most"),
        (lambda: mf.summarize([1.0, 2.0], threshold=float("nan")), "^threshold: a number > 0"),
        (lambda: mf.load_results(123), "^path: a folder or file path, got int"),
        (lambda: mf.optimal_scaling(L=4, K0=1.0, sigma_w2=1.0, sigma_b2=0.0, grid=2**63),
         "^grid must be at most"),
        *[(lambda name=name: mf.simulate_response(
              0.5, K0=1.0, sigma_w2=1.0, sigma_b2=0.0, key=jax.random.key(0),
              **{"L": 2, "width": 8, "d_out": 4, "inits": 4, name: 2**63}),
           f"^{name} must be at most 2") for name in ("L", "width", "d_out", "inits")],
    ],
)  # fmt: skip
def test_absurd_sizes_and_values_are_refused_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match) as err:
        call()
    assert "\n" not in str(err.value)


def test_their_valid_neighbours_still_run():
    mf.mean_ode_sgd(0.1, L=4, M=2)
    mf.mean_ode_sgd(0.1, L=jnp.asarray(4), M=jnp.asarray(2))  # traced-like arrays: no check
    assert mf.summarize([1.0, 2.0], threshold=float("inf"))["count"] == 2
    mf.BrownianLaw(d=2**20, n_fine=64)


def test_a_bad_compile_cache_variable_is_named(tmp_path, monkeypatch, capsys):
    """The cache folder named by MEANFIELD_COMPILE_CACHE that cannot be made: the refusal
    names the variable, not the option the user did not give."""
    from meanfield.cli import main

    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("MEANFIELD_COMPILE_CACHE", str(tmp_path / "afile"))
    argv = ["study", "tangent-kernel", "--L", "2,4", "--gammas", "0.5,1", "--M", "2", "--nets",
            "2", "--d", "2", "--out", str(tmp_path / "o"), "--no-progress"]  # fmt: skip
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "MEANFIELD_COMPILE_CACHE:" in line and "--compile-cache" not in line
    assert not (tmp_path / "o").exists()
