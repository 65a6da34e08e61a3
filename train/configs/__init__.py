"""ml_collections configs: base.py (defaults and presets), default.py (the main job), one file
per model x task."""
