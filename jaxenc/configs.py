"""Training-config defaults, one preset per model and per task; every config starts here
(train/configs/*.py through train/configs/base.py, or a user's own file with `jaxenc-train`).

  python -m train.main --config=train/configs/base.py:MODEL,DATASET --workdir=DIR
  e.g. --config=train/configs/base.py:transformer,trec  (any registered model and dataset)

Sections: `model` (name + the fields of the encoder's config class, e.g.
jaxenc.models.disan.DiSANConfig, whose defaults are the paper's values); `task`, `data`, `optim`,
`train`, `checkpoint` and `showcase` (jaxenc.training.sections: each key's default, meaning,
check and resume rule; --help prints them); `baselines` (name -> model section, each trained on
the same task and reported beside) and `recipes` (baseline name -> its own values of the other
sections, e.g. recipes.tree_lstm.optim.learning_rate).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ml_collections

from jaxenc.errors import ConfigError
from jaxenc.models import registry
from jaxenc.models.config import AUTO
from jaxenc.structures.arrays import CONSTITUENCY, DEPENDENCY, FIELD_TREES
from jaxenc.training import sections

# Datasets that ship gold trees of each kind: a model whose structure fields need only kinds the
# dataset has reads its gold trees (its `parser` option becomes "gold"). A fixed default parser
# becomes "gold" here, when the config is made; "auto" (PSAN's default) when the config is
# checked (jaxenc.training.validation), so that a --config.task.dataset override counts.
GOLD_TREES = {
    CONSTITUENCY: ("synthetic", "sst5_trees", "sst2_trees", "sst5_phrases", "sst2_phrases",
                   "snli", "ptb_sample"),
    DEPENDENCY: ("synthetic", "ud_ewt"),
}

# Per-dataset task options that differ from the defaults in `get_config`.
TASK_PRESETS = {
    "sick_e": dict(head=dict(pair_features="|u-v|,u*v")),     # SentEval's pair features
    "mrpc": dict(head=dict(pair_features="|u-v|,u*v")),
    "snli": dict(head=dict(pair_features="u,v,u-v,u*v")),     # DiSAN's NLI classifier
}


def ships_gold_trees(model: Mapping[str, Any], dataset: str) -> bool:
    """Whether `dataset` ships gold trees of every kind the structure fields of the model section
    `model` need (GOLD_TREES); False for a model without structure fields."""
    kinds = {FIELD_TREES[field] for field in registry.structure_spec(model).fields}
    return bool(kinds) and all(dataset in GOLD_TREES[kind] for kind in kinds)


def model_config(name: str, **overrides) -> ml_collections.ConfigDict:
    """The model section for encoder `name`: the defaults of its config class (the paper's
    hyperparameters, jaxenc.models.<name>) with `overrides`, validated. Its values may change
    type (a loop setting "auto" -> 0): the model's config class checks them when it is built."""
    return ml_collections.ConfigDict(registry.preset(name, **overrides), type_safe=False)


def with_model(config: ml_collections.ConfigDict, name: str,
               **overrides) -> ml_collections.ConfigDict:
    """`config` with encoder `name` as its model, sized as the model it had (the fields the two
    share: widths, layers, heads, dropout, ...) plus `overrides`; the old model becomes
    `baselines.<its name>`, trained on the same task, data, optimiser and budget."""
    baseline = config.model
    shared = (set(registry.preset(name)) & set(baseline)) - {"name", "freeze_embeddings"}
    config.model = model_config(name, **{key: baseline[key] for key in shared}, **overrides)
    config.model.freeze_embeddings = config.data.get_ref("freeze_embeddings")
    config.baselines[baseline.name] = baseline
    return config


def twin_option(config: ml_collections.ConfigDict, arg: str | None) -> ml_collections.ConfigDict:
    """The `:ARG` of a config file that trains a model beside its twin (`with_model`): none or
    "twin" keeps the twin in `baselines`; "solo" trains the model alone (an ablation whose
    twin another run of the same budget already has)."""
    if arg in (None, "", "twin"):
        return config
    if arg != "solo":
        raise ConfigError(f"config argument {arg!r}: expected 'twin' (the default) or 'solo', "
                          "e.g. --config=train/configs/phrase_transformer_pos.py:solo")
    config.baselines = ml_collections.ConfigDict()
    return config


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    """Defaults; `arg` "MODEL,DATASET" picks the model preset and the task's dataset."""
    model, dataset = (arg or "bag,trec").split(",")
    config = ml_collections.ConfigDict()
    config.model = model_config(model)
    parser = config.model.get("parser")
    if parser not in (None, AUTO) and ships_gold_trees(config.model, dataset):
        config.model.parser = "gold"  # "auto" is resolved once overrides are applied

    config.task = ml_collections.ConfigDict(sections.defaults(sections.Task))
    config.task.dataset = dataset
    if registry.encoder_spec(model).decoder is not None:
        config.task.head.decoder.name = "model"
    config.task.update_from_flattened_dict(
        {f"head.{k}": v for k, v in TASK_PRESETS.get(dataset, {}).get("head", {}).items()})

    for name in ("data", "optim", "train", "checkpoint", "showcase"):
        config[name] = ml_collections.ConfigDict(sections.defaults(sections.SECTIONS[name]))
    config.model.freeze_embeddings = config.data.get_ref("freeze_embeddings")

    config.baselines = ml_collections.ConfigDict()
    config.recipes = ml_collections.ConfigDict()
    return config
