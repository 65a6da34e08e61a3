"""The DiSAN kernel benchmark (python -m bench.bench_disan): one tiny run of the real train steps,
checked for the report `--out` writes (the table reports.performance reads), never for its timings:
every variant at every length, `vs blk` the reference blocked step's time over each row's, and
the lengths compiled for memory only left untimed."""

import math

from bench import bench_disan
from reports.run_files import read_rows

TINY = ["--batch=2", "--embed_dim=8", "--hidden=8", "--vocab=20", "--repeats=1",
        "--blocked_sizes=4", "--directional_sizes=4", "--floor", "--blocked_at_default_bits"]


def test_out_writes_every_variant_with_ratios_to_the_reference_blocked_step(tmp_path):
    out = tmp_path / "kernels.md"
    bench_disan.main(["--lengths=8", "--memory_lengths=16", *TINY, f"--out={out}"])
    rows = read_rows(out)
    timed = [(row["impl"], row["block"], row["bits"]) for row in rows if row["L"] == "8"]
    assert timed == [("dense", "-", "2"), ("blocked", "4", "32"), ("blocked", "4", "2"),
                     ("directional", "4", "2"), ("no t2t", "-", "2")]
    untimed = [(row["impl"], row["step ms"], row["vs blk"]) for row in rows if row["L"] == "16"]
    assert [impl for impl, _, _ in untimed] == ["dense", "blocked", "blocked", "directional"]
    assert all(step == ratio == "-" for _, step, ratio in untimed)
    reference = next(float(row["step ms"]) for row in rows
                     if row["L"] == "8" and row["impl"] == "blocked" and row["bits"] == "32")
    for row in rows[:len(timed)]:
        step = float(row["step ms"])
        assert math.isfinite(step) and step > 0
        # both times are rounded to 0.1 ms and the ratio to 0.01
        low, high = (reference - 0.05) / (step + 0.05), (reference + 0.05) / (step - 0.05)
        assert low - 0.005 <= float(row["vs blk"]) <= high + 0.005
    for row in rows:
        assert float(row["temp MiB"]) <= float(row["peak MiB"])
    first = out.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("`python -m bench.bench_disan --lengths=8 --memory_lengths=16")
