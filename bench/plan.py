"""The variants of a bench.run: each model's preset, every choice of its implementation axis
(AXES), DiSAN's blocked step with 32-bit dropout masks, bf16 presets and a plain Transformer of
each model's width; the attention-loop settings of a backend (loop_settings)."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import ml_collections
import numpy as np

from bench.rows import DISAN_BLOCKED_32BIT, axis_label
from jaxenc.configs import model_config
from jaxenc.layers.masks import DirectionalMask
from jaxenc.layers.multidim_attention import IMPLEMENTATIONS, resolve_impl
from jaxenc.models import phrase_transformer, psan
from jaxenc.models.config import AUTO
from jaxenc.models.registry import encoder_config

WIDTH_FIELDS = ("model_dim", "hidden", "memory_dim", "embed_dim")  # a model's width: the first


class Axis(NamedTuple):
    """A config field whose every choice is measured (implementations of one model).

    Attributes:
      field: the model config field.
      choices: its values, read from the model's own list of choices where it has one.
      base: the choice the others are compared with.
      same_work: value -> the value whose loop-free FLOP count it shares (same math), or None.
      resolve: (preset config, length) -> the choice the preset computes at that length; None:
        the preset's value once its "auto" options are resolved (the built encoder's).
    """

    field: str
    choices: tuple[str, ...]
    base: str
    same_work: Callable[[str], str | None] = lambda value: None
    resolve: Callable[[Mapping[str, Any], int], str] | None = None


def disan_impl(cfg: Mapping[str, Any], length: int) -> str:
    """The token2token kernel a DiSAN config computes at this length: its attention, like the
    model's, has directional masks and the scaled tanh bounded by c."""
    return resolve_impl(cfg["attention_impl"], length, cfg["blocked_threshold"],
                        DirectionalMask(np.zeros(1, np.int32), "forward"), cfg["c"])


AXES: dict[str, Axis] = {
    "disan": Axis("attention_impl", tuple(i for i in IMPLEMENTATIONS if i != "auto"), "dense",
                  same_work=lambda impl: "dense", resolve=disan_impl),
    "psan": Axis("psa_impl", psan.PSA_IMPLS, "dense", same_work={"streaming": "dense"}.get),
    "phrase_transformer": Axis("phase2", tuple(p for p in phrase_transformer.PHASE2 if p != AUTO),
                               "dense"),
    "dependency_transformer": Axis("variant", ("full", "transformer"), "transformer"),
}


@dataclasses.dataclass(frozen=True)
class Variant:
    """One measured configuration: a registered model, overrides of its preset, a dtype."""

    label: str
    model: str
    overrides: tuple[tuple[str, Any], ...] = ()
    dtype: str = "float32"
    reference: bool = False  # a plain Transformer added as some model's same-width reference

    def config(self, widths: Mapping[str, Mapping[str, Any]]) -> ml_collections.ConfigDict:
        return model_config(self.model, **{**widths.get(self.model, {}), **dict(self.overrides),
                                           "dtype": self.dtype})


class Plan(NamedTuple):
    """The variants of a run; `lines[model](length)` is the label of the model's f32 preset at a
    length, `references[model]` the label of its same-width Transformer."""

    variants: list[Variant]
    lines: dict[str, Callable[[int], str]]
    references: dict[str, str]


def tiny_widths() -> dict[str, dict[str, Any]]:
    """The encoder contract test's TINY widths (tests/test_encoder_contract.py)."""
    from tests.test_encoder_contract import TINY  # a test module: only --tiny needs it

    return TINY


def loop_settings(backend: str) -> dict[str, dict[str, int]]:
    """Each model's attention-loop settings for `backend`, what "auto" picks there
    (jaxenc.layers.loops), made explicit so that a CPU can compile a GPU's program: one example
    (DiSAN's blocked and directional loops, PSAN's streaming one) and one phrase (PSAN's packed
    attention) per step on a CPU, where that is fastest or as fast with the least memory
    (results/disan/speed.md, results/psan); the whole batch and a whole length class on
    accelerators."""
    per_step = int(backend == "cpu")
    return {"disan": dict(examples_per_step=per_step),
            "psan": dict(packed_chunk=per_step, examples_per_step=per_step)}


def with_loop_settings(widths: Mapping[str, Mapping[str, Any]],
                       backend: str) -> dict[str, dict[str, Any]]:
    """`widths` (each model's preset overrides) with this backend's loop settings under them."""
    loops = loop_settings(backend)
    return {model: {**loops.get(model, {}), **widths.get(model, {})}
            for model in {*loops, *widths}}


def width(cfg: Mapping[str, Any]) -> int:
    return next(cfg[field] for field in WIDTH_FIELDS if field in cfg)


def reference_overrides(cfg: Mapping[str, Any], widths: Mapping) -> dict[str, Any]:
    """A plain Transformer (its preset, or TINY sizes) at the model's width and embedding size."""
    base = model_config("transformer", **widths.get("transformer", {}))
    size = width(cfg)
    heads = base.num_heads
    while size % heads:
        heads -= 1
    return dict(model_dim=size, ff_dim=size * base.ff_dim // base.model_dim, num_heads=heads,
                embed_dim=cfg["embed_dim"])


def plan_variants(models: Sequence[str], dtypes: Sequence[str], widths: Mapping) -> Plan:
    """The variants of `models` in `dtypes`, `widths` being each model's preset overrides."""
    variants: list[Variant] = []
    lines: dict[str, Callable[[int], str]] = {}
    for model in models:
        axis = AXES.get(model)
        if axis is None:
            if "float32" in dtypes:
                variants.append(Variant(model, model))
            lines[model] = functools.partial(lambda length, label: label, label=model)
        else:
            if "float32" in dtypes:
                variants += [Variant(axis_label(model, axis.field, value), model,
                                     ((axis.field, value),)) for value in axis.choices]
                if model == "disan":
                    variants.append(Variant(DISAN_BLOCKED_32BIT, model,
                                            (("attention_impl", "blocked"),
                                             ("dropout_bits", 32))))
            preset = Variant(model, model).config(widths)
            resolve = axis.resolve or (
                lambda cfg, length, field=axis.field: getattr(encoder_config(cfg), field))
            lines[model] = functools.partial(
                lambda length, model, field, preset, resolve:
                axis_label(model, field, resolve(preset, length)),
                model=model, field=axis.field, preset=preset, resolve=resolve)
        if "bfloat16" in dtypes:
            variants.append(Variant(f"{model} bf16", model, dtype="bfloat16"))
    configs = {json.dumps(v.config(widths).to_dict(), sort_keys=True): v.label for v in variants}
    references = {}
    for model in models:
        overrides = reference_overrides(Variant(model, model).config(widths), widths)
        reference = Variant(f"transformer d={overrides['model_dim']}", "transformer",
                            tuple(sorted(overrides.items())), reference=True)
        key = json.dumps(reference.config(widths).to_dict(), sort_keys=True)
        if key not in configs:
            configs[key] = reference.label
            variants.append(reference)
        references[model] = configs[key]
    return Plan(variants, lines, references)

