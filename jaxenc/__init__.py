"""jaxenc: syntax-aware sentence encoders in JAX/Flax.

Parse trees are turned on the host, once, into fixed-shape integer arrays; the device sees only
padded tensors. See README.md and docs/ARCHITECTURE.md.
"""

__version__ = "0.1.0"
