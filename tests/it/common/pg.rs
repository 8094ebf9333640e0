//! The PostgreSQL server of `.ci/install-postgres` (`REPLICAD_TEST_POSTGRES`): a fresh database
//! per use, and the engine the servers of this run keep their tables in
//! (`REPLICAD_TEST_STORE`).

use postgres::{Client, NoTls};

/// The server of `.ci/install-postgres`; fails (never skips) without it.
pub fn server_url() -> String {
    std::env::var("REPLICAD_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!(
            "REPLICAD_TEST_POSTGRES is not set: run `eval \"$(bash .ci/install-postgres)\"` \
             (bash .ci/run does) and run the tests again"
        )
    })
}

/// A new, empty database on the test server; its URL. (On a thread of its own: the
/// synchronous client runs a runtime of its own, which cannot start inside a test's.)
pub fn fresh_database() -> String {
    std::thread::spawn(create_database).join().expect("creating a test database")
}

/// Runs `f` with a client of the database at `url`, on a thread of its own (see
/// [`fresh_database`]).
pub fn with_client<R: Send>(url: &str, f: impl FnOnce(&mut Client) -> R + Send) -> R {
    std::thread::scope(|s| {
        s.spawn(|| f(&mut Client::connect(url, NoTls).expect("the test server answers"))).join().expect("client")
    })
}

fn create_database() -> String {
    let url = server_url();
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    let mut admin = Client::connect(&url, NoTls).expect("the test server answers");
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    let (base, _) = url.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}

/// The `--store` of a new data directory: a fresh database when this run keeps the tables in
/// PostgreSQL (`REPLICAD_TEST_STORE=postgres`), else `None` (redb, the default;
/// `REPLICAD_TEST_STORE` unset or `redb`).
pub fn store_for_new_dir() -> Option<String> {
    match std::env::var("REPLICAD_TEST_STORE").as_deref() {
        Err(_) | Ok("redb") => None,
        Ok("postgres") => Some(fresh_database()),
        Ok(other) => panic!("REPLICAD_TEST_STORE={other}: expected redb or postgres"),
    }
}
