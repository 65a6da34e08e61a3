"""jaxenc.export / jaxenc.load and the one encode path (jaxenc.encoding) for every encoder.

Each model's run directory is made by the training harness itself (`preparation.prepare`: its data,
vocabulary, featurizer, relation vocabulary and initial parameters, saved as the best checkpoint
by `Checkpoints.save_best`), without training steps: what is tested is the path from a run to
vectors, which does not depend on how far the weights were trained.
"""

import dataclasses
import functools
import json
import logging
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from test_encoder_contract import TINY
from test_transfer import write_sts

import jaxenc
from jaxenc import exporting, loading, standalone
from jaxenc.data.batching import sentence_fields
from jaxenc.encoding import Encoder
from jaxenc.errors import ConfigError, DataError
from jaxenc.evaluation import transfer
from jaxenc.evaluation.encoders import CheckpointEncoder, load_encoder
from jaxenc.export_format import FORMAT_FILE, ExportError
from jaxenc.models.registry import ENCODERS, structure_spec
from jaxenc.records import Example, Sentence
from jaxenc.training import checkpointing, input_pipeline, integrity, preparation, run_files
from jaxenc.training.sharding import make_mesh
from train.configs import base

BATCH = 16
MODELS = tuple(sorted(ENCODERS))
PAPER_MODELS = ("disan", "psan", "dependency_transformer", "phrase_transformer", "meanmax_aae")
JAX_ONLY_MODELS = ("bag", *PAPER_MODELS)  # bag: exported differentiable
LONG = " ".join(["the", "critic", "says", "that"] * 4) + " the film is good ."  # 21 tokens
# The test widths of every encoder; PSAN's phrase classes are powers of two here, which halves
# the compilation of its "worst" packing plans (the default "exact" classes: test_packing.py).
SIZES = {**TINY, "psan": {**TINY["psan"], "packing_scheme": "pow2"}}


def run_config(name: str, **data):
    """A tiny model `name` on the synthetic data, one training bucket (16)."""
    config = base.get_config(f"{name},synthetic")
    config.model.update(SIZES[name])
    config.task.head.hidden_dims = (8,)
    config.data.update(dict(batch_size=BATCH, eval_batch_size=BATCH, max_length=16,
                            bucket_step=16, **data))
    return config


@functools.cache
def synthetic_splits() -> dict[str, list[Example]]:
    """A slice of the synthetic data (whatever the model, the same examples)."""
    splits = input_pipeline.load_splits(run_config("bag"))
    return {"train": splits["train"][:48], "dev": splits["dev"][:24], "test": splits["test"][:8]}


def make_run(root, name: str, **data) -> preparation.Setup:
    """A run directory of model `name` on a slice of the synthetic data (module doc)."""
    config = run_config(name, **data)
    setup = preparation.prepare(config, root / name, make_mesh(), synthetic_splits())
    checkpoints = checkpointing.Checkpoints(setup.workdir, keep=1, best_k=1)
    checkpoints.save_best(setup.state, 0.5, {"step": 0})
    checkpoints.close()
    return setup


