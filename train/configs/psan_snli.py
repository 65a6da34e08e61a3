"""PSAN on snli (Wu et al. 2018: SNLI test 86.1; 1,984,203 parameters outside the embeddings with
the NLI classifier [v_p; v_h; |v_p - v_h|; v_p * v_h] -> Dense 300 (ELU) -> Dense 3 (tied
encoder)).

Setting in train/configs/_psan.py (fixed GloVe, Adadelta 0.75, batch 16, dropout 0.5, packed
phrase attention). Table 4's ablations are flags: --config.model.single_level=K,
--config.model.division=equal|sentence, --config.model.memory=concat|highway.
"""

from __future__ import annotations

from train.configs._psan import paper_config


def get_config():
    config = paper_config("psan", "snli")
    config.task.head.pair_features = "u,v,|u-v|,u*v"
    config.train.update(dict(epochs=10, eval_every=5000))
    return config
