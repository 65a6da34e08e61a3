"""PSAN on sick_r (Wu et al. 2018: SentEval transfer SICK-R 0.891 Pearson; the Tai et al. (2015)
relatedness head, KL loss).

Setting: `pair_task_config` in train/configs/_psan.py, which says why it departs from the
paper's (`--config.model.memory_norm=none --config.model.memory=gated` trains the printed model).
"""

from __future__ import annotations

from train.configs._psan import pair_task_config


def get_config():
    return pair_task_config("sick_r")
