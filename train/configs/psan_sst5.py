"""PSAN on sst5_phrases (Wu et al. 2018: trained on every labelled phrase of the SST training trees
(gold trees), tested on sentences; SentEval transfer SST 83.8 (binary)).

Setting in train/configs/_psan.py (fixed GloVe, Adadelta 0.75, batch 16, dropout 0.5, packed
phrase attention). Table 4's ablations are flags: --config.model.single_level=K,
--config.model.division=equal|sentence, --config.model.memory=concat|highway.
"""

from __future__ import annotations

from train.configs._psan import paper_config


def get_config():
    return paper_config("psan", "sst5_phrases")
