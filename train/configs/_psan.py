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
