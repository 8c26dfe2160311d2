#!/usr/bin/env python3
"""Writes the metrics' HELP texts from the doc comments of the stats types.

    stats_help.py OUTPUT HEADER...

Every `struct NAME_stats` with data members in the headers gives one entry
per member: the `///` comment above it (one comment above several members
documents each of them). A member without a comment fails the build: every
metric says what it measures, in the words the stats type documents it
with, so the two cannot drift.
"""
import re
import sys

STRUCT = re.compile(r"^struct (\w+_stats)\b[^;]*\{\s*$")
MEMBER = re.compile(r"^\s+(?!using\b|static\b|friend\b|template\b)"
                    r"[\w:<>, ]+?[\w>]\s+(\w+)\s*(=[^;]*|\{[^;]*\})?;\s*$")
COMMENT = re.compile(r"^\s*/// ?(.*)$")


def clean(lines):
    text = " ".join(line.strip() for line in lines).strip()
    text = text.replace("`", "")
    text = re.sub(r"\s*\((gauge|counter)\)", "", text)
    return text


def entries_of(path):
    entries, problems = [], []
    struct, comment, comment_done = None, [], False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if struct is None:
                match = STRUCT.match(line)
                if match:
                    struct, comment, comment_done = match.group(1), [], False
                continue
            if line.startswith("};"):
                struct = None
                continue
            match = COMMENT.match(line)
            if match:
                if comment_done:
                    comment, comment_done = [], False
                comment.append(match.group(1))
                continue
            match = MEMBER.match(line)
            if match:
                if not comment:
                    problems.append(f"{path}:{number}: {struct}::{match.group(1)} "
                                    "has no doc comment (its metric's HELP)")
                entries.append((struct, match.group(1), clean(comment)))
                comment_done = True
            elif line.strip() == "":
                comment, comment_done = [], False
    return entries, problems


def main():
    output, headers = sys.argv[1], sys.argv[2:]
    entries, problems = [], []
    for header in headers:
        found, wrong = entries_of(header)
        entries += found
        problems += wrong
    if problems:
        sys.stderr.write("\n".join(problems) + "\n")
        return 1
    lines = ["#pragma once",
             "// Written by cmake/stats_help.py from the doc comments of the",
             "// stats types: edit those, not this.",
             "",
             "namespace coalesce::stats_help {",
             "",
             "struct field_help {",
             "  const char* type;",
             "  const char* field;",
             "  const char* text;",
             "};",
             "",
             "inline constexpr field_help fields[] = {"]
    for struct, field, text in entries:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'  {{"{struct}", "{field}", "{escaped}"}},')
    lines += ["};", "", "} // namespace coalesce::stats_help", ""]
    content = "\n".join(lines)
    try:
        with open(output, encoding="utf-8") as f:
            if f.read() == content:
                return 0
    except FileNotFoundError:
        pass
    with open(output, "w", encoding="utf-8") as f:
        f.write(content)
    return 0


if __name__ == "__main__":
    sys.exit(main())
