"""Optimiser masks, checkpoints, compilation count, tagging / seq2seq training, the job end to end
and its one-line errors."""

import importlib
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

import jaxenc
from jaxenc import showcase
from jaxenc.data.batching import Batcher
from jaxenc.data.featurize import Featurizer, tag_index
from jaxenc.data.synthetic import generate
from jaxenc.data.vocab import NUM_SPECIAL, ROOT, Vocabulary
from jaxenc.encoding import Encoder
from jaxenc.errors import ConfigError, DataError, DivergedError, NonFiniteError
from jaxenc.models.registry import build_encoder, encoder_spec
from jaxenc.records import Example, Sentence
from jaxenc.structures import psan
from jaxenc.structures.trees import tree_from_sentence
from jaxenc.tasks.factory import build_task
from jaxenc.training import (
    checkpointing,
    experiment,
    input_pipeline,
    loop,
    predict,
    preparation,
    run_files,
    run_report,
)
from jaxenc.training.optim import build_optimizer, weight_decay_mask
from jaxenc.training.sharding import make_mesh, replicated, shard_batch
from jaxenc.training.state import create_train_state, init_params
from jaxenc.training.steps import make_eval_step, make_train_step
from train.configs import base

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted(path.stem for path in (REPO / "train" / "configs").glob("[!_]*.py"))


def tiny_config(model: str = "bag") -> ml_collections.ConfigDict:
    """A few-second run on the synthetic data (8 devices: batches are multiples of 8)."""
    config = base.get_config(f"{model},synthetic")
    if model == "bag":
        config.model.embed_dim = 16
    else:
        config.model.update(dict(embed_dim=16, model_dim=16, num_layers=1, num_heads=2,
                                 ff_dim=16))
    config.task.head.hidden_dims = (16,)
    config.task.head.decoder.update(dict(model_dim=32, num_heads=2, ff_dim=32, dropout_rate=0.0))
    config.data.update(dict(batch_size=16, eval_batch_size=128, max_length=32, bucket_step=16))
    config.optim.update(dict(name="adam", learning_rate=3e-3, weight_decay=1e-4, clip_norm=5.0))
    config.train.update(dict(num_steps=40, eval_every=20, log_every=10, progress_bar=False))
    return config


def optim_config(**overrides) -> ml_collections.ConfigDict:
    config = base.get_config().optim
    config.update(overrides)
    return config


@pytest.fixture(scope="module")
def examples() -> list[Example]:
    return generate(96, seed=5)


def _setup(examples, model_cfg, kind="single", **task_args):
    """(model, task, featurizer, params) for a tiny encoder on `examples`."""
    vocab = Vocabulary.build(s.tokens for e in examples for s in e.sentences)
    encoder = build_encoder(model_cfg, len(vocab))
    tags = tag_index(examples) if kind == "tagging" else None
    featurizer = Featurizer(kind=kind, vocab=vocab, model_cfg=model_cfg, tags=tags,
                            target_vocab=vocab if kind == "unlabelled" else None)
    config = tiny_config()
    task = build_task(kind, config.task, num_classes=2,
                      num_tags=len(tags) if tags else None, target_vocab_size=len(vocab),
                      **task_args)
    return task.build_model(encoder), task, featurizer


# ----------------------------------------------------------------------------- featurizer


def test_featurizer_writes_prefix_structure_fields_and_targets(examples):
    vocab = Vocabulary.build(s.tokens for e in examples for s in e.sentences)
    psan_cfg = ml_collections.ConfigDict({"name": "psan", "num_levels": 3, "min_split_len": 4})
    featurizer = Featurizer(kind="single", vocab=vocab, model_cfg=psan_cfg,
                            structure_fields=("segments",))
    sentence = examples[0].sentences[0]
    features = featurizer(examples[0])
    assert set(features) == {"sentence/tokens", "sentence/segments", "label"}
    np.testing.assert_array_equal(features["sentence/tokens"], vocab.encode(sentence.tokens))
    expected = psan.segments(tree_from_sentence(sentence), num_levels=3, min_split_len=4)
    np.testing.assert_array_equal(features["sentence/segments"], expected)
    assert features["label"] == examples[0].label and features["label"].dtype == np.int32

    tagger = Featurizer(kind="tagging", vocab=vocab, model_cfg=psan_cfg, prefix=(ROOT,),
                        tags={"DT": 0, "NN": 1})
    tagged = tagger(examples[0])
    assert tagged["sentence/tokens"][0] == ROOT
    expected_tags = [-1] + [{"DT": 0, "NN": 1}.get(t, -1) for t in sentence.tags]
    np.testing.assert_array_equal(tagged["tags"], expected_tags)

    with pytest.raises(ConfigError, match="'relations'.*STRUCTURE_BUILDERS"):
        Featurizer(kind="single", vocab=vocab, model_cfg=psan_cfg, structure_fields=("relations",))
    with pytest.raises(ConfigError, match="oov='drop'"):
        Featurizer(kind="single", vocab=vocab, model_cfg=psan_cfg, structure_fields=("segments",),
                   found=np.ones(len(vocab), bool))
    unlabelled = Example(sentences=examples[0].sentences, uid="file.txt:7")
    with pytest.raises(DataError, match="file.txt:7: example has no label"):
        featurizer(unlabelled)


# ----------------------------------------------------------------------------- optimiser


def test_weight_decay_mask_covers_exactly_the_kernels(examples):
    model, _, featurizer = _setup(examples, tiny_config("transformer").model)
    batch = next(Batcher(featurizer.many(examples), batch_size=8, buckets=(32,),
                         shuffle=False).epoch(0))
    params = init_params(model, batch, seed=0)
    mask = weight_decay_mask(params)
    names = {jax.tree_util.keystr(path): (path[-1].key, decayed)
             for path, decayed in jax.tree_util.tree_leaves_with_path(mask)}
    assert {name for name, decayed in names.values() if decayed} == {"kernel"}
    assert all(decayed for name, decayed in names.values() if name == "kernel")
    assert {name for name, decayed in names.values() if not decayed} == {
        "bias", "scale", "embedding"}  # biases, LayerNorm scales/biases, the word table


