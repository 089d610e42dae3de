use super::*;

fn guard(listener: &str, origins: &[&str], hosts: &[&str]) -> Guard {
    let rules = AccessRules::new(
        origins.iter().map(|o| o.parse().unwrap()).collect(),
        hosts.iter().map(|h| h.parse().unwrap()).collect(),
    );
    Guard::new(Arc::new(rules), listener.parse().unwrap())
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    map
}

fn get(guard: &Guard, pairs: &[(&str, &str)]) -> Result<(), Refusal> {
    guard.check(
        &Method::GET,
        &Uri::from_static("/v1/threads"),
        &headers(pairs),
    )
}

fn host_ok(guard: &Guard, host: &str) -> bool {
    get(guard, &[("Host", host)]).is_ok()
}

#[test]
fn a_loopback_listener_answers_to_its_address_and_localhost_only() {
    let v4 = guard("127.0.0.1:4501", &[], &[]);
    for host in ["127.0.0.1:4501", "localhost:4501", "LOCALHOST.:4501"] {
        assert!(host_ok(&v4, host), "{host}");
    }
    for host in [
        "attacker.example:4501",
        "localhost:4502",
        "localhost",
        "127.0.0.1",
        "[::1]:4501",
        "10.0.0.1:4501",
        "localhost.attacker.example:4501",
        "",
    ] {
        assert!(!host_ok(&v4, host), "{host}");
    }
    assert_eq!(get(&v4, &[]), Err(Refusal::Host(None)));
    let v6 = guard("[::1]:80", &[], &[]);
    for host in ["[::1]", "[::1]:80", "localhost", "[0:0:0:0:0:0:0:1]:80"] {
        assert!(host_ok(&v6, host), "{host}");
    }
    assert!(!host_ok(&v6, "127.0.0.1:80"));
    // Another loopback address of the family is the listener's own only
    // when bound to it, but 127.0.0.1 is what `localhost` is.
    let other = guard("127.0.0.7:4501", &[], &[]);
    assert!(host_ok(&other, "127.0.0.7:4501"));
    assert!(host_ok(&other, "127.0.0.1:4501"));
    assert!(!host_ok(&other, "127.0.0.8:4501"));
}

#[test]
fn a_wildcard_listener_answers_to_any_ip_literal_with_its_port() {
    let any = guard("0.0.0.0:4501", &[], &["spool.internal"]);
    for host in [
        "10.1.2.3:4501",
        "127.0.0.1:4501",
        "[fe80::1]:4501",
        "localhost:4501",
        "spool.internal:443",
    ] {
        assert!(host_ok(&any, host), "{host}");
    }
    for host in ["10.1.2.3:4502", "attacker.example:4501", "10.1.2.3"] {
        assert!(!host_ok(&any, host), "{host}");
    }
    let one = guard("192.168.1.5:4501", &[], &[]);
    assert!(host_ok(&one, "192.168.1.5:4501"));
    assert!(!host_ok(&one, "localhost:4501"));
    assert!(!host_ok(&one, "127.0.0.1:4501"));
}

#[test]
fn the_request_target_authority_is_checked_like_host() {
    let g = guard("127.0.0.1:4501", &[], &[]);
    let absolute = Uri::from_static("http://attacker.example:4501/v1/threads");
    let refused = g.check(
        &Method::GET,
        &absolute,
        &headers(&[("Host", "127.0.0.1:4501")]),
    );
    assert_eq!(
        refused,
        Err(Refusal::Host(Some("attacker.example:4501".to_owned())))
    );
    let own = Uri::from_static("http://localhost:4501/v1/threads");
    assert!(g.check(&Method::GET, &own, &HeaderMap::new()).is_ok());
    let two = headers(&[
        ("Host", "127.0.0.1:4501"),
        ("Host", "attacker.example:4501"),
    ]);
    assert!(g.check(&Method::GET, &Uri::from_static("/"), &two).is_err());
}