class Run(NamedTuple):
    setup: preparation.Setup
    dev: list[Sentence]  # the run's shorter dev sentences (records with gold trees)
    out: Path  # its export
    enc: Encoder  # the export, loaded


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> Run, made once per model when first asked."""
    root, made = tmp_path_factory.mktemp("export"), {}

    def get(name: str) -> Run:
        if name not in made:
            setup = make_run(root, name)
            out = jaxenc.export(setup.workdir, root / f"{name}.export", batch_size=BATCH,
                                differentiable=name == "bag")
            dev = [example.sentences[0] for example in synthetic_splits()["dev"]
                   if len(example.sentences[0].tokens) < 16]  # bucket 16, prefix included
            made[name] = Run(setup, dev, out, jaxenc.load(out))
        return made[name]

    return get


def capitalised(sentence: Sentence) -> Sentence:
    """The sentence with its first word capitalised, in its tokens and in its gold tree: a word
    the vocabulary has only lower-cased (the lower-case fallback finds it)."""
    first = sentence.tokens[0]
    return dataclasses.replace(sentence, tokens=(first.title(), *sentence.tokens[1:]),
                               text=sentence.text.replace(first, first.title(), 1),
                               tree=sentence.tree.replace(f" {first})", f" {first.title()})", 1))


# ----------------------------------------------------------------------------- every model


@pytest.mark.parametrize("name", MODELS)
def test_round_trip_edge_cases_and_order(runs, name):
    setup, dev, _, enc = runs(name)
    records = dev[:5]
    items = ["", records[0], "hello", LONG, [*records[1].tokens], "   ", records[2].text, *records]
    vectors = enc.encode(items, batch_size=BATCH)
    assert vectors.shape == (len(items), enc.dim) and vectors.dtype == np.float32
    assert np.isfinite(vectors).all()
    np.testing.assert_array_equal(vectors[[0, 5]], 0.0)  # no tokens: zeros
    assert np.abs(vectors[[1, 2, 3, 4, 6]]).sum(axis=1).min() > 0
    assert any(len(batch["tokens"][0]) > max(enc.buckets) for batch in enc.featurize([LONG]))
    before = Encoder.from_workdir(setup.workdir).encode(items, batch_size=BATCH)
    np.testing.assert_allclose(vectors, before, rtol=1e-5, atol=1e-6)  # the same after export
    order = np.random.default_rng(0).permutation(len(items))
    np.testing.assert_allclose(enc.encode([items[i] for i in order], batch_size=BATCH),
                               vectors[order], rtol=1e-5, atol=1e-6)
    normalised = enc.encode(items, batch_size=BATCH, normalize_embeddings=True)
    norms = np.linalg.norm(normalised, axis=1)
    np.testing.assert_allclose(norms[norms > 0], 1.0, rtol=1e-5)
    assert (norms == 0).sum() == 2
    assert enc.encode([]).shape == (0, enc.dim)
    np.testing.assert_allclose(enc.encode("hello", batch_size=BATCH), vectors[2], rtol=1e-6)


@pytest.mark.parametrize("name", MODELS)
def test_encode_equals_the_training_featurizer_and_the_evaluation_path(runs, name):
    setup, dev, _, enc = runs(name)
    records = [example.sentences[0] for example in synthetic_splits()["dev"][:12]]  # to 30 words
    records += [capitalised(s) for s in records if s.tokens[0] in enc.vocab][:4]
    examples = [Example(sentences=(sentence,), label=0) for sentence in records]
    trained = setup.featurizer.many(examples)
    for ours, theirs in zip(enc.features(records), trained, strict=True):
        assert ours.keys() == {key.split("/", 1)[1] for key in theirs if "/" in key}
        for key, value in ours.items():
            np.testing.assert_array_equal(value, theirs[f"sentence/{key}"], err_msg=key)
    # The README's old recipe, vocab.encode(tokens) without the fallback, gets other ids.
    assert (enc.vocab.encode(records[-1].tokens) != trained[-1]["sentence/tokens"][
        len(enc.prefix_tokens):]).any()
    # The vectors of the training featurizer's evaluation batches (input_pipeline.make_batchers).
    # PSAN's packing plan: the "worst" capacities, the shapes `encode` compiled (planned ones hold
    # the same phrases in fewer slots: tests/test_psan.py, tests/test_packing.py).
    features = {split: trained for split in ("train", "dev", "test")}
    packing = structure_spec(setup.config.model).packing
    batcher = input_pipeline.make_batchers(
        features, setup.sections.data, 0, train=setup.sections.train,
        packing=packing and dataclasses.replace(packing, capacity="worst"))["dev"]
    expected = np.zeros((len(records), enc.dim), np.float32)
    for batch in batcher.epoch(0):
        real = batch["weight"] > 0
        expected[batch["index"][real]] = np.asarray(
            enc.apply(enc.params, sentence_fields(batch, "sentence")))[real]
    vectors = enc.encode(records, batch_size=BATCH)
    np.testing.assert_allclose(vectors, expected, rtol=1e-5, atol=1e-6)
    evaluation = load_encoder(str(setup.workdir))  # what eval.transfer --encoder WORKDIR uses
    assert isinstance(evaluation, CheckpointEncoder) and evaluation.name.startswith("ckpt-")
    evaluation.batch_size, evaluation.progress = BATCH, False
    np.testing.assert_allclose(evaluation.encode(records), vectors, rtol=1e-5, atol=1e-6)
    if not enc.structure_fields:  # a dataset's own text gives its own tokens, so its vectors
        np.testing.assert_allclose(enc.encode([s.text for s in records[:12]], batch_size=BATCH),
                                   vectors[:12], rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- jax alone

# Runs the exports' functions with jaxenc.standalone while jaxenc's other dependencies (all but
# jax, numpy and flatbuffers, which jax.export's serialisation imports) are blocked, as if they
# were not installed.
JAX_ONLY = textwrap.dedent("""
    import importlib.abc, sys

    BLOCKED = {"flax", "optax", "orbax", "chex", "ml_collections", "tensorflow",
               "tensorflow_datasets", "importlib_resources", "array_record", "grain", "absl",
               "tqdm", "matplotlib", "sacrebleu", "sacremoses", "spacy", "benepar", "pyarrow"}

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"{name} is blocked in this test", name=name)

    sys.meta_path.insert(0, NotInstalled())
    try:
        import flax
    except ImportError:
        print("no flax")
    import jax
    import numpy as np

    from jaxenc.standalone import load

    for folder in sys.argv[1:]:
        encoder = load(folder)
        fields = dict(np.load(f"{folder}.inputs.npz"))
        np.save(f"{folder}.outputs.npy", encoder(fields))
        if encoder.description["functions"]["differentiable"]:
            grads = jax.grad(lambda p: encoder.function(fields["tokens"].shape[1]).call(
                p, fields).sum())(encoder.params)
            norms = [float(np.abs(g).sum()) for g in jax.tree.leaves(grads)]
            print("gradient", all(np.isfinite(norms)) and sum(norms) > 0)
    print(sorted(name for name in sys.modules if name.split(".")[0] == "jaxenc"))
