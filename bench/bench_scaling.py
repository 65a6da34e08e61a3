"""Data-parallel scaling: the training step of DiSAN and the Transformer on 1, 2, 4 and 8 devices
at a fixed global batch.

The step is the training loop's (`jaxenc.training.steps.make_train_step`: params replicated, the
batch split over the mesh's "data" axis, XLA's gradient all-reduce), on batches of the embedded
synthetic dataset built by the loop's own `prepare` (one bucket, so one compile per mesh). DiSAN's
blocked attention takes one example per step on one device and the whole batch on several
(`examples_per_step` 1 and 0, the fast settings); --examples_per_step=1 shows what stepping
through the split batch axis costs (XLA gathers the batch and every device computes all of it).
Every mesh starts from the same parameters; the meshes take turns in every repeat (load drifts
on a shared machine hit all alike). Reported per model and device count: the median wall and
process CPU milliseconds per step, examples per second, the loss after the timed steps (equal
across meshes up to float rounding) and the time relative to one device.

Without accelerators the devices are fake: XLA_FLAGS=--xla_force_host_platform_device_count=8
(set here unless XLA_FLAGS is) splits the host CPU into 8 devices that share the same cores, so
the table shows the overhead of splitting the batch and all-reducing the gradients, never a
speed-up. On a GPU/TPU host the same command measures real devices.

    python -m bench.bench_scaling --devices=1,2,4,8 --batch=64 --steps=5 --repeats=3
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import itertools  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402

from bench.common import parse_ints, timed  # noqa: E402
from jaxenc import cli  # noqa: E402
from jaxenc.training import input_pipeline, preparation  # noqa: E402
from jaxenc.training.sharding import make_mesh, replicated, shard_batch  # noqa: E402
from jaxenc.training.state import create_train_state  # noqa: E402
from jaxenc.training.steps import make_train_step  # noqa: E402
from train.configs import base  # noqa: E402

MODELS = ("disan", "transformer")


def model_config(name: str, width: int, batch: int, length: int):
    """The synthetic-data training config of `name` at `width`, global batch `batch`, one bucket
    of `length` tokens, no dropout (the loss is then the same on every mesh)."""
    config = base.get_config(f"{name},synthetic")
    sizes = {"disan": dict(hidden=width, keep_prob=1.0),
             "transformer": dict(model_dim=width, ff_dim=2 * width, num_heads=4,
                                 dropout_rate=0.0)}[name]
    config.model.update(dict(embed_dim=width, **sizes))
    config.task.head.hidden_dims = (width,)
    config.data.update(dict(batch_size=batch, eval_batch_size=batch, max_length=length,
                            bucket_step=length))
    config.optim.update(dict(name="adam", learning_rate=1e-3, weight_decay=0.0, clip_norm=5.0))
    return config


def per_step(model, examples: int):
    """The task model with its encoder's `examples_per_step` (DiSAN's blocked attention; how,
    never what it computes) set to `examples`; unchanged for encoders without it."""
    encoder = model.encoder
    if not hasattr(encoder.config, "examples_per_step"):
        return model
    return model.clone(encoder=encoder.clone(
        config=dataclasses.replace(encoder.config, examples_per_step=examples)))


def benchmark(name: str, args) -> list[dict]:
    """Rows (devices, ms, cpu_ms, examples/s, loss) of `name` on every device count."""
    config = model_config(name, args.width, args.batch, args.length)
    with tempfile.TemporaryDirectory() as workdir:
        setup = preparation.prepare(config, Path(workdir), make_mesh(),
                                    input_pipeline.load_splits(config))
    batches = list(itertools.islice(setup.batchers["train"].epoch(0), args.steps))
    params = jax.device_get(setup.state.params)
    runs = {}
    for count in args.devices:
        mesh = make_mesh(jax.devices()[:count])
        examples = args.examples_per_step if args.examples_per_step >= 0 else int(count == 1)
        step = make_train_step(per_step(setup.model, examples), setup.task, setup.tx, mesh)
        state = create_train_state(params, setup.tx, config.train.seed, replicated(mesh))
        sharded = [shard_batch(batch, mesh) for batch in batches]
        jax.block_until_ready(step(state, sharded[0]))  # compiles; `state` is donated
        runs[count] = {"step": step, "mesh": mesh, "batches": sharded, "wall": [], "cpu": []}

    for _ in range(args.repeats):
        for run in runs.values():  # every repeat restarts from the same parameters
            state = create_train_state(params, setup.tx, config.train.seed,
                                       replicated(run["mesh"]))

            def steps(run=run, state=state):
                for batch in run["batches"]:
                    state, stats = run["step"](state, batch)
                run["loss"] = stats["loss"]
                return state

            wall, cpu = timed(steps)
            run["wall"].append(wall / len(batches))
            run["cpu"].append(cpu / len(batches))
    return [dict(model=name, devices=count, ms=1e3 * statistics.median(run["wall"]),
                 cpu_ms=1e3 * statistics.median(run["cpu"]),
                 examples=args.batch / statistics.median(run["wall"]), loss=float(run["loss"]))
            for count, run in runs.items()]


def print_table(rows: list[dict], args) -> None:
    devices = jax.devices()
    fake = devices[0].platform == "cpu"
    print(f"\n{len(devices)} {devices[0].platform} device(s), global batch {args.batch}, "
          f"bucket {args.length}, width {args.width}, DiSAN examples_per_step "
          f"{args.examples_per_step if args.examples_per_step >= 0 else '1 on 1 device, else 0'}"
          f", {args.steps} steps x {args.repeats} "
          f"repeats, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if fake:
        print("NOTE: fake CPU devices (--xla_force_host_platform_device_count) share the same "
              f"{os.cpu_count()} cores: this shows the overhead of data parallelism, not a "
              "speed-up.")
    header = (f"{'model':>12} {'devices':>7} {'step ms':>9} {'cpu ms':>9} {'ex/s':>8} "
              f"{'vs 1 device':>11} {'loss':>8}")
    print(header)
    print("-" * len(header))
    single = {row["model"]: row["ms"] for row in rows if row["devices"] == min(args.devices)}
    for row in rows:
        print(f"{row['model']:>12} {row['devices']:>7} {row['ms']:9.1f} {row['cpu_ms']:9.1f} "
              f"{row['examples']:8.0f} {row['ms'] / single[row['model']]:10.2f}x "
              f"{row['loss']:8.4f}")


@cli.reports_errors
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--devices", type=parse_ints, default=[1, 2, 4, 8],
                        help="device counts (each must divide --batch)")
    parser.add_argument("--batch", type=int, default=64, help="global batch (fixed)")
    parser.add_argument("--length", type=int, default=32, help="the one bucket length")
    parser.add_argument("--width", type=int, default=64, help="embedding and model width")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per repeat")
    parser.add_argument("--examples_per_step", type=int, default=-1,
                        help="DiSAN's blocked loop: examples per step (-1: 1 on one device, 0 = "
                             "the whole batch on several; 1 everywhere shows the batch gathered "
                             "on every device)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    unknown = set(args.models.split(",")) - set(MODELS)
    if unknown or max(args.devices) > jax.device_count():
        parser.error(f"models must be among {MODELS} and devices at most {jax.device_count()}")
    rows = []
    for name in args.models.split(","):
        rows += benchmark(name, args)
        print(f"{name} done", flush=True)
    print_table(rows, args)


if __name__ == "__main__":
    main()
