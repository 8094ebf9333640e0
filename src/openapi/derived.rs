//! Schemas derived from the Rust types that parse the request bodies and serialize the answers
//! (schemars' `JsonSchema`): a body's schema is its type as serde deserializes it, an answer's is
//! its view as serde serializes it. A type's name in `components.schemas` is its schema name
//! (`#[schemars(rename = "…")]`), and a type that names another refers to it there.
//!
//! The conventions of the document, applied to every derived schema:
//! - an answer object is closed (`additionalProperties: false`): the document lists every field
//!   the server sends;
//! - a request object is closed only where serde rejects unknown fields (`deny_unknown_fields`),
//!   open where the server ignores them;
//! - a success answer lists `success: true` first ([`Reply::ok`](crate::http::response::Reply::ok)
//!   writes it before the view's fields);
//! - an optional field (one serde may leave out) does not offer `null`: an answer leaves it out
//!   rather than writing `null`, and a client says "none" by leaving it out;
//! - a struct's or an enum's own doc comment is Rust documentation, not the wire's: only the
//!   fields' doc comments become `description`s, their lines joined (an inlined struct says
//!   `#[schemars(inline, description = "")]` for the same reason);
//! - unsigned integers carry `minimum: 0` and no format (OpenAPI names no `uint64`).
//!
//! A name read in a body and written in an answer must have one schema (else building the
//! document panics, which every test that builds it shows).

use std::borrow::Cow;

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema};
use serde_json::{json, Map, Value};

/// Collects the derived schemas of the document.
pub struct Derived {
    requests: SchemaGenerator,
    answers: SchemaGenerator,
    /// The success answers (they get `success: true`, once however often they are added): the
    /// schema name of the type, and the name of the answer when it is not that one.
    successes: Vec<(String, Option<&'static str>)>,
}

/// The settings of every derived schema: the conventions above.
fn settings() -> SchemaSettings {
    SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .with_transform(RecursiveTransform(unwrap_description))
        .with_transform(RecursiveTransform(optional_not_null))
        .with_transform(RecursiveTransform(standard_format))
}

impl Default for Derived {
    fn default() -> Self {
        Derived {
            requests: settings().for_deserialize().into_generator(),
            answers: settings().for_serialize().with_transform(RecursiveTransform(close)).into_generator(),
            successes: Vec::new(),
        }
    }
}

impl Derived {
    /// Adds the request body `T` (as deserialized) and every type it names.
    pub fn request<T: JsonSchema>(&mut self) -> &mut Self {
        self.requests.subschema_for::<T>();
        self
    }

    /// Adds the success answer `T` (as serialized, with `success: true`) and every type it names.
    pub fn answer<T: JsonSchema>(&mut self) -> &mut Self {
        self.answers.subschema_for::<T>();
        self.successes.push((T::schema_name().into_owned(), None));
        self
    }

    /// Adds the success answer `name`: `T` (as serialized) with `success: true`. `T` keeps its own
    /// name too when another schema refers to it (a replica read alone, and an item of the
    /// replica list), and for a generic type (`Page<T>`) that names each use.
    pub fn answer_as<T: JsonSchema>(&mut self, name: &'static str) -> &mut Self {
        self.answers.subschema_for::<T>();
        self.successes.push((T::schema_name().into_owned(), Some(name)));
        self
    }

    /// Adds `T` as it is serialized inside answers (an item of a list, an object of a field), and
    /// every type it names.
    pub fn part<T: JsonSchema>(&mut self) -> &mut Self {
        self.answers.subschema_for::<T>();
        self
    }