def test_sgd_update_is_l2_on_kernels_then_clip_and_frozen_embeddings_stay():
    params = {"encoder": {"embed": {"embedding": jnp.ones((4, 2))},
                          "dense": {"kernel": jnp.full((2, 3), 2.0), "bias": jnp.ones(3)}}}
    grads = jax.tree.map(lambda p: jnp.full_like(p, 0.1), params)
    cfg = optim_config(name="sgd", learning_rate=0.5, weight_decay=0.25, clip_norm=0.0)
    tx = build_optimizer(cfg, params, freeze_embeddings=True)
    updates, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(updates["encoder"]["dense"]["kernel"], -0.5 * (0.1 + 0.25 * 2.0))
    np.testing.assert_allclose(updates["encoder"]["dense"]["bias"], -0.5 * 0.1)
    np.testing.assert_array_equal(updates["encoder"]["embed"]["embedding"], 0.0)

    cfg.update(dict(weight_decay=0.0, clip_norm=0.01, learning_rate=1.0))
    tx = build_optimizer(cfg, params, freeze_embeddings=False)
    updates, _ = tx.update(grads, tx.init(params), params)
    assert float(optax.tree.norm(updates)) == pytest.approx(0.01, rel=1e-5)


@pytest.mark.parametrize("name", ["adam", "adadelta", "sgd"])
def test_the_flattened_optimizer_updates_as_the_per_leaf_one(name):
    # weight decay on kernels only, clipping of the global norm, a frozen word table
    params = {"encoder": {"embed": {"embedding": jnp.ones((6, 4))},
                          "dense": {"kernel": jnp.full((4, 3), 0.5), "bias": jnp.zeros(3)}},
              "head": {"kernel": jnp.full((3, 2), -0.2), "bias": jnp.ones(2)}}
    cfg = optim_config(name=name, learning_rate=0.1, weight_decay=0.01, clip_norm=1.0,
                       momentum=0.9)
    per_leaf = build_optimizer(optim_config(**{**cfg.to_dict(), "flatten": False}), params,
                               freeze_embeddings=True)
    flat = build_optimizer(cfg, params, freeze_embeddings=True)
    states, rng = [per_leaf.init(params), flat.init(params)], np.random.default_rng(0)
    trainable = 4 * 3 + 3 + 3 * 2 + 2
    assert trainable in [leaf.size for leaf in jax.tree.leaves(states[1])]
    assert trainable not in [leaf.size for leaf in jax.tree.leaves(states[0])]
    for _ in range(4):
        grads = jax.tree.map(lambda p: jnp.asarray(rng.normal(size=p.shape), jnp.float32), params)
        expected, states[0] = per_leaf.update(grads, states[0], params)
        updates, states[1] = flat.update(grads, states[1], params)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
                     updates, expected)
        np.testing.assert_array_equal(updates["encoder"]["embed"]["embedding"], 0.0)
        params = optax.apply_updates(params, updates)


def test_warmup_ramps_the_learning_rate_linearly():
    params = {"w": jnp.ones(3)}
    tx = build_optimizer(optim_config(name="sgd", learning_rate=0.8, warmup_steps=4,
                                      weight_decay=0.0, clip_norm=0.0), params)
    opt_state, steps = tx.init(params), []
    for _ in range(6):
        updates, opt_state = tx.update({"w": jnp.ones(3)}, opt_state, params)
        steps.append(float(updates["w"][0]))
    np.testing.assert_allclose(steps, [0.0, -0.2, -0.4, -0.6, -0.8, -0.8], rtol=1e-6)


def test_dependency_transformer_adagrad_is_pytorchs_rule_within_the_stated_tolerance():
    """The paper configs' AdaGrad against a numpy loop of torch.optim.Adagrad (state += g^2;
    p -= lr g / (sqrt(state) + 1e-10)) over 20 steps: each step's update within a relative 5e-5
    wherever the summed squared gradient is at least 1e-6, as the config's docstring states."""
    rng = np.random.default_rng(0)
    scales = np.array([1e-4, 1e-2, 1.0, 30.0])  # per column: summed g^2 from ~1e-9 to ~2e4
    for task in ("sick_r", "sick_e", "mrpc", "sst2"):
        cfg = importlib.import_module(f"train.configs.dependency_transformer_{task}").get_config()
        assert (cfg.optim.name, cfg.optim.learning_rate) == ("adagrad", 1e-3), task
        assert (cfg.optim.initial_accumulator, cfg.optim.eps) == (0.0, 1e-10), task
        assert (cfg.optim.weight_decay, cfg.optim.clip_norm) == (0.0, 0.0), task
    params = {"w": jnp.zeros((5, 4))}
    tx = build_optimizer(cfg.optim, params)
    opt_state, summed, compared = tx.init(params), np.zeros((5, 4)), 0
    for _ in range(20):
        grad = rng.normal(size=(5, 4)) * scales
        updates, opt_state = tx.update({"w": jnp.asarray(grad, jnp.float32)}, opt_state, params)
        summed += grad ** 2
        pytorch = -1e-3 * grad / (np.sqrt(summed) + 1e-10)
        above = summed >= 1e-6
        np.testing.assert_allclose(np.asarray(updates["w"])[above], pytorch[above], rtol=5e-5)
        compared += above.sum()
    assert compared > 250 and not (summed[:, 0] >= 1e-6).any()
    # Far below the threshold the two rules part: a first gradient of 1e-6 (summed 1e-12) moves
    # PyTorch's parameter by about lr, optax's by lr / sqrt(1 + 1e-10 / 1e-12), a tenth of it.
    updates, _ = tx.update({"w": jnp.full((5, 4), 1e-6)}, tx.init(params), params)
    np.testing.assert_allclose(updates["w"], -1e-3 / np.sqrt(1.0 + 1e-10 / 1e-12), rtol=1e-5)


def test_unknown_optimizer_is_a_config_error():
    cfg = optim_config(name="rmsprop")
    with pytest.raises(ConfigError, match="unknown optimizer 'rmsprop'.*adadelta"):
        build_optimizer(cfg, {"w": jnp.ones(2)})


# ----------------------------------------------------------------------------- checkpoints


