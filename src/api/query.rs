//! Query strings read into types. An operation's query is a struct deriving serde's
//! `Deserialize` and schemars' `JsonSchema`: [`read`] fills it from the request's query pairs,
//! and the operation's row (`Op::query_of`) documents one parameter per field, the field's doc
//! comment as the parameter's description and the field's type as its schema. What a handler
//! accepts and what the document says come from one type.
//!
//! How the pairs are read:
//! - a parameter given twice is read from its last value, but a list (`Vec<…>`) takes every
//!   value, each split at commas (`tags=a,b&tags=c`); `name[]` is read as `name`;
//! - an integer may be written with a zero fractional part (`24.0`): clients generated from a
//!   document typing the parameter `number` send it so; `1.5` is refused like any non-integer;
//! - an optional parameter given empty (`search=`) is absent;
//! - a parameter the type does not name is ignored.
//!
//! A value the type refuses is 400 `INVALID_QUERY` naming the parameter. The value types of
//! this module say their own limits in the document: [`Int`] (a range and a default) and
//! [`OneOf`] (a set of names).

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::value::{Error as ValueError, MapDeserializer, SeqDeserializer, StrDeserializer};
use serde::de::{self, DeserializeOwned, Deserializer, IntoDeserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::error::{Code, Error, Result};
use crate::http::request::Req;

/// The query of `req` as `T`; 400 `INVALID_QUERY` naming the parameter `T` refuses.
pub fn read<T: DeserializeOwned>(req: &Req) -> Result<T> {
    from_pairs(&req.query)
}

/// The query pairs `pairs` (decoded, in order) as `T`, as [`read`].
fn from_pairs<T: DeserializeOwned>(pairs: &[(String, String)]) -> Result<T> {
    let mut names: Vec<(&str, Values)> = Vec::new();
    for (name, value) in pairs {
        let name = name.strip_suffix("[]").unwrap_or(name);
        match names.iter_mut().find(|(n, _)| *n == name) {
            Some((_, values)) => values.0.push(value),
            None => names.push((name, Values(vec![value]))),
        }
    }
    serde_path_to_error::deserialize(MapDeserializer::<_, ValueError>::new(names.into_iter()))
        .map_err(|e| Error::new(Code::InvalidQuery, format!("query parameter {}: {}", e.path(), e.inner())))
}

/// The values of one query parameter, in the order given.
struct Values<'a>(Vec<&'a str>);

impl<'a> Values<'a> {
    fn last(&self) -> &'a str {
        self.0.last().copied().unwrap_or_default()
    }
}

