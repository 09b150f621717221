"""The README's and the guide's snippets, run as written.

Blocks marked with a `<!-- snippet: run -->` line right before their fence
run in order, per page, in one fresh directory: ```python blocks in one
Python namespace (as a user pasting them into one session), ```sh blocks
with bash, where `build/bin` is the build's binaries. A page's blocks fail
on the first error; every page's blocks must run. Install, Docker and
Kubernetes blocks are not marked: their own tests cover them.

Usage: doc_snippets.py REPO_ROOT BIN_DIR
"""

import os
import re
import subprocess
import sys
import tempfile
import time

REPO, BIN = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
PAGES = ["README.md", "docs/guide/your-model.md", "docs/guide/your-data.md"]
MARK = "<!-- snippet: run -->"


def snippets(page):
    text = open(os.path.join(REPO, page)).read()
    out = []
    for m in re.finditer(re.escape(MARK) + r"\n```(\w+)\n(.*?)\n```", text, re.S):
        out.append((m.group(1), m.group(2)))
    return out


failed = []
for page in PAGES:
    blocks = snippets(page)
    if not blocks:
        failed.append(page)
        print(f"FAIL  {page}: no marked snippet", flush=True)
        continue
    work = tempfile.mkdtemp(prefix="doc_snippets-")
    os.makedirs(os.path.join(work, "build"))
    os.symlink(BIN, os.path.join(work, "build", "bin"))
    os.chdir(work)
    sys.path.insert(0, os.path.join(REPO, "python"))  # what `pip install ./python` gives
    namespace = {"__name__": "__snippet__"}
    for i, (lang, code) in enumerate(blocks):
        start = time.time()
        try:
            if lang == "python":
                exec(compile(code, f"{page} block {i + 1}", "exec"), namespace)
            elif lang == "sh":
                r = subprocess.run(["bash", "-euo", "pipefail", "-c", code], capture_output=True,
                                   text=True, timeout=900)
                if r.returncode != 0:
                    raise RuntimeError(f"exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
            else:
                raise RuntimeError(f"a marked block of language {lang!r}")
            print(f"ok    {page} block {i + 1} ({lang}, {time.time() - start:.0f} s)", flush=True)
        except BaseException as e:  # noqa: BLE001 -- report and go to the next page
            print(f"FAIL  {page} block {i + 1} ({lang}): {e}", flush=True)
            failed.append(f"{page} block {i + 1}")
            break
print(f"{len(failed)} snippet(s) failed" if failed else "every marked snippet ran")
sys.exit(1 if failed else 0)
