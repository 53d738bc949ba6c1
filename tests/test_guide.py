"""docs/guide.md: every python block runs, in order, and prints what the guide shows."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import needs_dot

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide.md"


def load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_guide", ROOT / "examples" / "run_guide.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_guide"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


runner = load_runner()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    folder = tmp_path_factory.mktemp("guide")
    return folder, runner.run(GUIDE, folder)


def test_every_printed_output_matches_the_guide(results: tuple[Path, list]) -> None:
    _, ran = results
    compared = 0
    for block, printed in ran:
        out = block.output
        if out is None or out.check == "not checked" or printed is None:
            continue  # (printed is None: the block needs an optional module not installed)
        expected = runner.normalize(out.text, out.check)
        assert runner.normalize(printed, out.check) == expected, (
            f"docs/guide.md:{block.first_line}: the block's output differs from the guide "
            "(python examples/run_guide.py --update-outputs rewrites it)"
        )
        compared += 1
    assert compared >= 15  # the guide shows outputs throughout, not just a few


def _shown_pictures() -> list[str]:
    return re.findall(r"\]\(img/(guide-[\w-]+\.svg)\)", GUIDE.read_text(encoding="utf-8"))


def test_every_picture_the_guide_shows_is_committed_and_its_source_written(
    results: tuple[Path, list],
) -> None:
    folder, _ = results
    shown = _shown_pictures()
    assert len(shown) >= 4
    for name in shown:
        assert (ROOT / "docs" / "img" / name).is_file(), f"docs/img/{name} is not committed"
        assert "<svg" in (ROOT / "docs" / "img" / name).read_text(encoding="utf-8")
        drawn = folder / name
        source = drawn.with_suffix(".dot")  # what render writes when `dot` is missing
        assert drawn.is_file() or source.is_file(), f"no guide block writes {name}"


@needs_dot
def test_every_picture_the_guide_shows_is_drawn_by_its_code(results: tuple[Path, list]) -> None:
    folder, _ = results
    for name in _shown_pictures():
        assert (folder / name).is_file(), f"no guide block draws {name}"
        assert "<svg" in (folder / name).read_text(encoding="utf-8")


def test_blocks_run_in_the_scratch_folder_not_the_checkout(results: tuple[Path, list]) -> None:
    folder, _ = results
    written = {p.stem for p in folder.iterdir()}
    assert "guide-eager-tape" in written
    assert not (ROOT / "guide-eager-tape.svg").exists()
    assert not (ROOT / "guide-eager-tape.dot").exists()


def test_readme_links_the_guide() -> None:
    assert "(docs/guide.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


GUIDE_SAMPLE = """\
Text.

```python
print("a")
```

```text
a
```

```python
print("t 1.25 ms")
```

<!-- output: times masked -->
```text
t 9.5 ms
```

```python
x = 1
```

Prose between.

```text
not an output: prose stands between
```

```python
print("noise")
```

<!-- output: not checked -->
```text
anything
```
"""


def test_parse_pairs_blocks_with_the_output_right_after_them() -> None:
    blocks = runner.parse(GUIDE_SAMPLE)
    assert [b.source for b in blocks] == [
        'print("a")',
        'print("t 1.25 ms")',
        "x = 1",
        'print("noise")',
    ]
    assert blocks[0].first_line == 4
    checks = [b.output.check if b.output else None for b in blocks]
    assert checks == ["exact", "times masked", None, "not checked"]
    assert blocks[0].output.text == "a"


def test_outputs_compare_exactly_unless_times_are_masked() -> None:
    blocks = runner.parse(GUIDE_SAMPLE)
    namespace: dict = {}
    printed = [runner.run_block(b, namespace, "sample.md") for b in blocks]
    exact, masked = blocks[0].output, blocks[1].output
    assert runner.normalize(printed[0], exact.check) == runner.normalize(exact.text, exact.check)
    assert runner.normalize(printed[1], "exact") != runner.normalize(masked.text, "exact")
    assert runner.normalize(printed[1], masked.check) == runner.normalize(masked.text, masked.check)
    assert runner.normalize("a\n", "exact") != runner.normalize("b", "exact")


def test_errors_point_at_the_guide_line(tmp_path: Path) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text("Text.\n\n```python\nx = 1\n1 / 0\n```\n", encoding="utf-8")
    with pytest.raises(ZeroDivisionError) as info:
        runner.run(guide, tmp_path)
    assert info.traceback[-1].lineno + 1 == 5  # pytest's line numbers are 0-based


def test_a_block_needing_a_missing_module_is_skipped(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- needs: no_such_module_anywhere -->\n```python\nprint(1 / 0)\n```\n\n"
        "```text\nnever\n```\n\n"
        "<!-- needs: numpy no_such_module_anywhere -->\n```python\nprint(2 / 0)\n```\n\n"
        "<!-- needs: numpy json -->\n```python\nprint('both')\n```\n\n"
        "```python\nprint('ran')\n```\n",
        encoding="utf-8",
    )
    ran = runner.run(page, tmp_path)
    assert [b.needs for b, _ in ran] == [
        ("no_such_module_anywhere",),
        ("numpy", "no_such_module_anywhere"),
        ("numpy", "json"),
        (),
    ]
    assert [printed for _, printed in ran] == [None, None, "both\n", "ran\n"]
