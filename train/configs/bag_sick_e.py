"""Bag-of-words baseline on SICK-E (entailment / neutral / contradiction), tied encoder.

Pair features [|u - v|, u * v] as in SentEval; dev = SICK_trial.txt.
Pretrained vectors: --config.data.embeddings=PATH/glove.840B.300d.txt.
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("bag,sick_e")
    config.data.batch_size = 64
    config.optim.update(dict(name="adam", learning_rate=1e-3, weight_decay=0.0, clip_norm=5.0))
    config.train.update(dict(epochs=10, patience=3))
    return config
