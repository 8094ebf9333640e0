//! The store-wide facts (`tables::META`, `name → bytes`): the schema version ([`super::migrate`])
//! and the facts other modules keep under names of their own (the readiness probe's write, a
//! node's index position, the secrets key check, a pending migration step). Only this module
//! and the migrations open the table.

use std::ops::Range;

use super::kv::{Table, WriteTransaction};
use super::tables;
use crate::error::Result;

/// The facts table, open in a write transaction.
pub struct Meta<'t>(Table<'t, &'static str, &'static [u8]>);

impl<'t> Meta<'t> {
    /// Opens the table in `txn`. Errors: the store's.
    pub fn open(txn: &'t WriteTransaction) -> Result<Meta<'t>> {
        Ok(Meta(txn.open_table(tables::META)?))
    }

    /// The bytes under `name`, if any. Errors: the store's.
    pub fn get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.0.get(name)?.map(|v| v.value().to_vec()))
    }

    /// Puts `value` under `name`. Errors: the store's.
    pub fn put(&mut self, name: &str, value: &[u8]) -> Result<()> {
        self.0.insert(name, value)?;
        Ok(())
    }

    /// Removes `name`; whether it was there. Errors: the store's.
    pub fn remove(&mut self, name: &str) -> Result<bool> {
        Ok(self.0.remove(name)?.is_some())
    }

    /// The facts whose names are in `names`, in name order. Errors: the store's.
    pub fn range(&self, names: Range<&str>) -> Result<Vec<(String, Vec<u8>)>> {
        let rows = self.0.range(names)?;
        rows.map(|row| {
            let (name, value) = row?;
            Ok((name.value().to_string(), value.value().to_vec()))
        })
        .collect()
    }
}
