//! Fails when the committed `schema/http/openapi.json` differs from what the
//! code generates. Set SPOOL_UPDATE_SCHEMA=1 to rewrite it instead.

use std::path::PathBuf;

#[test]
fn openapi_matches_the_committed_document() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schema/http/openapi.json");
    let text = spool_server::openapi::render();
    if std::env::var_os("SPOOL_UPDATE_SCHEMA").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "schema/http/openapi.json drifted from the code. Run \
         `SPOOL_UPDATE_SCHEMA=1 cargo nextest run -p spool-server openapi` and commit the result."
    );
}

#[test]
fn the_openapi_document_is_valid_json_with_every_route() {
    let doc = spool_server::openapi::openapi();
    assert_eq!(doc["openapi"], "3.1.0");
    for (method, path) in spool_server::openapi::routes() {
        assert!(doc["paths"][path][method].is_object(), "{method} {path}");
    }
    // Every $ref points at a component.
    let text = doc.to_string();
    for piece in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = piece.split('"').next().unwrap();
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "dangling $ref {name}"
        );
    }
}
