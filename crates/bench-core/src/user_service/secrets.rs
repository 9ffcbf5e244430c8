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

/// Whether `value` takes its secret from the environment (`{{env.NAME}}`): then only its
/// literal text can hold a secret ([`header_value`]).
fn from_env(value: &str) -> bool {
    super::template::placeholders(value)
        .iter()
        .any(|p| p.starts_with("env."))
}

/// Authentication schemes (RFC 9110 `auth-scheme`, IANA's registry and two common ones) that
/// may open a secret value as literal text: `Bearer {{env.TOKEN}}` holds no secret as written.
const AUTH_SCHEMES: [&str; 8] = [
    "basic",
    "bearer",
    "digest",
    "dpop",
    "negotiate",
    "oauth",
    "token",
    "apikey",
];

/// The literal text of a secret value that takes its secret from the environment: kept when it
/// can hold no secret (white space, or an authentication scheme and the space after it at the
/// start), [`REDACTED`] otherwise.
fn literal_part(text: &str, first: bool) -> &str {
    let scheme = text.trim_end();
    if scheme.is_empty()
        || (first
            && text.len() > scheme.len()
            && AUTH_SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme)))
    {
        text
    } else {
        REDACTED
    }
}

/// The value of header `name` as a record may hold it: the value itself for a header that is
/// no secret; for a secret, [`REDACTED`] for a literal value, and for one that takes its secret
/// from the environment, its placeholders as written (so that a resumed run resolves them
/// again) with any literal text beside them that could be a secret (anything but white space
/// and a leading authentication scheme, `Bearer `) replaced by [`REDACTED`]:
/// `{{env.USER}}:hunter2` is recorded as `{{env.USER}}<redacted>`.
pub fn header_value(name: &str, value: &str, marked: &[String]) -> String {
    if !is_secret_header(name, marked) {
        return value.to_string();
    }
    if !from_env(value) {
        return REDACTED.to_string();
    }
    let mut out = String::new();
    let mut rest = value;
    let mut first = true;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open + 2..].find("}}") else {
            break;
        };
        let end = open + 2 + close + 2;
        if open > 0 {
            out.push_str(literal_part(&rest[..open], first));
        }
        out.push_str(&rest[open..end]);
        rest = &rest[end..];
        first = false;
    }
    if !rest.is_empty() {
        out.push_str(literal_part(rest, first));
    }
    out
}

/// How a request body (a REST body template, a gRPC request's JSON template) opens as a
/// record holds it when bodies are not recorded ([`body`]).
pub const BODY_PREFIX: &str = "<redacted body: ";

/// A request body as a record holds it unless the run records bodies (`record_bodies`): its
/// size and the first 16 hex digits of its SHA-256, never its text, since a body can hold a
/// password or a token as well as a header can (`<redacted body: 27 bytes, sha256
/// 5f3a…>`). The hash tells two runs' bodies apart without showing either.
pub fn body(text: &str) -> String {
    let hash = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .expect("a TLS 1.3 suite")
        .common
        .hash_provider
        .hash(text.as_bytes());
    let hex: String = hash.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{BODY_PREFIX}{} bytes, sha256 {hex}>", text.len())
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
            if kept == value.trim() {
                line.to_string()
            } else {
                format!("{}: {kept}", name.trim())
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
            header_value("Authorization", "{{env.TOKEN}}", &[]),
            "{{env.TOKEN}}"
        );
        assert_eq!(
            header_value("Authorization", "bearer  {{ env.TOKEN }}", &[]),
            "bearer  {{ env.TOKEN }}"
        );
        assert_eq!(
            header_line("Authorization: Bearer {{env.TOKEN}}", &[]),
            "Authorization: Bearer {{env.TOKEN}}"
        );
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
    fn a_literal_secret_beside_an_env_placeholder_is_redacted_and_the_placeholder_kept() {
        assert_eq!(
            header_value("Authorization", "{{env.USER}}:hunter2", &[]),
            "{{env.USER}}<redacted>"
        );
        assert_eq!(
            header_value("X-Api-Key", "hunter2{{env.K}}", &[]),
            "<redacted>{{env.K}}"
        );
        assert_eq!(
            header_value("Authorization", "Bearer hunter2 {{env.K}}", &[]),
            "<redacted>{{env.K}}",
            "a scheme is kept only when the placeholder follows it"
        );
        assert_eq!(
            header_value("Cookie", "a={{env.A}}; b=hunter2", &[]),
            "<redacted>{{env.A}}<redacted>"
        );
        assert_eq!(
            header_value(
                "X-Tenant",
                "{{id}}-hunter2 {{env.T}}",
                &["x-tenant".to_string()]
            ),
            "{{id}}<redacted>{{env.T}}",
            "a marked header alike; every placeholder is kept"
        );
        assert_eq!(
            header_line("Authorization: {{env.USER}}:hunter2", &[]),
            "Authorization: {{env.USER}}<redacted>"
        );
        for v in ["Bearer{{env.K}}", "Bearerx {{env.K}}"] {
            assert!(
                header_value("Authorization", v, &[]).starts_with(REDACTED),
                "{v}: not a scheme and a space"
            );
        }
    }

    #[test]
    fn a_body_is_recorded_as_its_size_and_hash() {
        assert_eq!(
            body("abc"),
            "<redacted body: 3 bytes, sha256 ba7816bf8f01cfea>",
            "SHA-256(\"abc\") begins ba7816bf8f01cfea"
        );
        assert_ne!(body("{\"password\":\"a\"}"), body("{\"password\":\"b\"}"));
        assert!(!body("{\"password\":\"hunter2\"}").contains("hunter2"));
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
