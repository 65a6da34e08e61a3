"""spaCy parse rate on SST-length sentences (SST-5 train), printed as one summary line.

    python -m bench.bench_parse --data_dir ../shared/data [--num_sentences 2000] [--batch_size 256]

Loading the pipeline and a warm-up batch are excluded from the timing.
"""

from __future__ import annotations

import argparse
import time

from jaxenc import cli
from jaxenc.data.paths import data_dir
from jaxenc.data.sst import read_sst_sentences
from jaxenc.structures.parsers import SpacyConstituencyParser, SpacyParser, get_parser

WARMUP_SENTENCES = 64


@cli.reports_errors
def main(argv: list[str] | None = None) -> None:
    flags = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_argument("--data_dir", default=None, help="datasets folder (else $JAXENC_DATA_DIR)")
    flags.add_argument("--parser", default="spacy",
                       choices=[SpacyParser.name, SpacyConstituencyParser.name])
    flags.add_argument("--model", default="en_core_web_sm", help="spaCy pipeline")
    flags.add_argument("--num_sentences", type=int, default=2000)
    flags.add_argument("--batch_size", type=int, default=256)
    args = flags.parse_args(argv)

    path = data_dir(args.data_dir) / "sst5_sentences" / "stsa.fine.train"
    examples = read_sst_sentences(path, num_classes=5)[:args.num_sentences]
    sentences = [example.sentences[0] for example in examples]
    parser = get_parser(args.parser, model=args.model, batch_size=args.batch_size)
    parser.parse(sentences[:WARMUP_SENTENCES])  # loads the pipeline

    start = time.perf_counter()
    parser.parse(sentences)
    seconds = time.perf_counter() - start
    tokens = sum(len(sentence) for sentence in sentences)
    print(f"{parser.name} ({parser.version}): {len(sentences)} SST-5 sentences "
          f"(mean {tokens / len(sentences):.1f} tokens) in {seconds:.2f} s = "
          f"{len(sentences) / seconds:.0f} sentences/s, {tokens / seconds:.0f} tokens/s "
          f"(batch {args.batch_size}, 1 process)")


if __name__ == "__main__":
    main()
