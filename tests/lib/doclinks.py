#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Relative links of the project's Markdown documents, checked as GitHub
renders them (tests/e2e/links.sh).

  tests/lib/doclinks.py FILE.md...      one line per broken link; exit 1
  tests/lib/doclinks.py --slugs         the slug rule against its table

A link [text](target) whose target is not a URL must name a file or folder
of the tree, relative to the document's folder (or the tree's root when it
begins with /), and its #anchor, if any, a heading of that Markdown file as
GitHub makes the anchor: the heading's rendered text (the backticks of code spans and
emphasis markers dropped, a link's text kept), lowercased, every character
that is not a letter, a digit, a space, a hyphen or an underscore dropped,
each space a hyphen; a second heading of the same anchor gets -1, a third
-2. Links inside code (fenced or indented blocks, code spans) are text, not
links. A line anchor (#L12) is allowed on a file that is not Markdown.
"""
import os
import re
import sys
import unicodedata

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def prose(text, spans=True):
    """TEXT with code blocks blanked (line numbers kept) and, with SPANS,
    code spans emptied: what remains is what GitHub reads as Markdown."""
    out, fence, code = [], None, False
    prev_blank = True
    for line in text.split("\n"):
        m = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append("")
            continue
        if m:
            fence = m.group(1)
            out.append("")
            continue
        # An indented block begins after a blank line (a list's
        # continuation lines here are indented by two).
        if line.startswith("    ") and (prev_blank or code):
            code = True
            out.append("")
            continue
        if line.strip():
            code = False
        prev_blank = not line.strip()
        out.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "``", line) if spans else line)
    return "\n".join(out)


def rendered(heading):
    """A heading's text as GitHub renders it, before the slug."""
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    t = t.replace("`", "")
    t = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", t)  # emphasis markers
    return t.strip()


def slug(heading):
    t = rendered(heading).lower()
    keep = []
    for c in t:
        cat = unicodedata.category(c)
        if c in " -" or cat[0] in "LMN" or cat == "Pc":  # Ruby's \p{Word}
            keep.append(c)
    return "".join(keep).replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    text = prose(open(path, encoding="utf-8").read(), spans=False)
    for line in text.split("\n"):
        m = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
    for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', text):
        out.add(m.group(1))
    return out


def links(path):
    """(line, target) of every link of PATH's prose."""
    text = prose(open(path, encoding="utf-8").read())
    for m in re.finditer(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text):
        yield text.count("\n", 0, m.start()) + 1, m.group(2)


def check(path):
    bad = []
    cache = {}
    for line, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        if file.startswith("/"):
            dest = os.path.join(ROOT, file.lstrip("/"))
        elif file:
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file))
        else:
            dest = path
        where = "%s:%d: %s" % (os.path.relpath(path, ROOT), line, target)
        if not os.path.exists(dest):
            bad.append("%s: no such file" % where)
            continue
        if not anchor:
            continue
        if not dest.endswith(".md"):
            if not re.fullmatch(r"L\d+(-L\d+)?", anchor) or os.path.isdir(dest):
                bad.append("%s: an anchor on a file that is not Markdown" % where)
            continue
        if dest not in cache:
            cache[dest] = anchors(dest)
        if anchor not in cache[dest]:
            bad.append("%s: no heading makes #%s" % (where, anchor))
    return bad


# The slug rule, case by case (GitHub's anchors of these headings).
SLUGS = [
    ("On a stock dstack image (sidecar)", "on-a-stock-dstack-image-sidecar"),
    ("The sidecar's image", "the-sidecars-image"),
    ("Which `requirements` forms", "which-requirements-forms"),
    ("3.1 The relay (`relay`)", "31-the-relay-relay"),
    ("Status file (`requirements.health_status_file`)", "status-file-requirementshealth_status_file"),
    ("Probes (`dstack.healthd.probe`, issue 27)", "probes-dstackhealthdprobe-issue-27"),
    ("**Bold** and _emphasis_ and snake_case", "bold-and-emphasis-and-snake_case"),
    ("A [link](other.md#x) in it", "a-link-in-it"),
    ("Eviction asks the kernel once a victim, not twice a slot", "eviction-asks-the-kernel-once-a-victim-not-twice-a-slot"),
    ("Refresh → file: p99 < 100 ms", "refresh--file-p99--100-ms"),
    ("µs and été", "µs-and-été"),
]


def main(argv):
    if argv[1:] == ["--slugs"]:
        bad = ["%r: %r, want %r" % (h, slug(h), want) for h, want in SLUGS if slug(h) != want]
        # A heading repeated takes -1, then -2; one in code is none.
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".md") as t:
            t.write("# A b\n\n## A b\n\n### A `b`\n\n```\n## Not one\n```\n")
            t.flush()
            got = sorted(anchors(t.name))
        if got != ["a-b", "a-b-1", "a-b-2"]:
            bad.append("repeated headings: %s, want a-b a-b-1 a-b-2" % " ".join(got))
        print("\n".join(bad) or "%d headings, each its anchor" % len(SLUGS))
        return 1 if bad else 0
    bad = []
    for p in argv[1:]:
        bad += check(os.path.abspath(p))
    print("\n".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
