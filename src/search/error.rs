//! The index's errors as the crate's [`Error`]: a tantivy error is a 500 whose cause is the
//! [`tantivy::TantivyError`] itself (match it with `Error::cause::<TantivyError>()`).

use tantivy::TantivyError;

use crate::error::Error;

impl From<TantivyError> for Error {
    fn from(e: TantivyError) -> Self {
        Error::caused_by(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    /// A tantivy error is a 500 that keeps the tantivy error, typed, and its text.
    #[test]
    fn a_tantivy_error_keeps_its_typed_cause() {
        let tantivy = || TantivyError::SchemaError("no field body".into());
        let e = Error::from(tantivy());
        assert_eq!((e.code, e.message.as_str()), (Code::Internal, "internal error"));
        assert!(matches!(e.cause::<TantivyError>(), Some(TantivyError::SchemaError(f)) if f == "no field body"));
        assert_eq!(e.cause_text(), Some(tantivy().to_string()));
    }
}
