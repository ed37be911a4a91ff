//! The page: server-rendered tables (every value escaped) and a small script that polls
//! `/status.json` and draws two SVG charts. No external assets: the machine it runs on may
//! have no internet, and an operator's browser should not fetch anything but Sluice.

use super::tables::{Section, Tables};

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.1em;margin:1.4em 0 .4em}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}\
th{background:#f2f2f2}.ONLINE{color:#070}.SHUNNED,.OFFLINE_SOFT,.OFFLINE_HARD{color:#b00;font-weight:bold}\
.charts{display:flex;gap:2em;flex-wrap:wrap}.chart svg{border:1px solid #ccc;background:#fcfcfc}\
.muted{color:#777}";

/// Polls `/status.json` every 2 s (same origin, the page's own credentials), keeps 90 samples
/// and draws questions/s and p99 per protocol; p99 is the upper bound of the bucket holding the
/// 99th percentile of the statements between two samples.
const SCRIPT: &str = r#"
const samples = [];
function p99(prev, cur) {
  const b = cur.latency_buckets.map((n, i) => n - prev.latency_buckets[i]);
  const total = b.reduce((a, n) => a + n, 0);
  if (total === 0) return null;
  let seen = 0;
  for (let i = 0; i < b.length; i++) {
    seen += b[i];
    if (seen >= 0.99 * total) {
      const bound = cur.latency_bounds_s[i];
      return bound === undefined ? cur.latency_bounds_s[cur.latency_bounds_s.length - 1] * 1000 : bound * 1000;
    }
  }
  return null;
}
function draw(id, series, unit) {
  const svg = document.getElementById(id);
  const w = 360, h = 110;
  const all = series.flatMap(s => s.points.filter(v => v !== null));
  const top = Math.max(0, ...all), max = Math.max(1e-9, top);
  let out = '';
  series.forEach(s => {
    const pts = s.points.map((v, i) => v === null ? null : [i * (w / 89), h - 4 - (v / max) * (h - 20)])
      .filter(p => p !== null).map(p => p[0].toFixed(1) + ',' + p[1].toFixed(1)).join(' ');
    out += '<polyline fill="none" stroke="' + s.color + '" stroke-width="1.5" points="' + pts + '"/>';
  });
  const label = top === 0 ? 'no traffic' : 'max ' + top.toPrecision(3) + ' ' + unit;
  out += '<text x="4" y="12" font-size="11">' + label + '</text>';
  svg.innerHTML = out;
  svg.dataset.points = String(all.length);
}
async function tick() {
  try {
    // Built from the origin, never from a URL carrying user:password (browsers refuse those
    // for requests a page makes); the browser adds the page's Basic credentials itself.
    const url = new URL('status.json', location.origin + location.pathname);
    const r = await fetch(url, {cache: 'no-store', credentials: 'same-origin'});
    if (!r.ok) throw new Error(r.status);
    const s = await r.json();
    s.t = performance.now() / 1000;
    samples.push(s);
    if (samples.length > 91) samples.shift();
    const qps = {mysql: [], pgsql: []}, lat = {mysql: [], pgsql: []};
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1], b = samples[i], dt = Math.max(0.001, b.t - a.t);
      for (const p of ['mysql', 'pgsql']) {
        qps[p].push((b[p].questions - a[p].questions) / dt);
        lat[p].push(p99(a[p], b[p]));
      }
    }
    draw('qps', [{points: qps.mysql, color: '#1f6fb2'}, {points: qps.pgsql, color: '#c4581d'}], 'q/s');
    draw('p99', [{points: lat.mysql, color: '#1f6fb2'}, {points: lat.pgsql, color: '#c4581d'}], 'ms');
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  } catch (e) {
    document.getElementById('updated').textContent = 'status.json: ' + e;
  }
}
tick();
setInterval(tick, 2000);
"#;

/// `&`, `<`, `>`, `"` and `'` escaped.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn table(s: &Section) -> String {
    let id: String = s
        .title
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let mut out = format!("<h2>{}</h2>\n", escape(&s.title));
    if s.rows.rows.is_empty() {
        out.push_str(&format!("<p class=\"muted\" id=\"{id}\">none</p>\n"));
        return out;
    }
    out.push_str(&format!("<table id=\"{id}\"><tr>"));
    for c in &s.rows.columns {
        out.push_str(&format!("<th>{}</th>", escape(c)));
    }
    out.push_str("</tr>\n");
    for row in &s.rows.rows {
        out.push_str("<tr>");
        for cell in row {
            let v = cell.as_deref().unwrap_or("");
            let class = matches!(v, "ONLINE" | "SHUNNED" | "OFFLINE_SOFT" | "OFFLINE_HARD")
                .then(|| format!(" class=\"{v}\""))
                .unwrap_or_default();
            out.push_str(&format!("<td{class}>{}</td>", escape(v)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

/// The whole page.
pub(crate) fn page(t: &Tables, version: &str) -> String {
    let mut body = String::new();
    for s in &t.sections {
        body.push_str(&table(s));
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width\"><title>Sluice status</title>\
<style>{STYLE}</style></head><body>\n\
<h1>Sluice {version}</h1>\n\
<p>up {uptime} s · MySQL clients <b id=\"mysql-clients\">{myc}</b> · PostgreSQL clients \
<b id=\"pgsql-clients\">{pgc}</b> · questions {myq} / {pgq} · <span id=\"updated\" class=\"muted\"></span></p>\n\
<div class=\"charts\"><div class=\"chart\"><div>questions/s \
(<span style=\"color:#1f6fb2\">MySQL</span>, <span style=\"color:#c4581d\">PostgreSQL</span>)</div>\
<svg id=\"qps\" width=\"360\" height=\"110\"></svg></div>\
<div class=\"chart\"><div>p99 latency, ms</div><svg id=\"p99\" width=\"360\" height=\"110\"></svg></div></div>\n\
{body}<p class=\"muted\">The tables are those of the admin port (runtime_*_servers, \
stats_*_connection_pool, stats_*_processlist, stats_*_query_digest, stats_workload_*), read when \
the page loaded; reload for new rows.</p>\n\
<script>{SCRIPT}</script>\n</body></html>\n",
        uptime = t.uptime_s,
        myc = t.clients.mysql,
        pgc = t.clients.pgsql,
        myq = t.questions.mysql,
        pgq = t.questions.pgsql,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::admin::AdminRows;

    #[test]
    fn values_are_escaped_and_status_is_classed() {
        let s = Section {
            title: "MySQL servers".into(),
            rows: AdminRows {
                columns: vec!["status".into(), "comment".into()],
                rows: vec![vec![
                    Some("SHUNNED".into()),
                    Some("<script>x</script>".into()),
                ]],
            },
        };
        let h = table(&s);
        assert!(h.contains("<td class=\"SHUNNED\">SHUNNED</td>"), "{h}");
        assert!(h.contains("&lt;script&gt;x&lt;/script&gt;"), "{h}");
        assert!(!h.contains("<script>x"), "{h}");
        assert!(h.contains("id=\"mysql-servers\""), "{h}");
    }
}