def test_checkpoint_round_trip(tmp_path):
    params = {"encoder": {"embed": {"embedding": jnp.arange(8.0).reshape(4, 2)},
                          "dense": {"kernel": jnp.ones((2, 3)), "bias": jnp.zeros(3)}}}
    cfg = optim_config(name="adam", learning_rate=0.1, weight_decay=0.0)
    tx = build_optimizer(cfg, params, freeze_embeddings=True)
    state = create_train_state(params, tx, seed=3)
    grads = jax.tree.map(jnp.ones_like, params)
    updates, opt_state = tx.update(grads, state.opt_state, params)
    state = state.replace(step=state.step + 7, params=optax.apply_updates(params, updates),
                          opt_state=opt_state)
    checkpoints = checkpointing.Checkpoints(tmp_path, keep=2, best_k=1)
    checkpoints.save(state, {"epoch": 2, "batch": 5})
    checkpoints.save_best(state, 0.75, {"step": 7})
    checkpoints.wait()
    blank = create_train_state(jax.tree.map(jnp.zeros_like, params), tx, seed=0)
    restored, position = checkpoints.restore_latest(blank)
    assert position == {"epoch": 2, "batch": 5}
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(got, want)
    best = checkpoints.restore_best_params()
    np.testing.assert_array_equal(best["encoder"]["dense"]["kernel"],
                                  state.params["encoder"]["dense"]["kernel"])
    checkpoints.close()


def test_checkpoint_of_another_config_is_refused(tmp_path):
    config = tiny_config()
    run_files.save_run_files(tmp_path, config, {})
    assert run_files.check_compatible(tmp_path, config) == {}  # same config: fine
    other = tiny_config()
    other.model.embed_dim = 32
    with pytest.raises(ConfigError, match="model.embed_dim=16.*32.*new --workdir"):
        run_files.check_compatible(tmp_path, other)


@pytest.mark.parametrize("changes, refused", [
    ({"optim.learning_rate": 0.1, "train.seed": 3}, ["optim.learning_rate", "train.seed"]),
    ({"task.head.hidden_dims": (8,)}, ["task.head.hidden_dims"]),  # nested: any depth
    ({"data.max_length": 16, "train.patience": 2}, ["data.max_length", "train.patience"]),
    ({"train.num_steps": 20}, ["train.num_steps"]),  # shorter: not what was trained
    ({"train.num_steps": 0, "train.epochs": 20}, ["train.num_steps"]),  # epochs instead
])
def test_every_key_that_changes_results_is_refused_on_resume(tmp_path, changes, refused):
    run_files.save_run_files(tmp_path, tiny_config(), {})
    other = tiny_config()
    other.update_from_flattened_dict(changes)
    with pytest.raises(ConfigError) as error:
        run_files.check_compatible(tmp_path, other)
    message = str(error.value)
    assert "\n" not in message and "(fix: use a new --workdir" in message
    named = re.findall(r"([\w.]+)=\S+ \(config says", message)
    assert named == refused


def test_bookkeeping_changes_and_a_longer_run_are_allowed(tmp_path):
    run_files.save_run_files(tmp_path, tiny_config(), {})
    other = tiny_config()
    allowed = {"train.eval_every": 5, "train.log_every": 1, "train.progress_bar": True,
               "train.num_steps": 80, "train.nonfinite": "skip", "checkpoint.every": 3,
               "data.data_dir": "/elsewhere", "data.eval_batch_size": 64}
    other.update_from_flattened_dict(allowed)
    other.baselines.transformer = tiny_config("transformer").model
    changes = run_files.check_compatible(tmp_path, other)
    assert {key: new for key, (_, new) in changes.items()
            if not key.startswith("baselines.transformer.")} == allowed
    assert changes["train.num_steps"] == (40, 80) and "baselines.transformer.name" in changes


def test_a_run_saved_before_a_model_option_existed_resumes_at_its_default(tmp_path):
    run_files.save_run_files(tmp_path, tiny_config(), {})
    path = tmp_path / run_files.CONFIG_FILE
    saved = json.loads(path.read_text())
    del saved["model"]["dtype"]  # as if the run predated the option (default "float32")
    path.write_text(json.dumps(saved))
    changes = run_files.check_compatible(tmp_path, tiny_config())
    assert changes == {"model.dtype": ("<absent>", "float32")}
    other = tiny_config()
    other.model.dtype = "bfloat16"  # not what the saved run computed
    with pytest.raises(ConfigError, match=r"model.dtype='<absent>' \(config says 'bfloat16'\)"):
        run_files.check_compatible(tmp_path, other)
    del saved["task"]["split_seed"]  # a task key added after the run: -1 carves as before
    path.write_text(json.dumps(saved))
    changes = run_files.check_compatible(tmp_path, tiny_config())
    assert changes == {"model.dtype": ("<absent>", "float32"), "task.split_seed": ("<absent>", -1)}
    other = tiny_config()
    other.task.split_seed = 3  # carves other splits than the saved run's
    with pytest.raises(ConfigError, match=r"task.split_seed absent, i.e. -1 \(config says 3; "
                                          r"resume with --config.task.split_seed=-1\)"):
        run_files.check_compatible(tmp_path, other)
    del saved["train"]["patience_min_epochs"]  # 0.0 stops by evaluations alone, as before
    path.write_text(json.dumps(saved))
    changes = run_files.check_compatible(tmp_path, tiny_config())
    assert changes["train.patience_min_epochs"] == ("<absent>", 0.0)
    other = tiny_config()
    other.train.patience_min_epochs = 1.0  # stops later than the saved run would
    with pytest.raises(ConfigError, match=r"train.patience_min_epochs absent, i.e. 0.0"):
        run_files.check_compatible(tmp_path, other)
    del saved["optim"]["flatten"]  # optimiser state per leaf: resumes only with flatten off
    path.write_text(json.dumps(saved))
    with pytest.raises(ConfigError, match=r"optim.flatten absent, i.e. False \(config says True; "
                                          r"resume with --config.optim.flatten=False\)"):
        run_files.check_compatible(tmp_path, tiny_config())
    other = tiny_config()
    other.optim.flatten = False
    assert run_files.check_compatible(tmp_path, other)["optim.flatten"] == (
        "<absent>", False)
    del saved["train"]["seed"]  # not a model option: never assumed
    path.write_text(json.dumps(saved))
    with pytest.raises(ConfigError, match="train.seed='<absent>'"):
        run_files.check_compatible(tmp_path, tiny_config())


