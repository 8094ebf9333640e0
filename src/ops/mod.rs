//! Operability: what an operator's tooling talks to besides the API. Health and readiness
//! ([`health`]), Prometheus metrics ([`metrics`]), graceful shutdown on signals
//! ([`shutdown`]), the log format ([`logging`]) and the build's identity ([`version`]).

pub mod health;
pub mod logging;
pub mod metrics;
pub mod shutdown;
pub mod version;
