#!/usr/bin/env python3
"""Converts the GNU sed manual in Info format (Debian package `sed`,
/usr/share/info/sed.info.gz) to plain text, one file per chapter, in the
style of data/sample/python-tutorial: headings underlined, prose unindented,
examples indented. See README.md for what is changed.

Usage: python3 data/sed-manual/convert.py [/usr/share/info/sed.info.gz]
"""
import gzip
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHAPTERS = {  # Info node of a chapter -> file name
    "Introduction": "introduction.txt",
    "Invoking sed": "invoking.txt",
    "sed scripts": "scripts.txt",
    "sed addresses": "addresses.txt",
    "sed regular expressions": "regexps.txt",
    "advanced sed": "advanced.txt",
    "Examples": "examples.txt",
    "Limitations": "limitations.txt",
    "Other Resources": "resources.txt",
    "Reporting Bugs": "bugs.txt",
}
UNDERLINES = {"*": "*", "=": "=", "-": "-", ".": "~"}


def nodes(info):
    for part in info.split("\x1f\n")[1:]:
        header, _, body = part.partition("\n")
        m = re.search(r"Node: ([^,]+)", header)
        if m is None:
            continue
        up = re.search(r"Up: ([^,]+)$", header.strip())
        yield m.group(1).strip(), (up.group(1).strip() if up else ""), body


def inline(text):
    text = re.sub(r"\*[Nn]ote ([^:*]+)::", r"see \1", text)
    text = re.sub(r"\*[Nn]ote ([^:*]+):\s+[^.,]+[.,]", r"see \1", text)
    text = re.sub(r"‘([^’\n]*)’", r"\1", text)
    text = text.replace("’", "'").replace("‘", "'")
    lines = [l for l in text.split("\n") if not re.match(r"^\* .*::", l)]
    if len(lines) == 2 and lines[1] and set(lines[1]) <= set("*=-~"):
        lines[1] = lines[1][0] * len(lines[0])
    return "\n".join(lines)


def indent(line):
    return len(line) - len(line.lstrip(" "))


def blocks(body):
    out = []
    in_table = False
    for block in re.split(r"\n\s*\n", body):
        lines = [l.rstrip() for l in block.split("\n") if l.strip()]
        if not lines:
            continue
        if lines[0].startswith("* Menu:") or all(l.startswith("* ") or indent(l) > 20 for l in lines):
            continue
        if lines[0].startswith("----------") and "Footnotes" in lines[0]:
            break
        if len(lines) == 2 and set(lines[1]) <= set("*=-.") and len(lines[1]) >= 3:
            title = re.sub(r"^(\d+(\.\d+)*|[A-Z](\.\d+)*)\s+", "", lines[0].strip())
            out.append(title + "\n" + UNDERLINES[lines[1][0]] * len(title))
            in_table = False
            continue
        terms = [l for l in lines if indent(l) == 0]
        if indent(lines[0]) == 0 and len(lines) > 1 and indent(lines[-1]) >= 5 and lines[0].startswith("‘"):
            n = len(terms) if lines[: len(terms)] == terms else 1
            out.append("\n".join(lines[:n] + [l[5:] for l in lines[n:]]))
            in_table = True
        elif in_table and min(indent(l) for l in lines) >= 5:
            out.append("\n".join(l[5:] for l in lines))
        else:
            in_table = in_table and indent(lines[0]) >= 5
            if indent(lines[0]) == 3 and all(indent(l) == 0 for l in lines[1:]):
                lines[0] = lines[0][3:]
            out.append("\n".join(lines))
    # a dedented block whose first line is indented by 3 is a paragraph of a table item
    fixed = []
    for b in out:
        ls = b.split("\n")
        if indent(ls[0]) == 3 and all(indent(l) == 0 for l in ls[1:]):
            ls[0] = ls[0][3:]
        fixed.append("\n".join(ls))
    return fixed


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/info/sed.info.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        info = f.read()
    chapter_of = {}
    texts = {}
    for name, up, body in nodes(info):
        chapter = name if name in CHAPTERS else chapter_of.get(up)
        if chapter is None:
            continue
        chapter_of[name] = chapter
        texts.setdefault(chapter, []).extend(t for t in map(inline, blocks(body)) if t.strip())
    for chapter, file in CHAPTERS.items():
        with open(os.path.join(HERE, file), "w", encoding="utf-8") as f:
            f.write("\n\n".join(texts[chapter]) + "\n")


if __name__ == "__main__":
    main()
