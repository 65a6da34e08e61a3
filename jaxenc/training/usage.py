"""The `--help` of `python -m train.main` / `jaxenc-train`, generated from what it describes.

`help_text(config)` lists the registered models, datasets and optimisers, then every config key
as `--config.SECTION.KEY` with its value in `config` (the defaults of
train/configs/base.py:bag,trec unless a --config is given) and a one-line meaning. Keys and values
come from the config itself; a model key's meaning comes from its config class (the `Attributes:`
section of the class docstrings along its MRO, else the comment above the field); any other key's
from its field in `jaxenc.training.sections`.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import textwrap
from collections.abc import Iterator
from typing import Any

import ml_collections

from jaxenc.data.registry import DATASETS
from jaxenc.models import registry
from jaxenc.models.config import EncoderConfig
from jaxenc.training.optim import OPTIMIZERS
from jaxenc.training.run_files import CONFIG_SECTIONS
from jaxenc.training.sections import MEANINGS

_WIDTH = 100      # of the help text
_KEY_COLUMN = 40  # where meanings start


def _cut(text: str, pattern: str) -> str:
    """`text` up to the first match of `pattern` outside parentheses (all of it if none)."""
    depth = 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and re.match(pattern, text[index:]):
            return text[:index]
    return text


def _one_line(text: str, limit: int) -> str:
    """The first sentence of `text` on one line, within `limit` characters: cut at its first
    semicolon, then without its parenthetical asides, then at a word."""
    text = _cut(" ".join(text.split()), r'\. ["A-Z]').rstrip(".")
    if len(text) > limit:
        text = _cut(text, ";")
    if len(text) > limit:
        text = " ".join(re.sub(r"\s*\([^()]*\)", "", text).split())
    if len(text) > limit:
        text = text[:limit - 3].rsplit(" ", 1)[0].rstrip(",;:") + "..."
    return text


def _attributes(doc: str) -> dict[str, str]:
    """{name: text} of the `Attributes:` section of a Google-style docstring (an entry may name
    several fields: `a, b: text`)."""
    lines = inspect.cleandoc(doc).splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"Attributes\b.*:$", line)]
    if not starts:
        return {}
    found: dict[str, str] = {}
    names: list[str] = []
    for line in lines[starts[0] + 1:]:
        if not line.strip() or not line.startswith(" "):
            break
        entry = re.match(r"  (\w+(?:, \w+)*): (.*)", line)
        if entry:
            names = entry.group(1).split(", ")
            found.update(dict.fromkeys(names, entry.group(2)))
        else:
            found.update({name: f"{found[name]} {line.strip()}" for name in names})
    return found


def _field_comments(cls: type) -> dict[str, str]:
    """{field: the comment lines right above its declaration in `cls`'s body}."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    comments: list[str] = []
    for line in source.splitlines():
        comment = re.match(r"    # ?(.*)", line)
        declaration = re.match(r"    (\w+): ", line)
        if comment:
            comments.append(comment.group(1))
            continue
        if declaration and comments:
            found[declaration.group(1)] = " ".join(comments)
        comments = []
    return found


def field_docs(cls: type) -> dict[str, str]:
    """{field: its description} of a model config class: from the nearest class along its MRO
    whose docstring's Attributes section or field comments describe the field ("" for none: a
    test requires every field of every encoder to have one)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        docs.update(_field_comments(klass))
        docs.update(_attributes(klass.__doc__ or "") if klass is not object else {})
    return {field.name: docs.get(field.name, "") for field in dataclasses.fields(cls)}


def _line(key: str, value: Any, meaning: str, indent: int = 2) -> str:
    """`  KEY=VALUE    meaning`, the meaning shortened to fit the help's width."""
    left = f"{' ' * indent}{key}={repr(value) if isinstance(value, str) else value}"
    left = f"{left:<{_KEY_COLUMN - 2}}  "
    return left + _one_line(meaning, max(_WIDTH - len(left), 30))


def _flat(section: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """(flat key, value) of a config section, depth first."""
    for key, value in section.items():
        if isinstance(value, ml_collections.ConfigDict):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _model_lines(prefix: str, section: Any) -> list[str]:
    """The keys of a model section (`model` or `baselines.NAME`) with their values in it."""
    docs = field_docs(registry.encoder_spec(section["name"]).config)
    keys = [key for key in docs if key in section]  # the config class's order
    keys += [key for key in section.keys() if key not in docs and key != "name"]
    return [_line(f"{prefix}.name", section["name"], "the model: one of the models above"),
            *(_line(f"{prefix}.{key}", section[key], docs.get(key, "")) for key in keys)]


def _every_model_lines() -> list[str]:
    """The model keys of every registered model, the fields they all share first."""
    common = {field.name: field.default for field in dataclasses.fields(EncoderConfig)}
    docs = field_docs(EncoderConfig)
    lines = [_line("model.name", "bag", "the model: one of the models above"),
             f"  keys of every model ({EncoderConfig.__module__}.{EncoderConfig.__qualname__}):"]
    lines += [_line(f"model.{name}", value, docs[name], 4) for name, value in common.items()]
    for name in registry.ENCODERS:
        if not registry.available(name):
            lines.append(f"  {name}: not installed")
            continue
        if name == next(iter(registry.ENCODERS)):
            lines.append("  each model's other keys, and other defaults:")
        cls = registry.encoder_spec(name).config
        docs = field_docs(cls)
        own = {key: value for key, value in cls().to_dict().items()
               if key not in common or common[key] != value}
        lines.append(f"  {name} ({cls.__module__}.{cls.__qualname__}):" + ("" if own else " none"))
        lines += [_line(f"model.{key}", value, docs[key], 4) for key, value in own.items()]
    return lines


def help_text(config: ml_collections.ConfigDict, source: str | None = None) -> str:
    """The config part of `--help`: models, datasets, optimisers, then every key of `config`
    (read from --config=`source`; None: the defaults, every model's keys listed)."""
    names = lambda items: textwrap.fill(", ".join(items), _WIDTH, initial_indent="  ",
                                        subsequent_indent="  ")
    parts = ["Models (MODEL of base.py:MODEL,DATASET; --config.model.name):", names(
        registry.ENCODERS), "Datasets (DATASET; --config.task.dataset):", names(DATASETS),
        "Optimisers (--config.optim.name):", names(OPTIMIZERS), ""]
    where = (f"the values of --config={source}" if source else
             "the defaults of --config=train/configs/base.py:bag,trec")
    parts.append(textwrap.fill(f"Config keys (--config.SECTION.KEY=VALUE), with {where}:", _WIDTH,
                               break_on_hyphens=False, break_long_words=False))  # a whole path
    order = {section: index for index, section in enumerate(CONFIG_SECTIONS)}
    for section in sorted(config.keys(), key=lambda name: order.get(name, len(order))):
        value = config[section]
        parts.append(f"{section}:")
        if section == "model":
            parts += _model_lines("model", value) if source else _every_model_lines()
        elif section == "baselines":
            parts.append("  NAME.KEY: a model section trained on the same task beside the model "
                         "(as model.KEY)")
            for name, model in value.items():
                parts += _model_lines(f"baselines.{name}", model)
        elif section == "recipes":
            parts.append("  NAME.SECTION.KEY: baselines.NAME's own value of SECTION.KEY (its "
                         "family's recipe)")
            parts += [_line(key, item, "this baseline's own value") for key, item in
                      _flat(value, "recipes.")]
        else:
            parts += [_line(key, item, MEANINGS.get(key, ""))
                      for key, item in _flat(value, f"{section}.")]
    return "\n".join(parts)