impl<'de> IntoDeserializer<'de, ValueError> for Values<'_> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for Values<'_> {
    type Error = ValueError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, ValueError> {
        visitor.visit_str(self.last())
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, ValueError> {
        if self.last().is_empty() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> std::result::Result<V::Value, ValueError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, ValueError> {
        let items = self.0.iter().flat_map(|v| v.split(',')).map(str::trim).filter(|s| !s.is_empty());
        let mut seq = SeqDeserializer::new(items.map(|item| Values(vec![item])));
        let value = visitor.visit_seq(&mut seq)?;
        seq.end()?;
        Ok(value)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, ValueError> {
        match self.last() {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            _ => Err(de::Error::custom("must be true or false")),
        }
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, ValueError> {
        let value = integer(self.last()).ok_or_else(|| de::Error::custom("must be a non-negative integer"))?;
        visitor.visit_u64(value)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> std::result::Result<V::Value, ValueError> {
        StrDeserializer::<ValueError>::new(self.last()).deserialize_enum(name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u8 u16 u32 u128 f32 f64 char str string bytes byte_buf unit unit_struct
        tuple tuple_struct map struct identifier ignored_any
    }
}

/// `raw` as a non-negative integer; an integral number with a zero fractional part (`24.00`)
/// is that integer.
fn integer(raw: &str) -> Option<u64> {
    let integral = match raw.split_once('.') {
        Some((int, frac)) if !frac.is_empty() && frac.bytes().all(|b| b == b'0') => int,
        Some(_) => return None,
        None => raw,
    };
    integral.parse().ok()
}

/// An integer parameter in `MIN..=MAX`, `DEFAULT` when absent (the struct's `#[serde(default)]`).
/// Its schema: `{type: integer, minimum: MIN, maximum: MAX, default: DEFAULT}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Int<const MIN: u64, const MAX: u64, const DEFAULT: u64>(pub u64);

impl<const MIN: u64, const MAX: u64, const DEFAULT: u64> Int<MIN, MAX, DEFAULT> {
    /// The value as a count of items.
    pub fn get(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl<const MIN: u64, const MAX: u64, const DEFAULT: u64> Default for Int<MIN, MAX, DEFAULT> {
    fn default() -> Self {
        Int(DEFAULT)
    }
}

impl<'de, const MIN: u64, const MAX: u64, const DEFAULT: u64> Deserialize<'de> for Int<MIN, MAX, DEFAULT> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let refused = || de::Error::custom(format!("must be an integer in {MIN}..={MAX}"));
        let value = u64::deserialize(d).map_err(|_| refused())?;
        if (MIN..=MAX).contains(&value) {
            Ok(Int(value))
        } else {
            Err(refused())
        }
    }
}

impl<const MIN: u64, const MAX: u64, const DEFAULT: u64> Serialize for Int<MIN, MAX, DEFAULT> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<const MIN: u64, const MAX: u64, const DEFAULT: u64> JsonSchema for Int<MIN, MAX, DEFAULT> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("Int{MIN}to{MAX}").into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "integer", "minimum": MIN, "maximum": MAX, "default": DEFAULT })
    }
}

/// A text parameter of at least `MIN` characters; its schema is `{type: string, minLength: MIN}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text<const MIN: u64>(pub String);

impl<'de, const MIN: u64> Deserialize<'de> for Text<MIN> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text.chars().count() as u64 >= MIN {
            Ok(Text(text))
        } else {
            Err(de::Error::custom(format!("must be at least {MIN} characters")))
        }
    }
}

impl<const MIN: u64> JsonSchema for Text<MIN> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("Text{MIN}").into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "minLength": MIN })
    }
}

/// A value written as one of a set of names on the wire (an order, a status, a channel).
pub trait Named: Sized + Copy + PartialEq + 'static {
    /// Every name a parameter of this type accepts and the value it stands for, in the
    /// document's order.
    fn table() -> Vec<(String, Self)>;

    /// Every name, in the document's order.
    fn names() -> Vec<String> {
        Self::table().into_iter().map(|(name, _)| name).collect()
    }
    /// The value a name stands for; `None` for a name outside the table.
    fn parse(name: &str) -> Option<Self> {
        Self::table().into_iter().find(|(n, _)| n == name).map(|(_, value)| value)
    }
    /// The value's name.
    fn name(&self) -> String {
        Self::table().into_iter().find(|(_, value)| value == self).map(|(name, _)| name).unwrap_or_default()
    }
}

/// The table of a type whose names parse with `parse`.
pub fn table_of<T>(names: &[&str], parse: fn(&str) -> Option<T>) -> Vec<(String, T)> {
    names.iter().filter_map(|n| parse(n).map(|value| (n.to_string(), value))).collect()
}

/// A parameter that is one of `T`'s names; its schema is `{type: string, enum: T::names()}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OneOf<T>(pub T);

impl<'de, T: Named> Deserialize<'de> for OneOf<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = Cow::<str>::deserialize(d)?;
        T::parse(&name).map(OneOf).ok_or_else(|| de::Error::custom(format!("must be one of {}", T::names().join(", "))))
    }
}

impl<T: Named> Serialize for OneOf<T> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.name())
    }
}

impl<T: Named> JsonSchema for OneOf<T> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("OneOf{}", std::any::type_name::<T>()).into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "enum": T::names() })
    }
}

