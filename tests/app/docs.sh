#!/usr/bin/env bash
# The documentation: README.md and docs/*.md. Needs no build (BIN_DIR is
# taken for the process tests' convention and not used).
#   tests/app/docs.sh [BIN_DIR [TEST_NAME_REGEX]]
# - README.md, the front page, is at most 200 lines;
# - every relative link resolves to a file or folder of the tree, and a
#   link with an #anchor to a heading of the page it names;
# - a code block right after a line `<!-- verbatim: PATH -->` is PATH's
#   content exactly (PATH relative to the page), so a page that shows a
#   file of the tree cannot drift from it.
# The last line is "N passed, M failed".
set -u
# BIN_DIR may not exist when nothing was built: the helpers only need a
# directory.
[ -d "${1:-}" ] || set -- "$(dirname "$0")" "${2:-.}"
source "$(dirname "$0")/process_helpers.sh"

PAGES=("$ROOT/README.md" "$ROOT"/docs/*.md)

# markdown_check MODE: the Python below over every page; prints one line
# per problem and exits non-zero when there is one.
markdown_check() {
  python3 - "$1" "$ROOT" "${PAGES[@]}" <<'PYTHON'
import os
import re
import sys

mode, root, pages = sys.argv[1], sys.argv[2], sys.argv[3:]
FENCE = re.compile(r"^ {0,3}(```|~~~)")

def blocks_and_prose(text):
    """(prose lines, fenced blocks): each block as (the line before its
    fence, its language, its content)."""
    prose, blocks = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            prose.append(lines[i])
            i += 1
            continue
        fence, start = m.group(1), i
        i += 1
        body = []
        while i < len(lines) and not lines[i].lstrip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        before = lines[start - 1] if start > 0 else ""
        blocks.append((before, "\n".join(body)))
    return prose, blocks

def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")

def anchors(path):
    prose, _ = blocks_and_prose(open(path, encoding="utf-8").read())
    seen, result = {}, set()
    for line in prose:
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result

problems = 0
def problem(page, text):
    global problems
    problems += 1
    print(f"    {os.path.relpath(page, root)}: {text}")

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
checked = 0
for page in pages:
    text = open(page, encoding="utf-8").read()
    prose, blocks = blocks_and_prose(text)
    here = os.path.dirname(page)
    if mode == "links":
        for line in prose:
            line = re.sub(r"`[^`]*`", "", line)  # code spans hold no links
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto:, ...
                checked += 1
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(here, path)) if path else page
                if not os.path.exists(full):
                    problem(page, f"{target}: no such file")
                    continue
                if not os.path.realpath(full).startswith(os.path.realpath(root)):
                    problem(page, f"{target}: outside the repository")
                    continue
                if anchor:
                    if not full.endswith(".md"):
                        problem(page, f"{target}: an anchor into a file that is not a page")
                    elif anchor not in anchors(full):
                        problem(page, f"{target}: no heading #{anchor} in {os.path.relpath(full, root)}")
    elif mode == "verbatim":
        for before, body in blocks:
            m = re.match(r"^<!--\s*verbatim:\s*(\S+)\s*-->$", before.strip())
            if not m:
                continue
            checked += 1
            source = os.path.normpath(os.path.join(here, m.group(1)))
            if not os.path.isfile(source):
                problem(page, f"verbatim {m.group(1)}: no such file")
                continue
            want = open(source, encoding="utf-8").read().rstrip("\n")
            if body.rstrip("\n") != want:
                problem(page, f"the block after <!-- verbatim: {m.group(1)} --> "
                              f"differs from {os.path.relpath(source, root)}")
print(f"    {checked} {mode} checked in {len(pages)} pages, {problems} wrong")
sys.exit(1 if problems or checked == 0 else 0)
PYTHON
}

# -- the tests ---------------------------------------------------------------

test_the_readme_is_at_most_200_lines() {
  local lines
  lines=$(wc -l <"$ROOT/README.md")
  echo "    README.md: $lines lines"
  check "README.md has at most 200 lines (got $lines)" [ "$lines" -le 200 ]
}

test_the_two_commands_come_first() {
  # The front page's first commands are scripts/run, then scripts/test.
  local first
  first=$(grep -m 2 -E '^scripts/' "$ROOT/README.md" | cut -d' ' -f1 | paste -sd' ')
  check "the first two commands are scripts/run and scripts/test (got $first)" \
    [ "$first" = "scripts/run scripts/test" ]
}

test_every_relative_link_resolves() {
  check "every relative link resolves to a file (and heading)" markdown_check links
}

test_every_verbatim_block_matches_its_file() {
  check "every block marked verbatim is its file" markdown_check verbatim
}

run_test "the readme is at most 200 lines"
run_test "the two commands come first"
run_test "every relative link resolves"
run_test "every verbatim block matches its file"
finish_tests