""")


def test_exported_functions_run_with_jax_alone(runs, tmp_path):
    folders, expected = [], {}
    for name in JAX_ONLY_MODELS:
        _, dev, out, enc = runs(name)
        batch = enc.featurize(dev[:5], batch_size=BATCH)[0]
        assert batch["tokens"].shape[1] in enc.buckets  # a bucket that has a function
        np.savez(f"{out}.inputs.npz", **{k: v for k, v in batch.items() if k != "index"})
        expected[name] = np.asarray(enc.apply(enc.params, batch))
        folders.append(str(out))
    (tmp_path / "jax_only.py").write_text(JAX_ONLY)
    result = subprocess.run([sys.executable, str(tmp_path / "jax_only.py"), *folders],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[:2] == ["no flax", "gradient True"]  # bag: vjp
    assert result.stdout.split("\n")[2] == ("['jaxenc', 'jaxenc.errors', 'jaxenc.export_arrays', "
                                            "'jaxenc.export_checks', 'jaxenc.export_format', "
                                            "'jaxenc.standalone']")
    for name, folder in zip(JAX_ONLY_MODELS, folders, strict=True):
        np.testing.assert_allclose(np.load(f"{folder}.outputs.npy"), expected[name], rtol=1e-5,
                                   atol=1e-6, err_msg=name)


def test_downstream_fine_tuning_with_params_and_apply_only(runs):
    out = runs("meanmax_aae").out
    enc = jaxenc.load(out)
    params, apply = enc.params, enc.apply  # all a downstream user takes from jaxenc
    batch = {key: jnp.asarray(value) for key, value in enc.featurize(
        ["the film is good .", "the film is not good .", "every critic is bad .",
         "no critic is bad ."], batch_size=4)[0].items()}
    labels = jnp.array([1, 0, 0, 1])
    head = {"w": jnp.zeros((enc.dim, 2)), "b": jnp.zeros(2)}
    optimizer = optax.adam(0.03)

    def loss_fn(trainable):
        vectors = apply(trainable["encoder"], batch)
        logits = vectors @ trainable["head"]["w"] + trainable["head"]["b"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    @jax.jit
    def step(trainable, state):
        loss, grads = jax.value_and_grad(loss_fn)(trainable)
        updates, state = optimizer.update(grads, state, trainable)
        return optax.apply_updates(trainable, updates), state, loss

    trainable = {"encoder": params, "head": head}
    state = optimizer.init(trainable)
    losses = []
    for _ in range(20):
        trainable, state, loss = step(trainable, state)
        losses.append(float(loss))
    assert np.isfinite(losses).all() and losses[-1] < 0.5 * losses[0]
    embedding = trainable["encoder"]["embed"]["embedding"]
    assert not np.allclose(embedding, params["embed"]["embedding"])  # the encoder was tuned too
    per_example = jax.vmap(lambda row: apply(params, jax.tree.map(lambda x: x[None], row))[0])
    np.testing.assert_allclose(per_example(batch), apply(params, batch), rtol=1e-5, atol=1e-6)
    dropped = apply(params, batch, jax.random.key(0))  # a dropout key: training mode
    assert np.isfinite(dropped).all() and not np.allclose(dropped, apply(params, batch))


# ----------------------------------------------------------------------------- format


def resealed(source, target, change) -> None:
    """A copy of an export with `change(folder)` applied and a new manifest."""
    shutil.copytree(source, target)
    change(target)
    integrity.seal(target)


def set_version(version):
    def change(folder):
        path = folder / FORMAT_FILE
        path.write_text(json.dumps({**json.loads(path.read_text()), "format_version": version}))
    return change


def test_other_versions_and_damaged_files_are_one_line_errors(runs, tmp_path):
    _, _, out, enc = runs("bag")
    resealed(out, tmp_path / "old", set_version(0))
    with pytest.raises(ConfigError, match="version 0 is older than the version 1") as error:
        jaxenc.load(tmp_path / "old")
    assert len(str(error.value).splitlines()) == 1 and "python -m jaxenc export" in str(error.value)
    resealed(out, tmp_path / "new", set_version(2))
    with pytest.raises(ConfigError, match="version 2 needs a newer reader"):
        jaxenc.load(tmp_path / "new")
    with pytest.raises(ExportError, match="version 0"):
        standalone.load(tmp_path / "old")

    damages = {  # file -> how it is damaged
        "params.npz": lambda path: path.write_bytes(path.read_bytes()[:-10]),  # truncated
        "vocab.txt": lambda path: path.write_text(path.read_text().replace("<unk>", "<unK>")),
        exporting.FORMAT_FILE: lambda path: path.write_text(
            path.read_text().replace('"lowercase_fallback": true', '"lowercase_fallback": false')),
        "functions/encode_l16.jaxexport": lambda path: path.unlink(),
    }
    for index, (name, damage) in enumerate(damages.items()):
        folder = tmp_path / f"damaged{index}"
        shutil.copytree(out, folder)
        damage(folder / name)
        with pytest.raises(DataError, match="export file is damaged") as error:
            jaxenc.load(folder)
        assert str(folder / name) in str(error.value) and len(str(error.value).splitlines()) == 1
        if name != "vocab.txt":  # what the jax-only reader reads is checked there too
            with pytest.raises(ExportError, match=name.split("/")[-1]):
                standalone.load(folder)(enc.example_batch(16, BATCH))
    (folder / integrity.MANIFEST_FILE).unlink()
    with pytest.raises(DataError, match="incomplete export"):
        jaxenc.load(folder)
    with pytest.raises(DataError, match="not a jaxenc encoder export"):
        jaxenc.load(tmp_path)


def test_a_model_config_that_does_not_fit_the_arrays_is_one_line(runs, tmp_path):
    """Another layer count: the parameters the config gives (jax.eval_shape) are compared with
    params.npz's headers before any array is read."""
    out = runs("transformer").out

    def change(folder):
        path = folder / FORMAT_FILE
        description = json.loads(path.read_text())
        description["model"]["num_layers"] = 7
        path.write_text(json.dumps(description))

    resealed(out, tmp_path / "layers", change)
    with pytest.raises(ExportError, match=r"array '[^']*layer_2/[^']*' is missing, "
                       r"format.json model needs float32\[") as error:
        jaxenc.load(tmp_path / "layers")
    assert len(str(error.value).splitlines()) == 1
    assert str(tmp_path / "layers" / "params.npz") in str(error.value)