@pytest.mark.parametrize("model, option", [("meanmax_aae", "end_token"),
                                           ("phrase_transformer", "decoder_memory")])
def test_a_run_saved_before_a_behaviour_changing_option_reads_back_as_trained(tmp_path, model,
                                                                                option):
    # The option's default changed what the model computes: a run that predates it is read
    # back (resume, encode, export) with the value that reproduces its training.
    before = build_encoder_config_class(model).BEFORE_OPTION[option]
    config = base.get_config(f"{model},synthetic")
    assert config.model[option] != before  # the default is the new behaviour
    run_files.save_run_files(tmp_path, config, {})
    path = tmp_path / run_files.CONFIG_FILE
    saved = json.loads(path.read_text())
    del saved["model"][option]
    path.write_text(json.dumps(saved))
    assert run_files.load_config(tmp_path).model[option] == before
    with pytest.raises(ConfigError, match=rf"model.{option}={before!r} \(config says"):
        run_files.check_compatible(tmp_path, config)  # resuming at the new default
    config.model[option] = before
    assert run_files.check_compatible(tmp_path, config) == {}


def build_encoder_config_class(model: str) -> type:
    return encoder_spec(model).config


def test_a_nan_evaluation_is_never_kept_as_best():
    position = loop.Position()
    assert not position.record_evaluation(1, float("nan"), patience=0, best_k=2)
    assert position.top_scores == [] and position.best_step == -1
    assert position.record_evaluation(2, 0.5, patience=0, best_k=2)
    assert not position.record_evaluation(3, float("nan"), patience=2, best_k=2)
    assert position.top_scores == [0.5] and position.best_step == 2
    assert not position.record_evaluation(4, float("inf"), patience=2, best_k=2)
    assert position.stopped  # two evaluations without improvement


def test_position_keeps_the_top_k_and_stops_after_patience():
    position = loop.Position()
    scores = [(1, 0.5), (2, 0.7), (3, 0.6), (4, 0.55), (5, 0.65)]
    kept = [position.record_evaluation(step, score, patience=2, best_k=2)
            for step, score in scores]
    assert kept == [True, True, True, False, True]
    assert position.top_scores == [0.7, 0.65] and position.best_step == 2
    assert position.evals_since_best == 3 and position.stopped


def test_patience_waits_for_its_minimum_steps_since_the_best_evaluation():
    position = loop.Position()
    scores = [(10, 0.5), (20, 0.4), (30, 0.45), (40, 0.3), (50, 0.6), (60, 0.2)]
    stopped = []
    for step, score in scores:
        position.record_evaluation(step, score, patience=2, best_k=1, min_steps=25)
        stopped.append(position.stopped)
    # two evaluations without gain at step 30 (20 steps after the best), 40 is 30 steps after it
    assert stopped == [False, False, False, True, False, False]


def _still_dev_config(**train) -> ml_collections.ConfigDict:
    """A tiny run whose parameters do not move (SGD at a step size far below float32's
    resolution), so its first dev evaluation stays the best; dev after every step, periodic
    checkpoints never (the best one is saved at step 1)."""
    config = tiny_config()
    config.data.batch_size = 64  # 63 steps per epoch
    config.optim.update(dict(name="sgd", learning_rate=1e-30, weight_decay=0.0, clip_norm=0.0))
    config.train.update(dict(num_steps=0, epochs=6, eval_every=1, log_every=1, patience=1))
    config.checkpoint.every = 10_000
    config.train.update(train)
    return config


def test_patience_min_epochs_holds_early_stopping_for_passes_over_the_data(tmp_path):
    epoch = loop.train_and_evaluate(_still_dev_config(epochs=1, eval_every=0, patience=0),
                                    tmp_path / "epoch")
    steps_per_epoch = epoch["steps"]
    assert epoch["stopped by"] == "cap" and steps_per_epoch > 2
    plain = loop.train_and_evaluate(_still_dev_config(), tmp_path / "plain")
    assert (plain["best step"], plain["steps"], plain["stopped by"]) == (1, 2, "patience")
    held = loop.train_and_evaluate(_still_dev_config(patience_min_epochs=1.5), tmp_path / "held")
    wait = math.ceil(1.5 * steps_per_epoch)  # steps after the best (step 1) before it may stop
    assert (held["best step"], held["steps"], held["stopped by"]) == (1, 1 + wait, "patience")
    dev = run_report.read_metrics(tmp_path / "held" / run_report.METRICS_FILE, "dev")
    assert [r["step"] for r in dev][:1 + wait] == list(range(1, 2 + wait))


# ----------------------------------------------------------------------------- compilation


def test_second_epoch_does_not_compile(examples):
    model, task, featurizer = _setup(examples, tiny_config().model)
    batcher = Batcher(featurizer.many(examples), batch_size=16, buckets=(8, 16, 24, 32),
                      shuffle=True, seed=0)
    mesh = make_mesh()
    params = init_params(model, next(batcher.epoch(0)), seed=0)
    tx = build_optimizer(tiny_config().optim, params)
    state = create_train_state(params, tx, seed=0, sharding=replicated(mesh))
    train_step = make_train_step(model, task, tx, mesh)
    shapes = set()
    for batch in batcher.epoch(0):
        shapes.add(batch["sentence/tokens"].shape)
        state, _ = train_step(state, shard_batch(batch, mesh))
    assert len(shapes) >= 2
    assert len(train_step.executables) == len(shapes)  # one compilation per bucket shape
    for batch in batcher.epoch(1):
        state, _ = train_step(state, shard_batch(batch, mesh))
    assert len(train_step.executables) == len(shapes)  # epoch 2 compiled nothing


