"""Dependency-Transformer (DT_full) on sick_e.

Ma et al. 2022: SICK-E 85.10 (plain Transformer 83.34). Table 3's
ablations are one override away: --config.model.variant=transformer|lr|rg (plain Transformer,
no gate and no levels, no levels).

Setting in train/configs/_dependency_transformer.py (AdaGrad 1e-3, batch 32, spaCy parses).
"""

from __future__ import annotations

from train.configs._dependency_transformer import paper_config


def get_config():
    return paper_config("dependency_transformer", "sick_e")
