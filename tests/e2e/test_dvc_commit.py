"""uqcal.dvc.commit_targets: the fewest `dvc commit` targets that commit exactly the finished stages."""

from __future__ import annotations

import itertools

from uqcal.pipeline.dvc import commit_targets

# materialise -> split -> train a -> train b (reads a) -> aggregate -> report; a second family beside it.
STAGES = {
    "materialise": {"deps": ["src/x.py"], "outs": ["data/raw/d.parquet"]},
    "split": {"deps": ["data/raw/d.parquet"], "outs": ["data/splits/f/d/s"]},
    "train-a": {"deps": ["data/splits/f/d/s"], "outs": ["results/f/d/s/a"]},
    "train-b": {"deps": ["data/splits/f/d/s", "results/f/d/s/a"], "outs": ["results/f/d/s/b"]},
    "aggregate-f": {"deps": ["results/f/d/s/a", "results/f/d/s/b"], "outs": ["results/f/summary.csv"]},
    "split-g": {"deps": ["data/raw/d.parquet"], "outs": ["data/splits/g/d/s"]},
    "train-g": {"deps": ["data/splits/g/d/s"], "outs": ["results/g/d/s/m"]},
    "aggregate-g": {"deps": ["results/g/d/s/m"], "outs": ["results/g/summary.csv"]},
    "report": {"deps": ["results/f/summary.csv", "results/g/summary.csv"], "outs": ["reports"]},
}


def _closure(name: str) -> set[str]:
    """The stage and everything upstream of it, by brute force over the outputs."""
    found, todo = {name}, [name]
    while todo:
        deps = STAGES[todo.pop()]["deps"]
        for other, stage in STAGES.items():
            if other not in found and set(stage["outs"]) & set(deps):
                found.add(other)
                todo.append(other)
    return found


def _committed(with_deps: list[str], alone: list[str]) -> set[str]:
    return set().union(*(_closure(t) for t in with_deps), alone)


def test_one_family_done_is_committed_through_its_aggregate_alone():
    done = ["materialise", "split", "train-a", "train-b", "aggregate-f"]
    with_deps, alone = commit_targets(STAGES, done)
    assert with_deps == ["aggregate-f"] and alone == []


def test_every_subset_of_stages_is_committed_exactly():
    # Whatever finished (upstream outputs can exist without their stage's record: named alone), the targets
    # commit exactly the done stages, and never name a stage that one --with-deps target already covers.
    names = list(STAGES)
    for size in range(len(names) + 1):
        for done in itertools.combinations(names, size):
            with_deps, alone = commit_targets(STAGES, list(done))
            assert _committed(with_deps, alone) == set(done), done
            for target in with_deps:
                assert not any(target in _closure(other) for other in with_deps if other != target), done
