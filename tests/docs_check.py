#!/usr/bin/env python3
"""Checks the project's Markdown against the tree.
- Every relative link: the file it names exists, and an anchor (#part) names a heading of that
  file as GitHub spells heading anchors (lower case, punctuation but '-' and '_' removed, spaces
  to '-', repeated headings numbered -1, -2, ...).
- The maps of the tree: every folder of dataplane/ is a room of docs/DATAPLANE.md's module map,
  and every folder of dataplane/ and control/ is named in its row of README.md's layout table.
Prints each finding as FILE:LINE: what; exit 1 when there is any."""
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(text):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def lines_outside_fences(path):
    inside = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                inside = not inside
                continue
            if not inside:
                yield number, line


def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        for _, line in lines_outside_fences(path):
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
        for _, line in lines_outside_fences(path):  # explicit <a id="..."> / name anchors
            found.update(re.findall(r'<a\s+(?:id|name)="([^"]+)"', line))
        cache[path] = found
    return cache[path]


def markdown_files(top):
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("build",)
                   and not d.startswith("build")]
        for name in files:
            if name.endswith(".md"):
                yield os.path.join(root, name)


def section(path, heading):
    """The lines of `path` under the heading `heading` up to the next heading of its level."""
    out, level = [], None
    for number, line in lines_outside_fences(path):
        m = HEADING.match(line)
        if m and level is not None and len(m.group(1)) <= level:
            break
        if level is not None:
            out.append((number, line))
        if m and m.group(2) == heading:
            level = len(m.group(1))
    return out


def folders(top, name):
    return sorted(d for d in os.listdir(os.path.join(top, name))
                  if os.path.isdir(os.path.join(top, name, d)))


def check_maps(top):
    findings = []
    dp_doc = os.path.join(top, "docs", "DATAPLANE.md")
    rooms = "".join(line for _, line in section(dp_doc, "Module map"))
    for d in folders(top, "dataplane"):
        if f"`{d}/" not in rooms:
            findings.append(f"docs/DATAPLANE.md: Module map: no room for dataplane/{d}/")
    layout = section(os.path.join(top, "README.md"), "Layout")
    for tree in ("dataplane", "control"):
        row = "".join(line for _, line in layout if line.startswith(f"| `{tree}/`"))
        if not row:
            findings.append(f"README.md: Layout: no row for {tree}/")
            continue
        for d in folders(top, tree):
            if f"`{d}`" not in row and f"`{d}/" not in row:
                findings.append(f"README.md: Layout: the {tree}/ row does not name {d}")
    return findings


def main():
    top = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    broken = check_maps(top)
    checked = 0
    for path in sorted(markdown_files(top)):
        for number, line in lines_outside_fences(path):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                checked += 1
                file_part, _, anchor = target.partition("#")
                dest = path if not file_part else os.path.normpath(
                    os.path.join(os.path.dirname(path), file_part))
                where = f"{os.path.relpath(path, top)}:{number}: {target}"
                if not os.path.exists(dest):
                    broken.append(f"{where}: no such file")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    broken.append(f"{where}: no heading with that anchor")
    for b in broken:
        print(b)
    print(f"docs_check: {checked} relative links and the maps of the tree checked, {len(broken)} findings")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
