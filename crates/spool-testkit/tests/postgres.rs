//! The PostgreSQL harness against the real server (`scripts/postgres.sh`).

use spool_testkit::postgres::TestDatabase;

#[test]
fn each_test_database_is_its_own_and_goes_when_dropped() {
    let first = TestDatabase::create();
    let second = TestDatabase::create();
    assert_ne!(first.name(), second.name());
    first
        .query("CREATE TABLE mine (n integer); INSERT INTO mine VALUES (7)")
        .unwrap();
    assert_eq!(first.query("SELECT n FROM mine").unwrap(), "7");
    let elsewhere = second.query("SELECT n FROM mine").unwrap_err();
    assert!(elsewhere.contains("does not exist"), "{elsewhere}");
    assert_eq!(
        first.query("SHOW server_version_num").unwrap()[..2],
        *"15",
        "the tests run on PostgreSQL 15"
    );

    let name = first.name().to_owned();
    drop(first);
    let listed = second
        .query(&format!(
            "SELECT count(*) FROM pg_database WHERE datname = '{name}'"
        ))
        .unwrap();
    assert_eq!(listed, "0", "a dropped test database is gone");
}
