"""Renders the proxysql.cnf that Ansible's community.proxysql role writes, with the role's own
defaults, from the `ansible` wheel on PyPI: `render_proxysql_cnf.py WHEEL OUT_FILE`.

The result is a real ProxySQL configuration that nobody on this project wrote (the `sluice import`
tests translate it). It is rendered at test time and never committed: the role is GPL-3.0.
Ansible's filters the template uses (to_json, combine, ternary, the `version` test) are
re-implemented here in their plain meaning."""

import json
import re
import sys
import zipfile

import jinja2
import yaml

ROLE = "ansible_collections/community/proxysql/roles/proxysql/"

wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    read = lambda name: z.read(ROLE + name).decode()
    ctx = {}
    for f in ("defaults/main.yml", "vars/main.yml"):
        ctx.update(yaml.safe_load(read(f)) or {})
    template = read("templates/proxysql.cnf.j2")

ctx["admin_credentials_list"] = [
    f"{ctx['proxysql_admin_user']}:{ctx['proxysql_admin_password']}"
]
ctx["ansible_lsb"] = {"codename": "bookworm", "id": "Debian", "major_release": "12"}

env = jinja2.Environment()
env.filters["to_json"] = json.dumps
env.filters["combine"] = lambda a, b: {**a, **b}
env.filters["ternary"] = lambda c, t, f: t if c else f


def version_test(a, b, op="=="):
    ta = tuple(int(x) for x in str(a).split("."))
    tb = tuple(int(x) for x in str(b).split("."))
    return {"<": ta < tb, "<=": ta <= tb, ">": ta > tb, ">=": ta >= tb, "==": ta == tb}[op]


env.tests["version"] = version_test
WHOLE = re.compile(r"^\{\{(.*)\}\}$", re.S)


def render(v):
    """A defaults value, as Ansible templates it: a lone {{ expr }} keeps its native type."""
    if isinstance(v, str) and "{{" in v:
        m = WHOLE.match(v.strip())
        if m and "{{" not in m.group(1):
            return env.compile_expression(m.group(1))(**ctx)
        return env.from_string(v).render(**ctx)
    if isinstance(v, dict):
        return {k: render(x) for k, x in v.items()}
    if isinstance(v, list):
        return [render(x) for x in v]
    return v


# Defaults refer to other defaults; a few passes resolve the chains.
for _ in range(6):
    ctx = {k: render(v) for k, v in ctx.items()}
with open(out, "w") as f:
    f.write(env.from_string(template).render(**ctx))