    /// Every schema added, by name: the request bodies, then the answers.
    ///
    /// # Panics
    /// When a body and an answer name one schema with two different shapes.
    pub fn into_schemas(mut self) -> Map<String, Value> {
        let mut all = self.requests.take_definitions(true);
        for (name, schema) in self.answers.take_definitions(true) {
            let same = all.get(&name).is_none_or(|read| *read == schema);
            assert!(same, "{name} is read in a body and written in an answer with different schemas: rename one");
            all.insert(name, schema);
        }
        for (of, name) in &self.successes {
            let Some(mut schema) = all.get(of).cloned() else { continue };
            with_success(&mut schema);
            all.insert(name.map_or_else(|| of.clone(), str::to_string), schema);
        }
        let answered_as_itself = |of: &String| self.successes.contains(&(of.clone(), None));
        for (of, _) in self.successes.iter().filter(|(_, name)| name.is_some()) {
            if !answered_as_itself(of) && !referred(&all, of) {
                all.remove(of);
            }
        }
        all.values_mut().for_each(drop_type_doc);
        all
    }
}

/// The query parameters of the query type `T` (see `api::query`): one OpenAPI parameter
/// object per field of `T` as serde reads it, in field order. The field's doc comment is the
/// parameter's `description`, a deprecated field (`#[schemars(extend("deprecated" = true))]`) a
/// deprecated parameter, and the rest of the field's schema, every type inlined, the
/// parameter's `schema`; a list is `style: form, explode: true` (the name repeated).
///
/// # Panics
/// When `T` is not a struct of named fields.
pub fn parameters<T: JsonSchema>() -> Vec<Value> {
    let generator = settings().for_deserialize().with(|s| s.inline_subschemas = true).into_generator();
    let root = generator.into_root_schema_for::<T>();
    let required = root.get("required").cloned().unwrap_or_else(|| json!([]));
    let Some(Value::Object(fields)) = root.get("properties") else { panic!("{} is not a struct", T::schema_name()) };
    let required = |name: &str| required.as_array().is_some_and(|r| r.iter().any(|n| n == name));
    fields
        .iter()
        .map(|(name, field)| {
            let mut schema = field.as_object().cloned().unwrap_or_default();
            let mut p = json!({ "name": name, "in": "query", "required": required(name) });
            if field["type"] == "array" {
                p["style"] = json!("form");
                p["explode"] = json!(true);
            }
            let (description, deprecated) = (schema.remove("description"), schema.remove("deprecated"));
            p["schema"] = Value::Object(schema);
            if let Some(description) = description {
                p["description"] = description;
            }
            if deprecated == Some(Value::Bool(true)) {
                p["deprecated"] = json!(true);
            }
            p
        })
        .collect()
}

/// Whether a schema of `all` refers to the schema `name`.
fn referred(all: &Map<String, Value>, name: &str) -> bool {
    let reference = format!("\"#/components/schemas/{name}\"");
    all.values().any(|schema| schema.to_string().contains(&reference))
}

/// A knowledge-base entry id or a chat-history item id, the `SparseId` schema ([`sparse_id`]):
/// the type of such a field for `#[schemars(with = "SparseId")]`.
pub struct SparseId;

impl JsonSchema for SparseId {
    fn schema_name() -> Cow<'static, str> {
        "SparseId".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        Schema::try_from(sparse_id()).unwrap_or_default()
    }
}

/// The schema of a knowledge-base entry id (`knowledgeBaseID`) or a chat-history item id: a
/// positive 64-bit integer, and what its values are.
pub fn sparse_id() -> Value {
    json!({
        "type": "integer",
        "format": "int64",
        "minimum": 1,
        "description": "Ids are increasing and time-ordered (a later one is greater), and sparse: they are not \
            counts and their differences say nothing about how many were issued in between (a millisecond \
            timestamp shifted left 10 bits plus a random part; ids from earlier versions are small numbers, below \
            every newer one). They fit 53 bits, so JavaScript numbers hold them exactly.",
    })
}

/// A reference to the schema `name` that the document writes out rather than derives (for
/// `#[schemars(schema_with = …)]` on a field a type does not describe, such as a JSON value).
pub fn written(name: &str) -> Schema {
    Schema::try_from(super::schemas::reference(name)).unwrap_or_default()
}

/// Closes an answer's object schema that lists its properties and says nothing of others.
fn close(schema: &mut Schema) {
    if let Some(object) = schema.as_object_mut().filter(|o| o.contains_key("properties")) {
        object.entry("additionalProperties").or_insert(Value::Bool(false));
    }
}

/// Takes `null` out of an object's optional properties. In an answer, serde leaves such a
/// field out (`skip_serializing_if`) rather than writing `null`; in a body, leaving it out is how
/// a client says "none" (serde also reads `null` there, which the document does not offer).
fn optional_not_null(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else { return };
    let required: Vec<Value> = object.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(Value::Object(properties)) = object.get_mut("properties") else { return };
    for (name, property) in properties.iter_mut() {
        if !required.iter().any(|r| r == name.as_str()) {
            without_null(property);
            if property.get("default").is_some_and(Value::is_null) {
                property.as_object_mut().map(|p| p.remove("default"));
            }
        }
    }
}

