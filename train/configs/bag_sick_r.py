"""Bag-of-words baseline on SICK-R with the Tai et al. (2015) head, the reference for
disan_sick_r.py: same data, head and schedule;
Adam 1e-3 (clipped at norm 5) like the other bag_<task> configs.

Pretrained vectors: --config.data.embeddings=PATH/glove.840B.300d.txt.
"""

from __future__ import annotations

from train.configs import base, disan_sick_r


def get_config():
    config = disan_sick_r.get_config()
    config.model = base.model_config("bag")
    config.optim.update(dict(name="adam", learning_rate=1e-3, weight_decay=0.0, clip_norm=5.0))
    return config
