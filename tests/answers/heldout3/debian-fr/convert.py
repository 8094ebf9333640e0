#!/usr/bin/env python3
"""Converts some sections of the French Debian Reference (HTML, Debian package
`debian-reference-fr` 2.100, /usr/share/debian-reference/chNN.fr.html) to Markdown, one file
per section ("1.1. Bases pour la console" becomes docs/ch01-1.md), in docs/ beside this script.
See README.md for what is changed.

Usage: python3 tests/answers/heldout3/debian-fr/convert.py /path/to/usr/share/debian-reference
"""
import html.parser
import os
import re
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "docs")
# (chapter, section): the sections kept, each one page
PAGES = [(1, 1), (1, 2), (1, 5), (2, 2), (4, 1), (4, 2), (4, 3), (4, 4), (6, 3), (8, 1), (9, 5), (10, 2)]
HEADINGS = {"h2": 1, "h3": 2, "h4": 3, "h5": 4}
SKIPPED_TAGS = {"script", "style", "head", "sup"}
SKIPPED_DIVS = {"toc", "navheader", "navfooter", "footnotes"}
ADMONITIONS = {"note", "tip", "warning", "caution", "important"}
BLOCKS = {"p", "div", "li", "tr", "blockquote", "dt", "dd", "table", "ul", "ol", "dl", "br"}


class Chapter(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self.buf, self.divs, self.starts = [], [], [], []
        self.started, self.skip, self.pre, self.heading = False, 0, 0, None
        self.cells, self.bullet, self.admon, self.header_row = None, False, 0, False

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
        cls = dict(attrs).get("class") or ""
        if tag == "div":
            kind = "skip" if cls in SKIPPED_DIVS else "admon" if cls in ADMONITIONS else ""
            self.divs.append(kind)
            self.skip += kind == "skip"
            self.admon += kind == "admon"
        if tag in SKIPPED_TAGS:
            self.skip += 1
        elif self.skip:
            return
        elif tag in HEADINGS:
            self.flush()
            self.started, self.heading = True, tag
        elif tag == "pre":
            self.flush()
            self.pre += 1
        elif self.admon and tag in ("table", "tr", "td", "th"):
            self.flush()  # an admonition's layout table: its label and its text, no cells
        elif tag == "thead":
            self.header_row = True
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
        if tag == "div":
            kind = self.divs.pop() if self.divs else ""
            self.skip -= kind == "skip"
            self.admon -= kind == "admon"
            if kind:
                self.flush()
                return
        if tag in SKIPPED_TAGS:
            self.skip -= 1
        elif self.skip:
            return
        elif tag in HEADINGS and self.heading:
            title = " ".join("".join(self.buf).split())
            text = re.sub(r"^\d+(\.\d+)*\.\s+", "", title)
            self.buf, self.heading = [], None
            if tag == "h2":  # a new section: where it starts, and its number
                self.starts.append((len(self.out), int(title.split(".")[1])))
            self.out += ["#" * HEADINGS[tag] + " " + text, ""]
        elif tag == "pre" and self.pre:
            self.pre -= 1
            code = "".join(self.buf).strip("\n")
            self.buf = []
            if self.started and code.strip():
                self.out += ["```"] + [l.rstrip() for l in code.split("\n")] + ["```", ""]
        elif self.admon and tag in ("table", "tr", "td"):
            self.flush()
        elif self.admon and tag == "th":
            label = " ".join("".join(self.buf).split())
            self.buf = []
            if label:
                self.out += [label + " :", ""]
        elif tag in ("td", "th") and self.cells is not None:
            self.flush()
        elif tag == "tr" and self.cells is not None:
            cells, self.cells = self.cells, None
            if cells:
                self.out += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"]
                if self.header_row:
                    self.out += ["|" + " --- |" * len(cells)]
        elif tag == "thead":
            self.header_row = False
        elif tag in BLOCKS and not self.pre:
            self.flush()
            if tag == "table":
                self.out += [""]

    def handle_data(self, data):
        if not self.skip and self.started or self.heading:
            self.buf.append(data)


def sections(path):
    """The chapter's h2 sections: {number: Markdown text}."""
    page = Chapter()
    page.feed(open(path, encoding="utf-8").read())
    page.flush()
    ends = [start for start, _ in page.starts[1:]] + [len(page.out)]
    return {number: re.sub(r"\n{3,}", "\n\n", "\n".join(page.out[start:end])).rstrip() + "\n"
            for (start, number), end in zip(page.starts, ends)}


def main():
    src = sys.argv[1]
    cache = {}
    for chapter, section in PAGES:
        if chapter not in cache:
            cache[chapter] = sections(os.path.join(src, f"ch{chapter:02d}.fr.html"))
        md = cache[chapter][section]
        name = f"ch{chapter:02d}-{section}.md"
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            f.write(md)
        print(f"{name} {len(md.encode())} {md.splitlines()[0]}")


if __name__ == "__main__":
    main()
