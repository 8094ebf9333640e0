//! The store's errors: redb's, classified by what they mean for a request, and their
//! conversion into the crate's [`Error`].
//!
//! Every redb error a store operation meets (`?` on redb's `StorageError`, `DatabaseError`,
//! `TransactionError`, `TableError`, `CommitError`, `SetDurabilityError` or `redb::Error`) becomes
//! a [`StoreError`] that keeps it (as a [`redb::Error`], whose text is the original's) and says
//! which of three cases it is: the filesystem is full ([`StoreError::Full`], a 507), the handle is
//! latched ([`StoreError::Latched`], a 500 that a reopened handle cures: `handle` retries a read
//! that met it), or anything else ([`StoreError::Redb`], a 500). The [`Error`] made of it carries
//! the [`StoreError`] as its cause, so code tells these apart by type
//! (`Error::cause::<StoreError>()`), not by text.

use std::io;

use crate::error::{Code, Error};

/// A redb error, classified (see the module documentation). Its text is redb's.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An I/O error of kind [`io::ErrorKind::StorageFull`] (ENOSPC): the write was not made.
    #[error(transparent)]
    Full(redb::Error),
    /// redb's `PreviousIo` (the handle latched by a failed write) or `DatabaseClosed` (a read
    /// begun on the handle a reopen closed): the handle must be reopened, and then serves again.
    #[error(transparent)]
    Latched(redb::Error),
    /// Any other redb error.
    #[error(transparent)]
    Redb(redb::Error),
}

/// The caller-facing message of a [`StoreError::Latched`] 500.
pub const LATCHED_MESSAGE: &str = "the store is being reopened after a failed write";

impl From<redb::Error> for StoreError {
    fn from(e: redb::Error) -> Self {
        match &e {
            redb::Error::Io(io) if io.kind() == io::ErrorKind::StorageFull => StoreError::Full(e),
            redb::Error::PreviousIo | redb::Error::DatabaseClosed => StoreError::Latched(e),
            _ => StoreError::Redb(e),
        }
    }
}

/// `From` each of redb's error types, through [`redb::Error`] (redb's own conversion keeps the
/// variant and its text).
macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError::from(redb::Error::from(e))
            }
        }

        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                Error::from(StoreError::from(e))
            }
        }
    )*};
}

from_redb!(
    redb::StorageError,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::CommitError,
    redb::SetDurabilityError
);

impl From<redb::Error> for Error {
    fn from(e: redb::Error) -> Self {
        Error::from(StoreError::from(e))
    }
}

/// [`StoreError::Full`] is a 507, [`StoreError::Latched`] a 500 saying the store is being
/// reopened, [`StoreError::Redb`] a plain 500; the [`StoreError`] is the cause.
impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Full(_) => Error::insufficient_storage().with_cause(e),
            StoreError::Latched(_) => Error::new(Code::Internal, LATCHED_MESSAGE).with_cause(e),
            StoreError::Redb(_) => Error::caused_by(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use redb::StorageError;

    use super::*;

    /// ENOSPC met by redb is a 507 whose cause is a [`StoreError::Full`] with redb's text.
    #[test]
    fn a_full_disk_met_by_redb_is_507() {
        let full = || StorageError::Io(io::Error::new(io::ErrorKind::StorageFull, "no space left on device"));
        let e = Error::from(redb::CommitError::Storage(full()));
        assert_eq!(e.code, Code::InsufficientStorage);
        assert!(matches!(e.cause::<StoreError>(), Some(StoreError::Full(redb::Error::Io(_)))));
        assert_eq!(e.cause_text(), Some(full().to_string()));
    }

    /// Any other redb error is a plain 500 keeping redb's error and text.
    #[test]
    fn another_redb_error_is_a_plain_500() {
        let e = Error::from(redb::TableError::TableDoesNotExist("rows".into()));
        assert_eq!((e.code, e.message.as_str()), (Code::Internal, "internal error"));
        assert!(
            matches!(e.cause::<StoreError>(), Some(StoreError::Redb(redb::Error::TableDoesNotExist(t))) if t == "rows")
        );
        assert_eq!(e.cause_text().as_deref(), Some("Table 'rows' does not exist"));

        let denied = Error::from(StorageError::Io(io::Error::new(io::ErrorKind::PermissionDenied, "denied")));
        assert_eq!(denied.code, Code::Internal);
        assert!(matches!(denied.cause::<StoreError>(), Some(StoreError::Redb(_))));
    }
}
