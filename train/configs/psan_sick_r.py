"""PSAN on sick_r (Wu et al. 2018: SentEval transfer SICK-R 0.891 Pearson; the Tai et al. (2015)
relatedness head, KL loss).

The pair-task setting of train/configs/_psan.py (`pair_task_config`: fixed GloVe, the named
deviations `memory_norm=layer` and `memory=highway`, Adam 1e-3, batch 64, no dropout: the
paper's own setting does not learn a pair task). `--config.model.memory_norm=none
--config.model.memory=gated` trains the paper's PSAN. Table 4's ablations are flags:
--config.model.single_level=K, --config.model.division=equal|sentence,
--config.model.memory=concat|highway.
"""

from __future__ import annotations

from train.configs._psan import pair_task_config


def get_config():
    return pair_task_config("sick_r")
