"""Multi30k task 1 (WMT'16 multimodal translation), German -> English, as parallel line files.

Two layouts in one folder: raw `{prefix}.{de,en}` (tokenised here with `text_io.tokenize`) and the
release's lower-cased, normalised, tokenised `{prefix}.lc.norm.tok.{de,en}` (split on spaces, the
Moses tokenizer's XML escapes `&apos;` `&quot;` `&amp;` undone so tokens match the raw layout's).
Splits: train (29000), dev = `val` (1014), test = `test_2016_flickr` (1000). Each Example holds the
German sentence in `sentences` and the English one in `target`.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from jaxenc.errors import DataError
from jaxenc.records import Example, Sentence
from jaxenc.text_io import Line, read_lines, tokenize

SPLIT_PREFIXES = {"train": "train", "dev": "val", "test": "test_2016_flickr"}
LAYOUT_SUFFIXES = {"tokenized": ".lc.norm.tok", "raw": ""}
SOURCE_LANGUAGE, TARGET_LANGUAGE = "de", "en"


def read_multi30k(folder: str | os.PathLike, split: str, *,
                  layout: str = "tokenized") -> list[Example]:
    """Reads one split; `layout` is "tokenized" (lc.norm.tok files) or "raw"."""
    if split not in SPLIT_PREFIXES:
        raise DataError(f"unknown Multi30k split {split!r}",
                        fix=f"use one of {tuple(SPLIT_PREFIXES)}")
    if layout not in LAYOUT_SUFFIXES:
        raise DataError(f"unknown Multi30k layout {layout!r}",
                        fix=f"use one of {tuple(LAYOUT_SUFFIXES)}")
    stem = Path(folder) / (SPLIT_PREFIXES[split] + LAYOUT_SUFFIXES[layout])
    return read_parallel(stem.with_name(f"{stem.name}.{SOURCE_LANGUAGE}"),
                         stem.with_name(f"{stem.name}.{TARGET_LANGUAGE}"),
                         moses_tokenized=layout == "tokenized")


def read_parallel(source_path: str | os.PathLike, target_path: str | os.PathLike, *,
                  moses_tokenized: bool) -> list[Example]:
    """Line-aligned source/target files -> Examples (source in `sentences`, target in `target`).

    With `moses_tokenized` the lines are Moses tokenizer output: split on spaces after undoing its
    XML escapes; otherwise raw text, tokenised by `text_io.tokenize`. `uid` names the source line.
    Raises DataError when the files differ in length.
    """
    sources, targets = read_lines(source_path), read_lines(target_path)
    if len(sources) != len(targets):
        raise DataError(f"{len(sources)} source lines but {len(targets)} target lines in "
                        f"{Path(target_path).name}", path=source_path,
                        fix="give the two sides of a parallel corpus the same number of lines")
    return [Example(sentences=(_sentence(source, moses_tokenized),),
                    target=_sentence(target, moses_tokenized), uid=source.uid)
            for source, target in zip(sources, targets, strict=True)]


def _sentence(line: Line, moses_tokenized: bool) -> Sentence:
    text = line.nonempty(line.text, "sentence")
    if moses_tokenized:
        text = html.unescape(text)
        return Sentence(tokens=tuple(text.split()), text=text)
    return Sentence(tokens=tokenize(text), text=text)
