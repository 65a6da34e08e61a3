"""PSAN on sick_e (Wu et al. 2018: SentEval transfer SICK-E 86.9; pair features |u - v|, u * v
(SentEval)).

Setting in train/configs/_psan.py (fixed GloVe, Adadelta 0.75, batch 16, dropout 0.5, packed
phrase attention). Table 4's ablations are flags: --config.model.single_level=K,
--config.model.division=equal|sentence, --config.model.memory=concat|highway.
"""

from __future__ import annotations

from train.configs._psan import paper_config


def get_config():
    return paper_config("psan", "sick_e")