#[test]
fn only_the_listeners_own_origin_and_allowed_ones_pass() {
    let g = guard("127.0.0.1:4501", &["http://app.example:8080"], &[]);
    let with = |host: &str, origin: &str| get(&g, &[("Host", host), ("Origin", origin)]);
    // Same origin, as the client addressed the listener.
    assert!(with("127.0.0.1:4501", "http://127.0.0.1:4501").is_ok());
    assert!(with("localhost:4501", "http://LocalHost:4501").is_ok());
    assert!(with("127.0.0.1:4501", "http://app.example:8080").is_ok());
    for origin in [
        "https://evil.example",
        "null",
        "http://localhost:4501",
        "https://127.0.0.1:4501",
        "http://127.0.0.1:4502",
        "http://app.example:8081",
        "https://app.example:8080",
        "http://app.example",
        "not an origin",
    ] {
        assert_eq!(
            with("127.0.0.1:4501", origin),
            Err(Refusal::Origin(origin.to_owned())),
            "{origin}"
        );
    }
    // The allowed origin's host may be addressed (through a proxy).
    assert!(with("app.example:8080", "http://app.example:8080").is_ok());
    assert!(with("app.example", "http://app.example:8080").is_ok());
    // Every Origin header must pass.
    let two = [
        ("Host", "127.0.0.1:4501"),
        ("Origin", "http://app.example:8080"),
        ("Origin", "https://evil.example"),
    ];
    assert!(get(&g, &two).is_err());
}

#[test]
fn a_state_change_needs_a_json_content_type() {
    let g = guard("127.0.0.1:4501", &[], &[]);
    let post = |pairs: &[(&str, &str)]| {
        let mut all = vec![("Host", "127.0.0.1:4501")];
        all.extend_from_slice(pairs);
        g.check(
            &Method::POST,
            &Uri::from_static("/v1/threads"),
            &headers(&all),
        )
    };
    for json in [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        " application/json ;charset=UTF-8",
    ] {
        assert!(post(&[("Content-Type", json)]).is_ok(), "{json}");
    }
    for other in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        "application/json-seq",
        "",
    ] {
        assert_eq!(
            post(&[("Content-Type", other)]),
            Err(Refusal::MediaType(Some(other.to_owned()))),
            "{other}"
        );
    }
    assert_eq!(post(&[]), Err(Refusal::MediaType(None)));
    let two = [
        ("Content-Type", "application/json"),
        ("Content-Type", "text/plain"),
    ];
    assert!(post(&two).is_err());
    for method in [Method::PUT, Method::PATCH, Method::DELETE] {
        let refused = g.check(
            &method,
            &Uri::from_static("/"),
            &headers(&[("Host", "127.0.0.1:4501")]),
        );
        assert_eq!(refused, Err(Refusal::MediaType(None)), "{method}");
    }
    assert!(get(&g, &[("Host", "127.0.0.1:4501")]).is_ok());
}

#[test]
fn the_checks_run_in_order_host_origin_media_type() {
    let g = guard("127.0.0.1:4501", &[], &[]);
    let all = headers(&[
        ("Host", "attacker.example:4501"),
        ("Origin", "https://evil.example"),
        ("Content-Type", "text/plain"),
    ]);
    let uri = Uri::from_static("/v1/threads");
    assert!(matches!(
        g.check(&Method::POST, &uri, &all),
        Err(Refusal::Host(_))
    ));
    let foreign = headers(&[
        ("Host", "127.0.0.1:4501"),
        ("Origin", "https://evil.example"),
        ("Content-Type", "text/plain"),
    ]);
    assert!(matches!(
        g.check(&Method::POST, &uri, &foreign),
        Err(Refusal::Origin(_))
    ));
}

#[test]
fn refusals_name_what_was_refused_and_how_to_let_it_in() {
    let origin = Refusal::Origin("https://evil.example".to_owned()).into_error();
    assert_eq!(origin.status, StatusCode::FORBIDDEN);
    assert!(origin.message.contains("\"https://evil.example\""));
    assert!(origin.message.contains("--allow-origin"));
    let host = Refusal::Host(Some("attacker.example:1".to_owned())).into_error();
    assert_eq!(host.status, StatusCode::MISDIRECTED_REQUEST);
    assert!(host.message.contains("--allow-host"));
    let media = Refusal::MediaType(None).into_error();
    assert_eq!(media.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(media.message.contains("application/json"));
    let long = shown("x".repeat(1000).as_bytes());
    assert!(long.chars().count() <= 201, "{}", long.len());
}
