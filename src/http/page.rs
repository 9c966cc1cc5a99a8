//! `GET /`: the fleet as a page, one HTML file with its style, script and chart library built
//! into the binary (nothing to build at install, nothing fetched from elsewhere). It reads the
//! routes the CLI reads (`/fleet`, `/changes`, `/history`), so it shows nothing they do not; its
//! policy lets it run no script but its own, call nothing off this daemon, and no other site
//! frame it.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;
use base64::Engine;
use sha2::{Digest, Sha256};

struct Page {
    html: String,
    policy: String,
}

/// The page with uPlot (`vendor/uplot`, its version in `VENDORED.md`) in its place, and a
/// policy naming its two scripts by their digests: a script injected into it would not run.
static PAGE: LazyLock<Page> = LazyLock::new(|| {
    let uplot = concat!(
        "<style>",
        include_str!("vendor/uplot/uPlot.min.css"),
        "</style>\n<script>",
        include_str!("vendor/uplot/uPlot.iife.min.js"),
        "</script>"
    );
    let html = include_str!("page.html").replacen("<!-- uPlot -->", uplot, 1);
    let scripts: Vec<String> = (html.split("<script>").skip(1))
        .filter_map(|rest| rest.split_once("</script>"))
        .map(|(script, _)| {
            let digest = Sha256::digest(script.as_bytes());
            format!(
                "'sha256-{}'",
                base64::engine::general_purpose::STANDARD.encode(digest)
            )
        })
        .collect();
    // The favicon is a data URI; the styles are inline and carry no value of a session.
    let policy = format!(
        "default-src 'none'; script-src {}; style-src 'unsafe-inline'; img-src data:; \
         connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
        scripts.join(" ")
    );
    Page { html, policy }
});

pub async fn page() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, PAGE.policy.as_str()),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        PAGE.html.as_str(),
    )
}
