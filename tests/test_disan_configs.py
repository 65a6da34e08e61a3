"""The DiSAN configs of train/configs (and their bag baselines): each loads, builds its task and
encoder with the paper's settings, and one jitted train step on a tiny slice of the real data gives
a finite loss and changes the parameters. SNLI's model has disan.md's parameter count."""

import importlib

import jax
import numpy as np
import pytest

from jaxenc.training import input_pipeline, preparation
from jaxenc.training.sharding import make_mesh, shard_batch
from jaxenc.training.steps import make_train_step

DISAN_CONFIGS = ("disan_snli", "disan_sst5", "disan_sst2", "disan_trec", "disan_sick_e",
                 "disan_sick_r")
BAGS = {"bag_sst5": "disan_sst5", "bag_sick_r": "disan_sick_r"}
SLICE_LINES = 40  # of each data file (header included)
BATCH = 8


def _config(name: str):
    return importlib.import_module(f"train.configs.{name}").get_config()


def _l2_distance(a, b) -> float:
    return float(sum(np.sum((np.asarray(x) - np.asarray(y)) ** 2)
                     for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)))


@pytest.mark.parametrize("name", DISAN_CONFIGS)
def test_disan_config_trains_one_step_on_real_data(name, tiny_data_dir, tmp_path):
    config = _config(name)
    assert config.model.name == "disan"
    assert (config.model.embed_dim, config.model.hidden) == (300, 300)
    assert (config.optim.name, config.optim.learning_rate, config.data.batch_size) == (
        "adadelta", 0.5, 64)
    sst = config.task.dataset.startswith("sst")
    assert config.model.keep_prob == (0.7 if sst or name == "disan_trec" else 0.75)
    assert config.optim.weight_decay == (1e-4 if sst or name == "disan_trec" else 5e-5)
    assert config.task.head.activation == ("relu" if sst else "elu")
    assert config.data.embeddings == ""  # the ONE override that gives the paper setting

    config.data.update(dict(data_dir=str(tiny_data_dir(config.task.dataset, SLICE_LINES)),
                            batch_size=BATCH, eval_batch_size=BATCH))
    mesh = make_mesh(jax.devices()[:1])  # one device: compiles faster than the 8 fake ones
    setup = preparation.prepare(config, tmp_path / "run", mesh, input_pipeline.load_splits(config))
    before = jax.tree.map(np.asarray, setup.state.params)
    if name == "disan_snli":  # disan.md: encoder + NLI head, embeddings excluded
        assert preparation.count_params(before)[1] == 2_345_403

    batch = next(setup.batchers["train"].epoch(0))
    assert batch["label" if "label" in batch else "score"].shape == (BATCH,)
    train_step = make_train_step(setup.model, setup.task, setup.tx, mesh)
    state, stats = train_step(setup.state, shard_batch(batch, mesh))
    loss = float(stats["loss"])
    assert np.isfinite(loss) and loss > 0.0, loss
    assert np.isfinite(float(stats["grad_norm"])) and float(stats["grad_norm"]) > 0.0
    assert int(state.step) == 1
    assert _l2_distance(before, state.params) > 0.0


@pytest.mark.parametrize("bag, disan", sorted(BAGS.items()))
def test_bag_baseline_differs_from_its_disan_config_only_in_model_and_optimiser(bag, disan):
    baseline, reference = _config(bag).to_dict(), _config(disan).to_dict()
    assert baseline["model"] == {"name": "bag", "embed_dim": 300, "freeze_embeddings": False,
                                 "dtype": "float32"}
    assert baseline["optim"]["name"] == "adam"
    for section in ("task", "data", "train", "checkpoint"):
        assert baseline[section] == reference[section], section
