#!/usr/bin/env python3
"""Converts a subset of the Flask 3.0.3 documentation (reStructuredText, from the PyPI sdist
`flask-3.0.3.tar.gz`, directory `docs/`) to Markdown, one file per page, in docs/ beside this script.
See README.md for what is changed.

Usage: python3 tests/answers/heldout/flask/convert.py /path/to/flask-3.0.3/docs
"""
import os
import re
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "docs")
PAGES = [
    "installation", "quickstart", "templating", "testing", "errorhandling", "debugging",
    "logging", "config", "signals", "views", "appcontext", "reqcontext", "blueprints",
    "cli", "server", "shell", "web-security", "async-await",
]
UNDERLINE = re.compile(r"^([=\-~^\"*#+`'])\1{2,}\s*$")
DIRECTIVE = re.compile(r"^\.\. ([a-z:_-]+)::\s*(.*)$")
CODE = {"code-block", "sourcecode", "code"}
LABELS = {"note": "Note:", "warning": "Warning:", "tip": "Tip:", "important": "Important:",
          "seealso": "See also:", "caution": "Caution:", "danger": "Danger:", "hint": "Hint:"}
VERSIONS = {"versionadded": "New in version {}.", "versionchanged": "Changed in version {}.",
            "deprecated": "Deprecated since version {}."}
SIGNATURES = {"py:data", "data", "function", "py:function", "class", "method", "attribute"}
TRANSPARENT = {"tabs", "container", "only"}


def role(m):
    name, text = m.group(1), m.group(2)
    link = re.match(r"^(.*?)\s*<([^>]+)>$", text, re.S)
    if link:
        return link.group(1)
    if name in ("doc", "ref"):
        return text.rsplit("/", 1)[-1].replace("-", " ")
    text = text.lstrip("!")
    if text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    text = text.lstrip(".")
    return f"`{text}`" if name not in ("ref", "doc") else text


def inline(text):
    text = re.sub(r":([a-z:]+):`([^`]+)`", role, text)
    text = re.sub(r"`([^`<]+?)\s*<([^>`]+)>`__?", r"[\1](\2)", text)
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    text = re.sub(r"(?<![`\w])`([^`]+)`_{1,2}", r"\1", text)
    text = re.sub(r"\|([^|\s]+)\|", r"\1", text)
    return text


def indent(line):
    return len(line) - len(line.lstrip(" "))


def dedent(lines):
    depth = min((indent(l) for l in lines if l.strip()), default=0)
    return [l[depth:] for l in lines]


def block(lines, i):
    """The indented block after line `i - 1`: its lines (dedented) and the next index."""
    j = i
    while j < len(lines) and (not lines[j].strip() or indent(lines[j]) > 0):
        j += 1
    body = lines[i:j]
    while body and not body[-1].strip():
        body.pop()
    return dedent(body), j


def fence(lines, lang=""):
    while lines and not lines[0].strip():
        lines = lines[1:]
    return [f"```{lang}"] + [l.rstrip() for l in lines] + ["```", ""]


def convert(lines, top=False):
    out, levels, i = [], [], 0
    literal = False
    while i < len(lines):
        line = lines[i].rstrip()
        if not line.strip():
            i += 1
            continue
        if indent(line) > 0:
            body, i = block(lines, i)
            out += fence(body) if literal else convert(body)
            literal = False
            continue
        literal = False
        nxt = lines[i + 1].rstrip() if i + 1 < len(lines) else ""
        if UNDERLINE.match(line) and i + 2 < len(lines) and UNDERLINE.match(lines[i + 2].strip()):
            i += 1  # an overline: the title follows
            continue
        if top and UNDERLINE.match(nxt) and not UNDERLINE.match(line):
            c = nxt[0]
            if c not in levels:
                levels.append(c)
            out += ["#" * (levels.index(c) + 1) + " " + inline(line.strip()), ""]
            i += 2
            continue
        m = DIRECTIVE.match(line)
        if m or line.startswith(".. "):
            name, arg = (m.group(1), m.group(2).strip()) if m else ("comment", "")
            body, i = block(lines, i + 1)
            while body and body[0].strip().startswith(":") and name != "comment":
                body = body[1:]  # directive options
            if name in CODE:
                out += fence(body, arg)
            elif name in LABELS or name in ("admonition", "tab", "group-tab"):
                label = LABELS.get(name) or (arg + ":" if name != "admonition" else arg)
                out += [inline(label), ""] + convert(body)
            elif name in VERSIONS:
                text = " ".join(l.strip() for l in body if l.strip())
                out += [inline((VERSIONS[name].format(arg) + " " + text).strip()), ""]
            elif name in SIGNATURES:
                out += [f"`{arg}`", ""] + convert(body)
            elif name in TRANSPARENT:
                out += convert(body)
            continue  # toctree, image, currentmodule, comments, targets: dropped
        para = []
        while i < len(lines) and lines[i].strip():
            if para and indent(lines[i]) > 0 and not re.match(r"^[-*] |^\d+\. |^#\. ", para[0]):
                break  # a definition's body: an indented block
            para.append(lines[i].strip())
            i += 1
        text = " ".join(para)
        if text.endswith("::"):
            literal = True
            text = text[:-2].rstrip() + (":" if not text[:-2].endswith(" ") and text != "::" else "")
        if para and re.match(r"^[-*] |^\d+\. |^#\. ", para[0]):
            items, cur = [], []
            for p in para:
                if re.match(r"^[-*] |^\d+\. |^#\. ", p) and cur:
                    items.append(" ".join(cur))
                    cur = []
                cur.append(re.sub(r"^#\. ", "1. ", p))
            items.append(" ".join(cur))
            if items[-1].endswith("::"):
                items[-1] = items[-1][:-2].rstrip() + ":"
            out += [inline(t) for t in items] + [""]
        elif text.strip():
            out += [inline(text), ""]
    return out


def main():
    src = sys.argv[1]
    for page in PAGES:
        lines = open(os.path.join(src, page + ".rst"), encoding="utf-8").read().split("\n")
        md = "\n".join(convert(lines, top=True)).rstrip() + "\n"
        md = re.sub(r"\n{3,}", "\n\n", md)
        with open(os.path.join(HERE, page + ".md"), "w", encoding="utf-8") as f:
            f.write(md)
        print(f"{page}.md {len(md.encode())}")


if __name__ == "__main__":
    main()
