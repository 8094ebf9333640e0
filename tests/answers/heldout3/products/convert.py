#!/usr/bin/env python3
"""Converts the README / FAQ files of ten packages (PyPI sdists and npm tarballs, unpacked side
by side in one directory) to Markdown pages, one file per document, in docs/ beside this script,
and copies each package's licence file to LICENSES/. See README.md for what is changed.

Usage: python3 tests/answers/heldout3/products/convert.py /path/to/unpacked
  where /path/to/unpacked/<archive name without .tar.gz/.tgz>/ holds each unpacked archive.
"""
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# page: (source file, title put on the first line if the file has none, sections dropped, licence)
SOURCES = {
    "scrapy": ("scrapy-2.19.0/scrapy-2.19.0/README.rst", "Scrapy", (),
               "scrapy-2.19.0/scrapy-2.19.0/LICENSE"),
    "requests": ("requests-2.34.2/requests-2.34.2/README.md", None, ("Cloning the repository",),
                 ("requests-2.34.2/requests-2.34.2/LICENSE", "requests-2.34.2/requests-2.34.2/NOTICE")),
    "httpx": ("httpx-0.28.1/httpx-0.28.1/README.md", "HTTPX", (),
              "httpx-0.28.1/httpx-0.28.1/LICENSE.md"),
    "express": ("express-5.3.0/package/Readme.md", "Express", ("Table of contents",),
                "express-5.3.0/package/LICENSE"),
    "black": ("black-26.10.1/black-26.10.1/README.md", "Black", ("Show your style",),
              "black-26.10.1/black-26.10.1/LICENSE"),
    "black-faq": ("black-26.10.1/black-26.10.1/docs/faq.md", None, (), None),
    "chalk": ("chalk-6.0.1/package/readme.md", "Chalk", ("Related",),
              "chalk-6.0.1/package/license"),
    "socket.io": ("socket.io-4.8.4/package/Readme.md", None, ("Backers", "Sponsors"),
                  "socket.io-4.8.4/package/LICENSE"),
    "sentry-sdk": ("sentry_sdk-2.75.0/sentry_sdk-2.75.0/README.md", None, ("Contributors",),
                   "sentry_sdk-2.75.0/sentry_sdk-2.75.0/LICENSE"),
    "twilio": ("twilio-9.13.0/twilio-9.13.0/README.md", None, (),
               "twilio-9.13.0/twilio-9.13.0/LICENSE"),
}
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def rst(text):
    """The README.rst of Scrapy: drop the badge substitutions, keep prose, code and links' text."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(".. code::"):
            i += 1
            body = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                body.append(lines[i].strip())
                i += 1
            out += ["```" + line.split("::")[1].strip()] + [b for b in body if b] + ["```", ""]
            continue
        if line.startswith(".. ") or line.startswith("|") or (line.startswith("   ") and out
                                                                and not out[-1].strip() == ""):
            i += 1
            continue
        if line.startswith("   :"):
            i += 1
            continue
        line = re.sub(r"`([^`<]+?)`_", r"\1", line)
        line = re.sub(r"(\w)_(?=\W|$)", r"\1", line)
        out.append(line)
        i += 1
    return "\n".join(out)


def markup(text):
    text = re.sub(r"<br\s*/?>", " ", text)
    text = re.sub(r"<[^>]+>", "", text)                       # HTML tags: their text only
    text = re.sub(r"\[!\[[^\]]*\]\([^)]*\)\]\([^)]*\)", "", text)  # linked badges
    text = re.sub(r"\[!\[[^\]]*\]\[[^\]]*\]\]\[[^\]]*\]", "", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)          # images
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)      # [text](url)
    text = re.sub(r"\[([^\]]+)\]\[[^\]]*\]", r"\1", text)     # [text][ref]
    text = re.sub(r"\[([^\]\n]+)\](?!\()", r"\1", text)       # [text] (a reference defined below)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)           # bold
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?!\w)", r"\1", text)  # *italics*
    text = re.sub(r"(?<![\w`\\])_([^_`]+?)_(?![\w`])", r"\1", text)   # _italics_
    text = text.replace("\\-", "-").replace("\\&", "&")
    return text.replace("&mdash;", "—").replace("&amp;", "&")


def inline(text):
    """Markdown and HTML markup reduced to its text, outside `code` spans (kept as they are)."""
    spans = re.findall(r"`[^`\n]*`", text)
    text = re.sub(r"`[^`\n]*`", lambda m: "\x01%d\x02" % spans.index(m.group(0)), text)
    return re.sub(r"\x01(\d+)\x02", lambda m: spans[int(m.group(1))], markup(text))


def convert(text, title, dropped):
    lines = text.replace("\r\n", "\n").split("\n")
    out, fenced, skip_level, ref_def = [], False, 0, False
    for line in lines:
        if line.startswith("```"):
            if line.startswith("```{"):  # a MyST directive (a table of contents): dropped
                fenced = "myst"
                continue
            if fenced == "myst":
                fenced = False
                continue
            fenced = not fenced
            if not skip_level:
                out.append(line.rstrip())
            continue
        if fenced == "myst":
            continue
        if fenced:
            if not skip_level:
                out.append(line.rstrip())
            continue
        m = HEADING.match(line)
        if m:
            level, name = len(m.group(1)), inline(m.group(2))
            name = re.sub(r"^[^\w`(]+\s*", "", name).replace("`", "")  # leading emoji, code marks
            if skip_level and level > skip_level:
                continue
            skip_level = level if name in dropped else 0
            if not skip_level:
                out += ["", "#" * level + " " + name, ""]
            continue
        if skip_level:
            continue
        if re.match(r"^\s*\[[^\]]+\]:\s*\S*\s*$", line):  # a link reference definition
            ref_def = line.rstrip().endswith(":")
            continue
        if ref_def and line.startswith("  "):
            ref_def = False
            continue
        ref_def = False
        if re.match(r"^\(.*\)=\s*$", line):  # a MyST label
            continue
        if re.match(r"^\s*(---|\*\*\*)\s*$", line):  # horizontal rules
            continue
        if line.strip() and not inline(line).strip():
            continue  # a line of HTML or badges only
        out.append("\x00" + (line[2:] if line.startswith("  ") and not line.startswith("   ")
                              and not re.match(r"^\s*[-*] ", line) else line))
    # prose (marked by \x00) is reduced paragraph by paragraph: emphasis may span lines
    text, block = [], []
    for line in out + [""]:
        if line.startswith("\x00") and line[1:].strip():
            block.append(line[1:])
            continue
        if block:
            text += [l.rstrip() for l in inline("\n".join(block)).split("\n")]
            block = []
        text.append(line.lstrip("\x00"))
    text = "\n".join(text)
    text = re.sub(r"\n[ \t]+\n", "\n\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    if not text.startswith("# "):
        first = re.search(r"(?m)^# .*$", text)
        if first and title is None:  # text before the title (a banner) goes after it
            text = first.group(0) + "\n\n" + (text[:first.start()] + text[first.end():]).strip() + "\n"
        else:
            text = f"# {title}\n\n{text}"
    return re.sub(r"\n{3,}", "\n\n", text)


def main():
    src = sys.argv[1]
    for page, (path, title, dropped, licence) in SOURCES.items():
        text = open(os.path.join(src, path), encoding="utf-8").read()
        if path.endswith(".rst"):
            text = rst(text)
        md = convert(text, title, dropped)
        with open(os.path.join(HERE, "docs", page + ".md"), "w", encoding="utf-8") as f:
            f.write(md)
        for i, path in enumerate((licence,) if isinstance(licence, str) else licence or ()):
            name = page + ("" if i == 0 else "-" + os.path.basename(path)) + ".txt"
            shutil.copy(os.path.join(src, path), os.path.join(HERE, "LICENSES", name))
        print(f"{page}.md {len(md.encode())}")


if __name__ == "__main__":
    main()
