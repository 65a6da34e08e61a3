"""Training entry point (`python -m train.main`) and its ml_collections configs."""