@pytest.mark.parametrize("skip", [False, True])
def test_train_step_skips_a_non_finite_update_when_asked(examples, skip):
    model, task, featurizer = _setup(examples, tiny_config().model)
    batch = next(Batcher(featurizer.many(examples), batch_size=16, buckets=(32,),
                         shuffle=False).epoch(0))
    mesh = make_mesh(jax.devices()[:1])
    params = init_params(model, batch, seed=0)
    tx = build_optimizer(tiny_config().optim, params)
    state = create_train_state(params, tx, seed=0, sharding=replicated(mesh))
    before = jax.tree.map(np.asarray, state.params)
    poisoned = {**batch, "weight": np.full_like(batch["weight"], np.nan)}
    state, stats = make_train_step(model, task, tx, mesh, skip_nonfinite=skip)(
        state, shard_batch(poisoned, mesh))
    assert int(state.step) == 1 and np.isnan(stats["loss"])
    kernel = np.asarray(state.params["head"]["logits"]["kernel"])
    if skip:
        np.testing.assert_array_equal(kernel, before["head"]["logits"]["kernel"])
    else:
        assert np.isnan(kernel).all()


def _diverging_config(nonfinite: str) -> ml_collections.ConfigDict:
    """A tiny run whose SGD step size makes the loss nan after a step or two."""
    config = tiny_config()
    config.optim.update(dict(name="sgd", learning_rate=1e10, clip_norm=0.0, weight_decay=0.0))
    config.train.update(dict(num_steps=12, eval_every=6, log_every=1, nonfinite=nonfinite,
                             divergence_bound=0.0))  # no bound: the loss goes on to nan
    config.checkpoint.every = 1
    return config


def test_a_diverging_loss_stops_the_run_at_the_bound_naming_the_step(tmp_path):
    config = tiny_config()
    config.optim.update(dict(learning_rate=1e6, clip_norm=0.0))  # adam: finite, huge losses
    config.train.log_every = 1
    config.checkpoint.every = 1
    with pytest.raises(DivergedError) as error:
        experiment.run(config, tmp_path)
    message = str(error.value)
    found = re.match(r"step (\d+): training loss (\S+), gradient norm (\S+): the loss is above "
                     r"--config.train.divergence_bound=10000, the run diverged; stopped, the "
                     r"latest checkpoint \(step (\d+)\) is the last good one \(fix: ", message)
    assert found and "\n" not in message, message
    step, loss, latest = int(found.group(1)), float(found.group(2)), int(found.group(4))
    assert 1e4 < loss < float("inf") and latest == step - 1
    records = run_report.read_metrics(tmp_path / run_report.METRICS_FILE, "train")
    assert [r["step"] for r in records] == list(range(1, step))
    assert all(r["loss"] <= 1e4 for r in records)
    assert isinstance(error.value, NonFiniteError)


def test_a_nan_loss_stops_the_run_naming_the_step_and_keeps_the_last_good_checkpoint(tmp_path):
    with pytest.raises(NonFiniteError, match=r"step (\d+): training loss nan") as error:
        experiment.run(_diverging_config("stop"), tmp_path)
    step = int(re.search(r"step (\d+)", str(error.value)).group(1))
    assert step > 1 and f"latest checkpoint (step {step - 1})" in str(error.value)
    assert "\n" not in str(error.value) and "nonfinite=skip" in str(error.value)
    assert max(int(p.name) for p in (tmp_path / "checkpoints").iterdir()) == step - 1
    records = run_report.read_metrics(tmp_path / run_report.METRICS_FILE)
    assert [r["step"] for r in records if r["split"] == "train"] == list(range(1, step))
    assert all(np.isfinite(r["loss"]) for r in records)
    assert not (tmp_path / run_report.RESULTS_FILE).exists()


def test_skipped_non_finite_steps_leave_finite_params_and_records(tmp_path, caplog):
    config = _diverging_config("skip")
    config.checkpoint.every = 0  # at the evaluations
    rows = experiment.run(config, tmp_path)
    assert rows[0]["steps"] == 12
    assert "skipped the updates of" in caplog.text
    train = run_report.read_metrics(tmp_path / run_report.METRICS_FILE, "train")  # one per step
    trained = [r for r in train if "skipped_steps" not in r]
    assert [r["step"] for r in train] == list(range(1, 13)) and 0 < len(trained) < 12
    assert all(np.isfinite(r["loss"]) and np.isfinite(r["grad_norm"]) for r in trained)
    assert all(r["skipped_steps"] == 1 and "loss" not in r for r in train if r not in trained)
    assert (tmp_path / run_report.CURVES_FILE).is_file()
    _, params, _, _ = checkpointing.load_trained_encoder(tmp_path)
    assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves(params))


# ----------------------------------------------------------------------------- other tasks


def _train(model, task, features, steps, learning_rate=3e-3):
    """Trains `steps` steps on one device; returns the metrics on `features` before and after."""
    mesh = make_mesh(jax.devices()[:1])
    batcher = Batcher(features, batch_size=16, buckets=(8, 16), shuffle=True, seed=0)
    eval_batcher = Batcher(features, batch_size=64, buckets=(8, 16), shuffle=False)
    params = init_params(model, next(batcher.epoch(0)), seed=0)
    cfg = tiny_config().optim
    cfg.learning_rate = learning_rate
    tx = build_optimizer(cfg, params)
    state = create_train_state(params, tx, seed=0, sharding=replicated(mesh))
    train_step, eval_step = make_train_step(model, task, tx, mesh), make_eval_step(model, task,
                                                                                    mesh)
    before = loop.evaluate(eval_step, state.params, eval_batcher, task, mesh)
    epoch = 0
    while int(state.step) < steps:
        for batch in batcher.epoch(epoch):
            state, _ = train_step(state, shard_batch(batch, mesh))
        epoch += 1
    return before, loop.evaluate(eval_step, state.params, eval_batcher, task, mesh)


def test_pos_tagging_learns_the_tags(examples):
    tagged = [Example(sentences=(Sentence(tokens=e.sentences[0].tokens[:16],
                                          tags=e.sentences[0].tags[:16]),)) for e in examples]
    model, task, featurizer = _setup(tagged, tiny_config().model, kind="tagging")
    features = featurizer.many(tagged)
    assert features[0]["tags"].shape == features[0]["sentence/tokens"].shape
    before, after = _train(model, task, features, steps=60, learning_rate=3e-2)
    assert before["accuracy"] < 0.5 < 0.9 < after["accuracy"], (before, after)


