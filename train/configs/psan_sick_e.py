"""PSAN on sick_e (Wu et al. 2018: SentEval transfer SICK-E 86.9; pair features |u - v|, u * v
(SentEval)).

Setting: `pair_task_config` in train/configs/_psan.py, which says why it departs from the
paper's (`--config.model.memory_norm=none --config.model.memory=gated` trains the printed model).
"""

from __future__ import annotations

from train.configs._psan import pair_task_config


def get_config():
    return pair_task_config("sick_e")
