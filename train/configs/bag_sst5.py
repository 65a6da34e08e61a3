"""Bag-of-words baseline (mean of word embeddings -> Dense 300 + ReLU -> Dense 5) on SST-5, the
reference for disan_sst5.py: same data (every labelled phrase of the SST train trees, non-neutral
ones and whole sentences 3x; whole sentences for dev / test), same head and schedule; Adam 1e-3
(clipped at norm 5) like the other bag_<task> configs.

Pretrained vectors: --config.data.embeddings=PATH/glove.840B.300d.txt.
"""

from __future__ import annotations

from train.configs import base, disan_sst5


def get_config():
    config = disan_sst5.get_config()
    config.model = base.model_config("bag")
    config.optim.update(dict(name="adam", learning_rate=1e-3, weight_decay=0.0, clip_norm=5.0))
    return config
