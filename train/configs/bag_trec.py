"""Bag-of-words baseline (mean of word embeddings -> MLP) on TREC coarse question types.

TREC ships no dev split: 10% of TREC.train is carved off (task.dev_fraction, seeded).
Pretrained vectors: --config.data.embeddings=PATH/glove.840B.300d.txt (GloVe text format);
without them the table starts random (U(-0.05, 0.05)) and is trained.
"""

from __future__ import annotations

from train.configs import base


def get_config():
    config = base.get_config("bag,trec")
    config.data.batch_size = 64
    config.optim.update(dict(name="adam", learning_rate=1e-3, weight_decay=0.0, clip_norm=5.0))
    config.train.update(dict(epochs=10, patience=3))
    return config
