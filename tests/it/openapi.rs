//! `openapi.yaml` and the router must list the same routes.

use std::collections::BTreeSet;

/// (method, path) pairs under `paths:`, read from the two-space / four-space indentation the
/// spec uses (a YAML parser would be a dependency for one test).
fn spec_routes(spec: &str) -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    let mut in_paths = false;
    let mut path = None;
    for line in spec.lines() {
        if line == "paths:" {
            in_paths = true;
            continue;
        }
        if in_paths && !line.starts_with(' ') && !line.is_empty() {
            break;
        }
        if let Some(p) = line.strip_prefix("  /").and_then(|l| l.strip_suffix(':')) {
            path = Some(format!("/{p}"));
        } else if let (Some(p), Some(m)) = (
            &path,
            line.strip_prefix("    ").and_then(|l| l.strip_suffix(':')),
        ) && ["get", "post", "put", "delete", "patch", "head"].contains(&m)
        {
            routes.insert((m.to_string(), p.clone()));
        }
    }
    routes
}

#[test]
fn spec_and_router_agree() {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("openapi.yaml");
    let documented = spec_routes(&spec);
    let served: BTreeSet<(String, String)> = wakebridge::http::ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert!(!served.is_empty());
    assert_eq!(documented, served, "openapi.yaml and http::ROUTES differ");
}

/// `ROUTES` itself must be true: every listed route is served (not a 404).
#[tokio::test]
async fn every_listed_route_is_served() {
    let server = crate::common::harness::TestServer::start(&[]).await;
    for (method, path) in wakebridge::http::ROUTES {
        let method =
            reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("method");
        let resp = server
            .client
            .request(method.clone(), server.url(path))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .expect("req");
        assert_ne!(resp.status().as_u16(), 404, "{method} {path}");
    }
}

/// `openapi.yaml` lists exactly the session states the daemon has, in its order.
#[test]
fn the_spec_lists_every_session_state() {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("openapi.yaml");
    let listed = spec
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("state:"))
        .find_map(|l| l.trim_start().strip_prefix("enum: ["))
        .expect("the state enum");
    let listed: Vec<&str> = listed
        .trim_end_matches(']')
        .split(',')
        .map(str::trim)
        .collect();
    let ours: Vec<&str> = <wakebridge::api::SessionState as strum::IntoEnumIterator>::iter()
        .map(wakebridge::api::SessionState::as_str)
        .collect();
    assert_eq!(listed, ours);
}