def test_cli_exports_once_and_reports_errors_in_one_line(runs, tmp_path, capsys):
    setup, _, _, enc = runs("bag")
    capsys.readouterr()  # the fixture's export
    target = tmp_path / "bag"
    assert exporting.main([str(setup.workdir), str(target), "--batch_size", "8",
                           "--platforms", "cpu"]) == target
    description = json.loads((target / "format.json").read_text())
    assert capsys.readouterr().out == exporting.describe(description, target) + "\n"
    assert description["functions"]["batch_size"] == 8 and description["buckets"] == [16]
    assert description["tokenizer"] == "whitespace" and not (tmp_path / ".bag.partial").exists()
    for argv, message in [([str(setup.workdir), str(target)], "exists (fix: pass a new folder"),
                          ([str(setup.workdir), str(setup.workdir), "--overwrite"],
                           "is not an export, --overwrite leaves it"),
                          ([str(setup.workdir), str(tmp_path / "x"), "--platforms", "gpu"],
                           "--platforms: gpu"),
                          ([str(tmp_path / "nowhere"), str(tmp_path / "y")],
                           "not a training run directory")]:
        with pytest.raises(SystemExit) as exit_info:
            exporting.main(argv)
        assert exit_info.value.code == 2
        error = capsys.readouterr().err
        assert error.startswith("error: ") and message in error and error.count("\n") == 1
    with pytest.raises(SystemExit) as exit_info:
        exporting.main(["--help"])
    assert exit_info.value.code == 0 and "jaxenc.load(OUT)" in capsys.readouterr().out
    np.testing.assert_allclose(jaxenc.load(target).encode(["the film is good ."]),
                               enc.encode(["the film is good ."]), rtol=1e-6)