/// The direction of a list's order (`sortOrder`): `asc` or `desc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortOrder {
    Asc,
    #[default]
    Desc,
}

impl SortOrder {
    /// Whether the order is descending.
    pub fn descending(self) -> bool {
        self == SortOrder::Desc
    }
}

impl Named for SortOrder {
    fn table() -> Vec<(String, Self)> {
        vec![("asc".into(), SortOrder::Asc), ("desc".into(), SortOrder::Desc)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::derived::parameters;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema, Default, Debug)]
    #[serde(default, rename_all = "camelCase")]
    struct Params {
        /// Items per page.
        page_size: Int<1, 100, 24>,
        /// Only these orders.
        orders: Vec<OneOf<SortOrder>>,
        /// Only this order.
        order: Option<OneOf<SortOrder>>,
        /// A word.
        word: Option<Text<3>>,
        /// Older name.
        #[schemars(extend("deprecated" = true))]
        flag: Option<bool>,
    }

    fn pairs(query: &str) -> Vec<(String, String)> {
        crate::http::request::parse_query(Some(query))
    }

    fn refused(query: &str) -> String {
        from_pairs::<Params>(&pairs(query)).expect_err(query).to_string()
    }

    #[test]
    fn defaults_last_values_and_lists_are_read() {
        let p: Params = from_pairs(&pairs("")).unwrap();
        assert_eq!((p.page_size, p.orders.len(), p.order, p.word, p.flag), (Int(24), 0, None, None, None));
        let p: Params =
            from_pairs(&pairs("pageSize=5&pageSize=7.00&orders=asc,desc&orders[]=asc&order=asc&order=desc&x=1"))
                .unwrap();
        assert_eq!(p.page_size, Int(7));
        assert_eq!(p.orders, [OneOf(SortOrder::Asc), OneOf(SortOrder::Desc), OneOf(SortOrder::Asc)]);
        assert_eq!(p.order, Some(OneOf(SortOrder::Desc)));
        let p: Params = from_pairs(&pairs("word=&order=&flag=true")).unwrap();
        assert_eq!((p.word, p.order, p.flag), (None, None, Some(true)), "an empty optional value is absent");
    }

    #[test]
    fn a_refused_value_names_its_parameter_and_the_rule() {
        for (query, says) in [
            ("pageSize=0", "pageSize: must be an integer in 1..=100"),
            ("pageSize=101", "pageSize: must be an integer in 1..=100"),
            ("pageSize=1.5", "pageSize: must be an integer in 1..=100"),
            ("pageSize=-1", "pageSize: must be an integer in 1..=100"),
            ("order=up", "order: must be one of asc, desc"),
            ("orders=asc,up", "orders[1]: must be one of asc, desc"),
            ("word=ab", "word: must be at least 3 characters"),
            ("flag=yes", "flag: must be true or false"),
        ] {
            let message = refused(query);
            assert!(message.contains(says), "{query}: {message}");
        }
    }

    #[test]
    fn the_document_gives_one_parameter_per_field_with_its_rules() {
        let p = parameters::<Params>();
        let names: Vec<&str> = p.iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["pageSize", "orders", "order", "word", "flag"]);
        assert_eq!(
            p[0],
            json!({ "name": "pageSize", "in": "query", "required": false, "description": "Items per page.",
                "schema": { "type": "integer", "minimum": 1, "maximum": 100, "default": 24 } })
        );
        assert_eq!((&p[1]["style"], &p[1]["explode"]), (&json!("form"), &json!(true)));
        assert_eq!(p[1]["schema"]["items"], json!({ "type": "string", "enum": ["asc", "desc"] }));
        assert_eq!(p[2]["schema"], json!({ "type": "string", "enum": ["asc", "desc"] }), "no null offered");
        assert_eq!(p[3]["schema"], json!({ "type": "string", "minLength": 3 }));
        assert_eq!((&p[4]["deprecated"], &p[4]["schema"]), (&json!(true), &json!({ "type": "boolean" })));
    }
}
