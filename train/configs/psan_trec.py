"""PSAN on trec (Wu et al. 2018: Table 5, trained on TREC with 300-d sentence vectors: 89.1% with
1192 MB (DiSAN 87.7% / 2943 MB, multi-head 87.1% / 1508 MB)).

Setting in train/configs/_psan.py (fixed GloVe, Adadelta 0.75, batch 16, dropout 0.5, packed
phrase attention). Table 4's ablations are flags: --config.model.single_level=K,
--config.model.division=equal|sentence, --config.model.memory=concat|highway.
"""

from __future__ import annotations

from train.configs._psan import paper_config


def get_config():
    return paper_config("psan", "trec")
