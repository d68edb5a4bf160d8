"""``make test`` starts the longest test files first (tests/conftest.py): the list must name files that exist, and
the command must keep the order collected."""

from tests.conftest import LONGEST_FIRST
from tests.paths import ROOT


def test_the_longest_files_named_for_the_workers_exist():
    missing = [path for path in LONGEST_FIRST if not (ROOT / path).is_file()]
    assert not missing, f"tests/conftest.py names test files that are gone: {missing}"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_make_test_keeps_the_order_collected():
    """xdist's own order (by the number of tests in a file) would start the long files with few tests last."""
    recipe = (ROOT / "Makefile").read_text()
    assert "--dist loadfile --no-loadscope-reorder" in recipe
