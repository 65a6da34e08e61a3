"""PSAN's training setting, shared by its per-task configs (psan.md).

GloVe 840B 300-d FIXED (one override: --config.data.embeddings=PATH/glove.840B.300d.txt), OOV
words hashed into 128 random vectors U(-0.05, 0.05) (data.oov="hashed"), batch 16, Adadelta lr
0.75, dropout 0.5 (model.keep_prob), L2 5e-5 on weight matrices, classifier Dense 300 + ELU.
Trees: gold for SST and SNLI, spaCy-derived phrase trees elsewhere (benepar when installed:
--config.model.parser=benepar). Deviation: Glorot-uniform instead of Glorot-normal weights (the
initialiser the other encoders share). Packed phrase attention with exact length classes.
"""

from __future__ import annotations

import ml_collections

from train.configs import base


def paper_config(model: str, dataset: str) -> ml_collections.ConfigDict:
    """`model` ("psan", or a model compared with it under the same schedule) on `dataset`."""
    config = base.get_config(f"{model},{dataset}")
    config.data.update(dict(batch_size=16, oov="hashed", freeze_embeddings=True))
    config.optim.update(dict(name="adadelta", learning_rate=0.75, weight_decay=5e-5))
    config.train.update(dict(epochs=20, patience=5))
    return config


def pair_task_config(dataset: str) -> ml_collections.ConfigDict:
    """PSAN trained on a sentence-pair task (SICK-R, SICK-E). The paper trains no PSAN on a pair
    task (its SICK numbers are SentEval transfer of the SNLI encoder), and neither the printed
    model nor the setting above learns one: with eq. 4 as printed the sentence vectors all point
    one way (SICK-R dev Pearson 0.000), and with the two flags below under Adadelta 0.75, batch
    16 and dropout 0.5 dev Pearson stays below zero (results/psan/README.md). So: the named
    deviations `memory_norm=layer` and `memory=highway`, and the recipe the encoder sweep chose
    on SICK-R dev (reports.encoder_runs: Adam 1e-3, clip 5, no L2, batch 64, no dropout,
    the word vectors fixed as the paper), trained until 5 evaluations bring no dev gain."""
    config = paper_config("psan", dataset)
    config.model.update(dict(memory_norm="layer", memory="highway", keep_prob=1.0))
    config.optim.update(dict(name="adam", learning_rate=1e-3, weight_decay=0.0, clip_norm=5.0))
    config.data.batch_size = 64
    config.train.update(dict(epochs=60, patience=5))
    return config
