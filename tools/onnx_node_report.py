"""Run the onnx package's backend node tests graphc imports; counts per op type.

    python tools/onnx_node_report.py [--failures]

A case runs when every op type in its model is one graphc imports. Each is counted as
passed, element type refused (the named error for a dtype graphc does not have),
refused (a form graphc names as unsupported, tests/onnx/test_node_cases.py REFUSED) or
failed.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package, run as a script

import graphc as gc  # noqa: E402
from tests.onnx.node_cases import load_cases, main_op, op_types  # noqa: E402
from tests.onnx.test_node_cases import run_case  # noqa: E402


def main() -> None:
    supported = set(gc.onnx.supported_op_types())
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures = []
    for case in load_cases():
        if not set(op_types(case.model.graph)) <= supported:
            continue
        try:
            outcome = run_case(case)
        except Exception as exc:  # noqa: BLE001 - a report, not a test
            outcome = "failed"
            failures.append((case.name, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"))
        counts[main_op(case)][outcome] += 1
    total = collections.Counter()
    print("| op type | cases | passed | element type refused | form refused | failed |")
    print("|---|---:|---:|---:|---:|---:|")
    for op in sorted(counts):
        c = counts[op]
        total.update(c)
        print(f"| {op} | {sum(c.values())} | {_row(c)} |")
    print(f"| all | {sum(total.values())} | {_row(total)} |")
    if "--failures" in sys.argv:
        for name, why in failures:
            print(f"{name}: {why}")


def _row(c: collections.Counter) -> str:
    return " | ".join(str(c[k]) for k in ("passed", "element type", "refused", "failed"))


if __name__ == "__main__":
    main()
