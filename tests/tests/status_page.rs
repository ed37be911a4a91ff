//! The status page on the HTTP port, in a real browser: headless Chromium loads `/status` with
//! the admin credentials, its script fetches `/status.json` and draws the charts, the servers it
//! lists are those of `runtime_mysql_servers` / `runtime_pgsql_servers`, a digest's text is
//! shown escaped, and a screenshot is saved to `target/status-page.png`.

use sluice_tests::*;
use std::process::{Command, Output};

fn http_status(port: u16, path: &str, user: Option<&str>) -> String {
    let mut c = Command::new("curl");
    c.args(["-s", "-o", "/dev/null", "-w", "%{http_code}"]);
    if let Some(u) = user {
        c.args(["-u", u]);
    }
    ok_stdout(
        &c.arg(format!("http://127.0.0.1:{port}{path}"))
            .output()
            .expect("curl"),
    )
}

fn chromium(args: &[&str], url: &str) -> Output {
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=7000",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("chromium (cargo xtask test installs it)")
}

/// The cells of table `id` in the page's DOM, row by row (header row left out).
fn table_cells(dom: &str, id: &str) -> Vec<Vec<String>> {
    let start = dom
        .find(&format!("<table id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no table {id} in:\n{dom}"));
    let table = &dom[start..start + dom[start..].find("</table>").expect("table end")];
    table
        .split("<tr>")
        .skip(2)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let text = &cell[cell.find('>').expect("td") + 1..];
                    text[..text.find("</td>").expect("td end")].to_string()
                })
                .collect()
        })
        .collect()
}

#[test]
fn a_browser_shows_the_servers_the_runtime_has_and_draws_the_charts() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let http = free_port();
    let template = format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{{admin_port}}\"\npgsql_ifaces = \"127.0.0.1:{{pg_admin_port}}\"\n\
         restapi_enabled = true\nrestapi_port = {http}\n\n[pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\n{}",
        standard_config("", "")
    );
    let s = Sluice::start(&template);
    // Behind the admin or stats credentials.
    assert_eq!(http_status(http, "/status", None), "401");
    assert_eq!(http_status(http, "/status", Some("admin:wrong")), "401");
    assert_eq!(http_status(http, "/status", Some("stats:stats")), "200");
    // Traffic, and a digest whose text holds markup.
    for _ in 0..5 {
        ok_stdout(&mariadb(
            s.port,
            "app",
            "app",
            &["--skip-ssl"],
            "SELECT 1 AS `<i>x</i>`",
        ));
    }
    ok_stdout(&psql_login(s.pg_port, "app", "app", "SELECT 1"));

    let url = format!("http://admin:admin@127.0.0.1:{http}/status");
    let dom = ok_stdout(&chromium(&["--dump-dom"], &url));
    let runtime = |table: &str| -> Vec<Vec<String>> {
        s.admin_ok(&format!(
            "SELECT hostgroup_id, hostname, port, status FROM {table} ORDER BY hostgroup_id, hostname, port"
        ))
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
    };
    for (id, table) in [
        ("mysql-servers", "runtime_mysql_servers"),
        ("postgresql-servers", "runtime_pgsql_servers"),
    ] {
        let shown: Vec<Vec<String>> = table_cells(&dom, id)
            .into_iter()
            .map(|r| r[..4].to_vec())
            .collect();
        assert_eq!(shown, runtime(table), "{id}");
        assert_eq!(shown.len(), 2, "{id}");
    }
    assert!(
        dom.contains("&lt;i&gt;x&lt;/i&gt;"),
        "the digest, escaped:\n{dom}"
    );
    assert!(
        !dom.contains("<i>x</i>"),
        "markup from a digest reached the page"
    );
    // The script fetched /status.json with the page's credentials and drew the chart.
    assert!(dom.contains("updated "), "{dom}");
    let points: usize = dom
        .split("id=\"qps\"")
        .nth(1)
        .and_then(|rest| rest.split("data-points=\"").nth(1))
        .and_then(|n| n.split('"').next()?.parse().ok())
        .unwrap_or(0);
    assert!(points > 0, "no questions/s points drawn:\n{dom}");

    let shot = xtask::workspace_root().join("target/status-page.png");
    let _ = std::fs::remove_file(&shot);
    let out = chromium(
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1400",
        ],
        &url,
    );
    assert!(out.status.success(), "{out:?}");
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
}
