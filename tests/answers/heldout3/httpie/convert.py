#!/usr/bin/env python3
"""Converts the HTTPie 3.2.4 user manual (one Markdown file, docs/README.md of the PyPI sdist
`httpie-3.2.4.tar.gz`) to Markdown pages, one file per `##` section of the manual, in docs/
beside this script. See README.md for what is changed.

Usage: python3 tests/answers/heldout3/httpie/convert.py /path/to/httpie-3.2.4/docs/README.md
"""
import os
import re
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "docs")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


def markup(text):
    text = re.sub(r"<br\s*/?>", " ", text)
    text = re.sub(r"</?(div|span|a|p|img|kbd|details|summary)\b[^>]*>", "", text)  # HTML tags
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)          # images
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)      # [text](url)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)           # bold
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?!\w)", r"\1", text)  # *italics*
    text = re.sub(r"(?<![\w`\\])_([^_`]+?)_(?![\w`])", r"\1", text)   # _italics_
    return text


def inline(text):
    """Markdown and HTML markup reduced to its text, outside `code` spans (kept as they are)."""
    spans = re.findall(r"`[^`\n]*`", text)
    text = re.sub(r"`[^`\n]*`", lambda m: "\x01%d\x02" % spans.index(m.group(0)), text)
    return re.sub(r"\x01(\d+)\x02", lambda m: spans[int(m.group(1))], markup(text))


def convert(lines):
    """The manual's lines, headings one level up, prose without markup: [(title, lines)]."""
    pages, out, fenced, comment, block = [], [], False, False, []

    def flush():
        if block:
            out.extend(l.rstrip() for l in inline("\n".join(block)).split("\n"))
            block.clear()

    for line in lines + [""]:
        if line.startswith("```"):
            flush()
            fenced = not fenced
            out.append(line.rstrip())
            continue
        if fenced:
            out.append(line.rstrip())
            continue
        if comment or line.startswith("<!--"):
            comment = "-->" not in line
            continue
        m = HEADING.match(line)
        if m:
            flush()
            level, name = len(m.group(1)), m.group(2).replace("`", "")
            name = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", name)
            if level <= 2:
                pages.append((name, out := []))
            out += ["#" * max(level - 1, 1) + " " + name, ""]
            continue
        if not line.strip():
            flush()
            out.append("")
            continue
        if re.match(r"^\s*</?div\b[^>]*>\s*$", line):
            continue
        block.append(line)
    flush()
    return pages


def main():
    lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
    pages = convert(lines)
    # the title page holds the introduction and the sections "About this document" and
    # "Main features" (as `##` headings under it)
    merged = [(pages[0][0], pages[0][1] + ["#" + l if l.startswith("# ") else l for l in
                                          pages[1][1] + pages[2][1]])] + pages[3:]
    for title, out in merged:
        name = "index" if title == "HTTPie documentation" else re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        md = re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n"
        with open(os.path.join(HERE, name + ".md"), "w", encoding="utf-8") as f:
            f.write(md)
        print(f"{name}.md {len(md.encode())} {title}")


if __name__ == "__main__":
    main()
