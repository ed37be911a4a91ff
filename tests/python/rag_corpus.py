"""The RAG tests' corpus: PostgreSQL's documentation as Debian ships it (postgresql-doc-15,
installed by `cargo xtask test`).

Mode `commands` (the default): one JSON line per command of the SQL reference: its name (the
title), its one-line purpose (held out of the indexed text: the benchmark's question) and the
start of its Description section (the indexed text).

Mode `sections`: one JSON line per section of the whole documentation (chapters' sect1 to
sect4, reference pages' refsect1/2: about 3,400), its title and the start of its own text (up
to the next section); purpose empty. Sections with less than 40 characters of text are left
out."""

import glob
import html
import json
import re
import sys

DOCS = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/doc/postgresql-doc-15/html"
LIMIT = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
CHARS = int(sys.argv[3]) if len(sys.argv) > 3 else 300
MODE = sys.argv[4] if len(sys.argv) > 4 else "commands"


def text(s):
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", s))).strip()


SECTION = re.compile(r'<div class="(?:sect[1-4]|refsect[12])"[^>]*>')
TITLE = re.compile(r"<h[2-6][^>]*>(.*?)</h[2-6]>", re.S)


def sections():
    n = 0
    for f in sorted(glob.glob(f"{DOCS}/*.html")):
        h = open(f, encoding="utf-8").read()
        starts = [m.end() for m in SECTION.finditer(h)]
        for i, at in enumerate(starts):
            part = h[at : starts[i + 1] if i + 1 < len(starts) else len(h)]
            title = TITLE.search(part)
            if not title:
                continue
            body = text(part[title.end() :])
            if len(body) < 40:
                continue
            print(json.dumps({"title": text(title.group(1))[:200], "purpose": "", "body": body[:CHARS]}))
            n += 1
            if n >= LIMIT:
                return


if MODE == "sections":
    sections()
    sys.exit(0)

n = 0
for f in sorted(glob.glob(f"{DOCS}/sql-*.html")):
    h = open(f, encoding="utf-8").read()
    purpose = re.search(r'<div class="refnamediv">.*?<p>(.*?)</p>', h, re.S)
    desc = re.search(r"<h2>Description</h2>(.*?)</div>", h, re.S)
    if not (purpose and desc):
        continue
    title, _, summary = text(purpose.group(1)).partition("—")
    print(json.dumps({"title": title.strip(), "purpose": summary.strip(), "body": text(desc.group(1))[:CHARS]}))
    n += 1
    if n >= LIMIT:
        break
