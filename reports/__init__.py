"""The reports of the results pages: every measured table of README.md, docs/ and results/
rebuilt from the run files committed in results/ (`python -m reports --write`), and the
commands that train, measure or collect what those files hold (`python -m reports.<name>`)."""