def test_an_export_names_the_model_dataset_and_checkpoint_it_came_from(tmp_path, capsys):
    """The run's best checkpoint is the second of three (dev accuracy 0.6 > 0.5 > 0.4): the
    export names its step and folder, and the dev metrics metrics.jsonl holds for that step."""
    from jaxenc.training.run_report import METRICS_FILE, MetricsLog

    setup = make_run(tmp_path, "bag")
    checkpoints = checkpointing.Checkpoints(setup.workdir, keep=1, best_k=1)
    metrics = MetricsLog(setup.workdir / METRICS_FILE)
    for step, accuracy in [(10, 0.4), (20, 0.6), (30, 0.45)]:
        state = setup.state.replace(step=step)
        checkpoints.save_best(state, accuracy, {"step": step, "accuracy": accuracy})
        metrics.write(step, "dev", {"accuracy": accuracy, "loss": 1.0 - accuracy})
    checkpoints.close()
    capsys.readouterr()

    out = jaxenc.export(setup.workdir, tmp_path / "out", batch_size=BATCH, platforms=["cpu"])
    source = loading.read_description(out)["source"]
    checkpoint = str((setup.workdir / run_files.BEST_DIR / "20").resolve())
    assert {key: source[key] for key in ("model", "dataset", "step", "checkpoint", "dev")} == {
        "model": "bag", "dataset": "synthetic", "step": 20, "checkpoint": checkpoint,
        "dev": {"accuracy": 0.6, "loss": 0.4}}
    printed = capsys.readouterr().out
    assert printed.startswith(f"exported bag trained on synthetic, step 20 (dev accuracy 0.6000) "
                              f"from {checkpoint}, to {out} (ckpt-bag-")
    assert printed.count("\n") == 1


