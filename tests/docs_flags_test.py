"""The README's flag tables against each binary's --help.

- The daemons' table lists exactly the flags of common/daemon/daemon_flags.cc,
  and `pscluster launch`'s table exactly the launcher's "launch:" flags (and
  the two daemon flags it takes, --data_channel and --dry_run); where a row
  writes --flag=value for a flag that is not a bool, value is its default.
- The device table lists every flag of worker/device_flags.cc.
- Every flag in any table exists in some binary's --help, and every flag a
  binary's --help lists is written somewhere in the README.

Usage: readme_flags_test.py README.md BIN_DIR
"""

import re
import subprocess
import sys

BINARIES = ["ps_server", "worker", "chief", "evaluator", "pscluster"]


def help_flags(bin_dir):
    """{source file: {flag: (default, help)}} from every binary's --help."""
    out = {}
    for binary in BINARIES:
        run = subprocess.run([bin_dir + "/" + binary, "--help"], capture_output=True, text=True,
                             timeout=60)
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


def readme_tables(readme):
    """[(line number, [(flag, value or None)])] for every '| flag | meaning |' table."""
    tables = []
    lines = readme.split("\n")
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


def main():
    readme = open(sys.argv[1]).read()
    helps = help_flags(sys.argv[2])
    errors = []
    every = {}
    for section, flags in helps.items():
        for flag, info in flags.items():
            every[flag] = info
    tables = readme_tables(readme)
    if len(tables) < 4:
        sys.exit("found %d flag tables in the README, expected the daemons', launch's, the "
                 "data's and the devices'" % len(tables))

    def table_with(flag):
        for line, rows in tables:
            if any(f == flag for f, _ in rows):
                return line, rows
        errors.append("no README table lists --%s" % flag)
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
        line, rows = table_with(anchor)
        listed = {f for f, _ in rows}
        missing = sorted(set(want) - listed)
        if missing:
            errors.append("the %s table (README line %d) lacks %s" % (name, line, missing))
        if name != "devices'":
            extra = sorted(listed - set(want))
            if extra:
                errors.append("the %s table (README line %d) lists %s, which --help does not" %
                              (name, line, extra))
        if check_defaults:
            for flag, value in rows:
                if value is None or flag not in want:
                    continue
                default = want[flag][0]
                if default in ("true", "false", ""):
                    continue  # a bool row shows its use; an empty default, a placeholder
                if not same_default(value, default):
                    errors.append("README line %d: --%s=%s, but its default is %s" %
                                  (line, flag, value, default))
    for line, rows in tables:
        for flag, _ in rows:
            if flag not in every:
                errors.append("README line %d: --%s is in no binary's --help" % (line, flag))
    for flag in sorted(every):
        if not re.search(r"--%s\b" % flag, readme):
            errors.append("--%s (%s) is not in the README" % (flag, every[flag][1][:60]))
    if errors:
        print("\n".join("readme_flags: " + e for e in errors), file=sys.stderr)
        sys.exit(1)
    print("readme_flags: %d flags of %d binaries, %d tables: OK" %
          (len(every), len(BINARIES), len(tables)))


if __name__ == "__main__":
    main()
