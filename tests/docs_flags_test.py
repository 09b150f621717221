"""The docs against the binaries and against themselves.

Flags: docs/reference.md's flag tables (every `| flag | meaning |` table)
against each binary's --help.
- The daemons' table lists exactly the flags of common/daemon/daemon_flags.cc,
  and `pscluster launch`'s table exactly the launcher's "launch:" flags (and
  the two daemon flags it takes, --data_channel and --dry_run); where a row
  writes --flag=value for a flag that is not a bool, value is its default.
- The device table lists every flag of worker/device_flags.cc.
- Every flag in any table exists in some binary's --help, and every flag a
  binary's --help lists is written somewhere in the reference.

Links: every relative link of README.md and of every page under docs/
(`[text](path)`, `[text](path#anchor)`, `![alt](path)`, `[text]: path`;
not http(s) or mailto) names a file or folder inside the repository, and an
anchor into a Markdown page names one of its headings (GitHub's ids). The
README links to the guide, the reference, the results, the reliability page
and the design notes, and is at most 250 lines.

Usage: docs_flags_test.py REPO_ROOT BIN_DIR
"""

import os
import re
import subprocess
import sys
import urllib.parse

BINARIES = ["ps_server", "worker", "chief", "evaluator", "pscluster"]
REFERENCE = "docs/reference.md"
README_MAX_LINES = 250
README_MUST_LINK = ["docs/guide/README.md", "docs/reference.md", "docs/results.md",
                    "docs/reliability.md", "docs/design-notes.md"]


def help_flags(bin_dir):
    """{source file: {flag: (default, help)}} from every binary's --help."""
    out = {}
    for binary in BINARIES:
        run = subprocess.run([os.path.join(bin_dir, binary), "--help"], capture_output=True,
                             text=True, timeout=60)
        if run.returncode != 0:
            sys.exit("%s --help exited %d: %s" % (binary, run.returncode, run.stderr))
        section = None
        text = run.stdout
        for block in re.split(r"\n(?=  Flags from |    --)", text):
            head = re.match(r"  Flags from (\S+):", block)
            if head:
                section = head.group(1)
                block = block[head.end():].lstrip("\n")
                if not block.startswith("    --"):
                    continue
            m = re.match(r"    --(\w+) \((.*)\);\s+default: (.*?);?\s*$", block, re.S)
            if m and section:
                flag, help_text, default = m.group(1), " ".join(m.group(2).split()), m.group(3)
                out.setdefault(section, {})[flag] = (default.strip('"'), help_text)
    return out


def flag_tables(text):
    """[(line number, [(flag, value or None)])] for every '| flag | meaning |' table."""
    tables = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "| flag | meaning |":
            start, rows = i + 1, []
            i += 2  # the header's separator
            while i < len(lines) and lines[i].startswith("|"):
                first = lines[i].split("|")[1]
                for flag, value in re.findall(r"`--(\w+)(?:=([^`]*))?`", first):
                    rows.append((flag, value if value != "" else None))
                i += 1
            tables.append((start, rows))
        i += 1
    return tables


def seconds(text):
    """'2m' and '120s' alike; None when text is not a duration."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3}
    total, rest = 0.0, text
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text):
        total += float(number) * units[unit]
        rest = rest.replace(number + unit, "", 1)
    return total if rest == "" and text else None


def same_default(written, default):
    if written == default:
        return True
    a, b = seconds(written), seconds(default)
    return a is not None and a == b


def check_flags(reference, helps, errors):
    """Appends to errors what the reference's tables get wrong; returns (flags, tables)."""
    every = {}
    for section, flags in helps.items():
        for flag, info in flags.items():
            every[flag] = info
    tables = flag_tables(reference)
    if len(tables) < 4:
        errors.append("found %d flag tables in %s, expected at least the daemons', launch's, "
                      "the data's and the devices'" % (len(tables), REFERENCE))

    def table_with(flag):
        for line, rows in tables:
            if any(f == flag for f, _ in rows):
                return line, rows
        errors.append("no table of %s lists --%s" % (REFERENCE, flag))
        return 0, []

    daemon = helps.get("common/daemon/daemon_flags.cc", {})
    launch = {f: v for f, v in helps.get("launcher/main.cc", {}).items()
              if v[1].startswith("launch:")}
    launch.update({f: daemon[f] for f in ("data_channel", "dry_run") if f in daemon})
    device = helps.get("worker/device_flags.cc", {})
    for name, want, anchor, check_defaults in (
            ("daemons'", daemon, "shutdown_grace", True),
            ("launch's", launch, "stop_grace", True),
            ("devices'", device, "visible_devices", False)):
        if not want:
            errors.append("no --help has the flags of the %s table" % name)
        line, rows = table_with(anchor)
        listed = {f for f, _ in rows}
        missing = sorted(set(want) - listed)
        if missing:
            errors.append("the %s table (%s line %d) lacks %s" % (name, REFERENCE, line, missing))
        if name != "devices'":
            extra = sorted(listed - set(want))
            if extra:
                errors.append("the %s table (%s line %d) lists %s, which --help does not" %
                              (name, REFERENCE, line, extra))
        if check_defaults:
            for flag, value in rows:
                if value is None or flag not in want:
                    continue
                default = want[flag][0]
                if default in ("true", "false", ""):
                    continue  # a bool row shows its use; an empty default, a placeholder
                if not same_default(value, default):
                    errors.append("%s line %d: --%s=%s, but its default is %s" %
                                  (REFERENCE, line, flag, value, default))
    for line, rows in tables:
        for flag, _ in rows:
            if flag not in every:
                errors.append("%s line %d: --%s is in no binary's --help" %
                              (REFERENCE, line, flag))
    for flag in sorted(every):
        if not re.search(r"--%s\b" % flag, reference):
            errors.append("--%s (%s) is not in %s" % (flag, every[flag][1][:60], REFERENCE))
    return every, tables


