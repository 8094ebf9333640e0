#!/usr/bin/env python3
"""Converts a subset of the SQLite 3.40.1 documentation (HTML, Debian package `sqlite3-doc`,
/usr/share/doc/sqlite3/*.html) to Markdown, one file per page, in docs/ beside this script.
See README.md for what is changed.

Usage: python3 tests/answers/heldout/sqlite/convert.py /path/to/usr/share/doc/sqlite3
"""
import html.parser
import os
import re
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "docs")
PAGES = ["whentouse", "quirks", "datatype3", "autoinc", "foreignkeys", "lang_transaction", "wal", "cli"]
HEADINGS = {"h1": 2, "h2": 3, "h3": 4, "h4": 5}
SKIPPED = {"script", "style", "svg", "head"}
BLOCKS = {"p", "div", "li", "tr", "blockquote", "dt", "dd", "table", "ul", "ol", "dl", "br"}


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.title, self.out, self.buf = "", [], []
        self.started, self.skip, self.pre, self.heading, self.in_title = False, 0, 0, None, False
        self.cells, self.bullet = None, False

    def flush(self):
        text = " ".join("".join(self.buf).split())
        self.buf = []
        if text and self.started:
            text, self.bullet = ("- " + text if self.bullet else text), False
            if self.cells is not None:
                self.cells.append(text)
            else:
                self.out += [text, ""]

    def handle_starttag(self, tag, attrs):
        if tag in SKIPPED:
            self.skip += 1
        elif tag == "title":
            self.in_title = True
        elif tag in HEADINGS:
            self.flush()
            self.started, self.heading = True, tag
        elif tag == "pre":
            self.flush()
            self.pre += 1
        elif tag in BLOCKS and not self.pre:
            if tag == "tr":
                self.flush()
                self.cells = []
            elif tag not in ("td", "th"):
                self.flush()
            self.bullet = self.bullet or tag == "li"
        elif tag in ("td", "th") and self.cells is not None:
            self.flush()

    def handle_endtag(self, tag):
        if tag in SKIPPED:
            self.skip -= 1
        elif tag == "title":
            self.in_title = False
        elif tag in HEADINGS and self.heading:
            text = re.sub(r"^\d+(\.\d+)*\.\s+", "", " ".join("".join(self.buf).split()))
            self.buf, self.heading = [], None
            if text and text != self.title:
                self.out += ["#" * HEADINGS[tag] + " " + text, ""]
        elif tag == "pre" and self.pre:
            self.pre -= 1
            code = "".join(self.buf).strip("\n")
            self.buf = []
            if self.started and code.strip():
                self.out += ["```"] + [l.rstrip() for l in code.split("\n")] + ["```", ""]
        elif tag in ("td", "th") and self.cells is not None:
            self.flush()
        elif tag == "tr" and self.cells is not None:
            cells, self.cells = self.cells, None
            if cells:
                self.out += ["| " + " | ".join(cells) + " |", ""]
        elif tag in BLOCKS and not self.pre:
            self.flush()

    def handle_data(self, data):
        if self.in_title:
            self.title += data.strip()
        elif not self.skip:
            self.buf.append(data)


def convert(path):
    page = Page()
    page.feed(open(path, encoding="utf-8").read())
    page.flush()
    out = page.out
    # table rows in a row are one table: drop the blank lines between them, add a header rule
    text = "\n".join(["# " + page.title, ""] + out)
    text = re.sub(r"(\|[^\n]*\|)\n\n(?=\|)", r"\1\n", text)
    text = re.sub(r"(?m)^This page last modified.*$", "", text)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def main():
    src = sys.argv[1]
    for page in PAGES:
        md = convert(os.path.join(src, page + ".html"))
        with open(os.path.join(HERE, page + ".md"), "w", encoding="utf-8") as f:
            f.write(md)
        print(f"{page}.md {len(md.encode())}")


if __name__ == "__main__":
    main()
