"""The Mean-Max AAE small config's corpus, counted: what `python -m jaxenc.data.corpus` writes
from the shared data (the transfer tasks' sentences left out) and what training
train/configs/meanmax_aae_small.py on it keeps (the corpus report a run logs), stored in
results/meanmax_aae/corpus.md.

    python -m reports.corpus_report           # build, read, write corpus.md
    python -m reports.corpus_report --check   # exit 1 if corpus.md differs
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from jaxenc.data import corpus
from jaxenc.training import input_pipeline
from jaxenc.training.sections import Sections
from reports.run_files import RESULTS
from train.configs import meanmax_aae_small

STORED = RESULTS / "meanmax_aae" / "corpus.md"
CORPUS_FILE = "corpus.txt"


def measure(data_dir: str | None) -> str:
    """corpus.md's text: the build report and the training corpus report of a fresh build."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / CORPUS_FILE
        with contextlib.redirect_stdout(io.StringIO()):
            built = corpus.main(["--out", str(out)]
                                + (["--data_dir", data_dir] if data_dir else []))
        config = meanmax_aae_small.get_config()
        config.data.corpus_files = str(out)
        _, read = corpus.load_corpus(input_pipeline.corpus_options(Sections.of(config)))
        built_line = str(built).replace(str(out), CORPUS_FILE)
    return "\n".join([
        "# The Mean-Max AAE small config's corpus",
        "",
        "Made by `python -m reports.corpus_report` from the shared data: the line "
        f"`python -m jaxenc.data.corpus --out {CORPUS_FILE}` prints (datasets "
        f"`{corpus.DEFAULT_SOURCES}`), then the corpus report a run of "
        f"train/configs/meanmax_aae_small.py with `--config.data.corpus_files={CORPUS_FILE}` "
        "logs (its GloVe 6B 50-d vocabulary, lower-cased, `data.corpus_oov="
        f"{config.data.corpus_oov}`).",
        "",
        f"    {built_line}",
        "",
        f"    {read}",
        "",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default=None, help="the data root ($JAXENC_DATA_DIR)")
    parser.add_argument("--check", action="store_true",
                        help="compare with corpus.md instead of writing it")
    args = parser.parse_args(argv)
    text = measure(args.data_dir)
    if args.check:
        same = STORED.is_file() and STORED.read_text(encoding="utf-8") == text
        print(f"{STORED.name}: {'up to date' if same else 'differs'}", file=sys.stderr)
        return 0 if same else 1
    STORED.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
