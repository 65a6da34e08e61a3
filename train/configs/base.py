"""Defaults for every config: `get_config("MODEL,DATASET")` from `jaxenc.configs` (the library
holds them so that installed users and `jaxenc-compare` have them too).

  python -m train.main --config=train/configs/base.py:MODEL,DATASET --workdir=DIR
  e.g. --config=train/configs/base.py:transformer,trec  (any registered model and dataset)
"""

from jaxenc.configs import get_config, model_config, twin_option, with_model

__all__ = ["get_config", "model_config", "twin_option", "with_model"]