/// Adds to an object schema the legacy names serde also reads (`#[serde(alias)]`, which schemars
/// does not see): each `(legacy, current)` a deprecated copy of `current`'s property.
pub fn legacy_names(schema: &mut Schema, names: &[(&str, &str)]) {
    let Some(Value::Object(properties)) = schema.get_mut("properties") else { return };
    for (legacy, current) in names {
        let Some(mut copy) = properties.get(*current).cloned() else { continue };
        copy["deprecated"] = Value::Bool(true);
        copy["description"] = format!("Legacy name of `{current}`.").into();
        properties.insert(legacy.to_string(), copy);
    }
}

/// `schema` without its `null` alternative: `type: [t, "null"]` → `type: t`, `null` out of an
/// `enum`, and `anyOf: [s, {type: null}]` → `s`.
fn without_null(schema: &mut Value) {
    let is_null = |v: &Value| v == "null" || v.get("type").is_some_and(|t| t == "null");
    if let Some(Value::Array(values)) = schema.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| !is_null(t));
        if let [one] = types.as_slice() {
            schema["type"] = one.clone();
        }
    } else if let Some(Value::Array(options)) = schema.get("anyOf") {
        let rest: Vec<&Value> = options.iter().filter(|o| !is_null(o)).collect();
        if let [one] = rest.as_slice() {
            let mut one = (*one).clone();
            if let (Some(own), Some(outer)) = (one.as_object_mut(), schema.as_object()) {
                outer.iter().filter(|(k, _)| *k != "anyOf").for_each(|(k, v)| {
                    own.insert(k.clone(), v.clone());
                });
            }
            *schema = one;
        }
    }
}

/// Drops the formats schemars gives unsigned integers (`uint64`, …): OpenAPI names none of them,
/// and `minimum: 0` says the same.
fn standard_format(schema: &mut Schema) {
    if schema.get("format").and_then(Value::as_str).is_some_and(|f| f.starts_with("uint")) {
        schema.remove("format");
    }
}

/// A doc comment's lines joined into paragraphs: one line break is a space, two stay.
fn unwrap_description(schema: &mut Schema) {
    if let Some(Value::String(text)) = schema.get_mut("description") {
        *text =
            text.split("\n\n").map(|p| p.split('\n').collect::<Vec<_>>().join(" ")).collect::<Vec<_>>().join("\n\n");
    }
}

/// Puts `success: true` first in an object schema's properties and its `required` (once).
fn with_success(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else { return };
    if object.get("properties").is_some_and(|p| p.get("success").is_some()) {
        return;
    }
    let mut properties = Map::new();
    properties.insert("success".into(), json!({ "type": "boolean", "const": true }));
    if let Some(Value::Object(own)) = object.remove("properties") {
        properties.extend(own);
    }
    object.insert("properties".into(), Value::Object(properties));
    let mut required = vec![json!("success")];
    if let Some(Value::Array(own)) = object.remove("required") {
        required.extend(own);
    }
    object.insert("required".into(), Value::Array(required));
}

