"""Copy the paths into the artifact, rooted as actions/upload-artifact roots them: one folder is
the artifact's root; otherwise the least common ancestor of the paths given."""

import glob
import os
import shutil
import sys

name = os.environ["NAME"]
given = [p.strip() for p in os.environ["PATHS"].splitlines() if p.strip()]
matched = sorted({os.path.abspath(m) for p in given for m in glob.glob(p, recursive=True)})
files = [
    f
    for m in matched
    for f in ([m] if os.path.isfile(m) else [os.path.join(d, n) for d, _, ns in os.walk(m) for n in ns])
]
if not files:
    message = f"no files found at {given} for artifact {name}"
    if os.environ["IF_NO_FILES_FOUND"] == "error":
        sys.exit(message)
    print(("warning: " if os.environ["IF_NO_FILES_FOUND"] == "warn" else "") + message)
    sys.exit(0)
searched = [os.path.abspath(p.rstrip("/")) for p in given]
if len(searched) == 1 and os.path.isdir(searched[0]):
    root = searched[0]
else:
    root = os.path.commonpath([p if os.path.isdir(p) else os.path.dirname(p) for p in searched])
dest = os.path.join(os.environ["STANDIN_STORE"], "artifacts", name)
if os.path.exists(dest):
    sys.exit(f"an artifact named {name} exists already")
for f in files:
    target = os.path.join(dest, os.path.relpath(f, root))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(f, target)
print(f"artifact {name}: {len(files)} file(s)")
