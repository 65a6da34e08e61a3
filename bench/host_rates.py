"""bench.run's host-side rates on one pinned core: gold-tree and spaCy parsing, tree -> arrays,
PSAN's packing plan, the input pipeline and its padding waste (the bench_* scripts' functions)."""

from __future__ import annotations

from typing import Any

from bench import bench_input, bench_packing, bench_parse, bench_structures
from bench.common import one_core
from jaxenc.data.batching import bucket_lengths
from jaxenc.data.packing import PackingConfig
from jaxenc.data.paths import data_dir
from jaxenc.errors import JaxencError
from jaxenc.models import psan


def packing_plan_rate(features: list[dict]) -> dict:
    """PSAN's packing plan over one planned epoch of `features` (bench_packing.measure at the
    default PackingConfig and packed_tile, batch 64, buckets of 8 up to 64): its rate and its
    attention elements against dense."""
    packing = bench_packing.measure(features, PackingConfig(), batch_size=64, max_length=64,
                                    bucket_step=8, later=0, tile=psan.PSANConfig.packed_tile)
    return dict(sentences_per_s=packing["rate"], packed=packing["packed"],
                bound=packing["bound"], batch_size=64, max_length=64)


def host_section(mode: str, explicit_dir: str | None) -> dict:
    """Host-side rates on one pinned core: gold-tree and spaCy parsing, tree -> arrays, PSAN's
    packing plan, the input pipeline, padding waste (the bench_* scripts' functions)."""
    if mode == "off":
        return {"skipped": "--host off"}
    try:
        root = data_dir(explicit_dir)
    except JaxencError as error:
        return {"skipped": str(error)}
    quick = mode == "quick"
    host: dict[str, Any] = {}
    with one_core():
        timings, trees = bench_structures.measure(root, repeats=1 if quick else 3)
        host["structures"] = dict(trees=trees, rates={name: 1 / seconds
                                                      for name, seconds in timings.items()},
                                  parse_gold=bench_structures.PARSE_GOLD,
                                  all_models=bench_structures.ALL_MODELS)
        try:
            host["parse"] = bench_parse.parse_rate(root, num_sentences=500 if quick else 2000)
        except JaxencError as error:
            host["parse"] = {"skipped": str(error)}
        host["packing"] = packing_plan_rate(bench_packing.sst_features(root))
        lengths, source = bench_input.sentence_lengths(0)
        features = bench_input.random_features(lengths, 0)
        max_length = int(lengths.max())
        _, rate = bench_input.throughput(features, bucket_lengths(max_length, 8), 64,
                                         epochs=1 if quick else 3, num_threads=0)
        host["input"] = dict(source=source, examples_per_s=rate, batch_size=64,
                             waste=bench_input.waste_by_scheme(features, max_length, 64))
    return host
