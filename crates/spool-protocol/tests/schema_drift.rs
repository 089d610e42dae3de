//! Fails when the committed `schema/` differs from what the code generates.
//! Set SPOOL_UPDATE_SCHEMA=1 to rewrite the files instead.

use std::collections::BTreeSet;
use std::path::PathBuf;

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schema")
}

#[test]
fn schema_matches_committed_files() {
    let dir = schema_dir();
    let update = std::env::var_os("SPOOL_UPDATE_SCHEMA").is_some();
    let mut expected = BTreeSet::new();
    let mut drifted = Vec::new();
    for (stem, schema) in spool_protocol::schema::all_schemas() {
        let file = format!("{stem}.json");
        let text = spool_protocol::schema::render(&schema);
        let path = dir.join(&file);
        expected.insert(file.clone());
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            drifted.push(file);
        }
    }
    let mut stale = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("schema/ exists") {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".json") && !expected.contains(&name) {
            if update {
                std::fs::remove_file(dir.join(&name)).unwrap();
            } else {
                stale.push(name);
            }
        }
    }
    assert!(
        drifted.is_empty() && stale.is_empty(),
        "schema/ drifted from the code: changed or missing {drifted:?}, no longer generated {stale:?}. \
         Run `SPOOL_UPDATE_SCHEMA=1 cargo nextest run -p spool-protocol schema` and commit the result."
    );
}

#[test]
fn every_schema_compiles_as_json_schema() {
    for (stem, schema) in spool_protocol::schema::all_schemas() {
        jsonschema::validator_for(&schema)
            .unwrap_or_else(|e| panic!("schema {stem} does not compile: {e}"));
    }
}