def test_seq2seq_learns_to_copy():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(6)]
    sources = [tuple(rng.choice(words, size=rng.integers(2, 5))) for _ in range(256)]
    data = [Example(sentences=(Sentence(tokens=s),)) for s in sources]  # autoencoding
    model, task, featurizer = _setup(data, tiny_config("transformer").model, kind="unlabelled")
    features = featurizer.many(data)
    assert features[0]["target/tokens"][0] == 4 and features[0]["target/tokens"][-1] == 5
    before, after = _train(model, task, features, steps=100)
    assert before["accuracy"] < 0.3 and after["accuracy"] > 0.6, (before, after)
    assert after["perplexity"] < before["perplexity"]


# ----------------------------------------------------------------------------- the whole job


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("run")
    config = tiny_config()
    config.baselines.transformer = tiny_config("transformer").model
    return config, workdir, experiment.run(config, workdir)


def test_run_writes_checkpoints_metrics_table_and_curves(finished_run):
    _, workdir, rows = finished_run
    assert [row["model"] for row in rows] == ["bag", "transformer"]
    for row, path in zip(rows, [workdir, workdir / "baselines" / "transformer"], strict=True):
        assert row["steps"] == 40 and row["best step"] in (20, 40)
        assert row["compiled shapes"] == 2  # buckets 16 and 32, nothing else
        assert row["seed"] == 0 and 0 <= row["train s"] < 600
        # the train step's arguments alone hold the params and Adam's two moments
        params_mib = sum(leaf.nbytes for leaf in jax.tree.leaves(
            checkpointing.load_trained_encoder(path)[1])) / 2**20
        assert row["train peak MiB"] >= 3 * params_mib > 0
        assert 0.0 <= row["test accuracy"] <= 1.0
        records = run_report.read_metrics(path / run_report.METRICS_FILE)
        assert [r["step"] for r in records if r["split"] == "train"] == [10, 20, 30, 40]
        assert [r["step"] for r in records if r["split"] == "dev"] == [20, 40]
        (cost,) = [r for r in records if r["split"] == run_report.COST]  # what compare reads
        assert cost["step"] == row["best step"]
        assert abs(cost["train_seconds"] - row["train s"]) <= 0.6
        assert json.loads((path / "config.json").read_text())["model"]["name"] == row["model"]
        assert Vocabulary.load(path / "vocab.txt").tokens[:6][-1] == "</s>"
    text = (workdir / run_report.RESULTS_FILE).read_text()
    assert "| bag | synthetic |" in text and "| transformer | synthetic |" in text
    assert (workdir / run_report.CURVES_FILE).read_bytes()[:4] == b"\x89PNG"


def test_compare_of_a_run_shows_its_baselines_too(finished_run, capsys):
    from jaxenc.training import compare

    _, workdir, rows = finished_run
    table = compare.main([str(workdir)])
    for row in rows:  # the top-level run, then baselines/transformer, as results.md lists them
        assert f"| {row['model']} synthetic | 0 | {row['dev accuracy']:.4f} |" in table
    assert [line.split(" ")[1] for line in table.splitlines()[2:]] == [r["model"] for r in rows]


def test_finished_run_resumes_without_training_again(finished_run):
    config, workdir, rows = finished_run
    again = loop.train_and_evaluate(config, workdir)
    assert again["test accuracy"] == rows[0]["test accuracy"]
    # nothing left to train: the measurements of the run that trained, saved with its position
    assert again["compiled shapes"] == rows[0]["compiled shapes"] == 2
    assert again["train peak MiB"] == rows[0]["train peak MiB"] > 0


def test_predict_gives_each_example_the_run_s_own_output_in_split_order(finished_run, tmp_path):
    config, workdir, rows = finished_run
    splits = input_pipeline.load_splits(config)
    outputs = predict.predict(workdir, "test")
    assert outputs["label"].tolist() == [example.label for example in splits["test"]]
    accuracy = np.mean(outputs["prediction"] == outputs["label"])
    assert accuracy == pytest.approx(rows[0]["test accuracy"], abs=1e-6)
    predict.main([str(workdir), "--split", "dev", "--out", str(tmp_path / "dev.jsonl")])
    lines = [json.loads(line) for line in (tmp_path / "dev.jsonl").read_text().splitlines()]
    assert [line["index"] for line in lines] == list(range(len(splits["dev"])))
    assert [line["label"] for line in lines] == [example.label for example in splits["dev"]]
    accuracy = np.mean([line["prediction"] == line["label"] for line in lines])
    assert accuracy == pytest.approx(rows[0]["dev accuracy"], abs=1e-6)
    with pytest.raises(ConfigError, match="--split validation: the run in .* has splits dev, "
                                          r"test, train \(fix: --split test\)"):
        predict.predict(workdir, "validation")


def test_load_trained_encoder(finished_run):
    _, workdir, _ = finished_run
    encoder, params, vocab, config = checkpointing.load_trained_encoder(workdir)
    assert config.model.name == "bag" and params["embed"]["embedding"].shape == (len(vocab), 16)
    tokens = vocab.encode(["the", "film", "is", "good", "."])[None]
    out = encoder.apply({"params": params},
                        {"tokens": tokens, "lengths": np.array([5], np.int32)}, train=False)
    np.testing.assert_allclose(out["sentence"][0],
                               np.asarray(params["embed"]["embedding"])[tokens[0]].mean(0),
                               rtol=1e-6)


MINIMAL_PAIR = ("the film that was not good is good .", "the film that was good is not good .")


