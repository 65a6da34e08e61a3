"""README.md stays a short page for users: at most 200 lines, its two commands where .ci/run
reads them, its example pointing at the folder the main job exports to, and every relative link
of README.md and docs/*.md (anchors included) pointing at something that exists."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCUMENTS = [README, *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def readme_command(marker: str) -> str:
    """The first ```sh block after the line `<!-- marker -->`, as .ci/run's awk extracts it."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"<!-- {marker} -->")
    body, inside = [], False
    for line in lines[start + 1:]:
        if line.startswith("```"):
            if inside:
                return "\n".join(body)
            assert line == "```sh", f"the block after <!-- {marker} --> is not a sh block"
            inside = True
        elif inside:
            body.append(line)
    raise AssertionError(f"no closed ```sh block after <!-- {marker} -->")


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file."""
    found, seen = set(), {}
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6} (.*)", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match[1].strip().lower()).replace(" ", "-")
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def test_the_readme_is_at_most_200_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_the_two_ci_commands_are_in_place():
    main_job, tests = readme_command("main-job"), readme_command("tests")
    assert "python -m train.main --config=train/configs/default.py --workdir=workdir/default" \
        in main_job
    assert "pip install -q -r requirements.txt" in main_job
    assert "python -m pytest" in tests
    assert "pip install -q -r requirements-dev.txt" in tests  # the test tools
    if "-n" in tests.split():  # parallel workers come from pytest-xdist, which CI must install
        requirements = (REPO / "requirements-dev.txt").read_text(encoding="utf-8")
        assert re.search(r"^pytest-xdist==", requirements, re.MULTILINE)
    assert "\n" not in main_job and "\n" not in tests


def test_the_example_loads_what_the_main_job_exports():
    from jaxenc import showcase
    assert f'jaxenc.load("workdir/default/{showcase.EXPORT_DIR}")' in \
        README.read_text(encoding="utf-8")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.relative_to(REPO).as_posix())
def test_relative_links_point_at_existing_files(document):
    text = FENCE.sub("", document.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        where = (document.parent / path).resolve() if path else document
        if not where.exists():
            broken.append(target)
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(target)
    assert not broken, f"{document.relative_to(REPO)}: links to nothing: {broken}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.relative_to(REPO).as_posix())
def test_named_test_files_exist(document):
    text = document.read_text(encoding="utf-8")
    for name in set(re.findall(r"tests/test_\w+\.py", text)):
        assert (REPO / name).is_file(), f"{document.relative_to(REPO)} names {name}"


def test_the_tests_reliability_md_names_exist():
    """docs/reliability.md backs each promise with tests named `test_...`: they must exist."""
    text = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    defined = "\n".join(path.read_text(encoding="utf-8") for path in (REPO / "tests").glob("*.py"))
    names = set(re.findall(r"`(test_\w+)`", text))
    assert names
    assert not [name for name in names if f"def {name}(" not in defined]
