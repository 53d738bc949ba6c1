"""The tutorials' graph y = (x + w)(w + 1), and the README's pictures of it.

    python examples/tutorial_graph.py                # out/tutorial_graph/tutorial-*.svg
    python examples/tutorial_graph.py --update-docs  # rewrites docs/img/tutorial-*.svg

draws tutorial-forward.svg and tutorial-backward.svg through the `graphc render`
command, the same as (from the repository root)

    graphc render examples/tutorial_graph.py:f --spec ":float32" --spec ":float32" \\
        -o docs/img/tutorial-forward.svg
    graphc render examples/tutorial_graph.py:f --spec ":float32" --spec ":float32" \\
        -o docs/img/tutorial-backward.svg --backward

The pictures go under --out (by default out/tutorial_graph/ at the repository's root,
a folder git ignores); only --update-docs writes the committed ones in docs/img.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# every file an example writes goes under --out; by default out/<example>/ at the
# repository's root, a folder git ignores
OUT = ROOT / "out" / "tutorial_graph"
PICTURES = ROOT / "docs" / "img"  # the README's copies, written with --update-docs


def f(x, w):  # type: ignore[no-untyped-def]
    a = x + w
    b = w + 1
    return a * b


def main(argv: list[str] | None = None) -> Path:
    """Draw both pictures; returns the folder they went to (.dot files without graphviz)."""
    import graphc as gc
    from graphc.cli import main as graphc

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="for pictures (out/tutorial_graph/)")
    parser.add_argument(
        "--update-docs", action="store_true", help="write docs/img/tutorial-*.svg instead"
    )
    args = parser.parse_args(argv)
    folder = PICTURES if args.update_docs else args.out
    specs = ["--spec", ":float32", "--spec", ":float32"]
    target = f"{Path(__file__).resolve()}:f"
    suffix = ".svg"
    if not gc.viz.have_dot():  # one note, not `graphc render`'s hint once per picture
        print(
            "note: graphviz's `dot` program is not installed, so the pictures are written as "
            ".dot sources; install it (Debian/Ubuntu: `sudo apt-get install graphviz`; macOS: "
            "`brew install graphviz`) and run this again for SVG"
        )
        suffix = ".dot"
    for name, more in (("tutorial-forward", []), ("tutorial-backward", ["--backward"])):
        code = graphc(["render", target, *specs, "-o", str(folder / f"{name}{suffix}"), *more])
        if code:
            raise SystemExit(code)
    return folder


if __name__ == "__main__":
    main(sys.argv[1:])
