"""A named word-vector package cut to the rows some datasets read, for a machine that cannot take
the whole package (the GloVe 6B 50-d package is 80 MB).

A run reads a package's rows for its vocabulary: the training words, the package's first
`data.vector_vocabulary` words, and, through the lower-case fallback, the lower-cased forms. A
copy that holds the package's first `--first` rows and the row of every word (and lower-cased
word) of the datasets' splits, in the package's order, gives such a run the same vocabulary and
the same initial embedding matrix. `--check CONFIG` builds both for a config (its vocabulary from
its dataset's training split, then the vectors with its seed) and fails unless they are equal.

  python -m reports.cut_vectors --datasets ud_ewt --first 100000 --out DIR \\
      --check train/configs/phrase_transformer_pos.py:solo

DIR then holds the package's module (its `__init__.py`, the cut matrix and word index) and its
dist-info: with DIR first on PYTHONPATH, `data.embeddings=glove-6b-50d` reads the cut copy.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from jaxenc.data import named_vectors, registry
from jaxenc.records import Example
from reports.run_files import REPO


def rows_to_keep(words: Sequence[str], first: int, needed: set[str]) -> list[int]:
    """Row indices in the package's order: the `first` first rows and each row whose word is in
    `needed`."""
    return [row for row, word in enumerate(words) if row < first or word in needed]


def words_of(examples: Iterable[Example]) -> set[str]:
    """Every token of the examples' sentences and targets, and its lower-cased form."""
    words = set()
    for example in examples:
        sentences = (*example.sentences, *((example.target,) if example.target else ()))
        for sentence in sentences:
            for token in sentence.tokens:
                words.update((token, token.lower()))
    return words


def write_cut(name: str, rows: Sequence[int], out: Path) -> Path:
    """Writes the package of source `name` holding `rows` only under `out`; returns the module's
    folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = named_vectors.NAMED_VECTORS[name]
    package = importlib.import_module(source.module)
    module_dir, root = Path(package.__file__).parent, Path(package.ROOT)
    vectors = named_vectors.open_named(name)
    cut_module = out / source.module
    cut_root = cut_module / root.relative_to(module_dir)
    cut_root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(package.__file__, cut_module / "__init__.py")
    np.save(cut_root / source.matrix_file, vectors.take(rows))
    pq.write_table(pa.table({source.index_column: [vectors.words[row] for row in rows]}),
                   cut_root / source.index_file)
    version = importlib.metadata.version(source.distribution)
    dist_info = out / f"{source.distribution.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(exist_ok=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {source.distribution}\nVersion: {version}\n",
        encoding="utf-8")
    return cut_module


def inputs_digest(config_spec: str) -> str:
    """sha256 of the vocabulary and the initial embedding matrix that the config's run builds
    (its dataset's training split, its seed), with the vectors the running Python imports."""
    from jaxenc.data.embeddings import load_vectors
    from jaxenc.training.input_pipeline import build_vocabularies

    path, _, arg = config_spec.partition(":")
    spec = importlib.util.spec_from_file_location("config_module", REPO / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.get_config(arg or None)
    data = config.data
    info = registry.DATASETS[config.task.dataset]
    train = registry.load(info.name, "train", data.data_dir or None)
    with tempfile.TemporaryDirectory() as workdir:
        vocab = build_vocabularies(Path(workdir), info.kind, train, data)["vocab"]
    vectors = load_vectors(data.embeddings, vocab, oov=data.oov, seed=config.train.seed,
                           lowercase_fallback=data.lowercase_fallback,
                           expected_dim=config.model.embed_dim)
    digest = hashlib.sha256("\n".join(vocab.tokens).encode("utf-8"))
    digest.update(np.ascontiguousarray(vectors.matrix, dtype=np.float32).tobytes())
    return digest.hexdigest()


def _digest_in_subprocess(config_spec: str, pythonpath: Sequence[str]) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*pythonpath, str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "reports.cut_vectors", "--digest", config_spec],
                          env=env, cwd=REPO, capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", default="glove-6b-50d",
                        choices=sorted(named_vectors.NAMED_VECTORS), help="the named package")
    parser.add_argument("--datasets", default="", help="comma-separated registry names whose "
                        "words (every split) the cut keeps")
    parser.add_argument("--first", type=int, default=0,
                        help="keep the package's first rows too (a run's data.vector_vocabulary)")
    parser.add_argument("--data_dir", default=None, help="the data root (default: "
                        "JAXENC_DATA_DIR)")
    parser.add_argument("--out", type=Path, help="the folder to write the cut package into")
    parser.add_argument("--check", metavar="CONFIG[:ARG]", help="fail unless this config's "
                        "vocabulary and initial embedding matrix are the same with the cut copy")
    parser.add_argument("--digest", metavar="CONFIG[:ARG]", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.digest:
        print(inputs_digest(args.digest))
        return
    if not args.out or not args.datasets:
        parser.error("--out and --datasets are required")
    needed = set()
    for name in args.datasets.split(","):
        if name not in registry.DATASETS:
            parser.error(f"--datasets: unknown dataset {name!r} (known: "
                         f"{', '.join(sorted(registry.DATASETS))})")
        for split in registry.DATASETS[name].splits:
            needed |= words_of(registry.load(name, split, args.data_dir))
    words = named_vectors.open_named(args.vectors).words
    rows = rows_to_keep(words, args.first, needed)
    write_cut(args.vectors, rows, args.out)
    print(f"{args.out}: {len(rows):,} of {len(words):,} rows of {args.vectors}")
    if args.check:
        full = _digest_in_subprocess(args.check, [])
        cut = _digest_in_subprocess(args.check, [str(args.out.resolve())])
        if full != cut:
            sys.exit(f"--check {args.check}: the cut copy changes the vocabulary or the initial "
                     f"embeddings (fix: add the datasets the config reads to --datasets, or "
                     f"raise --first to its data.vector_vocabulary)")
        print(f"{args.check}: vocabulary and initial embeddings equal ({full[:16]})")


if __name__ == "__main__":
    main()