def test_showcase_exports_the_best_model_and_compares_a_minimal_pair(finished_run, capsys):
    _, workdir, rows = finished_run
    capsys.readouterr()
    text = showcase.showcase(rows, workdir, MINIMAL_PAIR)
    best = max(rows, key=lambda row: row["dev accuracy"])
    exported = jaxenc.load(workdir / showcase.EXPORT_DIR)
    assert exported.model_config["name"] == best["model"]
    # the job prints which model it exported, from which run and checkpoint; results.md says so
    checkpoint = Path(best["workdir"]).resolve() / run_files.BEST_DIR / str(best["best step"])
    printed = capsys.readouterr().out
    assert printed.startswith(
        f"exported {best['model']} trained on synthetic, step {best['best step']} (dev accuracy "
        f"{best['dev accuracy']:.4f}, ")
    assert f") from {checkpoint}, to {workdir / showcase.EXPORT_DIR} (" in printed
    # results.md names them relative to the workdir, so it can be moved or committed
    relative = checkpoint.relative_to(Path(workdir).resolve()).as_posix()
    assert f"checkpoint of step {best['best step']}, `{relative}`) is exported to `export`" in text
    assert str(Path(workdir).resolve()) not in text
    cosines, vectors = {}, {}
    for row in rows:
        u, v = vectors[row["model"]] = Encoder.from_workdir(row["workdir"]).encode(
            list(MINIMAL_PAIR))
        cosines[row["model"]] = float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))
    np.testing.assert_allclose(*vectors["bag"], rtol=1e-6)  # same words, same mean
    u, v = vectors["transformer"]  # positions: another order, another vector
    assert np.abs(u - v).max() > 1e-3 * np.abs(u).max()
    (line,) = [line for line in text.splitlines() if line.startswith(f"| {MINIMAL_PAIR[0]} |")]
    shown = [float(cell) for cell in line.strip("| ").split(" | ")[2:]]
    other = next(row["model"] for row in rows if row is not best)
    np.testing.assert_allclose(shown, [cosines[best["model"]], cosines[other]], atol=1e-4)
    assert text in (workdir / run_report.RESULTS_FILE).read_text()


def test_showcase_pair_cosines_and_odd_sentences():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, 5)).astype(np.float32)
    vectors[3] = 0.0  # a sentence without known words
    expected = [vectors[i] @ vectors[i + 1] / np.linalg.norm(vectors[i])
                / np.linalg.norm(vectors[i + 1]) if i != 2 else 0.0 for i in (0, 2, 4)]
    np.testing.assert_allclose(showcase.pair_cosines(vectors), expected, rtol=1e-6)
    with pytest.raises(ConfigError, match="even number"):
        showcase.showcase([{"model": "bag", "dev accuracy": 0.5, "workdir": "x"}], ".", ["one"])


@pytest.mark.parametrize("section, key, value, message", [
    ("model", "name", "lstm", "unknown model 'lstm'"),
    ("optim", "name", "rmsprop", "unknown optimizer 'rmsprop'"),
    ("task", "dataset", "imdb", "unknown dataset 'imdb'"),
])
def test_bad_names_fail_before_any_work(tmp_path, section, key, value, message):
    config = tiny_config()
    config[section][key] = value
    with pytest.raises(ConfigError, match=message):
        experiment.run(config, tmp_path)
    assert not any(tmp_path.iterdir())


