//! Reply generation. Every model of the catalog is served by a backend; with nothing
//! configured that is the embedded generator ([`embedded`]), which needs no model server.

pub mod embedded;

/// Name of the embedded backend (the `X-Replica-Backend` header value).
pub const EMBEDDED: &str = "embedded";
