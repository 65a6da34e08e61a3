"""Repository entry points (`python -m train.main`, `python -m train.compare`) and the
ml_collections configs (train/configs/); the code lives in `jaxenc.training`."""