/// Removes the own doc comment of a struct or an enum of variants (the Rust documentation of the
/// type, not of the wire).
fn drop_type_doc(schema: &mut Value) {
    let described_in_rust =
        |o: &Map<String, Value>| o.get("type").is_some_and(|t| t == "object") || o.contains_key("oneOf");
    if let Some(object) = schema.as_object_mut().filter(|o| described_in_rust(o)) {
        object.remove("description");
    }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::{json, Value};

    use super::{legacy_names, Derived};

    /// An answer: one field always there, one left out when absent.
    #[derive(Serialize, JsonSchema)]
    #[schemars(rename = "Thing")]
    struct Thing {
        /// The name,
        /// on two lines.
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
        #[schemars(extend("deprecated" = true))]
        kind: Option<String>,
    }

    /// A body that ignores unknown fields, with an alias.
    #[derive(Deserialize, JsonSchema)]
    #[schemars(rename = "ThingWrite", transform = legacy)]
    #[allow(dead_code)]
    struct ThingWrite {
        #[serde(alias = "old_name")]
        name: String,
        size: Option<u64>,
    }

    fn legacy(schema: &mut schemars::Schema) {
        legacy_names(schema, &[("old_name", "name")]);
    }

    /// A body that refuses unknown fields.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[schemars(rename = "Strict")]
    #[allow(dead_code)]
    struct Strict {
        id: String,
    }

    /// A list of things, named per use.
    #[derive(Serialize, JsonSchema)]
    #[schemars(rename = "ListOf{T}")]
    struct List<T> {
        items: Vec<T>,
    }

    fn schemas(build: impl FnOnce(&mut Derived)) -> serde_json::Map<String, Value> {
        let mut d = Derived::default();
        build(&mut d);
        d.into_schemas()
    }

    #[test]
    fn an_answer_is_closed_lists_success_first_and_leaves_optional_fields_out_rather_than_null() {
        let all = schemas(|d| {
            d.answer::<Thing>();
        });
        let thing = &all["Thing"];
        assert_eq!(thing["additionalProperties"], false);
        let names: Vec<&String> = thing["properties"].as_object().unwrap().keys().collect();
        assert_eq!(names, ["success", "name", "size", "kind"]);
        assert_eq!(thing["properties"]["success"], json!({ "type": "boolean", "const": true }));
        assert_eq!(thing["required"], json!(["success", "name", "kind"]));
        assert_eq!(thing["properties"]["size"], json!({ "type": "integer", "minimum": 0 }), "no null, no uint64");
        assert_eq!(thing["properties"]["kind"]["type"], json!(["string", "null"]), "written as null: kept");
        assert_eq!(thing["properties"]["kind"]["deprecated"], true);
        assert_eq!(thing["properties"]["name"]["description"], "The name, on two lines.");
        assert!(thing.get("description").is_none(), "the type's doc comment is not the wire's");
    }

    #[test]
    fn a_body_is_open_unless_serde_refuses_unknown_fields_and_shows_its_legacy_names() {
        let all = schemas(|d| {
            d.request::<ThingWrite>().request::<Strict>();
        });
        let write = &all["ThingWrite"];
        assert!(write.get("additionalProperties").is_none(), "open: serde ignores unknown fields");
        assert_eq!(write["properties"]["size"]["type"], "integer", "an optional field does not offer null");
        assert_eq!(write["properties"]["old_name"]["deprecated"], true);
        assert_eq!(write["properties"]["old_name"]["description"], "Legacy name of `name`.");
        assert_eq!(all["Strict"]["additionalProperties"], false);
    }

    #[test]
    fn an_answer_under_another_name_keeps_its_own_only_when_referred_to() {
        let all = schemas(|d| {
            d.answer_as::<List<Thing>>("Things").answer_as::<Thing>("ThingRead");
        });
        assert!(all.contains_key("Things") && all.contains_key("ThingRead"));
        assert!(!all.contains_key("ListOfThing"), "nothing refers to the generic list's own name");
        assert!(all.contains_key("Thing"), "the list's items refer to it");
        assert!(all["Thing"]["properties"].get("success").is_none(), "an item carries no success");
        assert_eq!(all["ThingRead"]["properties"]["success"]["const"], true);
    }

    #[test]
    fn an_answer_of_several_operations_lists_success_once() {
        let all = schemas(|d| {
            d.answer::<Thing>().answer::<Thing>().answer_as::<Thing>("ThingRead").answer_as::<Thing>("ThingRead");
        });
        assert_eq!(all["Thing"]["required"], json!(["success", "name", "kind"]));
        assert_eq!(all["ThingRead"]["required"], json!(["success", "name", "kind"]));
    }

    /// A body and an answer of one name but two shapes.
    #[test]
    #[should_panic(expected = "Thing is read in a body and written in an answer")]
    fn one_name_with_two_shapes_is_refused() {
        #[derive(Deserialize, JsonSchema)]
        #[schemars(rename = "Thing")]
        #[allow(dead_code)]
        struct OtherThing {
            colour: String,
        }
        schemas(|d| {
            d.request::<OtherThing>().part::<Thing>();
        });
    }
}
