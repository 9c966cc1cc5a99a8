//! `GET /`: the fleet as a page, one HTML file with its style and script built into the binary
//! (nothing to build at install, nothing fetched from elsewhere). It reads `GET /fleet`, the
//! route `status --fleet` reads, so it shows nothing that route does not; its policy lets it
//! load nothing and call nothing off this daemon, and no other site frame it.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;

/// The page with uPlot (`vendor/uplot`, its version in `VENDORED.md`) in its place.
static PAGE: LazyLock<String> = LazyLock::new(|| {
    let uplot = concat!(
        "<style>",
        include_str!("vendor/uplot/uPlot.min.css"),
        "</style>\n<script>",
        include_str!("vendor/uplot/uPlot.iife.min.js"),
        "</script>"
    );
    include_str!("page.html").replacen("<!-- uPlot -->", uplot, 1)
});

/// The script and style are inline and set every value as text; the favicon is a data URI.
const POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                      img-src data:; connect-src 'self'; form-action 'none'; base-uri 'none'; \
                      frame-ancestors 'none'";

pub async fn page() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        PAGE.as_str(),
    )
}
