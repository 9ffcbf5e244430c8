//! What a run may record of a secret: nothing. One place decides which header values, URL
//! parts and command-line arguments carry credentials, so that the manifest's settings, its
//! command line and any other record redact them alike (docs/your-service.md, "Secrets").

/// What a recorded secret is replaced by.
pub const REDACTED: &str = "<redacted>";

/// Header (or gRPC metadata) names whose values are credentials whatever the user says:
/// any name containing one of these words, compared case-insensitively.
const CREDENTIAL_WORDS: [&str; 7] = [
    "authorization",
    "cookie",
    "token",
    "secret",
    "key",
    "password",
    "auth",
];

/// Whether `name`'s values are credentials: a built-in credential name, or one the user
/// marked secret (`targets.secret_headers`, `--secret-header`), case-insensitively.
pub fn is_secret_header(name: &str, marked: &[String]) -> bool {
    let lower = name.trim().to_ascii_lowercase();
    CREDENTIAL_WORDS.iter().any(|w| lower.contains(w))
        || marked.iter().any(|m| m.trim().eq_ignore_ascii_case(&lower))
}

/// Whether `value` takes its secret from the environment (`{{env.NAME}}`): then the text as
/// written holds no secret and is kept, so that a resumed run can resolve it again.
fn from_env(value: &str) -> bool {
    super::template::placeholders(value)
        .iter()
        .any(|p| p.starts_with("env."))
}

/// The value of header `name` as a record may hold it: [`REDACTED`] for a secret's literal
/// value, the value itself otherwise.
pub fn header_value(name: &str, value: &str, marked: &[String]) -> String {
    if is_secret_header(name, marked) && !from_env(value) {
        REDACTED.to_string()
    } else {
        value.to_string()
    }
}

/// `url` without credentials: userinfo (`user:password@`) becomes [`REDACTED`]`@`, and the
/// value of a query parameter with a credential name (`?access_token=…`) [`REDACTED`].
/// A path with a query (`/items?api_key=…`) is redacted alike; other text is kept as it is.
pub fn url(url: &str) -> String {
    let (scheme, authority, tail) = match url.find("://") {
        Some(scheme_end) => {
            let (scheme, rest) = url.split_at(scheme_end + 3);
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(authority_end);
            (scheme, authority, tail)
        }
        None => ("", "", url),
    };
    let authority = match authority.rfind('@') {
        Some(at) => format!("{REDACTED}{}", &authority[at..]),
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        None => tail.to_string(),
        Some((path, query_and_fragment)) => {
            let (query, fragment) = match query_and_fragment.split_once('#') {
                Some((q, f)) => (q, Some(f)),
                None => (query_and_fragment, None),
            };
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, value)) => format!("{name}={}", header_value(name, value, &[])),
                    None => pair.to_string(),
                })
                .collect();
            let mut out = format!("{path}?{}", query.join("&"));
            if let Some(f) = fragment {
                out.push('#');
                out.push_str(f);
            }
            out
        }
    };
    format!("{scheme}{authority}{tail}")
}

/// A `NAME: VALUE` header as a record may hold it ([`header_value`]); text without a colon
/// is kept as it is.
pub fn header_line(line: &str, marked: &[String]) -> String {
    match line.split_once(':') {
        Some((name, value)) => {
            let kept = header_value(name, value.trim(), marked);
            if kept == REDACTED {
                format!("{}: {REDACTED}", name.trim())
            } else {
                line.to_string()
            }
        }
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_and_marked_names_are_secret() {
        for name in [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "X-Api-Key",
            "x-auth-token",
        ] {
            assert!(is_secret_header(name, &[]), "{name}");
        }
        assert!(!is_secret_header("X-Tenant", &[]));
        assert!(is_secret_header("X-Tenant", &["x-tenant".to_string()]));
        assert!(!is_secret_header("Accept", &["x-tenant".to_string()]));
    }

    #[test]
    fn literal_values_are_redacted_and_env_placeholders_kept() {
        assert_eq!(
            header_value("Authorization", "Bearer devtoken", &[]),
            REDACTED
        );
        assert_eq!(
            header_value("Authorization", "Bearer {{env.TOKEN}}", &[]),
            "Bearer {{env.TOKEN}}"
        );
        assert_eq!(header_value("Accept", "text/plain", &[]), "text/plain");
        assert_eq!(
            header_line("Authorization: Bearer devtoken", &[]),
            "Authorization: <redacted>"
        );
        assert_eq!(
            header_line("X-Trace:1", &[]),
            "X-Trace:1",
            "a header that is no secret is kept byte for byte"
        );
        assert_eq!(header_line("no colon here", &[]), "no colon here");
    }

    #[test]
    fn urls_lose_userinfo_and_credential_query_values() {
        assert_eq!(
            url("https://alice:hunter2@localhost:8443/items/{{id}}"),
            "https://<redacted>@localhost:8443/items/{{id}}"
        );
        assert_eq!(
            url("https://localhost/x?id=1&access_token=abc#frag"),
            "https://localhost/x?id=1&access_token=<redacted>#frag"
        );
        assert_eq!(
            url("https://localhost/x?api_key={{env.K}}"),
            "https://localhost/x?api_key={{env.K}}"
        );
        assert_eq!(
            url("https://user@host:1/p@q"),
            "https://<redacted>@host:1/p@q",
            "an @ in the path is not userinfo"
        );
        assert_eq!(url("results/run"), "results/run");
        assert_eq!(
            url("/items/{{id}}?token=abc"),
            "/items/{{id}}?token=<redacted>"
        );
        assert_eq!(
            url("a question? no=1"),
            "a question? no=1",
            "text with a '?' but no credential name is kept"
        );
        assert_eq!(url("http://127.0.0.1:9/x"), "http://127.0.0.1:9/x");
    }
}
