"""The training harness: optimisers, train state, jitted data-parallel steps, checkpoints, the
loop and its reports. Entry point: `python -m train.main` (train/main.py)."""
