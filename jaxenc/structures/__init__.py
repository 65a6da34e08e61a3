"""Syntax structures: trees in, fixed-shape integer arrays out (host side, numpy).

- `trees`: `Tree` (constituency), `DependencyTree`, the PTB bracket format.
- `formats`: CoNLL-U, the NLTK Penn Treebank sample zips, bracket-per-line files.
- `derive`: a phrase tree from a dependency tree (for PSAN without a constituency parser).
- `psan`: PSAN segment ids per level and phrase lists (`segments`, `blocks`).
- `relations`: Dependency-Transformer relation ids and levels; node heads (Tree-LSTM).
- `hypernodes`: PhraseTransformer hypernodes and their adjacency (built on device).
- `stats`: PSAN Table 1 statistics (`python -m jaxenc.structures.stats`).
- `parsers`, `cache`: parser back-ends for sentences without trees, and their on-disk cache.
- `arrays`: every model's structure arrays for a sentence (used by the featurizer and TFDS).
"""

from jaxenc.structures.trees import DependencyTree, Tree, parse_bracketed

__all__ = ["DependencyTree", "Tree", "parse_bracketed"]