def test_transfer_evaluation_takes_a_workdir_or_an_export(runs, tmp_path):
    setup, _, out, enc = runs("bag")
    write_sts(tmp_path, 13, ["FNWN", "headlines", "OnWN"])
    names = []
    for spec in (str(setup.workdir), str(out)):
        results = transfer.run_transfer(spec, "STS13", tmp_path, tmp_path / "out")
        assert results["tasks"]["STS13"]["status"] == "ok"
        names.append(results["encoder"])
    assert names[0].startswith("ckpt-bag-") and names[1] == enc.name
    assert enc.name.startswith("export-bag.export-")
    assert sorted(path.name for path in (tmp_path / "out" / "cache").iterdir()) == sorted(names)


def test_transfer_cuts_or_refuses_a_sentence_over_max_length(runs, tmp_path, capsys, caplog):
    _, _, out, _ = runs("bag")
    long = " ".join(["the", "film", "is", "good"] * 150)  # 600 tokens
    write_sts(tmp_path, 13, ["FNWN"], last_pair=f"{long}\tthe film is good .")
    args = ["--encoder", str(out), "--tasks", "STS13", "--data_dir", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        transfer.main([*args, "--out", str(tmp_path / "refused"), "--long_sentences", "error"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and error.startswith("error: 1 of 1 tasks failed")
    assert "tokens) is longer than max_length 512; 1 of" in error
    assert "600 tokens" in error and "--long_sentences truncate" in error
    with caplog.at_level(logging.WARNING, logger="jaxenc.encode_batching"):
        results = transfer.main([*args, "--out", str(tmp_path / "cut")])
    assert results["tasks"]["STS13"]["status"] == "ok"
    assert any(record.getMessage().startswith("truncated 1 of ") for record in caplog.records)


# ----------------------------------------------------------------------------- expansion


def test_vocabulary_expansion_is_part_of_the_export(tmp_path):
    train = synthetic_splits()["train"]
    words = sorted({word for e in train for word in e.sentences[0].tokens if word.isalpha()})
    rng = np.random.default_rng(0)
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("".join(f"{word} {' '.join(map(str, rng.normal(size=8)))}\n"
                               for word in [*words, "zebra", "Okapi"]))
    setup = make_run(tmp_path, "meanmax_aae", embeddings=str(vectors), oov="drop",
                     freeze_embeddings=True, expand_vocabulary=True)
    enc = jaxenc.load(jaxenc.export(setup.workdir, tmp_path / "out", batch_size=BATCH,
                                    platforms=("cpu",)))
    description = json.loads((tmp_path / "out" / "format.json").read_text())
    assert description["vocabulary"]["expanded"]["added_words"] == 2
    assert "zebra" in enc.vocab and enc.found.shape == (len(enc.vocab),)
    assert enc.params["embed"]["embedding"].shape == (len(enc.vocab), 8)
    sentences = ["the film is good .", "the zebra film is good .", "the Okapi film is good .",
                 "the gnu film is good .", "gnu"]
    got = enc.encode(sentences, batch_size=BATCH)
    expected = Encoder.from_workdir(setup.workdir).encode(sentences, batch_size=BATCH)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got[1], got[0], atol=1e-4)  # "zebra" has a vector: it counts
    np.testing.assert_allclose(got[3], got[0], rtol=1e-5)  # "gnu" has none: dropped
    np.testing.assert_array_equal(got[4], 0.0)
