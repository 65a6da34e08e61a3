"""Layers shared by the encoders: embeddings, masks, attention variants, gates."""
