"""spaCy parse rate on SST-length sentences (SST-5 train), printed as one summary line.

    python -m bench.bench_parse --data_dir DATA [--num_sentences 2000] [--batch_size 256]

Loading the pipeline and a warm-up batch are excluded from the timing.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from jaxenc import cli
from jaxenc.data.paths import data_dir
from jaxenc.data.sst import read_sst_sentences
from jaxenc.structures.parsers import SpacyConstituencyParser, SpacyParser, get_parser

WARMUP_SENTENCES = 64


def parse_rate(root: Path, parser_name: str = "spacy", model: str = "en_core_web_sm",
               num_sentences: int = 2000, batch_size: int = 256) -> dict[str, float | str]:
    """Sentences and tokens per second of `parser_name` on the first SST-5 training sentences
    (the pipeline load and a warm-up batch not timed), with the parser's name and version."""
    path = root / "sst5_sentences" / "stsa.fine.train"
    examples = read_sst_sentences(path, num_classes=5)[:num_sentences]
    sentences = [example.sentences[0] for example in examples]
    parser = get_parser(parser_name, model=model, batch_size=batch_size)
    parser.parse(sentences[:WARMUP_SENTENCES])  # loads the pipeline

    start = time.perf_counter()
    parser.parse(sentences)
    seconds = time.perf_counter() - start
    tokens = sum(len(sentence) for sentence in sentences)
    return {"parser": f"{parser.name} ({parser.version})", "sentences": len(sentences),
            "mean_tokens": tokens / len(sentences), "seconds": seconds,
            "sentences_per_s": len(sentences) / seconds, "tokens_per_s": tokens / seconds}


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
    rate = parse_rate(data_dir(args.data_dir), args.parser, args.model, args.num_sentences,
                      args.batch_size)
    print(f"{rate['parser']}: {rate['sentences']} SST-5 sentences "
          f"(mean {rate['mean_tokens']:.1f} tokens) in {rate['seconds']:.2f} s = "
          f"{rate['sentences_per_s']:.0f} sentences/s, {rate['tokens_per_s']:.0f} tokens/s "
          f"(batch {args.batch_size}, 1 process)")


if __name__ == "__main__":
    main()
