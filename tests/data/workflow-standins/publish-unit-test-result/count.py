"""A test case is failed (failure or error), skipped, or else passed: the counts the check run
shows. Written to the step summary and to $STANDIN_STORE/junit-counts.json."""

import glob
import json
import os
import xml.etree.ElementTree as ET
from typing import Any

counts: dict[str, Any] = {"files": 0, "passed": 0, "skipped": 0, "failed": 0, "cases": {}}
for path in sorted(glob.glob(os.environ["FILES"], recursive=True)):
    counts["files"] += 1
    for case in ET.parse(path).getroot().iter("testcase"):
        children = {child.tag for child in case}
        result = (
            "failed" if children & {"failure", "error"} else "skipped" if "skipped" in children else "passed"
        )
        counts[result] += 1
        counts["cases"][case.get("name")] = result
with open(os.path.join(os.environ["STANDIN_STORE"], "junit-counts.json"), "w") as f:
    json.dump(counts, f, indent=1)
with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
    f.write(
        f"## {os.environ['CHECK_NAME']}\n\n{counts['files']} file(s): {counts['passed']} passed, "
        f"{counts['skipped']} skipped, {counts['failed']} failed\n"
    )