def prose_lines(text):
    """[(line number, line)] outside fenced code blocks, inline code spans blanked."""
    out, fence = [], None
    for number, line in enumerate(text.split("\n"), 1):
        m = re.match(r"\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
            elif m.group(1).startswith(fence):
                fence = None
            continue
        if fence is None:
            out.append((number, re.sub(r"(`+)(.+?)\1", lambda c: " " * len(c.group(0)), line)))
    return out


def slug(heading):
    """GitHub's id of a heading: its text, lower case, without punctuation, spaces as '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = text.replace("`", "").replace("*", "").strip().lower()
    return "".join(c if c.isalnum() or c in "-_" else "-" if c == " " else "" for c in text)


def anchors(path, cache={}):
    """The ids of a Markdown page's headings, duplicates numbered as GitHub numbers them."""
    if path not in cache:
        ids, seen, fence = set(), {}, None
        with open(path, encoding="utf-8") as f:
            for line in f.read().split("\n"):
                m = re.match(r"\s*(```+|~~~+)", line)
                if m:
                    fence = None if fence else m.group(1)[0] * 3
                    continue
                h = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
                if h and fence is None:
                    base = slug(h.group(1))
                    n = seen.get(base, 0)
                    ids.add(base if n == 0 else "%s-%d" % (base, n))
                    seen[base] = n + 1
        cache[path] = ids
    return cache[path]


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")


def check_links(root, page, errors):
    """Appends to errors every relative link of page that leads nowhere; returns the targets."""
    rel = os.path.relpath(page, root)
    text = open(page, encoding="utf-8").read()
    targets = set()
    for number, line in prose_lines(text):
        found = LINK.findall(line)
        ref = REF_LINK.match(line)
        if ref:
            found.append(ref.group(1))
        for target in found:
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            path = urllib.parse.unquote(path)
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            where = "%s line %d: %s" % (rel, number, target)
            if os.path.relpath(dest, root).startswith(".."):
                errors.append("%s leads outside the repository" % where)
                continue
            if not os.path.exists(dest):
                errors.append("%s: no such file" % where)
                continue
            targets.add(os.path.relpath(dest, root))
            if anchor and dest.endswith(".md") and os.path.isfile(dest):
                if urllib.parse.unquote(anchor).lower() not in anchors(dest):
                    errors.append("%s: %s has no heading #%s" %
                                  (where, os.path.relpath(dest, root), anchor))
    return targets


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: docs_flags_test.py REPO_ROOT BIN_DIR")
    root, bin_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
    errors = []

    reference = open(os.path.join(root, REFERENCE), encoding="utf-8").read()
    every, tables = check_flags(reference, help_flags(bin_dir), errors)

    readme = os.path.join(root, "README.md")
    lines = open(readme, encoding="utf-8").read().rstrip("\n").count("\n") + 1
    if lines > README_MAX_LINES:
        errors.append("README.md has %d lines; at most %d (the rest belongs in docs/)" %
                      (lines, README_MAX_LINES))
    pages = [readme]
    for folder, _, files in os.walk(os.path.join(root, "docs")):
        pages += sorted(os.path.join(folder, f) for f in files if f.endswith(".md"))
    linked = {}
    for page in pages:
        linked[page] = check_links(root, page, errors)
    for want in README_MUST_LINK:
        if want not in linked[readme]:
            errors.append("README.md does not link to %s" % want)

    if errors:
        print("\n".join("docs_flags: " + e for e in errors), file=sys.stderr)
        sys.exit(1)
    print("docs_flags: %d flags of %d binaries, %d tables; %d pages' links; README %d lines: OK" %
          (len(every), len(BINARIES), len(tables), len(pages), lines))


if __name__ == "__main__":
    main()
