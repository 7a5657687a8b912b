"""akm_run.stateroot: which state directory a bare command uses, on real directory trees."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from akm_run.stateroot import located, make_state_dir, project_root
from akmc.workspace import find_root


def tree(root: Path, *paths: str) -> Path:
    """Files (a name ending in `/` is a directory) below `root`; returns `root`."""
    for path in paths:
        target = root / path
        if path.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("")
    return root


def test_a_state_directory_between_here_and_the_project_root_is_used(tmp_path: Path) -> None:
    root = tree(tmp_path, "p/.git/", "p/a/.akm-run/state.db", "p/a/b/c/")
    assert located(root / "p/a/b/c") == root / "p/a/.akm-run"
    assert located(root / "p/a") == root / "p/a/.akm-run"


def test_the_nearest_state_directory_wins(tmp_path: Path) -> None:
    root = tree(tmp_path, "p/akm.toml", "p/.akm-run/state.db", "p/a/.akm-run/state.db", "p/a/b/")
    assert located(root / "p/a/b") == root / "p/a/.akm-run"
    assert located(root / "p") == root / "p/.akm-run"


def test_without_a_state_database_the_project_root_holds_it(tmp_path: Path) -> None:
    root = tree(tmp_path, "p/.git/", "p/a/.akm-run/", "p/a/b/")
    assert located(root / "p/a/b") == root / "p/.akm-run"  # an empty .akm-run is not a state directory


def test_a_state_directory_above_the_project_root_is_never_picked(tmp_path: Path) -> None:
    home = tree(tmp_path, "home/.akm-run/state.db", "home/proj/.git/", "home/proj/src/")
    assert located(home / "home/proj/src") == home / "home/proj/.akm-run"
    outer = tree(tmp_path, "outer/.git/", "outer/.akm-run/state.db", "outer/inner/.git/", "outer/inner/x/")
    assert located(outer / "outer/inner/x") == outer / "outer/inner/.akm-run"


def test_outside_any_project_only_the_current_directory_counts(tmp_path: Path) -> None:
    root = tree(tmp_path, ".akm-run/state.db", "a/b/")
    assert located(root / "a/b") == root / "a/b/.akm-run"
    assert located(root) == root / ".akm-run"


def test_akm_toml_wins_over_a_nearer_git_as_the_compiler_says(tmp_path: Path) -> None:
    root = tree(tmp_path, "w/akm.toml", "w/repo/.git/", "w/repo/src/")
    assert located(root / "w/repo/src") == root / "w/.akm-run" == find_root(root / "w/repo/src") / ".akm-run"


def test_a_created_state_directory_ignores_itself_and_an_existing_one_is_left_alone(tmp_path: Path) -> None:
    make_state_dir(tmp_path / "new" / ".akm-run")
    assert (tmp_path / "new/.akm-run/.gitignore").read_text() == "*\n"
    (tmp_path / "old").mkdir()
    make_state_dir(tmp_path / "old")
    assert not (tmp_path / "old/.gitignore").exists()


MARKERS = st.lists(st.sets(st.sampled_from(["akm.toml", ".git"])), min_size=1, max_size=5)


@given(MARKERS)
def test_the_project_root_is_the_compilers_workspace_root(levels: list[set[str]]) -> None:
    """Whatever markers the directories from a temporary one down hold, the runtime's project root is
    the root akmc finds (the runtime keeps its own copy of the rule: it never imports the compiler)."""
    with tempfile.TemporaryDirectory() as top:
        here = Path(top).resolve()
        for depth, markers in enumerate(levels):
            here = here / f"d{depth}"
            here.mkdir()
            for marker in markers:
                (here / marker).mkdir() if marker == ".git" else (here / marker).write_text("")
        found = project_root(here)
        if found is not None:
            assert found == find_root(here)
        else:
            assert not any(levels)
