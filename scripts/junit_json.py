#!/usr/bin/env python
"""pytest's JUnit XML (`--junitxml`) as JSON on stdout: device runs are asked for JSON, and
the device image has no pytest JSON plugin. One row per test: name, seconds, outcome, message.

Usage: python scripts/junit_json.py REPORT.xml > REPORT.json
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/junit_json.py REPORT.xml", file=sys.stderr)
        return 2
    root = ElementTree.parse(argv[0]).getroot()
    suite = root if root.tag == "testsuite" else root[0]
    cases = []
    for case in suite.iter("testcase"):
        problem = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        cases.append({"test": f"{case.get('classname')}::{case.get('name')}", "seconds": float(case.get("time") or 0),
                      "outcome": problem.tag if problem is not None else "passed",
                      "message": (problem.get("message") or "")[:800] if problem is not None else ""})
    print(json.dumps({"summary": dict(suite.attrib), "cases": cases}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
