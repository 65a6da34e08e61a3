"""reports.encoder_runs' queue: a run whose files are committed is skipped unless it is
trained again (`--again`), and a run finished under $RUNS is never trained twice."""

import sys

from reports import encoder_runs as runs

WRITES_RESULTS = ("import pathlib, sys; workdir = pathlib.Path(sys.argv[-1].split('=', 1)[1]); "
                  "workdir.mkdir(parents=True); (workdir / 'results.md').write_text('done')")


def test_committed_runs_train_only_again(tmp_path, monkeypatch):
    committed = tmp_path / "committed"
    (committed / "dt_sst5_s0").mkdir(parents=True)
    (committed / "dt_sst5_s0" / "results.md").write_text("table run")
    monkeypatch.setattr(runs, "COMMITTED", committed)
    monkeypatch.setenv("RUNS", str(tmp_path / "runs"))
    (tmp_path / "runs").mkdir()
    argv = [sys.executable, "-c", WRITES_RESULTS]
    assert runs.run_one("dt_sst5_s0", argv) == "done already: dt_sst5_s0"
    assert not (tmp_path / "runs" / "dt_sst5_s0").exists()
    assert runs.run_one("dt_sst5_s0", argv, again=True) == "finished: dt_sst5_s0"
    assert (tmp_path / "runs" / "dt_sst5_s0" / "results.md").read_text() == "done"
    assert runs.run_one("dt_sst5_s0", argv, again=True) == "done already: dt_sst5_s0"
    # a run that is not committed trains without `again`; a failure says its exit status
    assert runs.run_one("tree_lstm_sst5_s0", argv) == "finished: tree_lstm_sst5_s0"
    failing = [sys.executable, "-c", "raise SystemExit(3)"]
    assert runs.run_one("bag_sst5_s0", failing) == "FAILED (3): bag_sst5_s0"
