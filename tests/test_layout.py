"""The source tree is its layers (docs/ARCHITECTURE.md): few entries at the top, the tree as documented."""

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "uqcal"


def test_the_top_of_the_package_names_the_layers():
    # the package's own files (__init__.py, __main__.py for `python -m uqcal`, py.typed) are not layers
    plumbing = ("__pycache__", "__init__.py", "__main__.py", "py.typed")
    entries = sorted(p.name for p in SRC.iterdir() if p.name not in plumbing)
    assert len(entries) <= 7, entries  # the six layers and uqcal.plots
    assert {"cli", "pipeline", "methods", "data", "metrics", "core"} <= set(entries)


def test_the_architecture_page_opens_with_the_tree_as_it_is():
    text = (SRC.parents[1] / "docs" / "ARCHITECTURE.md").read_text()
    block = text.split("## Source tree", 1)[1].split("```", 2)[1]
    documented = [line.split()[0] for line in block.strip().splitlines()]
    root = SRC.parents[1]
    actual = sorted(
        p.relative_to(root).as_posix()
        for p in [SRC, *SRC.iterdir(), *(q for d in SRC.iterdir() if d.is_dir() for q in d.iterdir())]
        if "__pycache__" not in p.parts
    )
    assert documented == actual


def test_every_benchmark_and_experiment_script_is_listed_in_its_readme():
    """benchmarks/README.md and docs/experiments/README.md list every script of their folder (what it measures,
    where its numbers are used): a script nobody can find is not maintained."""
    root = SRC.parents[1]
    for folder in (root / "benchmarks", root / "docs" / "experiments"):
        readme = (folder / "README.md").read_text()
        scripts = sorted(p.name for p in folder.iterdir() if p.suffix in (".py", ".sh"))
        assert scripts, folder
        missing = [name for name in scripts if f"`{name}`" not in readme]
        assert not missing, f"{folder.relative_to(root)}/README.md does not list {missing}"
