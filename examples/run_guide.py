"""Run docs/guide.md's code: every ```python block, in order, in one namespace.

    python examples/run_guide.py                   # check the outputs; pictures in out/run_guide/
    python examples/run_guide.py --update-docs     # rewrite docs/img/guide-*.svg and the outputs
    python examples/run_guide.py --update-outputs  # rewrite only the checked output blocks

The blocks run in the --out folder (by default out/run_guide/ at the repository's root,
a folder git ignores), so the files they write land there; only --update-docs copies
the pictures named ``guide-*.svg`` into docs/img. A ```text block that
follows a python block (nothing but blank lines and an optional marker comment
between them) is that block's printed output. Markers:

    <!-- output: not checked -->   timings or machine-dependent text: not compared
    <!-- output: times masked -->  compared with every decimal number masked

A ```python block right after `<!-- needs: MODULE ... -->` runs only where the optional
modules named are installed (onnx, say); elsewhere it and its output are skipped.

tests/test_guide.py runs the same blocks and compares the outputs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide.md"
PICTURES = ROOT / "docs" / "img"
# every file an example writes goes under --out; by default out/<example>/ at the
# repository's root, a folder git ignores
OUT = ROOT / "out" / "run_guide"

FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!-- output: (not checked|times masked) -->$")
NEEDS = re.compile(r"^<!-- needs: ([\w. ]+) -->$")
DECIMAL = re.compile(r"\d+\.\d+")


@dataclass
class Output:
    """A ```text block printed by the code block before it."""

    text: str
    first_line: int  # 1-based line of the block's first content line
    last_line: int  # 1-based line of its closing fence
    check: str  # "exact", "times masked" or "not checked"


@dataclass
class Block:
    """A ```python block: its source, where it starts, and its expected output, if any."""

    source: str
    first_line: int  # 1-based line of the first source line
    output: Output | None
    needs: tuple[str, ...] = ()  # optional modules the block runs only with


def _fenced(lines: list[str]) -> list[tuple[str, int, int]]:
    """(language, index of opening fence, index of closing fence) of every fenced block."""
    found = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        found.append((match.group(1), i, end))
        i = end + 1
    return found


def parse(text: str) -> list[Block]:
    """The python blocks of a markdown text, each with the output block that follows it."""
    lines = text.split("\n")
    fenced = _fenced(lines)
    blocks = []
    for k, (lang, start, end) in enumerate(fenced):
        if lang != "python":
            continue
        output = None
        if k + 1 < len(fenced) and fenced[k + 1][0] == "text":
            _, out_start, out_end = fenced[k + 1]
            between = [line.strip() for line in lines[end + 1 : out_start] if line.strip()]
            markers = [MARKER.match(line) for line in between]
            if all(markers) and len(between) <= 1:
                check = markers[0].group(1) if markers else "exact"
                body = "\n".join(lines[out_start + 1 : out_end])
                output = Output(body, out_start + 2, out_end + 1, check)
        before = [line.strip() for line in lines[:start] if line.strip()][-1:]
        needs = NEEDS.match(before[0]) if before else None
        source = "\n".join(lines[start + 1 : end])
        blocks.append(
            Block(source, start + 2, output, tuple(needs.group(1).split()) if needs else ())
        )
    return blocks


def normalize(text: str, check: str) -> str:
    """Text as compared: trailing blanks dropped; with "times masked", numbers masked too."""
    lines = [line.rstrip() for line in text.rstrip("\n").split("\n")]
    if check == "times masked":
        lines = [" ".join(DECIMAL.sub("#", line).split()) for line in lines]
    return "\n".join(lines)


def run_block(block: Block, namespace: dict[str, Any], filename: str) -> str | None:
    """Execute one block; returns what it printed (None: skipped, its optional module
    is not installed). Line numbers match the markdown file."""
    if any(importlib.util.find_spec(module) is None for module in block.needs):
        return None
    code = compile("\n" * (block.first_line - 1) + block.source, filename, "exec")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(code, namespace)
    return printed.getvalue()


def run(guide: Path, folder: Path) -> list[tuple[Block, str | None]]:
    """Run every python block of `guide` with `folder` as working directory."""
    blocks = parse(guide.read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {"__name__": "__guide__"}
    here = Path.cwd()
    os.chdir(folder)
    try:
        return [(b, run_block(b, namespace, "docs/guide.md")) for b in blocks]
    finally:
        os.chdir(here)


def update_outputs(guide: Path, results: list[tuple[Block, str | None]]) -> int:
    """Rewrite the compared output blocks that differ from what their code printed."""
    lines = guide.read_text(encoding="utf-8").split("\n")
    changed = 0
    # from the bottom up, so earlier line numbers stay valid
    for block, printed in reversed(results):
        out = block.output
        if out is None or out.check == "not checked" or printed is None:
            continue
        if normalize(printed, out.check) != normalize(out.text, out.check):
            lines[out.first_line - 1 : out.last_line - 1] = printed.rstrip("\n").split("\n")
            changed += 1
    guide.write_text("\n".join(lines), encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=OUT, help="where the blocks run (out/run_guide/)"
    )
    parser.add_argument(
        "--update-docs", action="store_true", help="rewrite docs/img/guide-*.svg and the outputs"
    )
    parser.add_argument("--update-outputs", action="store_true", help="rewrite only the outputs")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = run(GUIDE, args.out)
    pictures = sorted(args.out.glob("guide-*.svg"))
    if args.update_docs:
        for picture in pictures:
            shutil.copyfile(picture, PICTURES / picture.name)
            print("wrote", (PICTURES / picture.name).relative_to(ROOT))
    else:
        print(f"{len(pictures)} guide-*.svg picture(s) in {args.out} (--update-docs: docs/img)")
    if args.update_docs or args.update_outputs:
        print(f"updated {update_outputs(GUIDE, results)} output block(s) in docs/guide.md")
        return
    for block, printed in results:
        out = block.output
        if out is None or out.check == "not checked" or printed is None:
            continue
        if normalize(printed, out.check) != normalize(out.text, out.check):
            print(f"output differs: block at docs/guide.md:{block.first_line}")


if __name__ == "__main__":
    main(sys.argv[1:])
