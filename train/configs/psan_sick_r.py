"""PSAN on sick_r (Wu et al. 2018: SentEval transfer SICK-R 0.891 Pearson; the Tai et al. (2015)
relatedness head, KL loss).

Setting in train/configs/_psan.py (fixed GloVe, Adadelta 0.75, batch 16, dropout 0.5, packed
phrase attention). Table 4's ablations are flags: --config.model.single_level=K,
--config.model.division=equal|sentence, --config.model.memory=concat|highway.

Two named deviations (jaxenc/models/psan.py), on for the pair tasks: with eq. 4 as printed the
sentence vectors all point one way and a head comparing two of them does not learn (SICK-R dev
Pearson 0.000, results/encoders/README.md); `memory_norm=layer` and `memory=highway` make it
learn. `--config.model.memory_norm=none --config.model.memory=gated` trains the paper's PSAN.
"""

from __future__ import annotations

from train.configs._psan import paper_config


def get_config():
    config = paper_config("psan", "sick_r")
    config.model.update(dict(memory_norm="layer", memory="highway"))
    return config
