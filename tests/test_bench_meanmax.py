"""The Mean-Max AAE throughput benchmark (python -m bench.bench_meanmax): one tiny run of the
small config's real train step, checked for the report `--out` writes (the row reports.meanmax_aae
reads), never for its timings."""

import math

from bench import bench_meanmax
from reports.run_files import row


def test_out_writes_one_row_that_the_reports_read(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a small cat sat .\nthe dog ran home .\none two three four\n",
                      encoding="utf-8")
    out = tmp_path / "bench_small.md"
    bench_meanmax.main(["--config=small", f"--corpus={corpus}", "--steps=2", "--bucket=8",
                        "--vocab=40", f"--out={out}"])
    report = row(out)
    assert report["config"] == "`meanmax_aae_small.py`"
    assert report["d_m / d_f / heads, embeddings, vocabulary"] == "512 / 1024 / 8, 50-d, 40"
    assert report["batch lengths"] == "all 8 tokens" and report["steps"] == "2"
    rate, cpu_ms = float(report["sentences/s (wall)"]), float(report["CPU ms per sentence"])
    assert math.isfinite(rate) and rate > 0 and cpu_ms > 0
    hours = float(report["one epoch of 70M sentences at this wall rate"].split(" hours")[0]
                  .replace(",", ""))
    assert math.isclose(hours, bench_meanmax.PAPER_SENTENCES / rate / 3600, rel_tol=0.01, abs_tol=1)
    assert len(out.read_text(encoding="utf-8").splitlines()) == 3
