"""The RAG tests' corpus: PostgreSQL's SQL command reference as Debian ships it
(postgresql-doc-15, installed by `cargo xtask test`). One JSON line per command: its name
(the title), its one-line purpose (held out of the indexed text: the benchmark's question) and
the start of its Description section (the indexed text)."""

import glob
import html
import json
import re
import sys

DOCS = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/doc/postgresql-doc-15/html"
LIMIT = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
CHARS = int(sys.argv[3]) if len(sys.argv) > 3 else 300


def text(s):
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", s))).strip()


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
