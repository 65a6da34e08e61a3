"""Dependency-Transformer (DT_full) on mrpc.

Ma et al. 2022: MRPC 73.58 (plain Transformer 72.41). Table 3's
ablations are one override away: --config.model.variant=transformer|lr|rg (plain Transformer,
no gate and no levels, no levels).

Setting in train/configs/_dependency_transformer.py (AdaGrad 1e-3, batch 32, spaCy parses).
"""

from __future__ import annotations

from train.configs._dependency_transformer import paper_config


def get_config():
    return paper_config("dependency_transformer", "mrpc")
