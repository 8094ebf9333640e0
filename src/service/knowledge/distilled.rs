//! `distilledKnowledge` of a replica (docs/decisions.md "Replicas"): a short text saying what its
//! knowledge base covers, and the counts behind it. Read from the summary kept at write time
//! (`store::kb::summary`), in the read transaction of the replica views
//! (`service::replicas::view_parts`).

use uuid::Uuid;

use crate::error::Result;
use crate::store::kb::summary as kb_summary;
use crate::store::kv::ReadableTable;

/// Titles named in the text; the rest are counted ("… and 7 more").
const TEXT_TITLES: usize = 10;

/// What a replica's knowledge base holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Distilled {
    /// Number of entries, whatever their status.
    pub entries: u64,
    /// Titles (given, else generated) of the first [`crate::store::kb::summary::MAX_TITLES`] entries that have one.
    pub titles: Vec<String>,
}

impl Distilled {
    /// The text of `distilledKnowledge`: `""` for an empty knowledge base, else e.g.
    /// `"3 knowledge-base entries: Pricing; Opening hours; Returns."`.
    pub fn text(&self) -> String {
        if self.entries == 0 {
            return String::new();
        }
        let noun = if self.entries == 1 { "entry" } else { "entries" };
        let named: Vec<&str> = self.titles.iter().take(TEXT_TITLES).map(String::as_str).collect();
        if named.is_empty() {
            return format!("{} knowledge-base {noun}, untitled.", self.entries);
        }
        let rest = self.entries - named.len() as u64;
        let more = if rest > 0 { format!(" and {rest} more") } else { String::new() };
        format!("{} knowledge-base {noun}: {}{more}.", self.entries, named.join("; "))
    }
}

/// [`Distilled`] of `replica`, read in `summaries` (`replica_kbsummary`): one lookup of the
/// summary kept at write time (`store::kb::summary`).
pub fn distilled_in(
    summaries: &kb_summary::Summaries<impl ReadableTable<u128, &'static [u8]>>,
    replica: Uuid,
) -> Result<Distilled> {
    let s = summaries.get(replica)?;
    Ok(Distilled { entries: s.entries, titles: s.titles.into_iter().map(|(_, t)| t).collect() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_the_first_titles_and_counts_the_rest() {
        assert_eq!(Distilled::default().text(), "");
        let one = Distilled { entries: 1, titles: vec!["Pricing".into()] };
        assert_eq!(one.text(), "1 knowledge-base entry: Pricing.");
        let titles: Vec<String> = (1..=12).map(|i| format!("T{i}")).collect();
        let many = Distilled { entries: 13, titles };
        assert_eq!(many.text(), "13 knowledge-base entries: T1; T2; T3; T4; T5; T6; T7; T8; T9; T10 and 3 more.");
        assert_eq!(Distilled { entries: 2, titles: vec![] }.text(), "2 knowledge-base entries, untitled.");
    }
}