def test_phrase_repeats_oversample_sst_train_only(data_root, tmp_path):
    lines = (data_root / "sst_ptb_trees" / "train.txt").read_text(encoding="utf-8").split("\n")
    folder = tmp_path / "data" / "sst_ptb_trees"
    folder.mkdir(parents=True)
    (folder / "train.txt").write_text("\n".join(lines[:50]) + "\n", encoding="utf-8")
    for split in ("dev", "test"):
        (folder / f"{split}.txt").write_text(lines[0] + "\n", encoding="utf-8")
    config = base.get_config("bag,sst5_phrases")
    config.data.data_dir = str(tmp_path / "data")
    once = input_pipeline.load_splits(config)
    config.data.phrase_repeats = 3
    thrice = input_pipeline.load_splits(config)
    emphasised = sum(e.label != 2 or e.uid.endswith("#0") for e in once["train"])
    assert len(thrice["train"]) == len(once["train"]) + 2 * emphasised
    assert thrice["dev"] == once["dev"] and thrice["test"] == once["test"]
    config = base.get_config("bag,trec")
    config.data.phrase_repeats = 3
    with pytest.raises(ConfigError, match="phrase_repeats=3 applies to sst5_phrases only"):
        experiment.run(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    config.data.phrase_repeats = 0
    with pytest.raises(ConfigError, match="phrase_repeats=0: must be a positive integer"):
        experiment.run(config, tmp_path / "run")


def test_missing_data_folder_is_a_data_error(tmp_path):
    config = base.get_config("bag,trec")
    config.data.data_dir = str(tmp_path / "nowhere")
    with pytest.raises(DataError, match="nowhere: data folder does not exist"):
        experiment.run(config, tmp_path / "run")


def test_max_length_below_every_example_is_a_config_error(tmp_path):
    config = tiny_config()
    config.data.max_length = 2
    with pytest.raises(ConfigError, match=r"data.max_length=2 is below every training example "
                                          r"\(the shortest has \d+ tokens\).*fix: "):
        experiment.run(config, tmp_path)


@pytest.mark.parametrize("below", ["", "sub/run"])
def test_a_workdir_that_is_a_file_is_a_config_error(tmp_path, below):
    (tmp_path / "file").write_text("not a run\n")
    with pytest.raises(ConfigError, match=r"file is a file, not a folder"):
        experiment.run(tiny_config(), tmp_path / "file" / below)


def _trec_folder(tmp_path, train_lines: int) -> Path:
    folder = tmp_path / "data" / "trec"
    folder.mkdir(parents=True)
    question = "DESC:manner How do you do ?\n"
    (folder / "TREC.train").write_text(question * train_lines)
    (folder / "TREC.test").write_text(question)
    return folder.parent


def test_an_empty_data_file_is_a_data_error_naming_it(tmp_path):
    config = base.get_config("bag,trec")
    config.data.data_dir = str(_trec_folder(tmp_path, 0))
    with pytest.raises(DataError, match=r"trec/TREC.train: the file is empty"):
        experiment.run(config, tmp_path / "run")


def test_a_carved_split_without_examples_is_a_data_error(tmp_path):
    config = base.get_config("bag,trec")
    config.data.data_dir = str(_trec_folder(tmp_path, 1))  # one example: none to carve
    with pytest.raises(DataError, match=r"'trec' has no dev examples.*task.dev_fraction"):
        experiment.run(config, tmp_path / "run")


def test_a_carved_split_takes_at_least_one_example():
    examples = generate(5, seed=0)
    rest, carved = input_pipeline._carve(examples, 0.1, seed=0, split="dev")  # 10% of 5 rounds to 0
    assert len(carved) == 1 and len(rest) == 4
    assert {e.uid for e in rest} | {e.uid for e in carved} == {e.uid for e in examples}
    rest, carved = input_pipeline._carve(examples[:1], 0.1, seed=0, split="dev")
    assert (len(rest), len(carved)) == (1, 0)


def test_the_split_seed_alone_decides_the_carved_dev_split(tmp_path):
    """task.split_seed -1 carves dev with train.seed; a fixed split_seed carves the same dev
    whatever train.seed is, and a different one carves another."""
    folder = tmp_path / "data" / "trec"
    folder.mkdir(parents=True)
    (folder / "TREC.train").write_text("".join(f"NUM:count how many {i} ?\n" for i in range(60)))
    (folder / "TREC.test").write_text("NUM:count how many ?\n")

    def dev(train_seed: int, split_seed: int) -> list[tuple[str, ...]]:
        config = base.get_config("bag,trec")
        config.data.data_dir = str(tmp_path / "data")
        config.train.seed, config.task.split_seed = train_seed, split_seed
        return [example.sentences[0].tokens
                for example in input_pipeline.load_splits(config)["dev"]]

    assert dev(0, -1) == dev(5, 0) == dev(0, 0)
    assert dev(1, -1) == dev(0, 1) != dev(0, 0)
    assert len(dev(0, 0)) == 6


def _main_error(*args: str) -> str:
    """The stderr of a failing `python -m train.main`, checked to be one line."""
    result = subprocess.run([sys.executable, "-m", "train.main", *args], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_main_refuses_a_workdir_of_another_config_in_one_line(finished_run):
    _, workdir, _ = finished_run
    error = _main_error("--config=train/configs/base.py:bag,synthetic", f"--workdir={workdir}",
                        "--config.model.embed_dim=8")
    assert "model.embed_dim=16" in error and "config says 8" in error


@pytest.mark.parametrize("args, message", [
    (["--config=train/configs/default.py", "--config.optim.nme=adam"],
     "did you mean --config.optim.name?"),
    (["--config=train/configs/base.py:lstm,trec"], "unknown model 'lstm'"),
    (["--config=train/configs/missing.py"], "no preset named 'missing'"),
])
def test_main_reports_bad_config_files_and_keys_in_one_line(tmp_path, args, message):
    assert message in _main_error(*args, f"--workdir={tmp_path}")


@pytest.mark.parametrize("name", CONFIGS)
def test_every_config_names_known_parts(name, tmp_path):
    config = importlib.import_module(f"train.configs.{name}").get_config()
    if config.task.dataset == "files":  # a user's own file (compare.py's default)
        config.data.train_file = str(tmp_path / "mine.tsv")
        (tmp_path / "mine.tsv").write_text("yes\ta sentence .\n")
    preparation.validate(config)
    for name, model_cfg in config.baselines.items():
        assert model_cfg.name == name
    assert build_encoder(config.model, vocab_size=10) is not None


@pytest.mark.parametrize("keep_prob, resumes", [(0.9, True), (0.75, False)])
def test_dropout_bits_that_draw_the_same_bits_resume(tmp_path, keep_prob, resumes):
    """A DiSAN run saved with dropout_bits=8 resumes under the default 0 where 0 also draws 8
    bits (keep_prob 0.9), and is refused where it draws 2 (0.75: another random stream)."""
    saved = base.get_config("disan,synthetic")
    saved.model.update(dict(keep_prob=keep_prob, dropout_bits=8))
    run_files.save_run_files(tmp_path, saved, {})
    other = base.get_config("disan,synthetic")
    other.model.update(dict(keep_prob=keep_prob, dropout_bits=0))
    if resumes:
        assert run_files.check_compatible(tmp_path, other) == {}
    else:
        with pytest.raises(ConfigError, match=r"model.dropout_bits=8 \(config says 0\)"):
            run_files.check_compatible(tmp_path, other)


def test_vector_vocabulary_appends_vector_words_that_keep_their_vectors(tmp_path):
    """data.vector_vocabulary=3 over a vectors file listing a new word, a training word, another
    new word and a fourth word: the vocabulary is the training vocabulary (ids unchanged) plus the
    two new words among the first 3, and after fine-tuning their rows still equal their vectors
    (no training sentence uses them), while a training word's row has moved."""
    config = tiny_config("bag")
    config.optim.weight_decay = 0.0
    train_vocab = Vocabulary.build(s.tokens for e in input_pipeline.load_splits(config)["train"]
                                   for s in e.sentences)
    trained_word = train_vocab.tokens[NUM_SPECIAL]
    rng = np.random.default_rng(0)
    vectors = {word: rng.normal(size=16).round(4) for word in
               ("quokka", trained_word, "zebra", "okapi")}
    path = tmp_path / "vectors.txt"
    path.write_text("".join(f"{word} {' '.join(map(str, v))}\n" for word, v in vectors.items()),
                    encoding="utf-8")
    config.data.update(dict(embeddings=str(path), vector_vocabulary=3))
    experiment.run(config, tmp_path / "run")
    vocab = Vocabulary.load(tmp_path / "run" / "vocab.txt")
    assert vocab.tokens == train_vocab.tokens + ("quokka", "zebra")
    checkpoints = checkpointing.Checkpoints(tmp_path / "run", keep=2, best_k=1, repair=False)
    table = checkpoints.restore_best_params()["encoder"]["embed"]["embedding"]
    checkpoints.close()
    for word in ("quokka", "zebra"):
        np.testing.assert_allclose(table[vocab.id(word)], vectors[word], rtol=1e-6)
    assert not np.allclose(table[vocab.id(trained_word)], vectors[trained_word], atol=1e-3)


def test_vector_vocabulary_without_vectors_is_refused(tmp_path):
    config = tiny_config("bag")
    config.data.vector_vocabulary = 10
    with pytest.raises(ConfigError, match="data.vector_vocabulary"):
        experiment.run(config, tmp_path / "run")
