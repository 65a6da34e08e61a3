"""PSAN on sick_e (Wu et al. 2018: SentEval transfer SICK-E 86.9; pair features |u - v|, u * v
(SentEval)).

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
    return pair_task_config("sick_e")
